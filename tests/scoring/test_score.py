"""The CRS formula: hand-derived tables for every piece, and hypothesis properties of the definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crs.scoring.formula import (
    AXES,
    ScoreInputError,
    TaskMetrics,
    axis_errors_from_metrics,
    axis_standard_errors,
    clinical_reliability_score,
    crs_components,
    error_floor,
    point_estimate,
)
from crs.scoring.settings import ScoreSettings


def _errors(rows: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(AXES)).rename_axis("encoder")


def _fixed(reference: str = "median", floor: float = 1e-3, **changes) -> ScoreSettings:
    return ScoreSettings(reference=reference, error_floor=floor, **changes)


def test_three_encoder_golden_table():
    # reference R errors (.2, .1, .4, .3); A halves every error; B triples discrimination error and
    # thirds calibration error.  rho = e / e_R, u = 1 / (1 + rho):
    #   R: u = (1/2, 1/2, 1/2, 1/2)
    #   A: rho = 1/2 everywhere -> u = 2/3 everywhere
    #   B: rho = (3, 1/3, 1, 1) -> u = (1/4, 3/4, 1/2, 1/2)
    # Pareto: A > R on every axis, so A dominates R. A vs B: A worse on calibration (2/3 < 3/4): no.
    # R vs B: R better on discrimination, worse on calibration: no. (B's 1/2 equal to R's on two
    # axes up to float noise: no dominance either way.)
    #   S: A 1/2, R 0, B 0;  Q: A 0, R 1/2, B 0;  Dom = (1 + S - Q) / 2: A 3/4, R 1/4, B 1/2
    # balance = geometric mean: A 2/3, R 1/2, B (1/4 * 3/4 * 1/2 * 1/2)^(1/4) = (3/64)^(1/4) = 0.465302
    # worst = min u: A 2/3, R 1/2, B 1/4 (all on discrimination, the first axis on ties)
    # CRS = mean: A (3/4 + 2/3 + 2/3) / 3 = 25/36; R (1/4 + 1/2 + 1/2) / 3 = 5/12;
    #             B (1/2 + 0.465302 + 1/4) / 3 = 0.405101 -> ranks A 1, R 2, B 3
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.1, 0.05, 0.2, 0.15), "B": (0.6, 0.1 / 3, 0.4, 0.3)})
    table = clinical_reliability_score(errors, _fixed("R"))
    assert table.loc["B", [f"u_{a}" for a in AXES]].tolist() == pytest.approx([0.25, 0.75, 0.5, 0.5])
    assert table["S"].to_dict() == pytest.approx({"R": 0.0, "A": 0.5, "B": 0.0})
    assert table["Q"].to_dict() == pytest.approx({"R": 0.5, "A": 0.0, "B": 0.0})
    assert table["dominance"].to_dict() == pytest.approx({"R": 0.25, "A": 0.75, "B": 0.5})
    assert table["balance"].to_dict() == pytest.approx({"R": 0.5, "A": 2 / 3, "B": (3 / 64) ** 0.25})
    assert table["worst_axis"].to_dict() == pytest.approx({"R": 0.5, "A": 2 / 3, "B": 0.25})
    assert table.loc["B", "worst_axis_name"] == "discrimination"
    assert table["crs"].to_dict() == pytest.approx({"R": 5 / 12, "A": 25 / 36, "B": 0.405101}, abs=1e-6)
    assert table["rank"].to_dict() == {"A": 1, "R": 2, "B": 3}


def test_median_reference_golden_table():
    # errors on one axis only (the others equal): A .1, B .2, C .4 -> median .2 (B's).
    # u = 1 / (1 + e / .2): A 2/3, B 1/2, C 1/3; no encoder is the reference, B only happens to sit at
    # the median. Dominance on the one differing axis: A > B > C, so S = A 1, B 1/2, C 0 and Q = A 0,
    # B 1/2, C 1. On the equal axes u = 1/2 for all. Balance = (u * (1/2)^3)^(1/4); worst = min(u, 1/2).
    errors = _errors({"A": (0.1, 0.1, 0.1, 0.1), "B": (0.2, 0.1, 0.1, 0.1), "C": (0.4, 0.1, 0.1, 0.1)})
    table = clinical_reliability_score(errors, _fixed())
    assert table["u_discrimination"].to_dict() == pytest.approx({"A": 2 / 3, "B": 0.5, "C": 1 / 3})
    assert table["u_calibration"].tolist() == pytest.approx([0.5] * 3)
    assert table["dominance"].to_dict() == pytest.approx({"A": 1.0, "B": 0.5, "C": 0.0})
    balance_a = (2 / 3 * 0.125) ** 0.25
    assert table.loc["A", "crs"] == pytest.approx((1.0 + balance_a + 0.5) / 3)
    assert table.loc["C", "crs"] == pytest.approx((0.0 + (1 / 3 * 0.125) ** 0.25 + 1 / 3) / 3)
    # with four encoders the median is the mean of the middle two: (.2 + .4) / 2 = .3
    errors.loc["D"] = (0.8, 0.1, 0.1, 0.1)
    assert clinical_reliability_score(errors, _fixed()).loc["A", "u_discrimination"] == pytest.approx(1 / (1 + 1 / 3))


def test_floor_makes_errors_below_it_equal():
    # floor .01: the reference's .002 and E's .005 both count as .01, so E ties the reference (u 1/2)
    # and an encoder at .02 gets rho 2, u 1/3
    errors = _errors({"R": (0.002, 0.1, 0.1, 0.1), "E": (0.005, 0.1, 0.1, 0.1), "F": (0.02, 0.1, 0.1, 0.1)})
    table = clinical_reliability_score(errors, _fixed("R", floor=0.01))
    assert table["u_discrimination"].to_dict() == pytest.approx({"R": 0.5, "E": 0.5, "F": 1 / 3})
    assert table.loc["E", "dominance"] == table.loc["R", "dominance"]
    # a per-axis floor (Series) applies to its axis only
    per_axis = pd.Series({"discrimination": 0.001, "calibration": 0.5, "label_efficiency": 0.001, "robustness": 0.001})
    table = clinical_reliability_score(errors, _fixed("R"), per_axis)
    assert table.loc["E", "u_discrimination"] == pytest.approx(1 / (1 + 2.5))
    assert table.attrs["floor"]["calibration"] == 0.5


def test_a_negative_calibration_error_is_floored_not_refused():
    # debiased calibration error -0.01 ("within noise of calibrated") counts as the floor .005
    errors = _errors({"R": (0.2, 0.01, 0.4, 0.3), "A": (0.2, -0.01, 0.4, 0.3)})
    table = clinical_reliability_score(errors, _fixed("R", floor=0.005))
    assert table.loc["A", "u_calibration"] == pytest.approx(1 / (1 + 0.5))


def test_float_noise_never_decides_a_dominance():
    # the audit's pair: 0.1499999999999999 and 0.15000000000000002 are the same error
    assert 0.1499999999999999 != 0.15000000000000002
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.1499999999999999, 0.1, 0.4, 0.3),
                      "B": (0.15000000000000002, 0.1, 0.4, 0.3)})  # fmt: skip
    table = clinical_reliability_score(errors, _fixed("R"))
    assert table.loc["A", "S"] == table.loc["B", "S"] == 0.5  # each dominates R only
    assert table.loc["A", "Q"] == table.loc["B", "Q"] == 0.0
    exact = crs_components(errors.to_numpy(), 0, tolerance=0.0)
    assert exact["S"][1] == 1.0  # with no tolerance A "dominates" B: the bug the tolerance removes


def test_weights_and_margin():
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.19, 0.099, 0.39, 0.29)})
    plain = clinical_reliability_score(errors, _fixed("R"))
    assert plain.loc["A", "dominance"] == 1.0
    # A's u gains are all below .05, so with that margin it no longer counts as dominating R
    assert clinical_reliability_score(errors, _fixed("R", dominance_margin=0.05)).loc["A", "dominance"] == 0.5
    only_worst = clinical_reliability_score(errors, _fixed("R", weights={"worst_axis": 1.0}))
    assert only_worst["crs"].to_dict() == pytest.approx(only_worst["worst_axis"].to_dict())


def test_missing_reference_names_encoders_present():
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.1, 0.05, 0.2, 0.15)})
    with pytest.raises(ScoreInputError, match=r"'resnet50'.*\['A', 'R'\].*median"):
        clinical_reliability_score(errors, _fixed("resnet50"))


def test_noise_floor_needs_a_floor():
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.1, 0.05, 0.2, 0.15)})
    with pytest.raises(ScoreInputError, match="noise"):
        clinical_reliability_score(errors, ScoreSettings())


def test_axis_without_any_value_is_left_out_but_partial_axis_is_an_error():
    errors = _errors({"R": (0.2, 0.1, 0.4, np.nan), "A": (0.1, 0.05, 0.2, np.nan)})
    table = clinical_reliability_score(errors, _fixed("R"))
    assert "u_robustness" not in table.columns and table.attrs["axes"] == list(AXES[:3])
    errors.loc["A", "robustness"] = 0.1
    with pytest.raises(ScoreInputError, match="robustness.*'R'"):
        clinical_reliability_score(errors, _fixed("R"))


# --- measurements -> axis errors ---------------------------------------------------------------------


def _task(clean, fractions, corrupt, shift, calibration) -> TaskMetrics:
    """One encoder, seeds on the last axis; conditions as lists of per-seed lists."""
    def conditions(values):
        return np.asarray(values, dtype=float).reshape(1, len(values), -1) if values else np.zeros((1, 0, len(clean)))

    return TaskMetrics(np.asarray([clean], float), conditions(fractions), conditions(corrupt), conditions(shift),
                       np.asarray([calibration], float))  # fmt: skip


def test_axis_errors_by_hand():
    # task 1, seeds (.8, .9): clean mean .85; fractions .6/.7 and .7/.8 -> .65, .75 -> mean .7;
    #   corruptions (.7, .7), (.5, .7) -> .7, .6 -> .65; shift (.6, .8) -> .7; robustness (.65 + .7) / 2
    #   = .675; calibration (.02, .04) -> .03
    # task 2, one seed: clean .7; one fraction .6; corruption .5; no shift; calibration .05
    # errors: discrimination 1 - (.85 + .7) / 2 = .225; label efficiency 1 - (.7 + .6) / 2 = .35;
    #         robustness 1 - (.675 + .5) / 2 = .4125; calibration (.03 + .05) / 2 = .04
    first = _task([0.8, 0.9], [[0.6, 0.7], [0.7, 0.8]], [[0.7, 0.7], [0.5, 0.7]], [[0.6, 0.8]], [0.02, 0.04])
    second = _task([0.7], [[0.6]], [[0.5]], [], [0.05])
    errors = axis_errors_from_metrics([first, second])
    assert errors.shape == (1, 4)
    assert errors[0] == pytest.approx([0.225, 0.04, 0.35, 0.4125])
    # seed weights (2, 0) count only seed 0 of task 1 (task 2 has one seed; weights are per task's seeds)
    only_first = axis_errors_from_metrics([first], np.array([[2.0, 0.0], [1.0, 1.0]]))
    assert only_first.shape == (2, 1, 4)
    # seed 0: clean .8, fractions .6 .7 -> .65, corruptions .7 .5 -> .6, shift .6 -> (.6 + .6) / 2, cal .02
    assert only_first[0, 0] == pytest.approx([0.2, 0.02, 0.35, 0.4])
    assert only_first[1, 0] == pytest.approx(axis_errors_from_metrics([first])[0])


def test_axis_errors_leave_an_axis_no_task_measures_as_nan_and_keep_nan_measurements():
    only_clean = _task([0.8], [], [], [], [0.02])
    errors = axis_errors_from_metrics([only_clean])[0]
    assert errors[0] == pytest.approx(0.2) and np.isnan(errors[2]) and np.isnan(errors[3])
    # robustness measured on one task only: the mean over the tasks that measure it
    with_corruption = _task([0.8], [], [[0.6]], [], [0.02])
    assert axis_errors_from_metrics([only_clean, with_corruption])[0, 3] == pytest.approx(0.4)
    # a NaN measurement is never averaged away
    holed = _task([0.8], [], [[np.nan]], [], [0.02])
    assert np.isnan(axis_errors_from_metrics([holed, with_corruption])[0, 3])


def test_axis_standard_errors_by_hand():
    # task 1: clean se (.01, .03) -> .02 (same test set: mean); corruption ses .02, .04 -> .03 and shift
    #   .04 -> robustness sqrt(.03^2 + .04^2) / 2 = .025 (independent test sets, each half)
    # task 2: clean .02 -> discrimination sqrt(.02^2 + .02^2) / 2 = .01414; robustness only task 1: .025
    first = _task([0.01, 0.03], [], [[0.02, 0.02], [0.04, 0.04]], [[0.04, 0.04]], [0.01, 0.01])
    second = _task([0.02], [], [], [], [0.01])
    se = axis_standard_errors([first, second])[0]
    assert se[0] == pytest.approx(np.sqrt(2 * 0.02**2) / 2)
    assert se[1] == pytest.approx(np.sqrt(2 * 0.01**2) / 2)
    assert np.isnan(se[2]) and se[3] == pytest.approx(0.025)


def test_two_shift_targets_count_as_one_half_of_robustness_by_hand():
    # corruptions (.7, .7), (.5, .7) -> .65; shift targets b (.6, .8) -> .7 and c (.4, .4) -> .4:
    #   their mean .55 is the shift half; robustness 1 - (.65 + .55) / 2 = .4 (not thirds: 1 - (.65 + .7 + .4) / 3)
    two = _task([0.8, 0.9], [], [[0.7, 0.7], [0.5, 0.7]], [[0.6, 0.8], [0.4, 0.4]], [0.02, 0.04])
    assert axis_errors_from_metrics([two])[0, 3] == pytest.approx(0.4)
    # standard errors: each target is its own test set, so the shift half combines them as independent
    #   estimates, sqrt(.03^2 + .04^2) / 2 = .025; with the corruption half .03: sqrt(.03^2 + .025^2) / 2
    ses = _task([0.01, 0.01], [], [[0.03, 0.03]], [[0.03, 0.03], [0.04, 0.04]], [0.01, 0.01])
    assert axis_standard_errors([ses])[0, 3] == pytest.approx(np.sqrt(0.03**2 + 0.025**2) / 2)
    one = _task([0.01, 0.01], [], [[0.03, 0.03]], [[0.04, 0.04]], [0.01, 0.01])
    assert axis_standard_errors([one])[0, 3] == np.sqrt(0.03**2 + 0.04**2) / 2  # one target: as before


def test_error_floor_is_the_reference_standard_error():
    standard_errors = np.array([[0.01, 0.002], [0.03, 0.004], [0.02, 0.0]])
    assert error_floor(standard_errors, 1) == pytest.approx([0.03, 0.004])
    assert error_floor(standard_errors, None) == pytest.approx([0.02, 0.002])  # median encoder
    assert error_floor(standard_errors, 2)[1] == pytest.approx(1e-6)  # never 0


def test_point_estimate_with_noise_floor():
    errors = _errors({"R": (0.2, 0.001, 0.4, 0.3), "A": (0.1, 0.004, 0.2, 0.15), "B": (0.3, 0.02, 0.2, 0.1)})
    standard_errors = _errors({"R": (0.01, 0.005, 0.01, 0.01), "A": (0.02, 0.006, 0.01, 0.01),
                               "B": (0.02, 0.007, 0.01, 0.01)})  # fmt: skip
    point = point_estimate(errors, standard_errors, ScoreSettings(reference="R"))
    # R's calibration se .005 floors R's .001 and A's .004 to .005: A's u_calibration is exactly 1/2
    assert point.floor["calibration"] == 0.005
    assert point.table.loc["A", "u_calibration"] == 0.5
    median = point_estimate(errors, standard_errors, ScoreSettings())
    assert median.floor["calibration"] == 0.006 and median.reference_index is None


# --- properties -----------------------------------------------------------------------------------

# errors on a coarse grid (k / 100) keep distinct values distinct under the transforms below
error_tables = (
    st.integers(2, 6)
    .flatmap(
        lambda n: st.lists(st.lists(st.integers(1, 100), min_size=4, max_size=4), min_size=n, max_size=n)
    )
    .map(lambda rows: np.array(rows, dtype=np.float64) / 100.0)
)


@settings(max_examples=150, deadline=None)
@given(error_tables, st.lists(st.floats(0.3, 3.0), min_size=4, max_size=4), st.floats(0.0, 2.0))
def test_dominance_unchanged_by_increasing_per_axis_transforms(errors, powers, offset):
    transformed = np.stack([errors[:, a] ** powers[a] + offset * a for a in range(4)], axis=1)
    before = crs_components(errors, 0, floor=1e-12)
    after = crs_components(transformed, 0, floor=1e-12)
    assert np.array_equal(before["dominance"], after["dominance"])


@settings(max_examples=150, deadline=None)
@given(error_tables, st.integers(0, 5))
def test_reference_scores_one_half_on_every_axis(errors, reference):
    reference %= len(errors)
    assert np.all(crs_components(errors, reference)["u"][reference] == 0.5)


@settings(max_examples=150, deadline=None)
@given(error_tables, st.floats(0.01, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 0.05),
       st.sampled_from([None, 0]))  # fmt: skip
def test_an_encoder_that_dominates_another_scores_strictly_higher(errors, w_dom, w_bal, w_worst, margin, reference):
    parts = crs_components(
        errors, reference, np.array([w_dom, w_bal, w_worst]) / (w_dom + w_bal + w_worst), margin=margin
    )
    gap = parts["u"][:, None, :] - parts["u"][None, :, :]
    dominates = np.all(gap >= 0, axis=-1) & np.any(gap > margin, axis=-1)
    for i, j in zip(*np.nonzero(dominates), strict=True):
        assert parts["crs"][i] > parts["crs"][j]


@settings(max_examples=150, deadline=None)
@given(error_tables, st.integers(0, 5), st.lists(st.integers(-4, 4), min_size=4, max_size=4),
       st.sampled_from([None, 0]))  # fmt: skip
def test_float_equal_axes_never_decide_a_dominance(errors, which, ulps, reference):
    # a twin of encoder `which` whose errors differ from its own by a few ulps: the two are the same
    # encoder as far as dominance goes, so the twin scores like an exact copy
    which %= len(errors)
    twin = errors[which] + np.array(ulps) * np.spacing(errors[which])
    assert ulps == [0] * 4 or not np.array_equal(twin, errors[which])
    near = crs_components(np.vstack([errors, twin]), reference)
    exact = crs_components(np.vstack([errors, errors[which]]), reference)
    assert np.array_equal(near["S"], exact["S"]) and np.array_equal(near["Q"], exact["Q"])


@settings(max_examples=100, deadline=None)
@given(error_tables, st.randoms(use_true_random=False), st.sampled_from(["median", "enc0"]))
def test_permuting_encoders_changes_nothing(errors, random, reference):
    names = [f"enc{i}" for i in range(len(errors))]
    table = pd.DataFrame(errors, index=names, columns=list(AXES))
    order = names[:]
    random.shuffle(order)
    first = clinical_reliability_score(table, _fixed(reference))
    second = clinical_reliability_score(table.loc[order], _fixed(reference)).loc[first.index]
    pd.testing.assert_frame_equal(first, second)
