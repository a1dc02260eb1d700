"""``crs publish``: a run folder and what others need to check it, as one verifiable bundle.

Layout of ``<bundle>/``::

    manifest.json     format, kind, provenance, and the sha256 of every other file
    manifest.sig      Ed25519 signature of manifest.json's bytes (only when signed)
    run/              records, seed aggregates, per-case predictions, audit and score tables:
                      a run folder that ``Benchmark.from_run_folder`` scores with no cache or images
    cases.json        per data set, the image ids of the rows of each predictions condition
                      (``clean``, ``shift__<target>``), in the predictions' row order
    images.json       per data set and shift target, the sha256 of every image file the run read
    spec.json         the run's spec, as embedded in its records

No features and no pixels are copied: predictions are probabilities and labels per image id. No local
place either: the spec's cache, output, source and data roots are placeholders (:mod:`crs.publish.places`),
and publishing refuses a bundle in which any file holds an absolute path, this machine's host name or a
credential-looking string (:mod:`crs.publish.leaks`).
"""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path
from typing import Any

from crs.benchmark import Benchmark
from crs.cache.images import DIGEST_RULE, recorded_digests
from crs.cache.prints import kept_rows
from crs.cache.store import FeatureStore, store_path
from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder
from crs.publish.leaks import leaks
from crs.publish.manifest import SIGNATURE_FILE, write_manifest
from crs.publish.places import copy_records, public_link, public_spec
from crs.publish.signing import sign
from crs.spec import Spec

RUN_DIR = "run"
CASES_FILE = "cases.json"
IMAGES_FILE = "images.json"
SPEC_FILE = "spec.json"
FULL = "full"
EXTENDS = "extends"
"""Records and manifest provenance entry: the bundle a run extends (path, manifest sha256, its own chain)."""


class BundleError(ValueError):
    """A bundle cannot be written or read; the message names what and the fix."""


def _store(spec: Spec, name: str) -> FeatureStore:
    path = store_path(spec.cache, name)
    if not path.exists():
        raise BundleError(f"the cache {path} the run read is not here: publishing records each image's sha256 and the "
                          "test rows' image ids from it; point at it with cache=DIR (--cache DIR)")
    return FeatureStore(path)


def case_ids(spec: Spec) -> dict[str, dict[str, list[str]]]:
    """Per data set, the image ids of each predictions condition's rows, in the predictions' order."""
    cases: dict[str, dict[str, list[str]]] = {}
    for entry in spec.datasets:
        table = _store(spec, entry.name).read_table()
        conditions = {artifacts.CLEAN: [str(i) for i in table.ids[table.indices("test")]]}
        for target in entry.shift_target_names:
            target_store = _store(spec, target)
            target_table = target_store.read_table()
            rows = kept_rows(target_store, target_table.ids, target_table.indices("test"))
            conditions[artifacts.condition_key(artifacts.SHIFT, target=target)] = [str(i) for i in target_table.ids[rows]]
        cases[entry.name] = conditions
    return cases


def image_digests(spec: Spec) -> dict[str, dict[str, Any]]:
    """Per data set and shift target, the sha256 the cache recorded of every image file, by image id."""
    out: dict[str, dict[str, Any]] = {}
    names = [name for entry in spec.datasets for name in (entry.name, *entry.shift_target_names)]
    for name in names:
        store = _store(spec, name)
        digests = recorded_digests(store)
        if digests is None:
            raise BundleError(f"{store.path} records no image digests; run `crs extract` once to record them")
        ids = store.read_table().ids
        out[name] = {"rule": DIGEST_RULE, "files": dict(zip((str(i) for i in ids), digests.tolist(), strict=True))}
    return out


def check_cases(folder: RunFolder, cases: dict[str, dict[str, list[str]]], spec: Spec) -> None:
    """Every predictions file's rows must match the ids the cache gives (a cache re-extracted since would not)."""
    for entry in spec.datasets:
        for encoder in spec.encoders_on(entry.name):
            if not folder.has_predictions(encoder, entry.name):
                continue
            arrays = folder.read_predictions_on_demand(encoder, entry.name)
            for condition, ids in cases[entry.name].items():
                key = f"{condition}_labels"
                if key in arrays and len(arrays[key]) != len(ids):
                    raise BundleError(
                        f"{folder.predictions_path(encoder, entry.name)}: {len(arrays[key])} {condition} rows, but the cache's "
                        f"test split of {entry.name!r} has {len(ids)}; the cache changed since the run: probe again first")


def _copy_run(folder: RunFolder, target: Path) -> None:
    target.mkdir(parents=True)
    for path in (folder.records_path, folder.root / artifacts.AGGREGATE_FILE):  # their spec without local places
        if path.exists():
            copy_records(path, target / path.name)
    if folder.audit_path.exists():
        shutil.copy2(folder.audit_path, target / folder.audit_path.name)
    (target / artifacts.PREDICTIONS_DIR).mkdir()
    for path in sorted(folder.predictions_dir.glob("*.npz")):
        shutil.copy2(path, target / artifacts.PREDICTIONS_DIR / path.name)
    shutil.copytree(folder.score_dir, target / artifacts.SCORE_DIR)


def refuse_leaks(bundle: Path) -> None:
    """Remove what was written to ``bundle`` and refuse (BundleError) if any file carries a local path, host name or
    credential (:mod:`crs.publish.leaks`); the spec's own places are already placeholders."""
    found = leaks(bundle)
    if not found:
        return
    for path in sorted(bundle.iterdir()):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise BundleError(f"not published: {found[0]}{more}; nothing local may leave in a bundle: remove it from the run "
                      "folder and publish again")


def _json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, sort_keys=True, indent=1, default=str) + "\n")


def publish(run_folder: str | Path, bundle: str | Path, *, cache: str | Path | None = None,
            sign_key: str | Path | None = None) -> Path:
    """Write ``run_folder`` (scored) as a bundle at ``bundle``; sign it with ``sign_key`` when given.

    ``cache`` overrides the cache the run recorded (the image ids and digests are read from it).
    Returns the manifest's path.
    """
    from crs import __version__

    bundle = Path(bundle)
    if bundle.exists() and any(bundle.iterdir()):
        raise BundleError(f"{bundle} exists and is not empty; publish into a new folder")
    bench = Benchmark.from_run_folder(run_folder, cache=cache)
    folder = RunFolder(run_folder)
    if not folder.has_score():
        raise BundleError(f"{folder.root} has no score yet; a bundle publishes a scored run: run `crs score` first")
    cases = case_ids(bench.spec)
    check_cases(folder, cases, bench.spec)
    images = image_digests(bench.spec)
    bundle.mkdir(parents=True, exist_ok=True)
    _copy_run(folder, bundle / RUN_DIR)
    _json(bundle / CASES_FILE, cases)
    _json(bundle / IMAGES_FILE, images)
    _json(bundle / SPEC_FILE, public_spec(folder.provenance().get("spec")))
    provenance = {"crs_version": __version__, "published": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "run_name": bench.spec.name, "encoders": bench.spec.encoder_names,
                  "datasets": [entry.name for entry in bench.spec.datasets],
                  "images": int(sum(len(v["files"]) for v in images.values())),
                  EXTENDS: public_link(folder.provenance().get(EXTENDS))}
    data = write_manifest(bundle, FULL, {"provenance": provenance})
    refuse_leaks(bundle)
    if sign_key is not None:
        (bundle / SIGNATURE_FILE).write_bytes(sign(data, sign_key))
    return bundle / "manifest.json"

