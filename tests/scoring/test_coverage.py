"""Encoders scored where they belong (docs/decisions/0038): per-task leaderboards and the overall one.

Synthetic cohorts (tests/scoring/cohorts.py) in which one encoder lacks a task. The per-task and
overall leaderboards are checked against their definitions (the same scoring run on the records of
that task's encoders, or of the encoders on every task, alone), not against stored numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.evaluate.artifacts import RunFolder
from crs.scoring.coverage import declared_records, every_task_encoders, is_complete, placement
from crs.scoring.formula import ScoreInputError
from crs.scoring.result import read_score, score_records
from crs.scoring.settings import ScoreSettings

from cohorts import TASKS, cohort_records

SETTINGS = ScoreSettings(n_boot=40, n_weight_samples=40)


def _with_specialist(n_general: int = 4, seed: int = 0) -> pd.DataFrame:
    """``n_general`` encoders on every task and e<n> on fundus only."""
    records = cohort_records(n_general + 1, seed=seed)
    specialist = f"e{n_general:02d}"
    return records[(records["encoder"] != specialist) | (records["task"] == "fundus")].reset_index(drop=True)


def _coverage(n_general: int = 4) -> dict[str, list[str]]:
    general = [f"e{i:02d}" for i in range(n_general)]
    return {task: general + ([f"e{n_general:02d}"] if task == "fundus" else []) for task in TASKS}


def test_a_missing_task_the_spec_did_not_declare_is_still_an_error():
    records = _with_specialist()
    with pytest.raises(ScoreInputError, match="e04"):
        score_records(records, SETTINGS)  # nothing declared: every encoder must have every task
    declared_everywhere = {task: [f"e{i:02d}" for i in range(5)] for task in TASKS}
    with pytest.raises(ScoreInputError, match=r"'(derm|chest)' has no run records for encoder 'e04'"):
        score_records(records, SETTINGS, coverage=declared_everywhere)  # complete coverage: the check of old
    partly = _coverage()
    partly["derm"] = [*partly["derm"], "e04"]  # declared on derm and fundus, recorded on fundus only
    with pytest.raises(ScoreInputError, match=r"encoder 'e04' on task 'derm'"):
        score_records(records, SETTINGS, coverage=partly)


def test_declared_coverage_gives_one_leaderboard_per_task_and_an_overall_one_over_the_encoders_on_every_task():
    records = _with_specialist()
    result = score_records(records, SETTINGS, coverage=_coverage())
    assert sorted(result.crs.index) == ["e00", "e01", "e02", "e03"]
    assert list(result.leaderboards) == list(TASKS)
    assert sorted(result.leaderboards["fundus"].crs.index) == ["e00", "e01", "e02", "e03", "e04"]
    assert all("e04" not in result.leaderboards[task].crs.index for task in ("derm", "chest"))
    # each leaderboard is, by definition, the score of its own records alone
    alone = score_records(records[records["task"] == "fundus"], SETTINGS)
    pd.testing.assert_frame_equal(result.leaderboards["fundus"].crs, alone.crs)
    overall = score_records(records[records["encoder"] != "e04"], SETTINGS)
    pd.testing.assert_frame_equal(result.crs, overall.crs)
    # rank sets, tiers, reversals and stability are each leaderboard's own
    board = result.leaderboards["fundus"]
    assert set(board.bootstrap.table.index) == set(board.crs.index)
    assert set(board.bootstrap.leading_tier) <= set(board.crs.index)
    assert board.reversals.n_pairs == 5 * 4 // 2
    assert "e04" in set(board.stability.references.index)


def test_placement_says_who_is_ranked_where_and_why():
    result = score_records(_with_specialist(), SETTINGS, coverage=_coverage())
    where = result.placement
    assert list(where.index[:4]) == list(result.crs.sort_values("rank").index)  # overall ones first, by rank
    assert not where.loc["e04", "overall"] and np.isnan(where.loc["e04", "overall_rank"])
    assert where.loc["e04", "tasks"] == "fundus"
    assert where.loc["e04", "why"].startswith("fundus only: ranked in the fundus leaderboard, not overall")
    fundus_rank = int(result.leaderboards["fundus"].crs.loc["e04", "rank"])
    assert where.loc["e04", "task_ranks"] == f"fundus: {fundus_rank}"
    for name in result.crs.index:
        assert where.loc[name, "overall"] and where.loc[name, "overall_rank"] == result.crs.loc[name, "rank"]
        expected = ", ".join(f"{task}: {int(result.leaderboards[task].crs.loc[name, 'rank'])}" for task in TASKS)
        assert where.loc[name, "task_ranks"] == expected


def test_the_median_reference_of_a_task_is_the_median_of_that_leaderboards_encoders():
    result = score_records(_with_specialist(), SETTINGS.replace(error_floor=1e-6), coverage=_coverage())
    board = result.leaderboards["fundus"]  # five encoders: the median error is one encoder's own error
    for axis in ("discrimination", "calibration", "label_efficiency", "robustness"):
        errors = board.axis_errors[axis]
        middle = errors.sort_values().index[2]
        assert board.crs.loc[middle, f"u_{axis}"] == pytest.approx(0.5, abs=1e-12)
    # the overall board has four encoders: nobody sits at the median, so nobody has u = 0.5 on discrimination
    assert not np.isclose(result.crs["u_discrimination"], 0.5).any()


def test_a_named_reference_must_run_on_every_task():
    records = _with_specialist()
    with pytest.raises(ScoreInputError, match="reference 'e04' does not run on every task"):
        score_records(records, SETTINGS.replace(reference="e04"), coverage=_coverage())
    result = score_records(records, SETTINGS.replace(reference="e01"), coverage=_coverage())
    for board in (result, *result.leaderboards.values()):
        assert board.crs.loc["e01", "u_discrimination"] == pytest.approx(0.5)


def test_complete_coverage_changes_nothing():
    records = cohort_records(4)
    everyone = {task: [f"e{i:02d}" for i in range(4)] for task in TASKS}
    plain = score_records(records, SETTINGS)
    declared = score_records(records, SETTINGS, coverage=everyone)
    pd.testing.assert_frame_equal(plain.crs, declared.crs)
    assert not declared.leaderboards and declared.placement is None
    assert plain.summary()["leaderboards"] == [] and "Per task" not in plain.format()


def test_records_of_undeclared_pairs_are_left_out():
    records = cohort_records(3)
    coverage = {"derm": ["e00", "e01", "e02"], "fundus": ["e00", "e01"], "chest": ["e00", "e01"]}
    kept = declared_records(records, coverage)
    assert set(map(tuple, kept[["encoder", "task"]].drop_duplicates().to_numpy())) == {
        (e, t) for t, names in coverage.items() for e in names}
    assert every_task_encoders(coverage) == ["e00", "e01"]
    assert not is_complete(coverage) and is_complete({"a": ["x", "y"], "b": ["y", "x"]})
    with pytest.raises(ScoreInputError, match="once"):
        every_task_encoders({"a": ["x", "x"]})


def test_placement_of_an_encoder_on_two_of_three_tasks():
    table = placement({"a": ["x", "y"], "b": ["x", "y"], "c": ["x"]}, {"x": 1}, {"a": {"x": 2, "y": 1},
                                                                            "b": {"x": 1, "y": 2}, "c": {"x": 1}})
    assert list(table.index) == ["x", "y"]
    assert table.loc["y", "why"].startswith("a, b only: ranked in the a and b leaderboards, not overall")
    assert table.loc["y", "task_ranks"] == "a: 1, b: 2"


def test_stored_score_keeps_every_leaderboard(tmp_path):
    result = score_records(_with_specialist(), SETTINGS, coverage=_coverage())
    folder = RunFolder(tmp_path)
    folder.write_score(result.tables(), result.summary(), result.format())
    stored = read_score(folder)
    assert list(stored.leaderboards) == list(result.leaderboards)
    for task, board in result.leaderboards.items():
        again = stored.leaderboards[task]
        pd.testing.assert_frame_equal(again.crs, board.crs, check_dtype=False)
        assert again.bootstrap.leading_tier == board.bootstrap.leading_tier
        assert again.reversals.n_reversed == board.reversals.n_reversed
    pd.testing.assert_frame_equal(stored.placement, result.placement, check_dtype=False)
    assert stored.format() == result.format()
