"""The journal of a row chunk not yet complete: the rows computed so far, so a kill loses one forward call.

A row chunk becomes durable as a whole (data, checksum, flag: :mod:`crs.cache.writer`). Until it
is full, each forward call's rows of it are appended to ``<array folder>/journal/<chunk>.rows``,
one record per call, with a plain ``write()`` and no fsync: a SIGKILL keeps what the kernel was
handed, so a resumed run reads the rows back and computes only the ones it lacks (they fill whole
forward calls, so its batches are those of an uninterrupted run). The journal is deleted once the
chunk's flag is set.

A crash of the machine may lose or tear a journal that was never flushed. Each record carries the
sha256 of its bytes, and reading stops at the first record that is short or does not match, so a
torn journal only costs its recomputation. A journal never sets a flag: its rows enter the chunk's
buffer, and the chunk is written, fsynced and flagged as any other (the flag never outlives its data).

Record: ``CRSJ``, rows n (uint32), dim (uint32), n positions in the array (int64), n x dim float16
values (little-endian, C order), sha256 of all of that.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import numpy as np

JOURNAL_FOLDER = "journal"
JOURNAL_SUFFIX = ".rows"
_MAGIC = b"CRSJ"
_HEADER = struct.Struct("<4sII")
_DIGEST_BYTES = 32


def encode_record(positions: np.ndarray, values: np.ndarray) -> bytes:
    """One record: the rows at ``positions`` (of the array) hold ``values`` (float16 as stored)."""
    n, dim = values.shape
    body = (_HEADER.pack(_MAGIC, n, dim) + np.ascontiguousarray(positions, dtype="<i8").tobytes()
            + np.ascontiguousarray(values, dtype="<f2").tobytes())
    return body + hashlib.sha256(body).digest()


def append_record(path: Path, positions: np.ndarray, values: np.ndarray) -> None:
    """Append one record with one ``write()`` (looped only if the kernel takes part of it); no fsync."""
    record = memoryview(encode_record(positions, values))
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while record:
            record = record[os.write(descriptor, record):]
    finally:
        os.close(descriptor)


def read_records(path: Path, start: int, stop: int, dim: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows a journal holds for positions ``[start, stop)``: (positions, float16 values, valid bytes).

    Reading stops at the first record that is short, garbled, of another width or outside the
    chunk; ``valid bytes`` is the length of the good prefix (what a resumed writer truncates to,
    so that its own records follow good ones). A missing journal holds nothing.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.float16), 0
    positions, values = [], []
    offset = 0
    while offset + _HEADER.size <= len(data):
        magic, n, width = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + n * 8 + n * width * 2 + _DIGEST_BYTES
        if magic != _MAGIC or width != dim or end > len(data):
            break
        body = data[offset:end - _DIGEST_BYTES]
        if hashlib.sha256(body).digest() != data[end - _DIGEST_BYTES:end]:
            break
        where = np.frombuffer(body, dtype="<i8", count=n, offset=_HEADER.size).astype(np.int64)
        if n and (where.min() < start or where.max() >= stop):
            break
        positions.append(where)
        values.append(np.frombuffer(body, dtype="<f2", offset=_HEADER.size + n * 8).reshape(n, dim))
        offset = end
    if not positions:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.float16), offset
    return np.concatenate(positions), np.concatenate(values).astype(np.float16), offset


def journal_files(folder: Path) -> dict[int, Path]:
    """The journals in one array's journal folder, by chunk."""
    if not folder.is_dir():
        return {}
    found = {}
    for path in folder.iterdir():
        if path.suffix == JOURNAL_SUFFIX and path.stem.isdigit():
            found[int(path.stem)] = path
    return found
