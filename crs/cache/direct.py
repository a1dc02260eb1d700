"""Row blocks of a feature array read straight from its chunk files, when its layout allows.

The cache writes feature arrays uncompressed (codec ``bytes``, little-endian) in chunks of whole
rows on the local disk. For such an array a chunk file holds exactly the chunk's rows, C order, so
a block of rows is one ``readinto`` per chunk into the result: no zarr decode, no intermediate
chunk buffer, no event loop. Reading the 65 corrupted conditions of one CheXpert-sized unit
(38,117 x 1,024 float16 each) took 52 ms of CPU per condition through zarr and 6-8 ms this way
(``docs/performance.md``). Any other layout (a compressor, another store, a missing chunk) is read
through zarr as before, so the result is always the array's own rows.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec
from zarr.core.chunk_grids import RegularChunkGrid
from zarr.storage import LocalStore

from crs.cache.filesystem import is_network_filesystem


def chunk_file(array: zarr.Array, chunk: int) -> Path | None:
    """The file holding row chunk ``chunk`` of a 2-D (or flag chunk of a 1-D) array on a local store."""
    root = getattr(array.store, "root", None)
    if root is None:
        return None
    coords = (chunk,) + (0,) * (len(array.shape) - 1)
    return Path(root) / array.path / array.metadata.encode_chunk_key(coords)


def raw_chunk_rows(array: zarr.Array) -> int | None:
    """Rows per chunk when the array's chunks can be read as raw files (uncompressed, native byte
    order, whole rows, a local folder), else None."""
    metadata = array.metadata
    store = array.store_path.store
    if array.ndim != 2 or not isinstance(store, LocalStore) or getattr(metadata, "zarr_format", 3) != 3:
        return None
    codecs: tuple[object, ...] = tuple(getattr(metadata, "codecs", ()))
    if len(codecs) != 1 or not isinstance(codecs[0], BytesCodec):
        return None
    endian = codecs[0].endian  # type: ignore[attr-defined]  # a BytesCodec
    native = sys.byteorder
    if array.dtype.itemsize > 1 and endian is not None and endian.value != native:
        return None
    grid = metadata.chunk_grid
    if not isinstance(grid, RegularChunkGrid) or grid.chunk_shape[1] != array.shape[1]:
        return None
    return int(grid.chunk_shape[0])


def read_block(array: zarr.Array, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of a 2-D array as a new array in its stored dtype."""
    stop = min(stop, array.shape[0])
    chunk_rows = raw_chunk_rows(array)
    if chunk_rows is None or stop <= start:
        return np.asarray(array[start:stop])
    reading = getattr(array.store_path.store, "reading_chunks", None)
    if reading is not None:  # a URL cache's read-through: the block's chunks fetched (checked) and held
        with reading(array, range(start // chunk_rows, (stop - 1) // chunk_rows + 1)):
            return _read_rows(array, start, stop, chunk_rows)
    return _read_rows(array, start, stop, chunk_rows)


def _read_rows(array: zarr.Array, start: int, stop: int, chunk_rows: int) -> np.ndarray:
    dtype = np.dtype(array.dtype)
    out = np.empty((stop - start, array.shape[1]), dtype=dtype)
    row_bytes = array.shape[1] * dtype.itemsize
    for chunk in range(start // chunk_rows, (stop - 1) // chunk_rows + 1):
        first = max(start, chunk * chunk_rows)
        last = min(stop, (chunk + 1) * chunk_rows)
        target = out[first - start : last - start].data.cast("B")
        offset = (first - chunk * chunk_rows) * row_bytes
        path = chunk_file(array, chunk)
        if path is None or _read_chunk(path, offset, target) != len(target):
            out[first - start : last - start] = np.asarray(array[first:last])  # unwritten or short chunk
    return out


def direct_reads() -> bool:
    """Whether chunk files are read with O_DIRECT (unless ``CRS_DIRECT_READS=0``; Linux and the like)."""
    return bool(getattr(os, "O_DIRECT", 0)) and os.environ.get("CRS_DIRECT_READS", "1") != "0"


def _read_chunk(path: Path, offset: int, target: memoryview) -> int:
    """Bytes of ``path`` from ``offset`` read into ``target``: O_DIRECT for reads of at least
    ``DIRECT_MIN_BYTES`` where the file system takes it and is local (not NFS, Lustre ...:
    :mod:`crs.cache.filesystem`), else through the page cache."""
    if len(target) >= DIRECT_MIN_BYTES and direct_reads() and not is_network_filesystem(path):
        read = _read_direct(path, offset, target)
        if read is not None:
            return read
    return _read_into(path, offset, target)


def _read_into(path: Path, offset: int, target: memoryview) -> int:
    """Bytes of ``path`` from ``offset`` read into ``target`` (fewer at the file's end; -1: no file)."""
    try:
        with open(path, "rb", buffering=0) as handle:
            handle.seek(offset)
            filled = 0
            while filled < len(target):
                read = handle.readinto(target[filled:])
                if not read:
                    break
                filled += read
            return filled
    except FileNotFoundError:
        return -1


ALIGNMENT = 4096
"""O_DIRECT reads start, end and land on multiples of this (the largest logical block size in use)."""
DIRECT_MIN_BYTES = 1 << 20
"""Smaller reads go through the page cache (their system-call cost is small either way)."""
_scratch = threading.local()


def _aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned scratch buffer of at least ``size`` bytes, kept per thread and reused."""
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = mmap.mmap(-1, size)
        _scratch.buffer = buffer
    return buffer


def _read_direct(path: Path, offset: int, target: memoryview) -> int | None:
    """Bytes of ``path`` from ``offset`` read into ``target`` with O_DIRECT, through an aligned
    scratch buffer (-1: no file; None: the file system refuses O_DIRECT, read it another way).

    A cold cache (the paper's 15 encoders hold about 100 GB, more than any workstation's page
    cache) is read from disk either way; without the page cache the kernel neither fills nor copies
    it: reading one CheXpert unit's 65 conditions (5.2 GB) cold took 0.6 s of system CPU and 6.5 s
    instead of 4.5 s and 10.8 s here."""
    begin = offset - offset % ALIGNMENT
    length = -(-(offset + len(target) - begin) // ALIGNMENT) * ALIGNMENT
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except FileNotFoundError:
        return -1
    except OSError:
        return None
    try:
        view = memoryview(_aligned_buffer(length))[:length]
        filled = 0
        while filled < length:
            read = os.preadv(descriptor, [view[filled:]], begin + filled)
            if read <= 0:
                break
            filled += read
            if filled % ALIGNMENT:  # a short read ends at the end of the file
                break
    except OSError:
        return None
    finally:
        os.close(descriptor)
    got = max(0, min(filled - (offset - begin), len(target)))
    target[:got] = view[offset - begin : offset - begin + got]
    return got
