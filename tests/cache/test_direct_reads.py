"""Row blocks read straight from chunk files equal zarr's reads, and fall back to zarr where they cannot."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from crs.cache.direct import raw_chunk_rows, read_block
from crs.cache.writer import ChunkedFeatureArray

SPANS = [(0, 1000), (0, 1), (5, 6), (63, 65), (64, 128), (100, 999), (990, 1000), (950, 5000), (7, 7)]


@pytest.fixture
def written(tmp_path):
    """A 1,000 x 12 float16 feature array in chunks of 64 rows (the last one partial), written by the cache writer."""
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    array = ChunkedFeatureArray(group, "clean", 1000, 12, 64)
    values = np.random.default_rng(0).normal(size=(1000, 12)).astype(np.float16)
    values[17, 3], values[900, 0] = 65504, 6e-8  # float16's largest and a subnormal
    for chunk in range(array.n_chunks):
        start, stop = array.chunk_bounds(chunk)
        array.write_chunk(chunk, values[start:stop])
    return zarr.open_array(str(tmp_path / "s.zarr" / "clean"), mode="r"), values


@pytest.mark.parametrize("start,stop", SPANS)
def test_direct_block_equals_zarr_and_the_written_rows(written, start, stop):
    array, values = written
    assert raw_chunk_rows(array) == 64  # the writer's layout is the raw one
    block = read_block(array, start, stop)
    assert block.dtype == np.float16 and block.flags.c_contiguous
    np.testing.assert_array_equal(block, values[start:stop])
    np.testing.assert_array_equal(block, np.asarray(array[start:stop]))


def test_compressed_array_is_read_through_zarr(tmp_path):
    values = np.random.default_rng(1).normal(size=(300, 8)).astype(np.float16)
    array = zarr.create_array(str(tmp_path / "z.zarr"), shape=values.shape, chunks=(64, 8), dtype="float16")
    array[:] = values
    assert raw_chunk_rows(array) is None  # default compressor: not raw bytes
    np.testing.assert_array_equal(read_block(array, 50, 260), values[50:260])


def test_chunks_split_across_columns_are_read_through_zarr(tmp_path):
    values = np.random.default_rng(2).normal(size=(100, 8)).astype(np.float16)
    array = zarr.create_array(str(tmp_path / "c.zarr"), shape=values.shape, chunks=(32, 4), dtype="float16",
                              compressors=None)
    array[:] = values
    assert raw_chunk_rows(array) is None
    np.testing.assert_array_equal(read_block(array, 10, 90), values[10:90])


def test_unwritten_chunk_reads_as_zarr_fills_it(tmp_path):
    array = zarr.create_array(str(tmp_path / "u.zarr"), shape=(200, 4), chunks=(50, 4), dtype="float16",
                              compressors=None, fill_value=0)
    array[0:50] = np.ones((50, 4), dtype=np.float16)  # chunks 1-3 never written: no files
    assert raw_chunk_rows(array) is not None
    block = read_block(array, 40, 120)
    np.testing.assert_array_equal(block[:10], 1)
    np.testing.assert_array_equal(block[10:], 0)


@pytest.mark.parametrize("start,stop", SPANS)
def test_o_direct_reads_equal_the_written_rows(written, start, stop, monkeypatch):
    """Every read through O_DIRECT (the aligned scratch buffer, offsets inside a chunk, the short
    last chunk), where this file system takes it, and through the page cache where it does not."""
    import crs.cache.direct as direct

    array, values = written
    monkeypatch.setattr(direct, "DIRECT_MIN_BYTES", 0)
    used = []
    real_read_direct = direct._read_direct
    monkeypatch.setattr(direct, "_read_direct", lambda *a: used.append(1) or real_read_direct(*a))
    np.testing.assert_array_equal(read_block(array, start, stop), values[start:stop])
    assert used or stop <= start or not direct.direct_reads()


def test_a_file_system_refusing_o_direct_falls_back_to_the_page_cache(written, monkeypatch):
    import os

    import crs.cache.direct as direct

    array, values = written
    monkeypatch.setattr(direct, "DIRECT_MIN_BYTES", 0)
    real_open = os.open

    def refusing(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(direct.os, "open", refusing)
    np.testing.assert_array_equal(read_block(array, 30, 700), values[30:700])
    monkeypatch.setenv("CRS_DIRECT_READS", "0")
    assert not direct.direct_reads()
