"""The headline's one simultaneous family (issue 47 items 1 and 2, decision 0166).

* By construction: whenever every interval of the family holds the truth, every "surely above" is true of
  the true CRS (random truths with ties and floors, random intervals around them), so encoders that tie
  for the lead are never left out of the tier then.
* By simulation (crs.bench.decision_coverage, small): 2, 4 and 5 identical encoders, calibrated and
  overconfident, are all kept in at least 0.95 - 2 MC SE of test sets (the CRS rank sets lost one in about
  10 % with four or five identical overconfident encoders).
* Through ``score_records``: the tier, the rank sets and the comparisons the headline words come from
  that one family, and the summary says so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crs.bench.decision_coverage import simulate
from crs.scoring.formula import crs_components
from crs.scoring.result import score_records
from crs.scoring.statements import crs_difference_low, simultaneous_statements

from cohorts import cohort_records


def _random_family(rng: np.random.Generator):
    """True errors with ties and values under the floor, and intervals (differences, box) that hold them."""
    n_encoders, n_axes = int(rng.integers(3, 6)), int(rng.integers(2, 5))
    levels = rng.uniform(0.0, 0.3, size=(3, n_axes))
    truth = levels[rng.integers(0, 3, size=n_encoders)] + rng.choice([0.0, 0.02], size=(n_encoders, n_axes))
    floor = rng.uniform(0.0, 0.1, size=n_axes)
    difference = truth.T[:, :, None] - truth.T[:, None, :]
    width = rng.choice([0.0, 0.005, 0.03, 0.1], size=difference.shape)
    width = np.triu(width, 1) + np.transpose(np.triu(width, 1), (0, 2, 1))
    below, above = rng.uniform(0, 1, difference.shape), rng.uniform(0, 1, difference.shape)
    low = difference - width * np.triu(below, 1) - width * np.transpose(np.triu(above, 1), (0, 2, 1))
    high = difference + width * np.triu(above, 1) + width * np.transpose(np.triu(below, 1), (0, 2, 1))
    box = rng.choice([0.0, 0.01, 0.05], size=truth.shape)
    error_low = np.maximum(truth - box * rng.uniform(0, 1, truth.shape), 0.0)
    error_high = truth + box * rng.uniform(0, 1, truth.shape)
    return truth, floor, low, high, error_low, error_high


@pytest.mark.parametrize("reference_index", [None, 0])
def test_the_crs_bound_never_exceeds_the_true_difference_when_the_intervals_hold(reference_index):
    rng = np.random.default_rng(47)
    weights = np.array([1 / 3, 1 / 3, 1 / 3])
    checked = positive = 0
    for _ in range(400):
        truth, floor, low, high, error_low, error_high = _random_family(rng)
        better = high < 0
        known_equal = (low == 0) & (high == 0)
        above_floor, below_floor = error_low > floor, error_high < floor
        bound = crs_difference_low(truth, low, error_low, error_high, floor, better, known_equal, above_floor,
                                   below_floor, weights, 0.0, reference_index)
        crs = crs_components(truth, reference_index, weights, floor)["crs"]
        true_gap = crs[:, None] - crs[None, :]
        off = ~np.eye(len(truth), dtype=bool)
        assert (bound[off] <= true_gap[off] + 1e-12).all()
        checked += off.sum()
        positive += (bound[off] > 0).sum()
    assert positive > 0.02 * checked  # the bound decides something, not only -inf


def test_surely_above_is_true_whenever_the_family_holds():
    """Replicates made around a truth with exact ties: whenever the family's intervals hold the truth, no
    encoder tied for the lead is left out and every "surely above" is true."""
    rng = np.random.default_rng(5)
    truth = np.array([[0.15, 0.05], [0.15, 0.05], [0.15, 0.05], [0.25, 0.12]])  # three tie for the lead
    crs = crs_components(truth, None, floor=np.array([0.01, 0.02]))["crs"]
    held = 0
    for _ in range(60):
        shared = rng.normal(0, 0.01, size=(1, 1, 2))
        point = truth + rng.normal(0, 0.012, size=truth.shape)
        drawn = point[None] + rng.normal(0, 0.012, size=(150, *truth.shape)) + shared
        found = simultaneous_statements(point, drawn, np.array([0.01, 0.02]), ["logit", "square"],
                                        ["e0", "e1", "e2", "e3"], encoders=["e0", "e1", "e2", "e3"])
        if found.holds(truth):
            held += 1
            assert {"e0", "e1", "e2"} <= set(found.leading_tier)
            assert (crs[:, None] > crs[None, :])[found.above].all()
    assert held >= 50


@pytest.mark.parametrize("count", [2, 4, 5])
@pytest.mark.parametrize("kind", ["calibrated", "overconfident"])
def test_identical_encoders_are_all_kept_in_the_tier(count, kind):
    found = simulate(f"{count} identical {kind}, 400", data_sets=40, n_boot=100, truth_patients=20_000)
    kept = found.rates["tier valid | one family (0166, default)"]
    assert kept >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 40), found.rates
    assert found.rates["leader lost while the family held | one family (0166, default)"] == 0.0


def test_the_score_reads_its_tier_and_comparisons_off_one_family():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = score_records(cohort_records(5, seed=3), n_boot=100)
    family = found.statements
    assert family is not None and found.comparisons is family.comparisons
    assert found.bootstrap.leading_tier == family.leading_tier
    assert list(found.crs.index[found.crs["in_leading_tier"]].sort_values()) == sorted(family.leading_tier)
    sets = family.rank_sets()
    assert (found.crs.loc[sets.index, "rank_low"].to_numpy() == sets["rank_low"].to_numpy()).all()
    summary = found.summary()["headline_family"]
    assert summary["leading_tier"] == list(family.leading_tier) and summary["level"] == 0.95
    # a tier member is never surely below another contestant; anyone left out is
    for name in found.crs.index:
        j = family.encoders.index(name)
        assert (name in family.leading_tier) == (not family.above[:, j].any())
