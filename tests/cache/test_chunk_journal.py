"""Chunk journals: what a kill leaves of a chunk not yet full is read back; what a crash tears is not trusted."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from crs.cache.journal import encode_record, read_records
from crs.cache.verify import verify_store
from crs.cache.writer import DONE_SUFFIX, ChunkedFeatureArray, stored_rows_done, stored_rows_kept


@pytest.fixture
def group(tmp_path):
    return zarr.open_group(str(tmp_path / "s.zarr"), mode="a").require_group("encoders/e/fp")


def rows(n: int, dim: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def test_a_chunk_not_yet_full_keeps_its_rows_in_a_journal_and_sets_no_flag(group):
    array = ChunkedFeatureArray(group, "clean", n_rows=10, dim=3, chunk_rows=4)
    first, second = rows(2, seed=1), rows(1, seed=2)
    array.journal(1, np.array([4, 5]), first)
    array.journal(1, np.array([7]), second)
    positions, values = array.journaled(1)
    assert positions.tolist() == [4, 5, 7]
    np.testing.assert_array_equal(values, np.concatenate([first, second]).astype(np.float16))
    # The journal is not a flag: the chunk is still incomplete, and verify sees only that.
    assert array.pending_chunks() == [0, 1, 2]
    assert {problem.kind for problem in verify_store(group.store.root)} <= {"incomplete", "unfinished-table"}
    # A resumed run keeps the journaled rows (3), the flags alone keep none.
    assert stored_rows_done(group, "clean") == 0 and stored_rows_kept(group, "clean") == 3
    # Writing the chunk drops its journal.
    array.write_chunk(1, rows(4))
    assert not array.journal_path(1).exists()
    assert stored_rows_done(group, "clean") == stored_rows_kept(group, "clean") == 4


def test_a_torn_tail_is_cut_off_and_later_records_follow_the_good_ones(group):
    array = ChunkedFeatureArray(group, "clean", n_rows=10, dim=3, chunk_rows=4)
    array.journal(0, np.array([0, 1]), rows(2, seed=3))
    path = array.journal_path(0)
    good = path.stat().st_size
    torn = encode_record(np.array([2]), rows(1, seed=4).astype(np.float16))
    with open(path, "ab") as handle:  # a kill (or a crash) half-way through the next record
        handle.write(torn[: len(torn) // 2])
    positions, _ = array.journaled(0)
    assert positions.tolist() == [0, 1] and path.stat().st_size == good  # cut back to the good prefix
    array.journal(0, np.array([2]), rows(1, seed=4))
    assert array.journaled(0)[0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("damage", ["flipped byte", "other width", "outside the chunk"])
def test_a_damaged_record_and_all_after_it_are_ignored(tmp_path, damage):
    good = encode_record(np.array([4]), rows(1).astype(np.float16))
    bad = {"flipped byte": bytes([good[0]]) + good[1:20] + bytes([good[20] ^ 1]) + good[21:],
           "other width": encode_record(np.array([5]), rows(1, dim=2).astype(np.float16)),
           "outside the chunk": encode_record(np.array([9]), rows(1).astype(np.float16))}[damage]
    after = encode_record(np.array([6]), rows(1, seed=5).astype(np.float16))
    path = tmp_path / "0.rows"
    path.write_bytes(good + bad + after)
    positions, values, valid = read_records(path, 4, 8, 3)
    assert positions.tolist() == [4] and values.shape == (1, 3) and valid == len(good)


def test_a_resume_finds_journals_of_finished_chunks_and_drops_them(group):
    array = ChunkedFeatureArray(group, "clean", n_rows=8, dim=3, chunk_rows=4)
    array.journal(0, np.array([0]), rows(1))
    journal = array.journal_path(0)
    group[f"clean{DONE_SUFFIX}"][0] = 1  # a kill after the flag, before the journal's deletion
    assert journal.exists() and stored_rows_kept(group, "clean") == 4
    array.drop_finished_journals()
    assert not journal.exists()


def test_a_finished_extraction_leaves_no_journal(tmp_path):
    from crs.data import load_dataset
    from crs.encoders import create
    from crs.extract.runner import extract_dataset

    dataset = load_dataset("synthetic", tmp_path / "data", modality="chest_xray", n_images=40, image_size=32)
    extract_dataset(dataset, [create("pixel_stats", weights="random")], tmp_path / "cache", [("jpeg", 2)],
                    batch_size=4, progress=False)
    assert not [path for path in (tmp_path / "cache").rglob("journal*")]
