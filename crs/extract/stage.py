"""Stage 1 for a whole spec: every data set and each of its shift targets, each encoder that runs on it, once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crs.cache.images import ImageChange, compare
from crs.cache.lock import layout_lock
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.corruptions.variants import resolve_variants
from crs.data import Dataset, load_entry
from crs.data.shift import shift_target_dataset
from crs.encoders import create
from crs.extract.overlap import PrintCollector, extraction_finished, screen_target, store_prints
from crs.extract.runner import ExtractStats, extract_dataset
from crs.spec import Spec

log = logging.getLogger("crs")


def _chosen(spec: Spec, names: list[str] | None) -> list:
    return [e for e in spec.encoders if names is None or e.name in names]


def create_encoders(spec: Spec, names: list[str] | None = None, device: str | None = None) -> list:
    return [
        create(e.name, weights=e.weights, device=device or spec.extract.device, input_size=e.input_size,
               precision=spec.extract.precision)
        for e in _chosen(spec, names)
    ]


def extract_spec(spec: Spec, encoder_names: list[str] | None = None, progress: bool = True,
            shard: tuple[int, int] | None = None, wait: bool = False,
            announce: Callable[[str], None] | None = None, allow_overlap: bool = False,
            on_dataset_done: Callable[[list[str]], object] | None = None) -> ExtractStats:
    """Stage 1 for every data set of the spec and every one of its shift targets.

    ``on_dataset_done`` is called with the names of a data set's stores (its own and its shift targets')
    once they are written: a URL cache pushes those then (:mod:`crs.cache.mirror`), so a run stopped later keeps them in the bucket.

    ``shard=(i, n)`` fills the i-th of n stretches of equal forward passes (:mod:`crs.extract.shards`); ``wait`` waits
    for another writer of the same (store, encoder, shard) instead of failing. Each shift target is
    compared with its source image by image (:mod:`crs.data.overlap`), from prints of stage 1's own
    decode (:mod:`crs.extract.overlap`): images it shares with the source are listed in its cache and
    left out of its evaluation by stage 2, or kept and marked with ``allow_overlap``.
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
        printed = PrintCollector(spec.cache, dataset) if entry.shift_targets else None
        try:
            stats.merge(
                extract_dataset(dataset, encoders, spec.cache, variants, spec.extract.batch_size,
                                spec.extract.chunk_rows, spec.extract.device, progress, shard=shard, wait=wait,
                                announce=announce, threads=_threads(spec),
                                corruption_rows_wanted=spec.extract.corruption_rows,
                                on_decoded=printed.add if printed else None)
            )
        finally:
            if printed is not None:
                printed.flush()  # kept even when the run stops: a resumed run decodes only pending rows
        _record_skipped(spec, dataset)
        source_prints = None
        written = [dataset.name]  # the stores this data set's pass writes: its own and its shift targets'
        for target_entry in entry.shift_targets:
            target = shift_target_dataset(load_entry(target_entry, **bad_images), dataset)
            written.append(target.name)
            printed = PrintCollector(spec.cache, target)
            try:
                stats.merge(
                    extract_dataset(target, encoders, spec.cache, (), spec.extract.batch_size,
                                    spec.extract.chunk_rows, spec.extract.device, progress, shard=shard, wait=wait,
                                    announce=announce, threads=_threads(spec), on_decoded=printed.add)
                )
            finally:
                printed.flush()
            names = [encoder.spec.name for encoder in encoders]
            if shard is not None and not extraction_finished(spec.cache, [dataset.name, target.name], names):
                # Other shards still decode (and print) their rows: the last one to finish compares.
                log.info("%s: other shards are still extracting; the last to finish compares it with %s",
                         target.name, dataset.name)
                _record_skipped(spec, target)
                continue
            if source_prints is None:
                source_prints = store_prints(dataset, spec.cache)
            overlap = screen_target(dataset, target, spec.cache, allow_overlap, source_prints)
            if overlap["n_overlapping"]:
                log.warning("%s: %d image(s) also in %s (%s; listed in audit.json)", target.name,
                            overlap["n_overlapping"], dataset.name,
                            "kept" if allow_overlap else "left out of its evaluation")
            _record_skipped(spec, target, overlap)
        if on_dataset_done is not None:
            on_dataset_done(written)
    return stats


def _threads(spec: Spec) -> int | None:
    return None if spec.extract.threads == "auto" else int(spec.extract.threads)


def _record_skipped(spec: Spec, dataset: Dataset, overlap: dict | None = None) -> None:
    """Keep the list of skipped images (and a target's label map: the classes scored) with the cache,
    so stage 2 can put them in the run's audit."""
    path = store_path(spec.cache, dataset.name)
    with layout_lock(path, "write attributes"):  # shards may write the same attributes
        attrs = FeatureStore(path, mode="a").root.attrs
        attrs["skipped_images"] = list(dataset.skipped)
        if dataset.label_map:
            attrs["label_map"] = dict(dataset.label_map)
        if overlap is not None:
            attrs["overlap"] = overlap




def spec_datasets(spec: Spec) -> list[Dataset]:
    """Every data set of the spec and each of its shift targets, loaded as stage 1 loads them (tables only)."""
    bad_images = {"skip_bad": True} if spec.extract.skip_bad else {}
    loaded = []
    for entry in spec.datasets:
        dataset = load_entry(entry, **bad_images)
        loaded.append(dataset)
        loaded.extend(shift_target_dataset(load_entry(target, **bad_images), dataset) for target in entry.shift_targets)
    return loaded


def verify_images(spec: Spec, workers: int = 8) -> dict[str, list[ImageChange] | str]:
    """Re-hash every image of every data set of ``spec`` against its store's record (decision 0046).

    Data set name -> the images whose files differ (empty: all the same), or a one-line reason
    there is nothing to compare with (no store yet, or a store recorded before crs kept digests).
    """
    results: dict[str, list[ImageChange] | str] = {}
    for dataset in spec_datasets(spec):
        path = store_path(spec.cache, dataset.name)
        if not path.exists():
            results[dataset.name] = f"no store at {path} yet (nothing extracted)"
            continue
        try:
            results[dataset.name] = compare(FeatureStore(path), dataset, workers=workers)
        except CacheError as error:
            results[dataset.name] = str(error)
    return results
