"""Stage 2 for a whole spec: plan the units, reuse unchanged ones, fit the rest, write the run folder."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd

from crs.cache.store import FeatureStore, store_path
from crs.evaluate import incremental
from crs.evaluate import records as records_io
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.audit import audit_tables
from crs.evaluate.parallel import run_units
from crs.evaluate.units import probe_settings, probe_units, unit_costs_table
from crs.spec import Spec, spec_to_dict

log = logging.getLogger("crs")


@dataclass(frozen=True)
class ProbeOutcome:
    """What stage 2 wrote: the run records and how many (encoder, task) units were fitted or reused."""

    records: pd.DataFrame
    units_fitted: int
    units_reused: int
    notes: tuple[str, ...] = ()
    """One line each for the user: what stage 2 left out and why (an imported encoder scored image-only)."""

    @property
    def n_probes(self) -> int:
        return int(self.records.drop_duplicates(["encoder", "task", "label_fraction", "seed"]).shape[0])


def probe_spec(
    spec: Spec, jobs: int | str | None = None, cluster: str | None = None, progress: bool = True, full: bool = False,
    zero_shot_encoders: list[str] | None = None,
) -> ProbeOutcome:
    """Stage 2 from the cache alone; writes run records, seed aggregates, predictions, the audit and
    the per-unit costs (``probe_costs.csv``).

    Units whose cache fingerprint and probe settings are unchanged since the last run reuse their
    stored records (``full=True`` refits everything); cohort-level scores are always recomputed.
    ``jobs``: worker processes, or ``"auto"`` (the spec's default: as many as memory and cores allow).

    With ``[score] zero_shot = true`` (or ``zero_shot_encoders`` named), the zero-shot of each
    vision-language unit runs inside its probe unit's pass over the conditions (decision 0112): the
    prototypes are made or read here first (bad input is refused before any probe is fitted), and
    ``<output>/zero_shot`` gets the records, prompt AUROCs and predictions files
    :func:`crs.evaluate.zero_shot.zero_shot_spec` would write. A reused unit runs its zero-shot in a
    pass of its own. The probes' records do not depend on it.
    """
    folder = RunFolder(spec.output).ensure_writable()
    settings = probe_settings(spec)
    units = probe_units(spec)
    zero_shot_jobs: dict = {}
    notes: list[str] = []
    if spec.score.zero_shot or zero_shot_encoders is not None:  # off by default: nothing below changes
        from crs.evaluate.zero_shot import zero_shot_jobs as make_jobs

        zero_shot_jobs = make_jobs(spec, encoders=zero_shot_encoders, notes=notes)
    if full and folder.records_path.exists():
        folder.records_path.unlink()
    outcome = incremental.run_incremental(
        units, spec.cache, settings, folder,
        lambda todo: run_units(todo, spec.cache, settings, jobs or spec.probe.jobs, cluster, progress, folder,
                               {unit: zero_shot_jobs[unit] for unit in todo if unit in zero_shot_jobs}),
    )
    log.info("probe: reused the records of %d unchanged units; fitted %d", len(outcome.reused), len(outcome.fresh))
    records = records_io.combine(outcome.records)
    audit = audit_tables(spec)
    folder.write_audit(audit)
    provenance = {
        "spec": spec_to_dict(spec), "versions": records_io.versions(), "machine": records_io.machine(),
        "cache_fingerprints": _cache_fingerprints(spec, units),
        "skipped_images": audit["skipped_images"], incremental.UNIT_KEYS: outcome.unit_keys,
    }
    folder.predictions_dir.mkdir(exist_ok=True)
    for unit in outcome.fresh:  # the workers wrote them; they take their place beside the new records
        folder.commit_predictions(unit.encoder, unit.task)
    costs = [result.cost for result in outcome.fresh.values() if result.cost is not None]
    if costs:
        folder.write_unit_costs(unit_costs_table(costs))
    folder.write_records(records, provenance)
    if zero_shot_jobs:
        _write_zero_shot(spec, units, outcome, zero_shot_jobs)
    return ProbeOutcome(records, len(outcome.fresh), len(outcome.reused), tuple(notes))


def _write_zero_shot(spec: Spec, units: list, outcome: incremental.IncrementalOutcome, jobs: dict) -> None:
    """``<output>/zero_shot`` from the fitted units' fused zero-shot results, and for the reused units
    (their probes not run again) a zero-shot pass of their own; in unit order."""
    from crs.evaluate.units import one_thread
    from crs.evaluate.zero_shot import run_zero_shot_unit, write_zero_shot

    settings = probe_settings(spec)
    results = []
    for unit in units:
        if unit not in jobs:
            continue
        fresh = outcome.fresh.get(unit)
        if fresh is not None and fresh.zero_shot is not None:
            results.append(fresh.zero_shot)
            continue
        with one_thread():
            results.append(run_zero_shot_unit(unit, spec.cache, settings, list(jobs[unit].prototype_sets),
                                              jobs[unit].output))
    write_zero_shot(spec.output, results)


def _cache_fingerprints(spec: Spec, units: list) -> dict[str, str]:
    """``encoder|task`` -> the cache fingerprint its features were read from (the report's provenance box)."""
    found: dict[str, str] = {}
    for unit in units:
        try:
            found[f"{unit.encoder}|{unit.task}"] = str(
                FeatureStore(store_path(spec.cache, unit.task)).current_fingerprint(unit.encoder))
        except Exception:  # noqa: BLE001 - provenance is a courtesy; the unit itself read the store
            continue
    return found
