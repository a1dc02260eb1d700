"""The CRS contract on random cohorts of run records (DESIGN sections 7 and 8).

Cohorts: 10-12 encoders x 3 tasks, 3 label fractions, 2 seeds, 3 corruption conditions on every
task and a shift target on one (tests/scoring/cohorts.py). Properties, with the other encoders fixed:

* raising any single AUROC record of an encoder never lowers its CRS point estimate;
* lowering any of its calibration errors never lowers it;
* an encoder that Pareto-dominates another on every measurement scores at least as high, and
  strictly higher when the dominance survives the error floors;
* float-equal axes never decide a dominance: a twin nudged by a few ulps scores like an exact copy
  (tests/scoring/test_score.py has the error-table form).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crs.scoring.formula import ScoreInputError, point_estimate
from crs.scoring.measurements import measure
from crs.scoring.result import score_records
from crs.scoring.settings import ScoreSettings

from cohorts import cohort_records


def _crs(records: pd.DataFrame, score_settings: ScoreSettings) -> pd.Series:
    measurements = measure(records, score_settings)
    point = point_estimate(measurements.axis_errors(), measurements.axis_standard_errors(), score_settings)
    return point.table["crs"]


references = st.sampled_from(["median", "e00", "e03"])
cohorts = st.tuples(st.integers(10, 12), st.integers(0, 10_000))


def _raise_auroc(records: pd.DataFrame, row: int, delta: float, score_settings: ScoreSettings) -> None:
    encoder = records.at[row, "encoder"]
    before = _crs(records, score_settings)[encoder]
    raised = records.copy()
    raised.at[row, "auroc"] = min(raised.at[row, "auroc"] + delta, 1.0)
    after = _crs(raised, score_settings)[encoder]
    assert after >= before - 1e-12, (records.loc[row].to_dict(), before, after)


@settings(max_examples=40, deadline=None)
@given(cohorts, st.integers(0, 10_000), st.floats(1e-6, 0.3), references)
def test_raising_any_auroc_record_never_lowers_that_encoders_crs(cohort, pick, delta, reference):
    records = cohort_records(*cohort)
    _raise_auroc(records, pick % len(records), delta, ScoreSettings(reference=reference))


@settings(max_examples=80, deadline=None)
@given(cohorts, st.integers(0, 10_000), st.floats(0.01, 0.2), references)
def test_raising_a_clean_auroc_never_lowers_that_encoders_crs(cohort, pick, delta, reference):
    # the record a ratio axis (retention against the clean AUROC) would punish: scoring retention
    # fails this test in about 7 % of draws (checked by mutating the formula)
    records = cohort_records(*cohort)
    clean_full = records.index[(records["condition"] == "clean") & (records["label_fraction"] == 1.0)]
    _raise_auroc(records, clean_full[pick % len(clean_full)], delta, ScoreSettings(reference=reference))


@settings(max_examples=60, deadline=None)
@given(cohorts, st.integers(0, 10_000), st.floats(1e-6, 0.2), references)
def test_lowering_any_calibration_error_never_lowers_that_encoders_crs(cohort, pick, delta, reference):
    records = cohort_records(*cohort)
    score_settings = ScoreSettings(reference=reference)
    scored = records.index[(records["condition"] == "clean") & (records["label_fraction"] == 1.0)]
    row = scored[pick % len(scored)]  # only these calibration errors are scored; others cannot move it
    encoder = records.at[row, "encoder"]
    before = _crs(records, score_settings)[encoder]
    lowered = records.copy()
    lowered.at[row, "ece_debiased"] -= delta  # may go below 0: "within noise of calibrated"
    lowered.at[row, "ece"] = max(lowered.at[row, "ece"] - delta, 0.0)
    after = _crs(lowered, score_settings)[encoder]
    assert after >= before - 1e-12


@settings(max_examples=40, deadline=None)
@given(cohorts, st.integers(0, 11), st.integers(0, 11), st.floats(0.0, 0.05), st.floats(0.0, 0.05), references)
def test_an_encoder_that_pareto_dominates_another_scores_higher(cohort, better, worse, auroc_gap, ece_gap, reference):
    records = cohort_records(*cohort)
    names = sorted(records["encoder"].unique())
    better, worse = names[better % len(names)], names[worse % len(names)]
    if better == worse:
        return
    # "worse" becomes a copy of "better" that is lower on every AUROC and worse calibrated; the gaps
    # may be zero on one of them (weak dominance), each record gets its own extra gap
    rng = np.random.default_rng(cohort[1])
    copy = records[records["encoder"] == better].copy()
    copy["encoder"] = worse
    copy["auroc"] = copy["auroc"] - auroc_gap * rng.uniform(0.5, 1.0, len(copy))
    copy["ece_debiased"] = copy["ece_debiased"] + ece_gap * rng.uniform(0.5, 1.0, len(copy))
    records = pd.concat([records[records["encoder"] != worse], copy], ignore_index=True)
    score_settings = ScoreSettings(reference=reference)
    measurements = measure(records, score_settings)
    point = point_estimate(measurements.axis_errors(), measurements.axis_standard_errors(), score_settings)
    crs = point.table["crs"]
    assert crs[better] >= crs[worse] - 1e-12
    u = point.table[[f"u_{axis}" for axis in point.axes]]
    if (u.loc[better] - u.loc[worse] > score_settings.strict_margin).any():
        assert crs[better] > crs[worse]


@settings(max_examples=25, deadline=None)
@given(cohorts, st.integers(0, 11), st.integers(1, 4), references)
def test_float_equal_axes_never_decide_a_dominance_on_records(cohort, which, ulps, reference):
    # a twin of one encoder whose every AUROC and calibration error differs from its own by a few
    # ulps dominates nobody the original does not, and is dominated by nobody who does not dominate it
    records = cohort_records(*cohort)
    name = sorted(records["encoder"].unique())[which % records["encoder"].nunique()]
    original = records[records["encoder"] == name]
    twin = original.assign(encoder="twin")
    nudged = twin.assign(auroc=twin["auroc"] + ulps * np.spacing(twin["auroc"].to_numpy()),
                         ece_debiased=twin["ece_debiased"] - ulps * np.spacing(twin["ece_debiased"].to_numpy()))
    score_settings = ScoreSettings(reference=reference)
    exact = _table(pd.concat([records, twin], ignore_index=True), score_settings)
    near = _table(pd.concat([records, nudged], ignore_index=True), score_settings)
    assert near["S"].equals(exact["S"]) and near["Q"].equals(exact["Q"])


def _table(records: pd.DataFrame, score_settings: ScoreSettings) -> pd.DataFrame:
    measurements = measure(records, score_settings)
    return point_estimate(measurements.axis_errors(), measurements.axis_standard_errors(), score_settings).table


def test_score_records_point_estimate_is_monotone_too():
    records = cohort_records(10, seed=3)
    base = score_records(records, n_boot=20, n_weight_samples=20).crs["crs"]
    for row in (0, 17, len(records) - 1):
        raised = records.copy()
        raised.at[row, "auroc"] += 0.05
        encoder = records.at[row, "encoder"]
        assert score_records(raised, n_boot=20, n_weight_samples=20).crs.loc[encoder, "crs"] >= base[encoder] - 1e-12


def test_a_task_missing_for_one_encoder_is_a_one_line_error_naming_both():
    records = cohort_records(10, seed=0)
    holed = records[~((records["encoder"] == "e04") & (records["task"] == "fundus"))]
    with pytest.raises(ScoreInputError) as error:
        score_records(holed, n_boot=5, n_weight_samples=5)
    message = str(error.value)
    assert "'fundus'" in message and "'e04'" in message and "\n" not in message


def test_a_condition_missing_for_one_encoder_is_an_error_naming_it():
    records = cohort_records(10, seed=0)
    holed = records[~((records["encoder"] == "e02") & (records["corruption"] == "noise") & (records["task"] == "derm"))]
    with pytest.raises(ScoreInputError, match=r"task 'derm'.*'e02'.*noise/2"):
        score_records(holed, n_boot=5, n_weight_samples=5)


def test_records_without_the_debiased_calibration_error_name_the_fix():
    records = cohort_records(10, seed=0).drop(columns=["ece_debiased"])
    with pytest.raises(ScoreInputError, match="ece_debiased.*crs probe"):
        score_records(records, n_boot=5, n_weight_samples=5)


def test_records_without_standard_errors_need_a_numeric_floor():
    records = cohort_records(10, seed=0).drop(columns=["auroc_se", "ece_se"])
    with pytest.raises(ScoreInputError, match="auroc_se.*error_floor"):
        score_records(records, n_boot=5, n_weight_samples=5)
    assert len(score_records(records, n_boot=5, n_weight_samples=5, error_floor=1e-3).crs) == 10


# --- with the optional equity axis (worst-group AUROC, crs.scoring.subgroups) ------------------------


def _subgroup_table(records: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Scored clean groups per encoder, task and attribute (sex: 2, age: 3), AUROCs around the encoder's clean AUROC."""
    rng = np.random.default_rng(seed)
    clean = records[(records["condition"] == "clean") & (records["label_fraction"] == 1.0)]
    rows = []
    for (encoder, task), auroc in clean.groupby(["encoder", "task"])["auroc"].mean().items():
        for attribute, groups in (("sex", ("female", "male")), ("age", ("<40", "40-59", "60+"))):
            for group in groups:
                rows.append({"encoder": encoder, "task": task, "condition": "clean", "attribute": attribute,
                             "group": group, "scored": True, "auroc": min(auroc + rng.normal(0, 0.03), 1.0)})
    return pd.DataFrame(rows)


def _crs_with_equity(records: pd.DataFrame, groups: pd.DataFrame, reference: str) -> pd.Series:
    """The point CRS with equity on, assembled as crs.scoring.result._score_cohort does (errors + equity column,
    its standard error beside the others)."""
    from crs.scoring.equity import equity_error

    score_settings = ScoreSettings(reference=reference, equity=True, case_level=True)
    measurements = measure(records, score_settings)
    errors, standard_errors = measurements.axis_errors(), measurements.axis_standard_errors()
    encoders = sorted(str(e) for e in errors.index)
    errors = errors.assign(equity=equity_error(groups, encoders))
    standard_errors = standard_errors.assign(equity=0.01)
    return point_estimate(errors, standard_errors, score_settings).table["crs"]


@settings(max_examples=60, deadline=None)
@given(cohorts, st.integers(0, 10_000), st.floats(1e-6, 0.2), references)
def test_with_equity_raising_any_group_auroc_never_lowers_that_encoders_crs(cohort, pick, delta, reference):
    records = cohort_records(*cohort)
    groups = _subgroup_table(records, cohort[1])
    row = pick % len(groups)
    encoder = groups.at[row, "encoder"]
    before = _crs_with_equity(records, groups, reference)[encoder]
    raised = groups.copy()
    raised.at[row, "auroc"] = min(raised.at[row, "auroc"] + delta, 1.0)
    after = _crs_with_equity(records, raised, reference)[encoder]
    assert after >= before - 1e-12


@settings(max_examples=40, deadline=None)
@given(cohorts, st.integers(0, 10_000), st.floats(1e-6, 0.3), references)
def test_with_equity_raising_any_auroc_record_never_lowers_that_encoders_crs(cohort, pick, delta, reference):
    records = cohort_records(*cohort)
    groups = _subgroup_table(records, cohort[1])
    row = pick % len(records)
    encoder = records.at[row, "encoder"]
    before = _crs_with_equity(records, groups, reference)[encoder]
    raised = records.copy()
    raised.at[row, "auroc"] = min(raised.at[row, "auroc"] + delta, 1.0)
    after = _crs_with_equity(raised, groups, reference)[encoder]
    assert after >= before - 1e-12


def test_without_equity_the_crs_is_the_four_axis_one():
    """equity off: no fifth column anywhere, the CRS exactly as before (the golden score tables pin it too)."""
    records = cohort_records(10, seed=5)
    four = _crs(records, ScoreSettings())
    measurements = measure(records, ScoreSettings())
    point = point_estimate(measurements.axis_errors(), measurements.axis_standard_errors(), ScoreSettings())
    assert point.axes == ("discrimination", "calibration", "label_efficiency", "robustness")
    assert "u_equity" not in point.table and "equity" not in point.floor
    with_equity = _crs_with_equity(records, _subgroup_table(records, 5), "median")
    assert not np.allclose(with_equity.to_numpy(), four.to_numpy())
