"""Stage 1's part of the duplicate check: print the images it decodes, then screen each shift target.

:class:`PrintCollector` receives each batch of canonical images the runner decodes (its
``on_decoded`` hook) and computes their prints in the decode worker (a grey 32 x 32 thumbnail, one
DCT: :func:`crs.data.overlap.image_prints`), then keeps them in the store
(:mod:`crs.cache.prints`). :func:`store_prints` returns a data set's prints from its store, printing
here only the rows no extraction printed (a store extracted before prints were kept, rows a killed run
decoded, other shards' rows; a shard leaves the comparison to the last shard to finish:
:func:`extraction_finished`). :func:`screen_target` compares a target with its source: stage 1 keeps
its report in the target's store, and stage 2 leaves the rows it drops out.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

from crs.cache.images import file_digests
from crs.cache.prints import REPORT, missing_rows, prints_key, read_prints, write_prints
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.data.base import DataError, Dataset
from crs.data.overlap import Prints, find_overlaps, image_prints, overlap_report, prints_of

log = logging.getLogger("crs.extract")


class PrintCollector:
    """Prints of the rows stage 1 decodes, kept in the data set's store by :meth:`flush`.

    ``add`` is called from the decode threads with each window's rows and images (thread-safe)."""

    def __init__(self, cache_root: Path, dataset: Dataset):
        self.path = store_path(cache_root, dataset.name)
        self.dataset = dataset
        self._lock = threading.Lock()
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.wanted: np.ndarray | None = None

    def add(self, rows: np.ndarray, images: Any) -> None:
        if self.wanted is None:  # the store's missing rows, read once at the first batch (the store exists by then)
            with self._lock:
                if self.wanted is None:
                    self.wanted = missing_rows(FeatureStore(self.path), self.dataset)
        mask = np.isin(rows, self.wanted)
        if not mask.any():
            return
        pixels = images.numpy() if hasattr(images, "numpy") else np.asarray(images)
        phash, thumb = image_prints(pixels if mask.all() else pixels[mask])
        with self._lock:
            self._parts.append((np.asarray(rows)[mask], phash, thumb))

    def flush(self) -> int:
        """Write the collected prints to the store; the number of rows written."""
        with self._lock:
            parts, self._parts = self._parts, []
        if not parts:
            return 0
        rows = np.concatenate([p[0] for p in parts])
        write_prints(FeatureStore(self.path, mode="a"), self.dataset, rows, np.concatenate([p[1] for p in parts]),
                     np.concatenate([p[2] for p in parts]))
        return len(rows)


def store_prints(dataset: Dataset, cache_root: Path, workers: int = 4) -> Prints:
    """``dataset``'s prints from its store, printing (decoding) here only the rows it lacks."""
    store = FeatureStore(store_path(cache_root, dataset.name), mode="a")
    missing = missing_rows(store, dataset)
    if len(missing):
        log.info("%s: printing %d image(s) no extraction printed (decoded again)", dataset.name, len(missing))
        write_prints(store, dataset, missing, *prints_of(dataset, missing, workers))
    prints = read_prints(store, dataset)
    if prints is None:  # no image record to take the sha256 from (an imported store): hash the files here
        digests = file_digests(Path(dataset.root), [str(p) for p in dataset.paths], workers)
        prints = read_prints(store, dataset, digests)
    if prints is None:
        raise DataError(f"{store.path}: the overlap prints of {dataset.name!r} could not be kept; check the cache folder")
    return prints


def cached_prints(dataset: Dataset, cache_root: Path) -> Prints | None:
    """``dataset``'s prints when its store holds all of them (reads only), else None."""
    path = store_path(cache_root, dataset.name)
    if not path.exists():
        return None
    return read_prints(FeatureStore(path), dataset)


def extraction_finished(cache_root: Path, datasets: list[str], encoders: list[str]) -> bool:
    """True when every ``encoders`` group of every store of ``datasets`` is complete (``current``): no shard
    of a sharded run is still decoding them, so their prints are all kept (or never will be by a run)."""
    for name in datasets:
        store = FeatureStore(store_path(cache_root, name))
        for encoder in encoders:
            try:
                store.current_fingerprint(encoder)
            except CacheError:
                return False
    return True


CHECK_VERSION = 2
"""2: pairs the thumbnails confirm are confirmed again from their files (decision 0142)."""


def _checked(source: Dataset, target: Dataset, cache_root: Path, allow_overlap: bool) -> dict[str, Any] | None:
    """What a kept report was made from (both stores' prints, the check's version, ``allow_overlap``); None while
    either store lacks a print (the comparison must run)."""
    keys = []
    for dataset in (source, target):
        path = store_path(cache_root, dataset.name)
        if not path.exists() or len(missing_rows(FeatureStore(path), dataset)):
            return None
        keys.append(prints_key(dataset))
    return {"source": keys[0], "target": keys[1], "version": CHECK_VERSION, "allowed": bool(allow_overlap)}


def screen_target(source: Dataset, target: Dataset, cache_root: Path, allow_overlap: bool = False,
                  source_prints: Prints | None = None, workers: int = 4) -> dict[str, Any]:
    """Compare ``target`` with ``source`` image by image: the report to keep in the target's store.

    The target's store keeps every image; stage 2 leaves out the report's ``dropped`` ids (none when
    ``allow_overlap``). A report the target's store keeps from the same prints and check is returned as it is:
    the second stage would read the candidate pairs' files again. Raises :class:`DataError` when every target image is also in the source."""
    checked = _checked(source, target, cache_root, allow_overlap)
    kept = FeatureStore(store_path(cache_root, target.name)).root.attrs.get(REPORT) if checked else None
    if isinstance(kept, dict) and kept.get("checked") == checked:  # same images, prints and check: no file read again
        return dict(kept)
    prints = source_prints if source_prints is not None else store_prints(source, cache_root, workers)
    overlaps = find_overlaps(prints, store_prints(target, cache_root, workers), source.name, target.name)
    report = overlap_report(source.name, overlaps, allow_overlap) | {"checked": _checked(source, target, cache_root,
                                                                                          allow_overlap)}
    if report["dropped"] and set(report["dropped"]) >= set(np.asarray(target.ids).astype(str).tolist()):
        raise DataError(f"shift target {target.name!r}: every image is also in {source.name!r}; it measures no shift")
    return report
