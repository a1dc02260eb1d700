"""The default interval (issue 47 item 3, decision 0181): the CRS interval printed is the adaptive one of
decision 0180, per encoder and narrower than the box's; the axis intervals stay the simultaneous box's; and
everything that speaks of several encoders' CRS at once (reversals with confidence) still reads the box's
CRS bounds ``crs_box_low`` / ``_high``."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from crs.evaluate.contest import contest_of_score
from crs.report.tables import axis_intervals, interval_note
from crs.scoring.intervals import MEASURED_COVERAGE_ADAPTIVE, MEASURED_COVERAGE_BOX, measured_coverage
from crs.scoring.result import score_records
from crs.scoring.reversals import contest_reversals, contest_reversals_of
from crs.scoring.settings import ScoreSettings
from crs.spec import ScoreConfig

from cohorts import cohort_records


@pytest.fixture(scope="module")
def scores():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = cohort_records(5, seed=3)
        return score_records(records, n_boot=100), score_records(records, ScoreSettings(n_boot=100, interval="box"))


def test_the_default_crs_interval_is_the_adaptive_one_and_narrower_than_the_box(scores):
    default, box = scores
    assert ScoreSettings().interval == "adaptive" and ScoreConfig().interval == "adaptive"
    assert default.summary()["interval"]["method"] == "adaptive"
    table, boxed = default.bootstrap.table, box.bootstrap.table
    # the box's CRS bounds are kept beside the printed ones, the same as the box score prints
    np.testing.assert_allclose(table["crs_box_low"], boxed["crs_low"])
    np.testing.assert_allclose(table["crs_box_high"], boxed["crs_high"])
    width, box_width = table["crs_high"] - table["crs_low"], boxed["crs_high"] - boxed["crs_low"]
    assert width.sum() < box_width.sum() and (width < box_width - 1e-6).any()
    assert ((table["crs_low"] <= table["crs"] + 1e-12) & (table["crs"] <= table["crs_high"] + 1e-12)).all()
    # the leaderboard and the summary print the adaptive bounds
    np.testing.assert_allclose(default.crs["crs_low"].reindex(table.index), table["crs_low"])
    ranking = {row["encoder"]: row for row in default.summary()["ranking"]}
    assert all(abs(ranking[name]["crs_high"] - table.loc[name, "crs_high"]) < 1e-12 for name in table.index)


def test_the_default_keeps_the_box_axis_intervals_and_reversals(scores):
    default, box = scores
    pd.testing.assert_frame_equal(axis_intervals(default), axis_intervals(box))
    found, boxed = default.reversal_uncertainty, box.reversal_uncertainty
    assert (found.count_low, found.count_high) == (boxed.count_low, boxed.count_high)
    assert contest_reversals_of(default).confident_pairs == contest_reversals_of(box).confident_pairs
    note = interval_note(default.bootstrap)
    assert "holds per encoder" in note and "simultaneous box" in note and "hold at once" in note


def test_the_default_labels_the_crs_by_the_adaptive_figures_and_the_axes_by_the_box():
    found = measured_coverage(0.05, "adaptive")
    assert found["crs"] == MEASURED_COVERAGE_ADAPTIVE["crs"]
    for axis in ("auroc", "calibration", "label_efficiency", "robustness"):
        assert found[axis] == MEASURED_COVERAGE_BOX[axis]


def test_a_reversal_with_confidence_needs_the_box_crs_bounds_not_the_printed_ones(scores):
    default, _ = scores
    contest = contest_of_score(default)
    ahead, behind = contest.contestants[:2]
    # printed (per-encoder) intervals that separate the two; box bounds that do not
    crs = pd.DataFrame({"auroc": [0.70, 0.80], "crs": [0.60, 0.50], "crs_low": [0.58, 0.48],
                        "crs_high": [0.62, 0.52]}, index=[ahead, behind])
    box = pd.DataFrame({"crs_box_low": [0.45, 0.40], "crs_box_high": [0.75, 0.65],
                        "discrimination_error_box_low": [0.29, 0.10], "discrimination_error_box_high": [0.31, 0.12]},
                       index=[ahead, behind])
    assert contest_reversals(crs, [ahead, behind], None, box.drop(columns=["crs_box_low", "crs_box_high"])).n_confident == 1
    assert contest_reversals(crs, [ahead, behind], None, box).n_confident == 0

