"""The paper's fifteen encoders in ``crs bench paper-scale``: a run folder of 15 encoders made from the
measured ones without new fits, so that the score and the report at 15 encoders are measured, not scaled.

Encoder k of the 15 (``enc00`` ... ``enc14``) is a copy of measured encoder k mod N (N = 2 in the
bench's usual run): its run records are the measured encoder's with the name replaced; its predictions
files are hard links to the measured encoder's (symbolic links where a hard link cannot be made), never
copies; in the records' provenance its cache fingerprints and unit keys are the measured encoder's under
its new name, and the embedded spec lists the 15. The folder's spec is the measured spec with the 15
names and the new folder as output; it keeps the measured cache, which holds only the N measured
encoders: the score reads nothing from the cache, and the report reads only each encoder's fingerprint
fields there (its card's provenance), so nothing is written to the cache and the copies' cards say the
fields were not found. Not copied, because neither the score nor the report reads them: ``audit.json``
(about 31 MB at full size), ``probe_costs.csv`` and the zero-shot folder (the bench measures the report
before the zero-shot stages, so the measured report has no zero-shot records either).

What it measures: a copy costs the score and the report what a distinct encoder costs. It has the same
rows, the same sorts and bootstrap resamples, and its predictions files are read, decoded and drawn per
encoder, so the parts shared by all encoders (start-up, imports, the figures' panels, the per-task
designs) are counted once, as a run pays them.

What it cannot show: copies tie exactly with their originals, in every metric and every bootstrap
replicate. Rank sets, tiers, reversal pairs and leave-one-out rankings are those of a cohort of identical
pairs, so any step whose cost depends on how many encoders are distinct (the size of a rank set with
ties, how many reversed pairs are listed) runs on that cohort, not on 15 distinct encoders. A copy's
predictions file is the same file as its original's, so it is read from the page cache where 15 distinct
files (about 10 GB at full size) might not all fit in it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crs.evaluate.artifacts import PREDICTIONS_DIR, RunFolder
from crs.evaluate.records import combine, read_provenance, seed_aggregate, write_parquet
from crs.spec import load_spec

FOLDER = "fifteen"  # under the bench's work folder: spec.toml and out/


def replica_names(count: int) -> list[str]:
    """The bench's encoder names for ``count`` encoders (``enc00``, ``enc01``, ...)."""
    return [f"enc{k:02d}" for k in range(count)]


def source_of(names: Sequence[str], measured: Sequence[str]) -> dict[str, str]:
    """Replica name -> the measured encoder it copies (encoder k copies measured encoder k mod N)."""
    return {name: measured[k % len(measured)] for k, name in enumerate(names)}


def replicate_run(spec_path: Path, count: int, folder: Path) -> Path:
    """Write ``folder/spec.toml`` and ``folder/out`` (records, provenance, linked predictions) for ``count``
    encoders copied from the run that ``spec_path`` describes; return the new spec's path."""
    spec = load_spec(spec_path)
    measured = spec.encoder_names
    source = RunFolder(spec.output)
    names = replica_names(count)
    copies = source_of(names, measured)
    if folder.exists():
        shutil.rmtree(folder)
    out = folder / "out"
    (out / PREDICTIONS_DIR).mkdir(parents=True)

    records = source.read_records()
    frames = [records[records["encoder"] == original].assign(encoder=name) for name, original in copies.items()]
    replicated = combine(frames)
    provenance = replicated_provenance(read_provenance(source.records_path), copies, out)
    target = RunFolder(out)
    write_parquet(replicated, target.records_path, provenance)
    write_parquet(seed_aggregate(replicated), target.aggregate_path, provenance)

    for name, original in copies.items():
        for path in sorted(source.predictions_dir.glob(f"{original}__*.npz")):
            link(path, target.predictions_dir / f"{name}{path.name[len(original):]}")

    new_spec = folder / "spec.toml"
    new_spec.write_text(replicated_spec_text(spec_path.read_text(), names, out))
    written = load_spec(new_spec).encoder_names
    if written != names:
        raise ValueError(f"{new_spec}: the replicated spec lists {written}, expected {names}")
    return new_spec


def link(source: Path, target: Path) -> None:
    """A hard link (no bytes copied, and it outlives its source), or a symbolic one across file systems."""
    try:
        os.link(source, target)
    except OSError:
        target.symlink_to(source.resolve())


def replicated_provenance(provenance: dict[str, Any], copies: dict[str, str], output: Path) -> dict[str, Any]:
    """The measured records' provenance for the replicas: the embedded spec's encoders and output, and the
    per-encoder cache fingerprints and unit keys (``encoder|...`` keys) under each replica's name."""
    result = json.loads(json.dumps(provenance, default=str))
    spec = result.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("encoders"), list):
        entries = {entry.get("name"): entry for entry in spec["encoders"] if isinstance(entry, dict)}
        spec["encoders"] = [{**entries.get(original, {}), "name": name} for name, original in copies.items()]
        spec["output"] = str(output)
    for key in ("cache_fingerprints", "unit_keys"):
        per_encoder = result.get(key)
        if not isinstance(per_encoder, dict):
            continue
        renamed: dict[str, Any] = {}
        for name, original in copies.items():
            for label, value in per_encoder.items():
                encoder, bar, rest = str(label).partition("|")
                if encoder == original:
                    renamed[f"{name}{bar}{rest}"] = value
        result[key] = renamed
    return result


_TOP_LEVEL = re.compile(r"^(encoders|output)\s*=")


def replicated_spec_text(text: str, names: Sequence[str], output: Path) -> str:
    """The spec's text with its top-level ``encoders`` list and ``output`` replaced (everything else kept,
    the cache included)."""
    lines = text.splitlines()
    replaced = set()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("["):
            break  # the first table: top-level keys end here
        match = _TOP_LEVEL.match(line)
        if match:
            key = match.group(1)
            lines[i] = f"encoders = {json.dumps(list(names))}" if key == "encoders" else f"output = {json.dumps(str(output))}"
            replaced.add(key)
    if replaced != {"encoders", "output"}:
        raise ValueError("the bench's spec must name its encoders as one top-level list and its output folder "
                         f"(found {sorted(replaced)}); write it as `crs bench paper-scale` does")
    return "\n".join(lines) + "\n"
