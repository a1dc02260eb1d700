"""A run folder copied to a laptop without `predictions/` (issue 34 item 5): it scores, or says in one
line what is missing; it never ends in a RecursionError."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from crs.benchmark import Benchmark
from crs.evaluate.artifacts import RunFolderError


@pytest.fixture
def copied(tiny_run, tmp_path):
    spec, _, _, _ = tiny_run
    folder = tmp_path / "laptop"
    shutil.copytree(spec.output, folder)
    return folder


def test_a_copy_without_predictions_says_so_in_one_line(copied):
    shutil.rmtree(copied / "predictions")
    with pytest.raises(RunFolderError, match=r"no predictions/ folder .*copy the run's predictions/ folder") as error:
        Benchmark.from_run_folder(copied).score()  # was: RecursionError: maximum recursion depth exceeded
    assert "\n" not in str(error.value) and "case_bootstrap = false" in str(error.value)


def test_a_copy_missing_one_predictions_file_names_it(copied):
    gone = sorted((copied / "predictions").glob("*.npz"))[0]
    gone.unlink()
    with pytest.raises(RunFolderError, match=rf"1 per-case predictions file\(s\) missing, first .*{gone.name}"):
        Benchmark.from_run_folder(copied).score()


def test_a_copy_without_predictions_scores_at_the_seed_level(copied):
    shutil.rmtree(copied / "predictions")
    bench = Benchmark.from_run_folder(copied)
    seed_level = dataclasses.replace(bench.spec.score, case_bootstrap=False)
    result = Benchmark(dataclasses.replace(bench.spec, score=seed_level)).score(to=copied.parent / "seed-level")
    assert sorted(result.crs.index) == sorted(bench.spec.encoder_names)
    assert not result.settings.case_level
