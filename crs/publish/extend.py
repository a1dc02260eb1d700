"""``crs run SPEC --extend BUNDLE``: add encoders to a published run without re-running its encoders.

The CRS is relative to the cohort (dominance, the median reference), so a new encoder is only
comparable when every encoder is scored together on the same test patients, label-fraction draws
and seeds. Extending therefore

1. checks that the local data sets hash to the bundle's (``images.json``), listing every mismatch and
   refusing on one unless told otherwise;
2. takes the bundle's spec (splits, label fractions, seeds, probe and score settings) with the local
   data roots and cache, and the user's encoders that the bundle does not have;
3. extracts and probes only those encoders, after checking that the local cache's test rows and drawn
   label-fraction ids are the bundle's;
4. writes the bundle's records and predictions unchanged beside the new ones, and scores everyone.

The new run's provenance names the bundle (and its manifest's sha256), so a bundle published from it
records the chain it extends.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crs.benchmark import Benchmark
from crs.cache.images import file_digests
from crs.data import load_dataset
from crs.evaluate import records as records_io
from crs.evaluate.artifacts import RunFolder
from crs.publish.bundle import CASES_FILE, EXTENDS, IMAGES_FILE, RUN_DIR, SPEC_FILE, BundleError, case_ids
from crs.publish.manifest import MANIFEST_FILE, manifest_problems, read_manifest
from crs.scoring.result import ScoreResult
from crs.spec import DatasetEntry, Spec, for_setting, spec_from_dict, spec_to_dict

log = logging.getLogger("crs.publish")



@dataclass(frozen=True)
class DataMismatch:
    """One image whose local file is not the bundle's (``local`` is ``missing`` or ``absent`` when it is not here)."""

    dataset: str
    image_id: str
    published: str
    local: str

    def __str__(self) -> str:
        return f"{self.dataset}: {self.image_id} (bundle {self.published[:12]}, here {self.local[:12]})"


@dataclass(frozen=True)
class ExtendOutcome:
    """What an extension did: the new encoders, the published ones kept, the score, seconds."""

    spec: Spec
    new_encoders: tuple[str, ...]
    published_encoders: tuple[str, ...]
    mismatches: tuple[DataMismatch, ...]
    score: ScoreResult
    report: Path
    seconds: float


def _entries(spec: Spec) -> dict[str, DatasetEntry]:
    return {entry.name: entry for top in spec.datasets for entry in (top, *top.shift_targets)}


def data_mismatches(bundle: Path, local: Spec, workers: int = 8) -> list[DataMismatch]:
    """Every image of the bundle's data sets whose local file differs (or is missing), by image id."""
    published: dict[str, Any] = json.loads((bundle / IMAGES_FILE).read_text())
    entries = _entries(local)
    found: list[DataMismatch] = []
    for name, record in published.items():
        entry = entries[name]
        dataset = load_dataset(entry.loader, entry.root, **entry.options)
        paths = {str(i): str(p) for i, p in zip(dataset.ids, dataset.paths, strict=True)}
        files: dict[str, str] = record["files"]
        present = [image_id for image_id in files if image_id in paths]
        digests = dict(zip(present, file_digests(Path(dataset.root), [paths[i] for i in present], workers), strict=True))
        for image_id, digest in files.items():
            here = digests.get(image_id, "absent")
            if here != digest:
                found.append(DataMismatch(name, image_id, digest, here))
    return found


def extension_spec(bundle: Path, local: Spec) -> tuple[Spec, tuple[str, ...], tuple[str, ...]]:
    """The bundle's spec with the local data roots, cache and output, plus the local encoders it lacks.

    Returns (spec, new encoder names, published encoder names)."""
    published = spec_from_dict(json.loads((bundle / SPEC_FILE).read_text()))
    have = set(published.encoder_names)
    new = tuple(entry for entry in local.encoders if entry.name not in have)
    if not new:
        raise BundleError(f"every encoder of {local.name!r} is already in the bundle ({sorted(have)}); "
                          "name at least one new encoder in the spec's encoders")
    local_entries = _entries(local)
    missing = [name for name in _entries(published) if name not in local_entries]
    if missing:
        raise BundleError(f"the bundle scores data sets {missing} that the spec does not name; add them (with the "
                          "local root of each) to the spec's [[datasets]] under the same names")

    def localised(entry: DatasetEntry) -> DatasetEntry:
        here = local_entries[entry.name]
        targets = tuple(localised(target) for target in entry.shift_targets)
        return dataclasses.replace(entry, root=here.root, shift_targets=targets)

    spec = dataclasses.replace(
        published, name=local.name, cache=local.cache, cache_url=local.cache_url, output=local.output, source=local.source,
        encoders=(*published.encoders, *new), datasets=tuple(localised(entry) for entry in published.datasets),
        extract=dataclasses.replace(published.extract, device=local.extract.device, batch_size=local.extract.batch_size),
        # prompt files are local places too: a bundle names them by file name only (crs.publish.places)
        score=dataclasses.replace(published.score, prompts=local.score.prompts) if published.score.prompts else published.score,
        probe=dataclasses.replace(published.probe, jobs=local.probe.jobs),
    )
    return spec, tuple(entry.name for entry in new), tuple(published.encoder_names)


def _check_same_draws(bundle: Path, spec: Spec, fresh: RunFolder) -> None:
    """The local cache's test rows and the drawn label-fraction ids must be the bundle's, or nothing is comparable."""
    cases = json.loads((bundle / CASES_FILE).read_text())
    here = case_ids(spec)
    for name, conditions in cases.items():
        for condition, ids in conditions.items():
            if here.get(name, {}).get(condition) != ids:
                raise BundleError(f"data set {name!r}: the local {condition} test rows are not the bundle's "
                                  "(another split or another image list); the encoders would not be comparable")
    published = json.loads((bundle / RUN_DIR / "audit.json").read_text()) if (bundle / RUN_DIR / "audit.json").exists() else {}
    drawn = json.loads(fresh.audit_path.read_text())
    for key in ("label_fraction_ids", "validation_fraction_ids"):
        if key in published and published[key] != drawn.get(key):
            raise BundleError(f"the label-fraction draws ({key}) differ from the bundle's; the same data and "
                              "settings draw the same ids, so the local data or crs version differs")


def _manifest_sha256(bundle: Path) -> str:
    return hashlib.sha256((bundle / MANIFEST_FILE).read_bytes()).hexdigest()


def extend(local_spec: Spec | str | Path, bundle: str | Path, *, allow_data_mismatch: bool = False,
           jobs: int | str | None = None, progress: bool = True) -> ExtendOutcome:
    """Extract, probe and score the encoders of ``local_spec`` that ``bundle`` lacks, beside its encoders."""
    started = time.perf_counter()
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    problems = manifest_problems(bundle, manifest)
    if problems:
        raise BundleError(f"{bundle} is not as published ({problems[0]}; {len(problems)} problem(s)): `crs verify {bundle}`")
    if manifest.get("kind") != "full":
        raise BundleError(f"{bundle} is an aggregates-only bundle: it holds no records to extend")
    local = Benchmark(local_spec).spec
    spec, new, published = extension_spec(bundle, local)
    mismatches = data_mismatches(bundle, local)
    if mismatches and not allow_data_mismatch:
        listed = "; ".join(str(m) for m in mismatches[:3])
        raise for_setting(BundleError(f"{len(mismatches)} image file(s) differ from the bundle's, first: {listed}; "
                                      "get the published data, or accept the difference"), "allow_data_mismatch")
    output = RunFolder(spec.output).ensure_writable()
    bench = Benchmark(spec)
    bench.extract(list(new), progress=progress)
    # Stage 2 of the new encoders only, in a scratch folder, then the published rows beside them.
    scratch = spec.output / ".extend-probe"
    if scratch.exists():
        shutil.rmtree(scratch)
    new_only = dataclasses.replace(
        spec, output=scratch, encoders=tuple(e for e in spec.encoders if e.name in new),
        score=dataclasses.replace(spec.score, reference_encoder="median"))
    fresh = Benchmark(new_only).probe(jobs=jobs, progress=progress).records
    _check_same_draws(bundle, spec, RunFolder(scratch))
    source = RunFolder(bundle / RUN_DIR)
    kept = source.read_records()
    records = records_io.combine([kept, fresh])
    provenance = dict(RunFolder(scratch).provenance())
    provenance["spec"] = spec_to_dict(spec)
    provenance[EXTENDS] = {"bundle": str(bundle.resolve()), "manifest_sha256": _manifest_sha256(bundle),
                           "run_name": manifest.get("provenance", {}).get("run_name"),
                           "chain": manifest.get("provenance", {}).get(EXTENDS)}
    output.predictions_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.predictions_dir.glob("*.npz")):
        shutil.copy2(path, output.predictions_dir / path.name)
    for path in sorted(RunFolder(scratch).predictions_dir.glob("*.npz")):
        shutil.copy2(path, output.predictions_dir / path.name)
    shutil.copy2(RunFolder(scratch).audit_path, output.audit_path)
    output.write_records(records, provenance)
    shutil.rmtree(scratch)
    score = bench.score(overwrite=True)
    report = bench.report(score)
    return ExtendOutcome(spec, new, published, tuple(mismatches), score, report, time.perf_counter() - started)

