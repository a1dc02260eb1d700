"""Read an imported features file in row blocks, so a file larger than memory can be imported.

``open_feature_file(path, condition, ids_path)`` returns a :class:`FeatureFile`: the row ids (read
whole; they are small) and a reader that yields the feature matrix block by block in file order.
Formats: ``.npy`` (+ an ids file), ``.npz`` (``features`` and ``ids``; stored or deflated), ``.h5``
(a crs export, or any file with ``features`` and optionally ``ids``). Nothing is read with pickle,
and nothing maps the whole file: ``.npy`` and stored ``.npz`` members are read with plain seeks,
deflated members are decompressed as a stream, HDF5 datasets are sliced.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from crs.cache.h5 import FeatureFileError, H5Features, open_h5_features

ID_COLUMNS = ("id", "image_id", "ids")
BLOCK_BYTES = 64 << 20  # rows per block: about 64 MiB of input at a time


class FeatureImportError(ValueError):
    """An import was refused; the one-line message names the file, the ids or the option to fix."""


def read_ids(path: Path) -> np.ndarray:
    """Row ids from a text file (one per line) or a CSV (column ``id``/``image_id``, or its only column)."""
    if not path.is_file():
        raise FeatureImportError(f"ids file {path} not found")
    if path.suffix.lower() == ".csv":
        import pandas as pd  # pandas costs ~0.3 s to import; only CSV ids files need it

        table = pd.read_csv(path, dtype=str, keep_default_na=False)
        column = next((c for c in ID_COLUMNS if c in table.columns), None)
        if column is None and len(table.columns) == 1:
            column = table.columns[0]
        if column is None:
            raise FeatureImportError(
                f"ids file {path} has columns {list(table.columns)}; name the id column one of {list(ID_COLUMNS)}"
            )
        return table[column].str.strip().to_numpy(dtype=str)
    lines = [line.strip() for line in path.read_text().splitlines()]
    return np.array([line for line in lines if line], dtype=str)


class _NpyRows:
    """Rows of an .npy payload that starts at ``offset`` in ``stream``: seeks when it can, else reads on."""

    def __init__(self, stream: IO[bytes], shape: tuple[int, ...], dtype: np.dtype, seekable: bool):
        self.stream, self.shape, self.dtype, self.seekable = stream, shape, dtype, seekable
        self.offset = stream.tell()
        self.position = 0  # next row the stream is at (for streams that cannot seek)
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize

    def read(self, start: int, stop: int) -> np.ndarray:
        if self.seekable:
            self.stream.seek(self.offset + start * self.row_bytes)
        elif start != self.position:
            raise RuntimeError(f"a compressed .npz member is read in order: asked for row {start} at row {self.position}")
        count = (stop - start) * self.row_bytes
        data = bytearray(count)
        view = memoryview(data)
        filled = 0
        while filled < count:
            got = self.stream.readinto(view[filled:])  # type: ignore[attr-defined]
            if not got:
                raise FeatureImportError(f"the features end after {start + filled // max(self.row_bytes, 1)} rows; "
                                         "the file is truncated, write it again")
            filled += got
        self.position = stop
        return np.frombuffer(data, dtype=self.dtype).reshape((stop - start, *self.shape[1:]))


def _npy_header(stream: IO[bytes], source: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an .npy header; refuse object arrays and Fortran order with the fix."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(stream)
        else:
            raise FeatureImportError(f"{source}: .npy format version {version} is not supported; save it with numpy.save")
    except ValueError as error:
        if isinstance(error, FeatureImportError):
            raise
        raise FeatureImportError(f"{source} is not a readable .npy payload ({error})") from None
    if dtype.hasobject:
        raise FeatureImportError(f"{source} holds Python objects; save plain numeric features and string ids")
    if fortran and len(shape) > 1:
        raise FeatureImportError(
            f"{source} is stored column by column (Fortran order); save it row by row with "
            "numpy.save(path, numpy.ascontiguousarray(features))"
        )
    return tuple(int(n) for n in shape), dtype


@dataclass
class FeatureFile:
    """One condition of a features file: its ids, shape and dtype, read in row blocks (in file order)."""

    source: str
    ids: np.ndarray
    shape: tuple[int, ...]
    dtype: np.dtype
    _read: Any
    _closer: ExitStack = field(default_factory=ExitStack)

    @property
    def n_rows(self) -> int:
        return self.shape[0] if self.shape else 0

    def block_rows(self) -> int:
        """Rows per block for ``blocks`` (about :data:`BLOCK_BYTES` of input)."""
        row_bytes = max(1, int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize)
        return max(1, BLOCK_BYTES // row_bytes)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as stored (numeric dtype of the file). Blocks are asked for in order."""
        return np.asarray(self._read(start, stop))

    def blocks(self, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, block) over the whole file, in order."""
        step = rows or self.block_rows()
        for start in range(0, self.n_rows, step):
            yield start, self.read(start, min(start + step, self.n_rows))

    def close(self) -> None:
        self._closer.close()

    def __enter__(self) -> FeatureFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _open_npy(path: Path, ids_path: Path | None) -> FeatureFile:
    if ids_path is None:
        raise FeatureImportError(
            f"{path} is a bare .npy: give its row ids with --ids FILE (one id per line, or a CSV with an 'id' column)"
        )
    ids = read_ids(ids_path)
    closer = ExitStack()
    stream = closer.enter_context(open(path, "rb"))
    try:
        shape, dtype = _npy_header(stream, str(path))
    except BaseException:
        closer.close()
        raise
    rows = _NpyRows(stream, shape, dtype, seekable=True)
    return FeatureFile(path.name, ids, shape, dtype, rows.read, closer)


def _stored_member_offset(stream: IO[bytes], info: zipfile.ZipInfo) -> int:
    """Where an uncompressed zip member's bytes start: after its local header (30 bytes, name, extra)."""
    stream.seek(info.header_offset)
    header = stream.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for member {info.filename}")
    name_length, extra_length = struct.unpack("<2H", header[26:30])
    return info.header_offset + 30 + name_length + extra_length


def _open_npz(path: Path, ids_path: Path | None) -> FeatureFile:
    closer = ExitStack()
    try:
        archive = closer.enter_context(zipfile.ZipFile(path))
        members = {name.removesuffix(".npy"): name for name in archive.namelist()}
        missing = [k for k in ("features", "ids") if k not in members and not (k == "ids" and ids_path)]
        if missing:
            raise FeatureImportError(f"{path} lacks array(s) {missing}; an .npz needs 'features' and 'ids'")
        if ids_path is not None:
            ids = read_ids(ids_path)
        else:
            with archive.open(members["ids"]) as member:
                ids = np.load(io.BytesIO(member.read()), allow_pickle=False)
            ids = np.asarray(ids).astype(str)
        info = archive.getinfo(members["features"])
        stream: IO[bytes]
        if info.compress_type == zipfile.ZIP_STORED:  # np.savez stores: read the member in place, with seeks
            stream = closer.enter_context(open(path, "rb"))
            stream.seek(_stored_member_offset(stream, info))
        else:  # np.savez_compressed deflates: decompress as a stream, in order
            stream = closer.enter_context(archive.open(info))
        shape, dtype = _npy_header(stream, f"{path} [features]")
        rows = _NpyRows(stream, shape, dtype, seekable=info.compress_type == zipfile.ZIP_STORED)
    except ValueError as error:  # np.load of object ids without pickle: refused
        closer.close()
        if isinstance(error, FeatureImportError):
            raise
        raise FeatureImportError(f"{path} holds Python objects ({error}); save plain numeric features and string ids") from None
    except (OSError, EOFError, zipfile.BadZipFile) as error:
        closer.close()
        raise FeatureImportError(f"{path} is not a readable .npz file ({error})") from None
    return FeatureFile(path.name, ids, shape, dtype, rows.read, closer)


def _open_h5(path: Path, condition: str, ids_path: Path | None) -> FeatureFile:
    try:
        features: H5Features = open_h5_features(path, condition)
    except OSError as error:
        raise FeatureImportError(f"{path} is not a readable HDF5 file ({error})") from None
    except FeatureFileError as error:
        raise FeatureImportError(str(error)) from None
    closer = ExitStack()
    closer.callback(features.close)
    ids = features.ids
    if ids_path is not None:
        ids = read_ids(ids_path)
    elif ids is None:
        closer.close()
        raise FeatureImportError(f"{path} has a 'features' dataset but no 'ids'; add one or pass --ids FILE")
    dataset = features.dataset
    return FeatureFile(path.name, np.asarray(ids).astype(str), tuple(dataset.shape), np.dtype(dataset.dtype),
                       lambda start, stop: dataset[start:stop], closer)


def open_feature_file(path: Path, condition: str, ids_path: Path | None = None) -> FeatureFile:
    """Open ``condition`` of ``path`` for block reads; the caller closes it (it is a context manager)."""
    if not path.is_file():
        raise FeatureImportError(f"features file {path} not found")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        opened = _open_npy(path, ids_path)
    elif suffix == ".npz":
        opened = _open_npz(path, ids_path)
    elif suffix in (".h5", ".hdf5"):
        opened = _open_h5(path, condition, ids_path)
    else:
        raise FeatureImportError(f"{path}: unknown features format {suffix!r}; use .npy (+ --ids), .npz or .h5")
    if not (np.issubdtype(opened.dtype, np.floating) or np.issubdtype(opened.dtype, np.integer)):
        opened.close()
        raise FeatureImportError(f"{path.name}: features must be numeric, got dtype {opened.dtype}")
    return opened
