"""Where a run lay on the publisher's machine stays there: a bundle's spec and provenance name no local path.

A run's spec records its cache, output, source and every data set's root as absolute paths (a
hospital's internal folders). A bundle carries the spec with each replaced by a placeholder that says
what goes there (``<local root of derm>``); a reader who extends the bundle puts their own roots
there (``crs run --extend`` takes them from the extender's spec). Local files named elsewhere in the
spec (prompt files, an encoder's checkpoint) keep their file name only, and the bundle an extended run
extends is named by its folder name (its manifest sha256 identifies it).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path, PureWindowsPath
from typing import Any

LOCAL = "<local>"
CACHE = "<local cache>"
OUTPUT = "<local output>"
PLACES = ("cache", "output", "source")


def root_placeholder(name: str) -> str:
    """What stands for data set ``name``'s root in a published spec."""
    return f"<local root of {name}>"


def _is_local_path(value: str) -> bool:
    return value.startswith(("/", "~", "\\\\")) or PureWindowsPath(value).drive != ""


def _file_name(value: str) -> str:
    name = PureWindowsPath(value).name if "\\" in value else Path(value).name
    return f"{LOCAL}/{name}"


def _dataset(entry: dict[str, Any]) -> dict[str, Any]:
    entry = dict(entry)
    entry["root"] = root_placeholder(str(entry.get("name")))
    entry["shift_targets"] = [_dataset(target) for target in entry.get("shift_targets") or []]
    return entry


def public_spec(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """``spec`` (as embedded in run records) with every local place replaced by a placeholder."""
    if not isinstance(spec, dict):
        return spec
    out = copy.deepcopy(spec)
    out["cache"], out["output"] = CACHE, OUTPUT
    out.pop("source", None)
    out["datasets"] = [_dataset(entry) for entry in out.get("datasets", [])]
    for encoder in out.get("encoders", []):
        weights = encoder.get("weights")
        if isinstance(weights, str) and _is_local_path(weights):
            encoder["weights"] = _file_name(weights)
    score = out.get("score") or {}
    if isinstance(score.get("prompts"), dict):
        score["prompts"] = {task: [_file_name(f) if _is_local_path(str(f)) else f for f in files]
                            for task, files in score["prompts"].items()}
    return out


def public_link(link: dict[str, Any] | None) -> dict[str, Any] | None:
    """An ``extends`` entry (and its chain) with the extender's path to the bundle cut to the bundle's folder name."""
    if not isinstance(link, dict):
        return link
    out = dict(link)
    if isinstance(out.get("bundle"), str):
        out["bundle"] = PureWindowsPath(out["bundle"]).name if "\\" in out["bundle"] else Path(out["bundle"]).name
    out["chain"] = public_link(out.get("chain"))
    return out


def public_provenance(provenance: dict[str, Any]) -> dict[str, Any]:
    """Run-record provenance with the spec's places and the extended bundle's path made public."""
    out = dict(provenance)
    if "spec" in out:
        out["spec"] = public_spec(out["spec"])
    if "extends" in out:
        out["extends"] = public_link(out["extends"])
    return out


def copy_records(source: Path, target: Path) -> None:
    """Copy a records parquet file with its embedded provenance made public; the rows are unchanged."""
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    metadata = dict(table.schema.metadata or {})
    provenance = json.loads(metadata.get(b"crs", b"{}"))
    metadata[b"crs"] = json.dumps(public_provenance(provenance), default=str).encode()
    pq.write_table(table.replace_schema_metadata(metadata), target)
