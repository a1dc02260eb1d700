"""Stage 1 for a whole spec: every data set and each of its shift targets, each encoder that runs on it, once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crs.cache.lock import WriterLock, layout_lock_path
from crs.cache.store import FeatureStore, store_path
from crs.corruptions.variants import resolve_variants
from crs.data import Dataset, load_entry
from crs.data.shift import shift_target_dataset
from crs.encoders import create
from crs.extract.runner import ExtractStats, extract_dataset
from crs.spec import Spec

log = logging.getLogger("crs")


def _chosen(spec: Spec, names: list[str] | None) -> list:
    return [e for e in spec.encoders if names is None or e.name in names]


def create_encoders(spec: Spec, names: list[str] | None = None, device: str | None = None) -> list:
    return [
        create(e.name, weights=e.weights, device=device or spec.extract.device, input_size=e.input_size)
        for e in _chosen(spec, names)
    ]


def extract_spec(spec: Spec, encoder_names: list[str] | None = None, progress: bool = True,
            shard: tuple[int, int] | None = None, wait: bool = False,
            announce: Callable[[str], None] | None = None) -> ExtractStats:
    """Stage 1 for every data set of the spec and every one of its shift targets.

    ``shard=(i, n)`` fills the i-th of n stretches of equal forward passes (:mod:`crs.extract.shards`); ``wait`` waits
    for another writer of the same (store, encoder, shard) instead of failing.
    """
    all_encoders = create_encoders(spec, encoder_names)
    stats = ExtractStats()
    bad_images = {"skip_bad": True} if spec.extract.skip_bad else {}
    for entry in spec.datasets:
        declared = spec.encoders_on(entry.name)  # a specialist is extracted on its own data sets only
        encoders = [encoder for encoder, e in zip(all_encoders, _chosen(spec, encoder_names), strict=True)
                    if e.name in declared]
        if not encoders:
            continue
        dataset = load_entry(entry, **bad_images)
        if dataset.skipped:
            log.warning("%s: skipped %d bad images (listed in the run records)", entry.name, len(dataset.skipped))
        variants = resolve_variants(dataset.modality, spec.extract.corruptions, spec.extract.severities)
        stats.merge(
            extract_dataset(dataset, encoders, spec.cache, variants, spec.extract.batch_size,
                            spec.extract.chunk_rows, spec.extract.device, progress, shard=shard, wait=wait,
                            announce=announce, threads=_threads(spec),
                            corruption_rows_wanted=spec.extract.corruption_rows)
        )
        _record_skipped(spec, dataset)
        for target_entry in entry.shift_targets:
            target = shift_target_dataset(load_entry(target_entry, **bad_images), dataset)
            stats.merge(
                extract_dataset(target, encoders, spec.cache, (), spec.extract.batch_size,
                                spec.extract.chunk_rows, spec.extract.device, progress, shard=shard, wait=wait,
                            announce=announce, threads=_threads(spec))
            )
            _record_skipped(spec, target)
    return stats


def _threads(spec: Spec) -> int | None:
    return None if spec.extract.threads == "auto" else int(spec.extract.threads)


def _record_skipped(spec: Spec, dataset: Dataset) -> None:
    """Keep the list of skipped images with the cache, so stage 2 can put it in the run records."""
    path = store_path(spec.cache, dataset.name)
    with WriterLock(layout_lock_path(path), wait=True):  # shards may write the same attributes
        FeatureStore(path, mode="a").root.attrs["skipped_images"] = list(dataset.skipped)


