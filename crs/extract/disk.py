"""A full disk during stage 1, at any moment, as one line: the store, the bytes still needed, what to do.

The bytes are counted as the file system counts them: every chunk is a file (its features, its
checksum, its flag), and each file takes whole blocks, so a chunk of 8 rows of 512 float16 features
(8 KiB of data) takes 8 KiB + two blocks, and a flag of one byte takes a block. Array metadata takes
a block per file. The count covers the chunks not yet complete, whether or not their arrays exist yet, the journal
of each array's open chunk (decision 0101) and the lock files.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from crs.cache.writer import CacheFullError
from crs.spec import for_setting

METADATA_FILES_PER_ARRAY = 3  # zarr.json of the features, their flags and their checksums
FILES_PER_CHUNK = 3  # features, flag, checksum
DEFAULT_BLOCK = 4096


def is_disk_full(error: BaseException) -> bool:
    """True for ENOSPC (or a quota), here or in what caused it."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, CacheFullError):
            return True
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        current = current.__cause__ or current.__context__
    return False


def block_size(path: Path) -> int:
    """The allocation unit of the file system holding ``path`` (its nearest existing parent)."""
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return int(os.statvfs(folder).f_frsize) or DEFAULT_BLOCK
    except OSError:
        return DEFAULT_BLOCK


def blocks(n_bytes: int, block: int) -> int:
    """Bytes a file of ``n_bytes`` takes on disk (whole blocks; an empty file takes none)."""
    return -(-n_bytes // block) * block


def array_bytes(n_rows: int, chunk_rows: int, dim: int, pending_chunks: Iterable[int], block: int,
                exists: bool) -> int:
    """Disk bytes one feature array still needs: each pending chunk's three files, and its metadata if new."""
    total = 0 if exists else METADATA_FILES_PER_ARRAY * block
    pending = 0
    for chunk in pending_chunks:
        rows = min(chunk_rows, n_rows - chunk * chunk_rows)
        total += blocks(rows * dim * 2, block) + (FILES_PER_CHUNK - 1) * block
        pending += 1
    if pending:  # the journal of the chunk being filled (float16 rows and their positions), deleted when it is full
        total += blocks(chunk_rows * (dim * 2 + 64), block)
    return total


def disk_full_error(store: Path, needed: int, error: BaseException) -> BaseException:
    """The one line: the store, what its unfinished chunks still need on disk, what is free, what to do."""
    try:
        free = f"{shutil.disk_usage(_existing(store)).free:,} bytes free"
    except OSError:
        free = "free space unknown"
    where = getattr(error, "filename", None)
    at = f" (writing {Path(where).name})" if isinstance(where, str) and where else ""
    return for_setting(CacheFullError(
        f"disk full under the cache store {store}{at}: its unfinished chunks still need about {needed:,} bytes "
        f"on disk ({free}, counted in {block_size(store):,}-byte blocks as the file system does); free that much "
        "space or move the cache folder to a larger disk, then re-run the same command to resume (complete chunks "
        "are kept; `crs cache verify` lists only the unfinished parts, which a resume or `--repair` completes)",
        str(store), needed), "cache")


def _existing(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
