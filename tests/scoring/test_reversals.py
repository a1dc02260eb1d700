"""AUROC-vs-CRS reversals with bootstrap shares and the noise baseline (crs.scoring.reversals), by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.scoring.formula import ScoreInputError
from crs.scoring.reversals import auroc_crs_reversals, noise_baseline

NAMES = ["a", "b", "c"]


def _three_encoders():
    """AUROC ranks a > b > c in the point estimate and every replicate; the CRS varies.

    CRS point (a .5, b .7, c .6): (a, b) and (a, c) reversed, (b, c) not -> 2 reversals.
    Replicates: r0 = r1 = point (2 reversals); r2 (a .8, b .7, c .6) none; r3 (a .5, b .6, c .7) all 3.
    """
    auroc = pd.Series([0.9, 0.8, 0.7], index=NAMES)
    crs = pd.Series([0.5, 0.7, 0.6], index=NAMES)
    auroc_replicates = np.tile(auroc.to_numpy(), (4, 1))
    crs_replicates = np.array([[0.5, 0.7, 0.6], [0.5, 0.7, 0.6], [0.8, 0.7, 0.6], [0.5, 0.6, 0.7]])
    return auroc, crs, auroc_replicates, crs_replicates


def test_shares_counts_and_interval_by_hand():
    result = auroc_crs_reversals(*_three_encoders(), level=0.75, alpha=0.5)
    pairs = result.pairs.set_index(["first", "second"])
    # (a, b) and (a, c) reversed in r0, r1, r3 -> 3 / 4; (b, c) only in r3 -> 1 / 4
    assert pairs.loc[("a", "b"), "p_reversed"] == 0.75 and pairs.loc[("a", "c"), "p_reversed"] == 0.75
    assert pairs.loc[("b", "c"), "p_reversed"] == 0.25
    assert (
        pairs["p_opposite"] == 0
    ).all()  # AUROC never flips, so every reversal has the point's orientation
    assert pairs["reversed"].tolist() == [True, True, False]
    assert result.n_reversed == 2 and result.n_pairs == 3
    assert result.n_robust == 2  # held in >= 75 % of replicates
    assert result.replicate_counts.tolist() == [2, 2, 0, 3]
    # quantiles 0.25 / 0.75 of (0, 2, 2, 3), linear: 0 + 0.75 x 2 = 1.5 and 2 + 0.25 x 1 = 2.25
    assert (result.count_low, result.count_high) == pytest.approx((1.5, 2.25))
    # noise: r0 vs r2 order (a, b) and (a, c) oppositely -> 2; r1 vs r3 only (b, c) -> 1
    assert result.noise.loc["crs", "mean"] == 1.5
    assert result.noise.loc["auroc"].tolist() == [0.0, 0.0, 0.0]
    assert result.summary()["robust_pairs"] == [["a", "b"], ["a", "c"]]


def test_none_robust_at_95_percent():
    assert auroc_crs_reversals(*_three_encoders()).n_robust == 0


def test_a_reversal_that_flips_orientation_is_not_robust():
    # AUROC and CRS always disagree on (x, y), but half the time x leads AUROC and half the time y does:
    # reversed in every replicate, yet neither order holds, so not a robust reversal.
    auroc, crs = pd.Series([0.8, 0.7], index=["x", "y"]), pd.Series([0.6, 0.7], index=["x", "y"])
    auroc_replicates = np.array([[0.8, 0.7], [0.7, 0.8]] * 10)
    crs_replicates = np.array([[0.6, 0.7], [0.7, 0.6]] * 10)
    result = auroc_crs_reversals(auroc, crs, auroc_replicates, crs_replicates)
    row = result.pairs.iloc[0]
    assert (row["p_reversed"], row["p_as_point"], row["p_opposite"]) == (1.0, 0.5, 0.5)
    assert result.n_reversed == 1 and result.n_robust == 0


def test_ties_are_not_reversals():
    auroc, crs = pd.Series([0.8, 0.7], index=["x", "y"]), pd.Series([0.7, 0.7], index=["x", "y"])
    result = auroc_crs_reversals(auroc, crs, np.array([[0.8, 0.7]] * 4), np.array([[0.7, 0.7]] * 4))
    assert result.n_reversed == 0 and result.replicate_counts.tolist() == [0, 0, 0, 0]


def test_noise_baseline_pairs_disjoint_replicates():
    # replicate 0 vs 2: order of (0, 1) flips -> 1; replicate 1 vs 3: (0, 1) and (0, 2) flip -> 2
    replicates = np.array([[2.0, 1.0, 0.0], [3.0, 1.0, 2.0], [1.0, 2.0, 0.0], [0.0, 1.0, 2.0]])
    mean, low, high = noise_baseline(replicates, (0.0, 1.0))
    assert (mean, low, high) == (1.5, 1.0, 2.0)


def test_replicates_must_be_paired_and_finite():
    auroc, crs, auroc_replicates, crs_replicates = _three_encoders()
    with pytest.raises(ScoreInputError, match="same draws"):
        auroc_crs_reversals(auroc, crs, auroc_replicates, crs_replicates[:3])
    crs_replicates[0, 0] = np.nan
    with pytest.raises(ScoreInputError, match="NaN"):
        auroc_crs_reversals(auroc, crs, auroc_replicates, crs_replicates)
