"""The whole job for one spec: extract (stage 1), probe, score, report (stage 2).

Each step reads what the previous one wrote under the spec's cache and output folders, so steps can
be re-run alone: ``crs probe`` on a copied cache folder needs no images and no encoder weights.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from crs import records as records_io
from crs.cache.store import FeatureStore, store_path
from crs.data import Dataset, load_dataset
from crs.extract import ExtractStats, extract_dataset, resolve_variants
from crs.run_probes import ProbeSettings, ProbeUnit, run_units
from crs.spec import DatasetEntry, Spec, spec_to_dict

log = logging.getLogger("crs")

RECORDS_FILE = "records.parquet"
AGGREGATE_FILE = "records_seed_aggregated.parquet"
PREDICTIONS_DIR = "predictions"
AUDIT_FILE = "audit.json"


def ensure_writable(folder: Path) -> Path:
    """Create ``folder`` and check it accepts files, with a one-line error naming it otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".crs-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise PermissionError(f"output folder {folder} is not writable ({error.strerror}); choose another with --out") from None
    return folder


def load_entry(entry: DatasetEntry, **extra: object) -> Dataset:
    dataset = load_dataset(entry.loader, entry.root, **{**entry.options, **extra})
    dataset.name = entry.name
    return dataset


def create_encoders(spec: Spec, names: list[str] | None = None, device: str | None = None) -> list:
    from crs.encoders import create

    chosen = [e for e in spec.encoders if names is None or e.name in names]
    return [
        create(e.name, weights=e.weights, device=device or spec.extract.device, input_size=e.input_size)
        for e in chosen
    ]


def extract(spec: Spec, encoder_names: list[str] | None = None, progress: bool = True,
            shard: tuple[int, int] | None = None, wait: bool = False) -> ExtractStats:
    """Stage 1 for every data set (and shift target) of the spec.

    ``shard=(i, n)`` fills only chunks ``k % n == i`` (``crs extract --shard i/n``); ``wait`` waits
    for another writer of the same (store, encoder, shard) instead of failing.
    """
    encoders = create_encoders(spec, encoder_names)
    stats = ExtractStats()
    bad_images = {"skip_bad": True} if spec.extract.skip_bad else {}
    for entry in spec.datasets:
        dataset = load_entry(entry, **bad_images)
        if dataset.skipped:
            log.warning("%s: skipped %d bad images (listed in the run records)", entry.name, len(dataset.skipped))
        variants = resolve_variants(dataset.modality, spec.extract.corruptions, spec.extract.severities)
        stats.merge(
            extract_dataset(dataset, encoders, spec.cache, variants, spec.extract.batch_size,
                            spec.extract.chunk_rows, spec.extract.device, progress, shard=shard, wait=wait)
        )
        _record_skipped(spec, dataset)
        if entry.shift_target is not None:
            # The target is resized to the source's canonical size: the shift is the site's, not the file size's.
            target = load_entry(entry.shift_target, **bad_images)
            if target.image_size != dataset.image_size:
                target.image_size = dataset.image_size
            stats.merge(
                extract_dataset(target, encoders, spec.cache, (), spec.extract.batch_size,
                                spec.extract.chunk_rows, spec.extract.device, progress, shard=shard, wait=wait)
            )
            _record_skipped(spec, target)
    return stats


def _record_skipped(spec: Spec, dataset: Dataset) -> None:
    """Keep the list of skipped images with the cache, so stage 2 can put it in the run records."""
    from crs.cache.lock import WriterLock, layout_lock_path

    path = store_path(spec.cache, dataset.name)
    with WriterLock(layout_lock_path(path), wait=True):  # shards may write the same attributes
        FeatureStore(path, mode="a").root.attrs["skipped_images"] = list(dataset.skipped)


def audit_tables(spec: Spec) -> dict[str, object]:
    """Skipped images and the drawn label-fraction ids per task and seed, for auditing and repeating a run."""
    from crs.run_probes import training_subsets

    settings = probe_settings(spec)
    skipped_images: dict[str, list[str]] = {}
    label_fraction_ids: dict[str, dict[str, dict[str, list[str]]]] = {}
    names = [entry.name for entry in spec.datasets]
    names += [entry.shift_target.name for entry in spec.datasets if entry.shift_target]
    for name in names:
        store = FeatureStore(store_path(spec.cache, name))
        skipped_images[name] = list(cast(list[str], store.root.attrs.get("skipped_images", [])))
    for entry in spec.datasets:
        table = FeatureStore(store_path(spec.cache, entry.name)).read_table()
        train_ids = table.ids[table.indices("train")]
        drawn: dict[str, dict[str, list[str]]] = {}
        for fraction, seed, rows in training_subsets(table, settings):
            drawn.setdefault(str(seed), {})[str(fraction)] = train_ids[rows].tolist()
        label_fraction_ids[entry.name] = drawn
    return {"skipped_images": skipped_images, "label_fraction_ids": label_fraction_ids}


def probe_settings(spec: Spec) -> ProbeSettings:
    p = spec.probe
    return ProbeSettings(p.label_fractions, p.seeds, p.Cs, p.backend, p.family, p.selection, p.min_per_class)


def probe_units(spec: Spec) -> list[ProbeUnit]:
    """Every (encoder, task) unit of the spec, with the task's shift target where it has one."""
    return [
        ProbeUnit(encoder, entry.name, entry.shift_target.name if entry.shift_target else "")
        for entry in spec.datasets for encoder in spec.encoder_names
    ]


def probe(
    spec: Spec, jobs: int | None = None, cluster: str | None = None, progress: bool = True, full: bool = False
) -> pd.DataFrame:
    """Stage 2 from the cache alone; writes run records, seed aggregates and predictions.

    Units whose cache fingerprint and probe settings are unchanged since the last run reuse their
    stored records (``full=True`` refits everything); cohort-level scores are always recomputed.
    """
    from crs import incremental

    output = ensure_writable(spec.output)
    settings = probe_settings(spec)
    units = probe_units(spec)
    predictions = output / PREDICTIONS_DIR
    previous = output / RECORDS_FILE
    if full and previous.exists():
        previous.unlink()
    outcome = incremental.run_incremental(
        units, spec.cache, settings, previous,
        lambda todo: run_units(todo, spec.cache, settings, jobs or spec.probe.jobs, cluster, progress),
        predictions_dir=predictions,
    )
    log.info("probe: reused the records of %d unchanged units; fitted %d", len(outcome.reused), len(outcome.fresh))
    records = records_io.combine(outcome.records)
    audit = audit_tables(spec)
    (output / AUDIT_FILE).write_text(json.dumps(audit, indent=1))
    provenance = {
        "spec": spec_to_dict(spec), "versions": records_io.versions(),
        "skipped_images": audit["skipped_images"], incremental.UNIT_KEYS: outcome.unit_keys,
    }
    predictions.mkdir(exist_ok=True)
    for unit, result in outcome.fresh.items():
        # allow_pickle spelled out (else mypy reads **predictions as possibly binding it); False: the arrays
        # are numeric, and np.load refuses pickled ones anyway
        np.savez_compressed(incremental.predictions_file(predictions, unit), allow_pickle=False, **result.predictions)
    records_io.write_parquet(records, previous, provenance)
    records_io.write_parquet(records_io.seed_aggregate(records), output / AGGREGATE_FILE, provenance)
    records.attrs["units_fitted"] = len(outcome.fresh)
    records.attrs["units_reused"] = len(outcome.reused)
    return records


def read_records(spec: Spec) -> pd.DataFrame:
    path = spec.output / RECORDS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no run records at {path}; run `crs probe` first")
    records = pd.read_parquet(path)
    # A spec may drop an encoder: score only those it names, the cache keeps the rest.
    return records[records["encoder"].isin(spec.encoder_names)].reset_index(drop=True)
