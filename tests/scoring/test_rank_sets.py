"""Simultaneous rank confidence sets (crs.scoring.rank_sets): hand cases and a coverage simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.scoring.formula import ScoreInputError
from crs.scoring.rank_sets import p_rank_one, rank_best_first, rank_confidence_sets

NAMES = [f"e{j}" for j in range(10)]


def test_ranks_share_the_better_rank_on_ties():
    assert rank_best_first(np.array([0.3, 0.9, 0.3, 0.1])).tolist() == [2, 1, 2, 4]


def test_p_rank_one_splits_ties():
    replicates = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    # replicate 2 is a tie between encoders 0 and 1: half each -> (1 + 0.5) / 4, (0.5 + 1) / 4, 1 / 4
    assert p_rank_one(replicates) == pytest.approx([0.375, 0.375, 0.25])


def test_well_separated_encoders_get_single_ranks():
    rng = np.random.default_rng(0)
    point = pd.Series([0.9, 0.5, 0.7], index=["a", "b", "c"])
    replicates = pd.DataFrame(point.to_numpy() + rng.normal(0, 0.01, (300, 3)), columns=point.index)
    sets = rank_confidence_sets(point, replicates)
    assert sets.table.index.tolist() == ["a", "c", "b"]
    assert sets.table["rank_low"].tolist() == [1, 2, 3] and sets.table["rank_high"].tolist() == [1, 2, 3]
    assert sets.leading_tier == ("a",)
    assert sets.table.loc["a", "p_rank1"] == 1.0


def test_indistinguishable_encoders_share_every_rank_and_all_lead():
    rng = np.random.default_rng(1)
    replicates = rng.normal(0.0, 1.0, (400, 4))
    sets = rank_confidence_sets(np.zeros(4), replicates, NAMES[:4])
    assert (sets.table["rank_low"] == 1).all() and (sets.table["rank_high"] == 4).all()
    assert set(sets.leading_tier) == set(NAMES[:4])


def test_stepdown_is_never_wider_than_single_step():
    rng = np.random.default_rng(2)
    point = np.linspace(0, 1, 8)
    replicates = point + rng.normal(0, 0.15, (500, 8))
    step = rank_confidence_sets(point, replicates, NAMES[:8], stepdown=True).table.sort_index()
    single = rank_confidence_sets(point, replicates, NAMES[:8], stepdown=False).table.sort_index()
    assert (step["rank_low"] >= single["rank_low"]).all() and (step["rank_high"] <= single["rank_high"]).all()


def test_bad_inputs_raise():
    with pytest.raises(ScoreInputError, match="NaN"):
        rank_confidence_sets(np.zeros(2), np.array([[0.0, np.nan], [0.0, 1.0]]), ["a", "b"])
    with pytest.raises(ScoreInputError, match="replicates must be"):
        rank_confidence_sets(np.zeros(3), np.zeros((5, 2)), ["a", "b", "c"])
    with pytest.raises(ScoreInputError, match="lack encoders"):
        rank_confidence_sets(pd.Series([0.0, 1.0], index=["a", "b"]), pd.DataFrame({"a": [0.0, 1.0]}))


def _naive_sets(point: np.ndarray, replicates: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair marginal percentile intervals of the difference, no multiplicity adjustment (the negative control)."""
    n = len(point)
    first, second = np.triu_indices(n, k=1)
    low, high = np.quantile(replicates[:, first] - replicates[:, second], [alpha / 2, 1 - alpha / 2], axis=0)
    better = np.zeros((n, n), dtype=bool)
    better[first[low > 0], second[low > 0]] = True
    better[second[high < 0], first[high < 0]] = True
    return 1 + better.sum(axis=0), n - better.sum(axis=1)


def test_simultaneous_coverage_of_the_true_ranks():
    """Coverage of all ten true ranks at once, 500 repetitions.

    Ten encoders with true scores in tied blocks and clear gaps (0, 0, 0, 0.15, 0.3, 0.3, 0.5, 0.8,
    0.8, 1.2); each estimate is the mean over 200 shared cases (a case effect shared by all
    encoders, SD 0.6, plus noise SD 1), bootstrap 300 case resamples. Monte Carlo SE of a 0.95
    coverage over 500 repetitions: 0.0097, so the bound is 0.95 - 3 SE = 0.92. Measured at writing:
    0.982 here (0.981 over 1,000 repetitions of another seed; mean set width 3.1 ranks), while
    unadjusted per-pair intervals cover only 0.81 (0.79), which this test also checks, so it can
    tell a procedure that ignores multiplicity.
    """
    theta = np.array([0.0, 0.0, 0.0, 0.15, 0.3, 0.3, 0.5, 0.8, 0.8, 1.2])
    true_rank = rank_best_first(theta)
    n_cases, n_boot, repetitions = 200, 300, 500
    rng = np.random.default_rng(0)
    covered, naive_covered, widths = [], [], []
    for _ in range(repetitions):
        cases = theta + 0.6 * rng.normal(0, 1, (n_cases, 1)) + rng.normal(0, 1, (n_cases, len(theta)))
        draws = rng.integers(0, n_cases, size=(n_boot, n_cases)) + n_cases * np.arange(n_boot)[:, None]
        counts = np.bincount(draws.ravel(), minlength=n_boot * n_cases).reshape(n_boot, n_cases)
        replicates = counts @ cases / n_cases
        point = cases.mean(axis=0)
        table = rank_confidence_sets(point, replicates, NAMES).table.reindex(NAMES)
        low, high = table["rank_low"].to_numpy(), table["rank_high"].to_numpy()
        covered.append(bool(((low <= true_rank) & (true_rank <= high)).all()))
        widths.append(float((high - low).mean()))
        naive_low, naive_high = _naive_sets(point, replicates, 0.05)
        naive_covered.append(bool(((naive_low <= true_rank) & (true_rank <= naive_high)).all()))
    monte_carlo_se = np.sqrt(0.95 * 0.05 / repetitions)
    assert np.mean(covered) >= 0.95 - 3 * monte_carlo_se
    assert np.mean(naive_covered) < 0.95 - 3 * monte_carlo_se  # the check can fail
    assert np.mean(widths) < 5.0  # and the sets say something (a set of all ten ranks has width 9)
