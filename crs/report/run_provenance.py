"""The report's provenance box: which crs, which spec, which cached features, which machine and BLAS
kernel made the numbers on the page (read from the run records' metadata; nothing is recomputed), and
how each test set was drawn, which its case bootstrap followed (the score's summary, decision 0085)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from crs.evaluate.records import crs_version
from crs.scoring.resample import design_line

SPEC_PLACES = ("output", "cache", "source")
"""Where a run lies, not what it computed: left out of the spec hash, so a moved folder keeps its hash."""


def spec_hash(spec: Mapping[str, Any]) -> str:
    """The first 12 hex digits of the sha256 of the embedded spec (sorted JSON, places left out)."""
    kept = {key: value for key, value in spec.items() if key not in SPEC_PLACES}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:12]


def provenance_rows(provenance: Mapping[str, Any], records_written: float | None = None) -> list[tuple[str, str]]:
    """(label, value) rows of the box; what the records do not hold (an older crs) is said so.
    ``records_written``: the run records' modification time (seconds since the epoch), the run's date:
    it is not stored in the records, so that identical runs write identical bytes."""
    not_recorded = "not recorded (run records of an older crs)"
    made_with = str(provenance.get("versions", {}).get("crs", "")) or not_recorded
    here = crs_version()
    rows = []
    if records_written is not None:
        when = datetime.fromtimestamp(records_written, tz=UTC)
        rows.append(("run date", f"{when:%Y-%m-%d %H:%M} UTC (run records written)"))
    rows.append(("crs version", made_with if made_with in (here, not_recorded) else f"{made_with} (this report: {here})"))
    versions = provenance.get("versions", {})
    commit = versions.get("crs_commit") if isinstance(versions, Mapping) else None
    rows.append(("crs git commit", str(commit) if commit else
                 ("not a git checkout (an installed crs)" if commit == "" else not_recorded)))
    spec = provenance.get("spec")
    rows.append(("spec hash", f"sha256 {spec_hash(spec)}" if isinstance(spec, Mapping) else not_recorded))
    fingerprints = provenance.get("cache_fingerprints")
    if isinstance(fingerprints, Mapping) and fingerprints:
        by_encoder: dict[str, list[str]] = {}
        for key, value in sorted(fingerprints.items()):
            encoder, _, task = str(key).partition("|")
            by_encoder.setdefault(encoder, []).append(f"{task} {str(value)[:10]}")
        rows.append(("cache fingerprints", "; ".join(f"{e}: {', '.join(t)}" for e, t in by_encoder.items())))
    else:
        rows.append(("cache fingerprints", not_recorded))
    machine = provenance.get("machine")
    if isinstance(machine, Mapping):
        rows.append(("machine (stage 2)", f"{machine.get('architecture', '?')}, {machine.get('system', '?')}, "
                                          f"{machine.get('cores', '?')} cores"))
        coretype = machine.get("openblas_coretype")
        rows.append(("BLAS kernel (stage 2)", str(machine.get("blas", "unknown"))
                     + (f" (OPENBLAS_CORETYPE={coretype})" if coretype else "")))
    else:
        rows += [("machine (stage 2)", not_recorded), ("BLAS kernel (stage 2)", not_recorded)]
    return rows


def design_rows(score: Any) -> list[tuple[str, str]]:
    """One (label, value) row per data set the case bootstrap resampled: its sampling design and how it
    was resampled; none for a seed-only score."""
    designs = score.interval_summary().get("sampling_design") or []
    return [(f"test set {row['data_set']}", design_line(row).split(": ", 1)[1]) for row in designs]


SUMMARY_ROWS = ("crs version", "crs git commit", "spec hash", "run date")


def provenance_summary(rows: list[tuple[str, str]]) -> str:
    """The one line shown while the provenance box is collapsed (issue 46 item 14: the leaderboard stays above
    the fold): crs version, commit, spec hash and run date; the rest opens on a click."""
    found = dict(rows)
    parts = []
    for key in SUMMARY_ROWS:
        value = str(found.get(key, ""))
        if not value or value.startswith("not recorded"):
            continue
        if key == "crs git commit":
            value = f"commit {value[:10]}"
        elif key == "crs version":
            value = f"crs {value}"
        elif key == "run date":
            value = value.split(" (", 1)[0]
        parts.append(value)
    return " \u00b7 ".join(parts)
