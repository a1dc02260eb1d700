"""The overlap check's image prints, kept in each store beside the features (decision 0097).

Stage 1 prints the images it decodes anyway (:func:`crs.data.overlap.image_prints` of its canonical
tensors): a 64-bit pHash and a 32 x 32 grey thumbnail (uint16) per row, in arrays
``overlap_prints/phash``, ``overlap_prints/thumb`` and ``overlap_prints/done`` (which rows hold a print);
the comparison makes each thumbnail's detail and views (flip, zooms) itself. Prints depend on the image list and the decode geometry, so attribute
``overlap_prints`` records the table's ``id_digest``, ``image_size`` and ``fit`` and the prints'
``version`` (:data:`PRINTS_VERSION`); prints of another table, geometry or version are discarded, never
reused (a store printed before thumbnails were kept prints again, once: one decode of its rows). The
exact-copy print is the sha256 the image record holds already (:mod:`crs.cache.images`).

A shift target's store keeps every image; the overlap report (attribute ``overlap``) names the target
ids shared with the source, and stage 2 leaves those rows out (:func:`kept_rows`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from crs.cache.images import recorded_digests
from crs.cache.lock import layout_lock
from crs.cache.store import FeatureStore, child_array
from crs.data.base import Dataset
from crs.data.overlap import THUMB, Prints, dataset_decoder

GROUP = "overlap_prints"
ATTRIBUTE = "overlap_prints"
REPORT = "overlap"
"""Store attribute of a shift target's overlap report (:func:`crs.data.overlap.overlap_report`)."""
ROWS_PER_CHUNK = 4096
PRINTS_VERSION = 2
"""2: the grey thumbnail is kept instead of its detail, so flips and crops can be looked for (decision 0122)."""


def prints_key(dataset: Dataset) -> dict[str, Any]:
    """What a store's prints of ``dataset`` depend on (its ids, decode geometry, the prints' version)."""
    return _key(dataset)


def _key(dataset: Dataset) -> dict[str, Any]:
    return {"id_digest": dataset.id_digest(), "image_size": int(dataset.image_size), "fit": dataset.fit,
            "version": PRINTS_VERSION}


def _valid(store: FeatureStore, dataset: Dataset) -> bool:
    return store.root.attrs.get(ATTRIBUTE) == _key(dataset) and f"{GROUP}/done" in store.root


def missing_rows(store: FeatureStore, dataset: Dataset) -> np.ndarray:
    """Rows of ``dataset`` whose print the store does not hold (all of them when it holds none for it)."""
    if not _valid(store, dataset):
        return np.arange(len(dataset))
    return np.flatnonzero(~np.asarray(child_array(store.root, f"{GROUP}/done")[:], dtype=bool))


def write_prints(store: FeatureStore, dataset: Dataset, rows: np.ndarray, phash: np.ndarray,
                 thumb: np.ndarray) -> None:
    """Keep the prints of ``rows`` (under the store's layout lock: shards print their own rows)."""
    if len(rows) == 0:
        return
    order = np.argsort(rows, kind="stable")
    rows, phash, thumb = np.asarray(rows)[order], np.asarray(phash)[order], np.asarray(thumb)[order]
    with layout_lock(store.path, "keep overlap prints"):
        root = store.root
        if not _valid(store, dataset):
            n = len(dataset)
            chunk = max(1, min(n, ROWS_PER_CHUNK))
            root.create_array(f"{GROUP}/phash", shape=(n,), dtype="uint64", chunks=(chunk,), overwrite=True)
            root.create_array(f"{GROUP}/thumb", shape=(n, THUMB * THUMB), dtype="uint16",
                              chunks=(chunk, THUMB * THUMB), overwrite=True)
            root.create_array(f"{GROUP}/done", shape=(n,), dtype="bool", chunks=(chunk,), fill_value=False,
                              overwrite=True)  # unwritten chunks read as False: nothing printed yet
            root.attrs[ATTRIBUTE] = _key(dataset)
        child_array(root, f"{GROUP}/phash").set_orthogonal_selection((rows,), phash.astype(np.uint64))
        child_array(root, f"{GROUP}/thumb").set_orthogonal_selection((rows, slice(None)), thumb.astype(np.uint16))
        child_array(root, f"{GROUP}/done").set_orthogonal_selection((rows,), np.ones(len(rows), dtype=bool))


def read_prints(store: FeatureStore, dataset: Dataset, sha256: Any = None) -> Prints | None:
    """Every row's prints, sha256 from the image record (or ``sha256``, the files' digests in row order);
    None while any row's print or digest is missing."""
    digests = recorded_digests(store) if sha256 is None else np.asarray(sha256, dtype=str)
    if digests is None or len(digests) != len(dataset) or len(missing_rows(store, dataset)):
        return None
    return Prints(ids=np.asarray(dataset.ids).astype(str), sha256=digests,
                  phash=np.asarray(child_array(store.root, f"{GROUP}/phash")[:], dtype=np.uint64),
                  thumbs=np.asarray(child_array(store.root, f"{GROUP}/thumb")[:], dtype=np.uint16),
                  decode=dataset_decoder(dataset))


def dropped_ids(store: FeatureStore) -> list[str]:
    """The ids of a shift target that its overlap report drops from its evaluation (none without a report)."""
    report = cast(dict[str, Any] | None, store.root.attrs.get(REPORT))
    return [str(i) for i in report.get("dropped", [])] if isinstance(report, dict) else []


def kept_rows(store: FeatureStore, ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows`` (of the store's table, whose ids are ``ids``) without the target's dropped overlaps."""
    dropped = dropped_ids(store)
    if not dropped:
        return rows
    return rows[~np.isin(np.asarray(ids)[rows].astype(str), np.asarray(dropped, dtype=str))]
