"""Chunked feature writes with per-chunk completion flags, so a killed run resumes where it stopped."""

from __future__ import annotations

import numpy as np
import zarr

from crs.cache.store import FEATURE_DTYPE


class ChunkedFeatureArray:
    """A (rows, dim) float16 feature array written one row chunk at a time.

    A chunk's flag in ``<name>__done`` is set only after its data has been written, so a crash
    between the two leaves the chunk marked incomplete and it is recomputed on resume.
    """

    def __init__(self, group: zarr.Group, name: str, n_rows: int, dim: int, chunk_rows: int):
        self.name = name
        self.n_rows = n_rows
        self.chunk_rows = chunk_rows
        if name in group:
            self.array = group[name]
            if self.array.shape != (n_rows, dim):
                raise ValueError(f"feature array {name} has shape {self.array.shape}, expected {(n_rows, dim)}")
            self.done = group[f"{name}__done"]
        else:
            self.array = group.create_array(
                name, shape=(n_rows, dim), chunks=(min(chunk_rows, max(n_rows, 1)), dim),
                dtype=FEATURE_DTYPE, compressors=None, fill_value=0,
            )
            self.done = group.create_array(
                f"{name}__done", shape=(self.n_chunks,), dtype="uint8", compressors=None, fill_value=0,
            )
            self.done[:] = 0

    @property
    def n_chunks(self) -> int:
        return max(1, -(-self.n_rows // self.chunk_rows))

    def chunk_bounds(self, chunk: int) -> tuple[int, int]:
        return chunk * self.chunk_rows, min((chunk + 1) * self.chunk_rows, self.n_rows)

    def pending_chunks(self) -> list[int]:
        return np.flatnonzero(np.asarray(self.done[:]) == 0).tolist()

    def is_complete(self) -> bool:
        return not self.pending_chunks()

    def write_chunk(self, chunk: int, features: np.ndarray) -> None:
        start, stop = self.chunk_bounds(chunk)
        if features.shape[0] != stop - start:
            raise ValueError(f"{self.name} chunk {chunk}: got {features.shape[0]} rows, expected {stop - start}")
        if not np.isfinite(features).all():
            raise ValueError(f"{self.name} chunk {chunk}: the encoder produced NaN or infinite features")
        stored = features.astype(FEATURE_DTYPE)
        if not np.isfinite(stored).all():
            raise ValueError(f"{self.name} chunk {chunk}: features exceed the float16 range (|x| > 65504)")
        self.array[start:stop] = stored
        self.done[chunk] = 1
