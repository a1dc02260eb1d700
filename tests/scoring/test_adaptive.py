"""The adaptive split of the CRS into its jumping part (dominance) and its smooth part (issue 47 item 3,
decision 0180).

* By construction: the CRS-difference bound built from the smooth part's interval and the dominance
  term's range over the family never exceeds the true difference when the intervals hold (random truths
  with ties and errors under the floor).
* By simulation: replicates around a truth with exact ties and an error under the floor; the adaptive
  CRS interval holds each encoder's true CRS in at least 0.95 - 2 MC SE of test sets, and "surely above"
  from the smooth route is true whenever the family holds.
* Through the bench (crs.bench.decision_coverage, small): identical encoders are all kept with the
  smooth part in the family.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_statements import _random_family

from crs.bench.decision_coverage import simulate
from crs.scoring.formula import crs_components
from crs.scoring.projection import adaptive_crs_bounds, sharper_bounds
from crs.scoring.result import score_records
from crs.scoring.settings import ScoreInputError, ScoreSettings
from crs.scoring.statements import simultaneous_statements, smooth_difference_low, smooth_part
from crs.spec import ScoreConfig, SpecError

from cohorts import cohort_records

WEIGHTS = np.array([1 / 3, 1 / 3, 1 / 3])


@pytest.mark.parametrize("reference_index", [None, 0])
def test_the_smooth_bound_never_exceeds_the_true_difference_when_the_intervals_hold(reference_index):
    rng = np.random.default_rng(180)
    checked = positive = 0
    for _ in range(400):
        truth, floor, low, high, error_low, error_high = _random_family(rng)
        better = high < 0
        known_equal = (low == 0) & (high == 0)
        above_floor, below_floor = error_low > floor, error_high < floor
        part = smooth_part(truth, floor, WEIGHTS, 0.0, reference_index)
        # an interval of each smooth-part difference that holds the truth
        smooth_low = part[:, None] - part[None, :] - rng.choice([0.0, 0.01, 0.05], size=(len(truth), len(truth)))
        bound = smooth_difference_low(smooth_low, better, known_equal, above_floor, below_floor, WEIGHTS, 0.0)
        crs = crs_components(truth, reference_index, WEIGHTS, floor)["crs"]
        true_gap = crs[:, None] - crs[None, :]
        off = ~np.eye(len(truth), dtype=bool)
        assert (bound[off] <= true_gap[off] + 1e-12).all()
        checked += off.sum()
        positive += (bound[off] > 0).sum()
    assert positive > 0.02 * checked  # the bound decides something


def _replicated(rng, truth, spread=0.012, n_boot=150):
    shared = rng.normal(0, 0.01, size=(1, 1, truth.shape[1]))
    point = truth + rng.normal(0, spread, size=truth.shape)
    return point, point[None] + rng.normal(0, spread, size=(n_boot, *truth.shape)) + shared


def test_surely_above_from_the_smooth_part_is_true_whenever_the_family_holds():
    rng = np.random.default_rng(7)
    floor = np.array([0.01, 0.06])
    truth = np.array([[0.15, 0.05], [0.15, 0.05], [0.15, 0.05], [0.25, 0.12]])  # three tie, one under the floor
    crs = crs_components(truth, None, floor=floor)["crs"]
    names = ["e0", "e1", "e2", "e3"]
    held = 0
    for _ in range(60):
        point, drawn = _replicated(rng, truth)
        found = simultaneous_statements(point, drawn, floor, ["logit", "square"], names, encoders=names, smooth=True)
        if found.holds(truth):
            held += 1
            assert {"e0", "e1", "e2"} <= set(found.leading_tier)
            assert (crs[:, None] > crs[None, :])[found.above].all()
    assert held >= 50


@pytest.mark.parametrize("pretest", [None, 2.0], ids=["one family", "pretest"])
@pytest.mark.parametrize("truth", [
    np.array([[0.15, 0.05], [0.15, 0.05], [0.15, 0.05], [0.25, 0.12]]),  # exact ties, one axis at the floor
    np.array([[0.10, 0.03], [0.15, 0.08], [0.20, 0.12], [0.25, 0.20]]),  # every order settled
], ids=["ties", "separated"])
def test_the_adaptive_interval_holds_each_true_crs_at_its_level(truth, pretest):
    rng = np.random.default_rng(11)
    floor = np.array([0.01, 0.04])
    crs = crs_components(truth, None, floor=floor)["crs"]
    data_sets = 150
    hits = np.zeros(len(truth))
    width = sharper = 0.0
    for _ in range(data_sets):
        point, drawn = _replicated(rng, truth, n_boot=200)
        low, high = adaptive_crs_bounds(point, drawn, floor, None, pretest=pretest)
        hits += (low <= crs + 1e-12) & (crs <= high + 1e-12)
        width += float(np.mean(high - low))
        box_low, box_high = sharper_bounds(point, drawn, floor, None)["crs"]
        sharper += float(np.mean(box_high - box_low))
    assert hits.min() / data_sets >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / data_sets), hits / data_sets
    if pretest is not None:
        assert width < 0.85 * sharper  # away from the corners the sharper box has to take


def test_with_a_margin_the_adaptive_interval_is_the_sharper_box():
    rng = np.random.default_rng(3)
    truth = np.array([[0.10, 0.03], [0.15, 0.08], [0.20, 0.12]])
    point, drawn = _replicated(rng, truth)
    floor = np.array([0.01, 0.01])
    adaptive = adaptive_crs_bounds(point, drawn, floor, None, margin=0.05)
    box = sharper_bounds(point, drawn, floor, None, margin=0.05)["crs"]
    np.testing.assert_allclose(adaptive, box)


@pytest.mark.parametrize("count", [2, 4, 5])
@pytest.mark.parametrize("kind", ["calibrated", "overconfident"])
def test_identical_encoders_are_all_kept_with_the_smooth_part(count, kind):
    found = simulate(f"{count} identical {kind}, 400", data_sets=40, n_boot=100, truth_patients=20_000)
    option = "+ smooth part (0180)"
    assert found.rates[f"tier valid | {option}"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 40), found.rates
    assert found.rates["worst coverage | adaptive (0180)"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 40)


def test_a_clearly_better_encoder_is_named_alone_where_the_bound_alone_could_not():
    """Far better on AUROC, within noise on calibration: no dominance either way can make calm's CRS reach
    sharp's, but the worst-case bound over the box (decision 0166) could not see it; the smooth part's own
    interval can."""
    rng = np.random.default_rng(1)
    truth = np.array([[0.08, 0.055], [0.25, 0.05], [0.30, 0.10]])
    floor = np.array([0.01, 0.01])
    names = ["sharp", "calm", "weak"]
    crs = crs_components(truth, None, floor=floor)["crs"]
    assert crs[0] > crs[1] > crs[2]
    alone = {False: 0, True: 0}
    for _ in range(40):
        point = truth + rng.normal(0, 0.004, size=truth.shape)
        drawn = point[None] + rng.normal(0, 0.004, size=(200, *truth.shape))
        for smooth in alone:
            found = simultaneous_statements(point, drawn, floor, ["logit", "square"], names, encoders=names,
                                            smooth=smooth)
            alone[smooth] += found.leading_tier == ("sharp",)
    assert alone[True] >= 36 and alone[False] <= 4, alone


def test_the_score_reads_its_headline_method_from_the_settings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = cohort_records(5, seed=3)
        default = score_records(records, n_boot=100).summary()["headline_family"]
        bound = score_records(records, ScoreSettings(n_boot=100, headline="bound")).summary()["headline_family"]
    assert default["smooth"] is True and bound["smooth"] is False
    with pytest.raises(ScoreInputError, match="headline must be one of"):
        ScoreSettings(headline="nope")
    with pytest.raises(SpecError, match="headline must be one of"):
        ScoreConfig(headline="nope")
    assert ScoreSettings.from_config(ScoreConfig(headline="stepdown")).headline == "stepdown"


def test_interval_adaptive_prints_the_adaptive_crs_interval():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = cohort_records(5, seed=3)
        found = score_records(records, ScoreSettings(n_boot=100, interval="adaptive"))
    table = found.bootstrap.table
    assert found.summary()["interval"]["method"] == "adaptive"
    assert (table["crs_low"] <= table["crs"] + 1e-12).all() and (table["crs"] <= table["crs_high"] + 1e-12).all()
    assert not np.allclose(table["crs_low"], table["crs_box_low"])  # not the sharper box's
    from crs.report.tables import interval_note

    note = interval_note(found.bootstrap)  # the CRS's own words; the axes are the box's (decision 0181)
    assert "smooth part" in note and "simultaneous box over every encoder's axis errors" in note
    with pytest.raises(SpecError, match="'adaptive'"):
        ScoreConfig(interval="corners")
