"""Which image files a store's features were computed from, so a changed data folder is never silently reused.

The cache keys rows by image id; ids say nothing about pixels. A store therefore records, when its
sample table is first written, the data root and the sha256 of every image file (array
``image_sha256``, attribute ``images``). Every extraction re-hashes an evenly spaced sample of
:data:`SAMPLE_FILES` files and refuses, in one line naming the first changed file, a data set whose
files differ (decision 0046); ``crs cache verify --images`` re-hashes every file. The digest is of
the file's bytes, so a regenerated synthetic data set with identical bytes, or the same files
copied to another folder, reuse the cache (the new root is recorded); a touched file's mtime
alone changes nothing.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from PIL import Image

from crs.cache.store import CacheError, FeatureStore, child_array
from crs.data.base import Dataset
from crs.data.dicom import looks_like_dicom

log = logging.getLogger("crs.cache")

SAMPLE_FILES = 64
DIGEST_ARRAY = "image_sha256"
RECORD_ATTRIBUTE = "images"
DIGEST_RULE = "sha256 of the whole image file"
# PIL modes whose decoding changed with decision 0045 (16-bit and float grey were clipped to white before).
RECODED_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I", "F"})


def file_digest(path: Path) -> str:
    """sha256 of ``path``'s bytes ("missing" when there is no such file)."""
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except FileNotFoundError:
        return "missing"


def file_digests(root: Path, paths: Sequence[str], workers: int = 8) -> list[str]:
    """:func:`file_digest` of each path under ``root``, in order (threads: hashlib releases the GIL)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(lambda p: file_digest(root / p), paths, chunksize=64))


def sample_rows(n_images: int, k: int = SAMPLE_FILES) -> np.ndarray:
    """``k`` evenly spaced rows (all rows when there are fewer), the same for the same ``n_images``."""
    if n_images <= k:
        return np.arange(n_images)
    return np.unique(np.linspace(0, n_images - 1, k).round().astype(np.int64))


@dataclass(frozen=True)
class ImageChange:
    """One image whose file is not the one the store's features were computed from."""

    row: int
    image_id: str
    path: str
    now: str  # digest now, or "missing"

    def __str__(self) -> str:
        return f"{self.image_id} ({self.path}): " + ("missing" if self.now == "missing" else "content differs")


def recorded_digests(store: FeatureStore) -> np.ndarray | None:
    """The per-image digests recorded in ``store`` (None: recorded before crs kept them)."""
    attrs = store.root.attrs
    if RECORD_ATTRIBUTE not in attrs or DIGEST_ARRAY not in store.root:
        return None
    record = cast(dict[str, Any], attrs[RECORD_ATTRIBUTE])
    if record.get("id_digest") != attrs.get("id_digest"):
        return None  # the table changed since: the record is of another image list
    return np.array([str(v) for v in np.asarray(child_array(store.root, DIGEST_ARRAY)[:]).tolist()], dtype=str)


def compare(store: FeatureStore, dataset: Dataset, rows: np.ndarray | None = None, workers: int = 8) -> list[ImageChange]:
    """Images of ``dataset`` (at ``rows``, default all) whose files differ from the store's record."""
    recorded = recorded_digests(store)
    if recorded is None:
        raise CacheError(f"{store.path} records no image digests; run `crs extract` once to record them")
    rows = np.arange(len(dataset)) if rows is None else np.asarray(rows)
    paths = [str(dataset.paths[i]) for i in rows]
    now = file_digests(Path(dataset.root), paths, workers)
    return [ImageChange(int(row), str(dataset.ids[row]), path, digest)
            for row, path, digest in zip(rows.tolist(), paths, now, strict=True) if digest != recorded[row]]


def changed_message(store: FeatureStore, dataset: Dataset, changes: Sequence[ImageChange], checked: int) -> str:
    """One line: which data set, how many files differ, the first, and the two ways out."""
    record = cast(dict[str, Any], store.root.attrs.get(RECORD_ATTRIBUTE, {}))
    was = record.get("root", "?")
    where = f"under {dataset.root}" + (f" (the cache was extracted from {was})" if str(was) != str(dataset.root) else "")
    return (f"data set {dataset.name!r}: {len(changes)} of {checked} checked image file(s) {where} differ from those its "
            f"cached features were computed from, first: {changes[0]}; point the data set back at the original images, "
            f"or delete {store.path} to extract features from these")


def _record(store: FeatureStore, dataset: Dataset, workers: int) -> None:
    digests = file_digests(Path(dataset.root), [str(p) for p in dataset.paths], workers)
    array = store.root.create_array(DIGEST_ARRAY, shape=(len(digests),), dtype=str, overwrite=True)
    array[:] = np.asarray(digests, dtype=str)
    store.root.attrs[RECORD_ATTRIBUTE] = {"root": str(dataset.root), "id_digest": store.root.attrs.get("id_digest"),
                                          "rule": DIGEST_RULE, "sample_files": SAMPLE_FILES}


def _sampled_modes(dataset: Dataset) -> set[str]:
    """PIL modes of the sampled files (headers only; DICOM files are skipped: their decode did not change)."""
    modes = set()
    for row in sample_rows(len(dataset)).tolist():
        path = Path(dataset.root) / str(dataset.paths[row])
        if not path.is_file() or looks_like_dicom(path):
            continue
        try:
            with Image.open(path) as image:
                modes.add(image.mode)
        except (OSError, SyntaxError, ValueError):
            continue
    return modes


def image_problem(store: FeatureStore, dataset: Dataset, workers: int = 8) -> str | None:
    """Why the store's features may not be reused for ``dataset``'s files (one line), or None. Writes nothing.

    Sampled files that differ from the record; or, for a store recorded before crs kept digests, 16-bit
    or float grey images, whose features the old decoder computed from clipped, white pictures (0045).
    A store whose table is of another image list has nothing to compare (extraction rewrites the table).
    """
    if store.root.attrs.get("id_digest") != dataset.id_digest():
        return None
    if recorded_digests(store) is None:
        if store.encoder_names() and RECORD_ATTRIBUTE not in store.root.attrs:
            recoded = sorted(_sampled_modes(dataset) & RECODED_MODES)
            if recoded:
                return (f"{store.path} was extracted before crs decoded {', '.join(recoded)} images faithfully "
                        f"(they were clipped to white; decision 0045); delete it to extract {dataset.name!r} again")
        return None
    rows = sample_rows(len(dataset))
    changes = compare(store, dataset, rows, workers)
    return changed_message(store, dataset, changes, len(rows)) if changes else None


def ensure_same_images(store: FeatureStore, dataset: Dataset, workers: int = 8) -> str:
    """Record the images of a new store, or check a sample of them against the record.

    Call after ``store.write_table(dataset)`` under the store's layout lock. Returns what happened
    (``recorded`` | ``same`` | ``moved``); raises :class:`CacheError` with :func:`image_problem`'s line.
    """
    problem = image_problem(store, dataset, workers)
    if problem is not None:
        raise CacheError(problem)
    if recorded_digests(store) is None:
        _record(store, dataset, workers)
        return "recorded"
    record = dict(cast(dict[str, Any], store.root.attrs[RECORD_ATTRIBUTE]))
    if record.get("root") != str(dataset.root):
        log.info("%s: same image files now under %s (were under %s)", dataset.name, dataset.root, record.get("root"))
        store.root.attrs[RECORD_ATTRIBUTE] = {**record, "root": str(dataset.root)}
        return "moved"
    return "same"
