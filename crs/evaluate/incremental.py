"""Incremental stage 2: refit only the (encoder, task) units whose inputs changed since the last run.

A unit's run records are a pure function of its cached features, its sample table and the probe
settings. Each unit therefore gets a key: a hash of the encoder's current cache fingerprint and
feature-array names on the task store (and on each shift-target store), the ids of a corruption
subsample's rows where the group has one, the stores' table digests and sampling designs,
the probe settings and the crs version. The keys are saved in the records file's provenance; on the
next run a unit whose key is unchanged, whose rows are in the previous records and whose
predictions file exists is reused, every other unit is fitted. Cohort-level results (dominance,
CRS, tiers, reversals) are never stored here: they are recomputed from the combined records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd

from crs.cache import corrupt_rows
from crs.cache.fingerprint import fingerprint
from crs.cache.prints import dropped_ids
from crs.cache.store import FeatureStore, store_path
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.records import crs_version as records_version
from crs.evaluate.records import read_provenance
from crs.evaluate.units import RECORDS_FORMAT, ProbeSettings, ProbeUnit, UnitResult, corrupted_arrays

UNIT_KEYS = "unit_keys"  # provenance entry of the records parquet: unit label -> key


def unit_label(unit: ProbeUnit) -> str:
    return f"{unit.encoder}|{unit.task}|{','.join(unit.targets)}"


def _store_fields(cache_root: Path, dataset: str, encoder: str, unit: ProbeUnit | None = None) -> dict[str, Any]:
    """What a unit reads from one store: the encoder's current group, its arrays and the table.

    With ``unit``, only the corrupted arrays the unit evaluates count (another spec's severities in a
    shared cache change nothing this unit reads)."""
    store = FeatureStore(store_path(cache_root, dataset))
    attrs: Any = store.root.attrs
    current = store.current_fingerprint(encoder)
    arrays = store.feature_array_names(encoder, current)
    if unit is not None:
        evaluated = set(corrupted_arrays(unit, store, str(attrs.get("modality", ""))))
        arrays = [name for name in arrays if not name.startswith("corrupt/") or name in evaluated]
    fields = {
        "fingerprint": current,
        "arrays": arrays,
        "table": attrs.get("table_digest") or attrs.get("id_digest"),
    }
    dropped = dropped_ids(store)  # a shift target's overlaps left out of its evaluation (decision 0097)
    if dropped:
        fields["overlap_dropped"] = sorted(dropped)
    if "split_design" in attrs:  # the predictions store it (decision 0086): recorded later, the unit is refit
        fields["split_design"] = attrs["split_design"]
    # A corruption subsample rewrites the corrupted arrays in place (same fingerprint, same names).
    rows = cast(dict[str, Any] | None, store.encoder_group(encoder, current).attrs.get(corrupt_rows.GROUP_ATTR))
    if rows is not None:
        fields["corrupt_rows"] = rows["ids_sha256"]
    return fields


def unit_key(unit: ProbeUnit, cache_root: Path, settings: ProbeSettings) -> str:
    """Hash of every input of one unit's records; equal keys mean equal records."""
    fields = {
        "unit": unit_label(unit),
        "task": _store_fields(cache_root, unit.task, unit.encoder, unit),
        "targets": [_store_fields(cache_root, target, unit.encoder) for target in unit.targets],
        "settings": dataclasses.asdict(settings),
        "crs_version": records_version(),
        "records_format": RECORDS_FORMAT,
    }
    return fingerprint(fields)


@dataclass(frozen=True)
class IncrementalOutcome:
    """Records of every unit (in unit order), the freshly computed results, and the keys to save."""

    records: list[pd.DataFrame]
    fresh: dict[ProbeUnit, UnitResult]
    reused: list[ProbeUnit]
    unit_keys: dict[str, str]


def reusable_records(
    units: Sequence[ProbeUnit], keys: dict[ProbeUnit, str], folder: RunFolder
) -> dict[ProbeUnit, pd.DataFrame]:
    """Previous records of the units whose key is unchanged (and whose predictions file is present)."""
    previous_records = folder.records_path
    if not previous_records.exists():
        return {}
    try:
        previous_keys = dict(read_provenance(previous_records).get(UNIT_KEYS, {}))
        previous = pd.read_parquet(previous_records)
    except (OSError, ValueError):  # unreadable old file: recompute everything rather than trust it
        return {}
    reused = {}
    for unit in units:
        if previous_keys.get(unit_label(unit)) != keys[unit]:
            continue
        if not folder.has_predictions(unit.encoder, unit.task):
            continue
        rows = previous[(previous["encoder"] == unit.encoder) & (previous["task"] == unit.task)]
        if len(rows):
            reused[unit] = rows.reset_index(drop=True)
    return reused


def run_incremental(
    units: Sequence[ProbeUnit],
    cache_root: Path,
    settings: ProbeSettings,
    folder: RunFolder,
    runner: Callable[[list[ProbeUnit]], list[UnitResult]],
) -> IncrementalOutcome:
    """Reuse unchanged units from the run folder's previous records; run the rest through ``runner``.

    ``runner`` is the ordinary stage-2 call (``crs.evaluate.parallel.run_units`` bound to the spec's
    jobs and cluster), so the fitted units are computed exactly as in a full run.
    """
    keys = {unit: unit_key(unit, Path(cache_root), settings) for unit in units}
    reused = reusable_records(units, keys, folder)
    to_run = [unit for unit in units if unit not in reused]
    results = runner(to_run) if to_run else []
    fresh = dict(zip(to_run, results, strict=True))
    records = [reused[unit] if unit in reused else fresh[unit].records for unit in units]
    return IncrementalOutcome(records, fresh, [u for u in units if u in reused],
                              {unit_label(u): keys[u] for u in units})
