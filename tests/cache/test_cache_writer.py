"""The chunked writer: flag after durable data, checksums, kept chunking, refusals that leave nothing marked."""

from __future__ import annotations

import errno
import hashlib

import numpy as np
import pytest
import zarr

from crs.cache.store import CacheError
from crs.cache.writer import (
    CHECKSUM_SUFFIX,
    DONE_SUFFIX,
    CacheWriteError,
    ChunkedFeatureArray,
    chunk_checksum,
    chunk_file,
    is_marker_array,
)


@pytest.fixture
def group(tmp_path):
    return zarr.open_group(str(tmp_path / "s.zarr"), mode="a").require_group("encoders/e/fp")


def test_chunks_flags_and_checksums(group):
    array = ChunkedFeatureArray(group, "clean", n_rows=10, dim=3, chunk_rows=4)
    assert array.n_chunks == 3 and array.chunk_bounds(2) == (8, 10)
    assert array.pending_chunks() == [0, 1, 2]
    features = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    array.write_chunk(2, features)
    assert array.pending_chunks() == [0, 1]
    stored = np.asarray(group["clean"][8:10])
    assert stored.dtype == np.float16
    np.testing.assert_array_equal(stored, features.astype(np.float16))
    # The recorded checksum is sha256 of the float16 bytes, recomputed here from scratch.
    expected = hashlib.sha256(features.astype("<f2").tobytes()).digest()
    assert bytes(np.asarray(group[f"clean{CHECKSUM_SUFFIX}"][2])) == expected == chunk_checksum(stored)
    # One file per flag, so shards never rewrite each other's flags.
    assert group[f"clean{DONE_SUFFIX}"].chunks == (1,)
    assert chunk_file(group[f"clean{DONE_SUFFIX}"], 2).is_file()


def test_pending_chunks_of_a_shard(group):
    array = ChunkedFeatureArray(group, "clean", n_rows=40, dim=2, chunk_rows=4)
    assert array.pending_chunks((1, 3)) == [1, 4, 7]
    array.write_chunk(4, np.ones((4, 2), np.float32))
    assert array.pending_chunks((1, 3)) == [1, 7]
    assert array.pending_chunks((0, 1)) == [c for c in range(10) if c != 4]


def test_zero_chunk_is_written_as_a_file(group):
    # zarr skips all-fill chunks by default; verify must be able to tell "never written" apart.
    array = ChunkedFeatureArray(group, "clean", n_rows=4, dim=2, chunk_rows=4)
    array.write_chunk(0, np.zeros((4, 2), np.float32))
    assert chunk_file(array.array, 0).is_file()


def test_reopen_keeps_the_original_chunking(group):
    first = ChunkedFeatureArray(group, "clean", n_rows=10, dim=2, chunk_rows=4)
    first.write_chunk(0, np.ones((4, 2), np.float32))
    again = ChunkedFeatureArray(group, "clean", n_rows=10, dim=2, chunk_rows=8)
    assert again.chunk_rows == 4 and again.pending_chunks() == [1, 2]


def test_reopen_with_another_shape_is_refused(group):
    ChunkedFeatureArray(group, "clean", n_rows=10, dim=2, chunk_rows=4)
    with pytest.raises(CacheError, match=r"shape \(10, 2\), expected \(10, 3\)"):
        ChunkedFeatureArray(group, "clean", n_rows=10, dim=3, chunk_rows=4)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e6])
def test_non_finite_or_out_of_range_features_are_refused_and_not_marked(group, bad):
    array = ChunkedFeatureArray(group, "clean", n_rows=4, dim=2, chunk_rows=4, label="derm / enc clean")
    features = np.ones((4, 2), np.float32)
    features[1, 1] = bad
    with pytest.raises(ValueError, match="derm / enc clean chunk 0: .*(NaN or infinite|float16 range)"):
        array.write_chunk(0, features)
    assert array.pending_chunks() == [0]
    assert not chunk_file(array.array, 0).exists()


def test_full_disk_leaves_the_chunk_incomplete(group, monkeypatch):
    array = ChunkedFeatureArray(group, "clean", n_rows=8, dim=2, chunk_rows=4, label="derm / enc clean")
    from crs.cache import writer

    def no_space(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "fsync_file", no_space)
    # A full disk names the store and the bytes of the chunk (CacheFullError is a CacheWriteError).
    with pytest.raises(CacheWriteError, match=r"no space left on the disk of \S+s\.zarr writing derm / enc clean chunk 1 "
                                              r"\(16 bytes\); free disk space"):
        array.write_chunk(1, np.ones((4, 2), np.float32))
    assert array.pending_chunks() == [0, 1]


def test_marker_names():
    assert is_marker_array("clean__done") and is_marker_array("corrupt/jpeg/3__sha256")
    assert not is_marker_array("corrupt/jpeg/3")
