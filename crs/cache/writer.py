"""Chunked feature writes with per-chunk completion flags and checksums, so a killed run resumes where it stopped.

Each feature array ``<name>`` (rows x dim, float16) has two marker arrays beside it:

* ``<name>__done``   (n_chunks,) uint8, one zarr chunk (one file) per flag: 1 once that row chunk is durable;
* ``<name>__sha256`` (n_chunks, 32) uint8, one file per chunk: sha256 of the chunk's float16 bytes
  (little-endian, C order), recorded before the flag, checked by ``crs cache verify``.

One file per flag means workers filling disjoint chunks (``--shard i/n``) never rewrite each
other's flags. zarr's LocalStore writes every file to a temporary name and renames it into place, so
a killed process leaves either the old or the new file, never a torn one; ``write_chunk`` then
fsyncs the data (and its folder) before it writes the checksum and the flag, so the flag can never
outlive the data, even across a power cut.

Until a chunk is full, the rows computed for it are journaled (:mod:`crs.cache.journal`): a kill
loses at most the forward call in flight, a crash of the machine at most the open chunks.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import cast

import numpy as np
import zarr
from zarr.core.array_spec import ArrayConfigParams

from crs.cache.direct import chunk_file
from crs.cache.journal import JOURNAL_FOLDER, JOURNAL_SUFFIX, append_record, journal_files, read_records
from crs.cache.store import FEATURE_DTYPE, CacheError, child_array
from crs.spec import for_setting

DONE_SUFFIX = "__done"
CHECKSUM_SUFFIX = "__sha256"
MARKER_SUFFIXES = (DONE_SUFFIX, CHECKSUM_SUFFIX)
CHECKSUM_RULE = "sha256 of the chunk's float16 bytes, little-endian, C order"
# Files always exist once written (zarr would otherwise skip all-zero chunks), so verify can tell
# "never written" from "written as zeros".
_ARRAY_CONFIG: ArrayConfigParams = {"write_empty_chunks": True}


class CacheWriteError(CacheError):
    """Writing to the cache failed (full disk, read-only folder); the chunk stays marked incomplete."""


class CacheFullError(CacheWriteError):
    """The cache's disk is full (ENOSPC): the chunk stays incomplete, the run resumes once space is freed."""

    def __init__(self, message: str, store: str = "", chunk_bytes: int = 0):
        super().__init__(message)
        self.store = store
        self.chunk_bytes = chunk_bytes


def is_marker_array(name: str) -> bool:
    """True for the ``__done`` / ``__sha256`` bookkeeping arrays, False for feature arrays."""
    return name.endswith(MARKER_SUFFIXES)


def chunk_checksum(stored: np.ndarray) -> bytes:
    """sha256 of a chunk as stored: float16, little-endian, C order (see :data:`CHECKSUM_RULE`)."""
    return hashlib.sha256(np.ascontiguousarray(stored, dtype="<f2").tobytes()).digest()


def fsync_file(path: Path | None) -> None:
    """Flush one file and its folder entry to disk (no-op for stores that are not local folders)."""
    if path is None or not path.exists():
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def rows_in_done_chunks(flags: np.ndarray, chunk_rows: int, n_rows: int) -> int:
    """Rows covered by the chunks whose flag is set (the last chunk may be short)."""
    done = np.flatnonzero(np.asarray(flags) != 0)
    starts = done * chunk_rows
    return int(np.clip(n_rows - starts, 0, chunk_rows).sum())


def stored_rows_done(group: zarr.Group, name: str) -> int:
    """Rows of feature array ``name`` in ``group`` that are complete, read from its flags (read-only)."""
    if name not in group or f"{name}{DONE_SUFFIX}" not in group:
        return 0
    array = child_array(group, name)
    chunk_rows = int(cast(int, array.attrs.get("chunk_rows", array.chunks[0])))
    flags = np.asarray(child_array(group, f"{name}{DONE_SUFFIX}")[:])
    return rows_in_done_chunks(flags, chunk_rows, int(array.shape[0]))


def stored_rows_kept(group: zarr.Group, name: str) -> int:
    """Rows of feature array ``name`` a resumed run keeps: those of complete chunks, and the rows
    journaled for the chunks not yet complete (read-only)."""
    kept = stored_rows_done(group, name)
    if name not in group or f"{name}{DONE_SUFFIX}" not in group:
        return kept
    array = child_array(group, name)
    chunk_rows = int(cast(int, array.attrs.get("chunk_rows", array.chunks[0])))
    flags = np.asarray(child_array(group, f"{name}{DONE_SUFFIX}")[:])
    n_rows, dim = (int(v) for v in array.shape)
    folder = journal_folder(array)
    for chunk, path in (journal_files(folder) if folder is not None else {}).items():
        if chunk < len(flags) and flags[chunk] == 0:
            positions, _, _ = read_records(path, chunk * chunk_rows, min((chunk + 1) * chunk_rows, n_rows), dim)
            kept += len(np.unique(positions))
    return kept


def journal_folder(array: zarr.Array) -> Path | None:
    """The folder of an array's chunk journals (None for stores that are not local folders)."""
    root = getattr(array.store, "root", None)
    return None if root is None else Path(root) / array.path / JOURNAL_FOLDER


class ChunkedFeatureArray:
    """A (rows, dim) float16 feature array written one row chunk at a time.

    A chunk's flag is set only after its data and checksum are durable, so a crash at any point
    leaves the chunk marked incomplete (recomputed on resume) or complete with the right bytes.
    Reopening an existing array keeps the row chunking it was created with, whatever
    ``chunk_rows`` says now, because the flags count its chunks.
    """

    def __init__(self, group: zarr.Group, name: str, n_rows: int, dim: int, chunk_rows: int, label: str = ""):
        self.name = name
        self.label = label or name
        self.n_rows = n_rows
        if name in group and f"{name}{DONE_SUFFIX}" in group:
            array = child_array(group, name)
            if tuple(array.shape) != (n_rows, dim):
                raise CacheError(
                    f"feature array {self.label} has shape {tuple(array.shape)}, expected {(n_rows, dim)}; "
                    "run `crs cache verify --repair` or delete the group"
                )
            self.chunk_rows = int(cast(int, array.attrs.get("chunk_rows", array.chunks[0])))
            self.array = array.with_config(_ARRAY_CONFIG)
            self.done = child_array(group, f"{name}{DONE_SUFFIX}").with_config(_ARRAY_CONFIG)
            checksums = f"{name}{CHECKSUM_SUFFIX}"
            self.checksums = child_array(group, checksums).with_config(_ARRAY_CONFIG) if checksums in group else None
            return
        # Markers first, feature array last: "the array exists" then implies its markers exist.
        self.chunk_rows = int(chunk_rows)
        self.done = group.create_array(
            f"{name}{DONE_SUFFIX}", shape=(self.n_chunks,), chunks=(1,), dtype="uint8", compressors=None,
            fill_value=0, overwrite=True, config=_ARRAY_CONFIG,
        )
        self.checksums = group.create_array(
            f"{name}{CHECKSUM_SUFFIX}", shape=(self.n_chunks, 32), chunks=(1, 32), dtype="uint8",
            compressors=None, fill_value=0, overwrite=True, config=_ARRAY_CONFIG,
        )
        self.array = group.create_array(
            name, shape=(n_rows, dim), chunks=(min(self.chunk_rows, max(n_rows, 1)), dim),
            dtype=FEATURE_DTYPE, compressors=None, fill_value=0, overwrite=True, config=_ARRAY_CONFIG,
        )
        self.array.attrs.update(
            {"n_rows": n_rows, "dim": dim, "chunk_rows": self.chunk_rows, "dtype": FEATURE_DTYPE,
             "checksum": CHECKSUM_RULE}
        )

    @property
    def n_chunks(self) -> int:
        return max(1, -(-self.n_rows // self.chunk_rows))

    def chunk_bounds(self, chunk: int) -> tuple[int, int]:
        return chunk * self.chunk_rows, min((chunk + 1) * self.chunk_rows, self.n_rows)

    def pending_chunks(self, shard: tuple[int, int] | None = None) -> list[int]:
        """Chunks not yet complete; with ``shard=(i, n)`` only those with ``chunk % n == i``."""
        pending = np.flatnonzero(np.asarray(self.done[:]) == 0)
        if shard is not None:
            pending = pending[pending % shard[1] == shard[0]]
        return pending.tolist()

    def is_complete(self) -> bool:
        return not self.pending_chunks()

    def rows_done(self) -> int:
        """Rows whose chunk is marked complete (what a restart keeps)."""
        return rows_in_done_chunks(np.asarray(self.done[:]), self.chunk_rows, self.n_rows)

    def journal_path(self, chunk: int) -> Path | None:
        folder = journal_folder(self.array)
        return None if folder is None else folder / f"{chunk}{JOURNAL_SUFFIX}"

    def journal(self, chunk: int, positions: np.ndarray, features: np.ndarray) -> None:
        """Append rows computed for a chunk not yet full to its journal (no fsync: a kill keeps them)."""
        path = self.journal_path(chunk)
        if path is None:
            return
        with np.errstate(over="ignore"):
            stored = features.astype(FEATURE_DTYPE)
        try:
            append_record(path, positions, stored)
        except OSError as error:
            raise self._write_error(error, chunk, int(stored.nbytes)) from None

    def journaled(self, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows of an incomplete chunk its journal holds: (positions in the array, float16 rows).

        A torn or garbled tail (a crash) is cut off, so the records this run appends follow good ones.
        """
        path = self.journal_path(chunk)
        start, stop = self.chunk_bounds(chunk)
        dim = int(self.array.shape[1])
        if path is None:
            return np.zeros(0, np.int64), np.zeros((0, dim), np.float16)
        positions, values, valid = read_records(path, start, stop, dim)
        if path.exists() and path.stat().st_size > valid:
            os.truncate(path, valid)
        return positions, values

    def drop_finished_journals(self) -> None:
        """Delete the journals of chunks already complete (a kill between the flag and the deletion), and
        the journal folder once it is empty."""
        folder = journal_folder(self.array)
        if folder is None:
            return
        journals = journal_files(folder)
        flags = np.asarray(self.done[:]) if journals else np.zeros(0, np.uint8)  # read only when needed
        for chunk, path in journals.items():
            if chunk >= len(flags) or flags[chunk] != 0:
                path.unlink(missing_ok=True)
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # a finished array keeps no empty journal folder

    def write_chunk(self, chunk: int, features: np.ndarray) -> None:
        """Store one full row chunk: data (fsynced), then its checksum, then its flag; then drop its journal."""
        start, stop = self.chunk_bounds(chunk)
        if features.shape[0] != stop - start:
            raise ValueError(f"{self.label} chunk {chunk}: got {features.shape[0]} rows, expected {stop - start}")
        if not np.isfinite(features).all():
            bad = int((~np.isfinite(features)).any(axis=1).sum())
            raise ValueError(
                f"{self.label} chunk {chunk}: the encoder produced NaN or infinite features in {bad} row(s); "
                "check its weights and preprocessing (nothing was written)"
            )
        with np.errstate(over="ignore"):
            stored = features.astype(FEATURE_DTYPE)
        if not np.isfinite(stored).all():
            raise ValueError(
                f"{self.label} chunk {chunk}: features exceed the float16 range (|x| > 65504); "
                "normalise the encoder output (nothing was written)"
            )
        try:
            self.array[start:stop] = stored
            fsync_file(chunk_file(self.array, chunk))
            if self.checksums is not None:
                self.checksums[chunk] = np.frombuffer(chunk_checksum(stored), dtype=np.uint8)
                fsync_file(chunk_file(self.checksums, chunk))
            self.done[chunk] = 1
            fsync_file(chunk_file(self.done, chunk))
        except OSError as error:
            raise self._write_error(error, chunk, int(stored.nbytes)) from None
        journal = self.journal_path(chunk)
        if journal is not None:
            journal.unlink(missing_ok=True)

    def _write_error(self, error: OSError, chunk: int, nbytes: int) -> BaseException:
        reason = error.strerror or str(error)
        if error.errno == errno.ENOSPC:
            store = str(getattr(self.array.store, "root", "") or self.label)
            return for_setting(CacheFullError(
                f"no space left on the disk of {store} writing {self.label} chunk {chunk} "
                f"({nbytes:,} bytes); free disk space or choose another cache folder, then re-run "
                "to resume (the chunk stays marked incomplete)", store, nbytes), "cache")
        return for_setting(CacheWriteError(
            f"cannot write {self.label} chunk {chunk} ({reason}); free disk space or choose a writable "
            "cache folder, then re-run to resume (the chunk stays marked incomplete)"
        ), "cache")
