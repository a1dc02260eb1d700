"""Which image files a store's features were computed from, so a changed data folder is never silently reused.

The cache keys rows by image id; ids say nothing about pixels. A store therefore records, when its
sample table is first written, the data root, the sha256 of every image file (array
``image_sha256``, attribute ``images``) and each file's size, modification and change times in
nanoseconds (array ``image_stat``). Every check is complete, not sampled (decision 0118): every
file is stat'ed, the files whose stat or root differs from the record are hashed, and a file whose
bytes differ is refused in one line naming it (decision 0046). The digest decides, the stat only
chooses what to hash: a regenerated synthetic data set with identical bytes, a touched file, or the
same files copied to another folder reuse the cache (the new root and stats are recorded at the
next extraction). ``crs cache verify --images`` re-hashes every file.
"""

from __future__ import annotations

import hashlib
import logging
import os
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

SAMPLE_FILES = 64  # files whose pixel modes `crs check` reports (the content check itself reads every file's stat)
DIGEST_ARRAY = "image_sha256"
STAT_ARRAY = "image_stat"
STAT_FIELDS = ("size", "mtime_ns", "ctime_ns")
MISSING_STAT = (-1, -1, -1)
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


def file_stat(path: Path) -> tuple[int, int, int]:
    """(size, mtime_ns, ctime_ns) of ``path`` (:data:`MISSING_STAT` when there is no such file)."""
    try:
        stat = os.stat(path)
    except OSError:
        return MISSING_STAT
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def file_stats(root: Path, paths: Sequence[str], workers: int = 8) -> np.ndarray:
    """:func:`file_stat` of each path under ``root``: an (N, 3) int64 array in order (threads: a network
    file system answers a stat in a round trip, several at once hide it)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        stats = list(pool.map(lambda p: file_stat(root / p), paths, chunksize=256))
    return np.asarray(stats, dtype=np.int64).reshape(len(paths), len(STAT_FIELDS))


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


def recorded_stats(store: FeatureStore) -> np.ndarray | None:
    """The per-image (size, mtime_ns, ctime_ns) recorded in ``store`` (None: recorded before crs kept them)."""
    digests = recorded_digests(store)
    if digests is None or STAT_ARRAY not in store.root:
        return None
    stats = np.asarray(child_array(store.root, STAT_ARRAY)[...], dtype=np.int64)
    return stats if stats.shape == (len(digests), len(STAT_FIELDS)) else None


def compare(store: FeatureStore, dataset: Dataset, rows: np.ndarray | None = None, workers: int = 8) -> list[ImageChange]:
    """Images of ``dataset`` (at ``rows``, default all) whose files differ from the store's record (all re-hashed)."""
    recorded = recorded_digests(store)
    if recorded is None:
        raise CacheError(f"{store.path} records no image digests; run `crs extract` once to record them")
    rows = np.arange(len(dataset)) if rows is None else np.asarray(rows)
    paths = [str(dataset.paths[i]) for i in rows]
    now = file_digests(Path(dataset.root), paths, workers)
    return [ImageChange(int(row), str(dataset.ids[row]), path, digest)
            for row, path, digest in zip(rows.tolist(), paths, now, strict=True) if digest != recorded[row]]


@dataclass(frozen=True)
class ContentCheck:
    """One complete check of a data set's files against a store's record.

    ``changes``: files whose bytes differ; ``hashed``: rows re-hashed because their stat (or the root)
    differs from the record; ``stats``: every file's stat now, for the record once nothing changed.
    """

    changes: list[ImageChange]
    hashed: np.ndarray
    stats: np.ndarray

    def stale_record(self, store: FeatureStore) -> bool:
        """True when the record's stats (or root) should be refreshed: same bytes, other stats."""
        return len(self.hashed) > 0 or recorded_stats(store) is None


def check_contents(store: FeatureStore, dataset: Dataset, workers: int = 8) -> ContentCheck:
    """Stat every file of ``dataset``; hash those whose stat differs from ``store``'s record (every file when
    the record has no stats or names another root); compare those digests with the record."""
    recorded = recorded_digests(store)
    if recorded is None:
        raise CacheError(f"{store.path} records no image digests; run `crs extract` once to record them")
    paths = [str(p) for p in dataset.paths]
    stats = file_stats(Path(dataset.root), paths, workers)
    was = recorded_stats(store)
    record = cast(dict[str, Any], store.root.attrs.get(RECORD_ATTRIBUTE, {}))
    if was is None or str(record.get("root")) != str(dataset.root):
        suspect = np.arange(len(paths))
    else:
        suspect = np.flatnonzero((stats != was).any(axis=1))
    changes = compare(store, dataset, suspect, workers) if len(suspect) else []
    return ContentCheck(changes, suspect, stats)


def changed_message(store: FeatureStore, dataset: Dataset, changes: Sequence[ImageChange], checked: int) -> str:
    """One line: which data set, how many files differ, the first, and the two ways out."""
    record = cast(dict[str, Any], store.root.attrs.get(RECORD_ATTRIBUTE, {}))
    was = record.get("root", "?")
    where = f"under {dataset.root}" + (f" (the cache was extracted from {was})" if str(was) != str(dataset.root) else "")
    first = changes[0]
    state = "missing" if first.now == "missing" else "content differs"
    return (f"data set {dataset.name!r}: {len(changes)} of {checked} checked image file(s) {where} differ from those its "
            f"cached features were computed from, first: {first.image_id} ({Path(dataset.root) / first.path}): {state}; "
            f"restore the original file(s) or point the data set back at the original images, "
            f"or delete {store.path} to extract features from these")


def _record(store: FeatureStore, dataset: Dataset, workers: int) -> None:
    paths = [str(p) for p in dataset.paths]
    stats = file_stats(Path(dataset.root), paths, workers)  # before the bytes: a file written between is hashed next time
    digests = file_digests(Path(dataset.root), paths, workers)
    array = store.root.create_array(DIGEST_ARRAY, shape=(len(digests),), dtype=str, overwrite=True)
    array[:] = np.asarray(digests, dtype=str)
    _record_stats(store, stats)
    store.root.attrs[RECORD_ATTRIBUTE] = {"root": str(dataset.root), "id_digest": store.root.attrs.get("id_digest"),
                                          "rule": DIGEST_RULE, "stat": list(STAT_FIELDS), "check": "complete"}


def _record_stats(store: FeatureStore, stats: np.ndarray) -> None:
    array = store.root.create_array(STAT_ARRAY, shape=stats.shape, dtype="int64", overwrite=True)
    array[...] = stats


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


def vouches_for(store: FeatureStore, dataset: Dataset) -> bool:
    """True when ``store`` holds a digest record of exactly ``dataset``'s image list (its files were read once)."""
    return store.root.attrs.get("id_digest") == dataset.id_digest() and recorded_digests(store) is not None


def image_problem(store: FeatureStore, dataset: Dataset, workers: int = 8) -> str | None:
    """Why the store's features may not be reused for ``dataset``'s files (one line), or None. Writes nothing.

    Any file whose bytes differ from the record (every file is stat'ed, those whose stat differs are
    hashed: :func:`check_contents`); or, for a store recorded before crs kept digests, 16-bit or float
    grey images, whose features the old decoder computed from clipped, white pictures (0045). A store
    whose table is of another image list has nothing to compare (extraction rewrites the table).
    """
    found = _content_check(store, dataset, workers)
    return found if isinstance(found, str) else None


def _content_check(store: FeatureStore, dataset: Dataset, workers: int) -> str | ContentCheck | None:
    if store.root.attrs.get("id_digest") != dataset.id_digest():
        return None
    if recorded_digests(store) is None:
        if store.encoder_names() and RECORD_ATTRIBUTE not in store.root.attrs:
            recoded = sorted(_sampled_modes(dataset) & RECODED_MODES)
            if recoded:
                return (f"{store.path} was extracted before crs decoded {', '.join(recoded)} images faithfully "
                        f"(they were clipped to white; decision 0045); delete it to extract {dataset.name!r} again")
        return None
    check = check_contents(store, dataset, workers)
    return changed_message(store, dataset, check.changes, len(dataset)) if check.changes else check


def ensure_same_images(store: FeatureStore, dataset: Dataset, workers: int = 8) -> str:
    """Record the images of a new store, or check every one of them against the record.

    Call after ``store.write_table(dataset)`` under the store's layout lock. Returns what happened
    (``recorded`` | ``same`` | ``moved``); raises :class:`CacheError` with :func:`image_problem`'s line.
    Same bytes under other stats (a touched or copied file) refresh the recorded stats, so the next
    check hashes nothing.
    """
    found = _content_check(store, dataset, workers)
    if isinstance(found, str):
        raise CacheError(found)
    if recorded_digests(store) is None:
        _record(store, dataset, workers)
        return "recorded"
    record = dict(cast(dict[str, Any], store.root.attrs[RECORD_ATTRIBUTE]))
    if found is not None and found.stale_record(store):
        _record_stats(store, found.stats)
        record.update({"stat": list(STAT_FIELDS), "check": "complete"})
        store.root.attrs[RECORD_ATTRIBUTE] = record
    if record.get("root") != str(dataset.root):
        log.info("%s: same image files now under %s (were under %s)", dataset.name, dataset.root, record.get("root"))
        store.root.attrs[RECORD_ATTRIBUTE] = {**record, "root": str(dataset.root)}
        return "moved"
    return "same"
