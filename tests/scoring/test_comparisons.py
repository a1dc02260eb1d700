"""Dominance with confidence (issue 40 item 2): simultaneous intervals on every pairwise difference of
axis errors, checked against an independent brute-force computation and on planted cases whose answer
is written here with its derivation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from crs.scoring.comparisons import ComparisonInputError, pairwise_comparisons


def _brute_force(point, replicates, alpha):
    """Loops over every pair and axis; dominance by checking points of a grid over the box."""
    n_boot, n_encoders, n_axes = replicates.shape
    pairs = [(j, k) for j in range(n_encoders) for k in range(n_encoders) if j < k]
    se, largest = {}, [0.0] * n_boot
    for a in range(n_axes):
        for j, k in pairs:
            d = point[j, a] - point[k, a]
            series = [replicates[b, j, a] - replicates[b, k, a] for b in range(n_boot)]
            mean = sum(series) / n_boot
            sd = math.sqrt(sum((x - mean) ** 2 for x in series) / (n_boot - 1))
            se[a, j, k] = sd
            if sd > 1e-12:
                for b in range(n_boot):
                    largest[b] = max(largest[b], abs(series[b] - d) / sd)
    ordered = sorted(largest)
    position = (1 - alpha) * (n_boot - 1)  # numpy's default (linear) quantile, written out
    below = int(math.floor(position))
    c = ordered[below] + (position - below) * (ordered[min(below + 1, n_boot - 1)] - ordered[below])
    box = {}
    for a in range(n_axes):
        for j in range(n_encoders):
            for k in range(n_encoders):
                if j == k:
                    continue
                d = point[j, a] - point[k, a]
                s = se[a, min(j, k), max(j, k)]
                half = c * s if s > 1e-12 else 0.0
                box[a, j, k] = (d - half, d + half)
    surely = np.zeros((n_encoders, n_encoders), dtype=bool)
    possibly = np.zeros((n_encoders, n_encoders), dtype=bool)
    for j in range(n_encoders):
        for k in range(n_encoders):
            if j == k:
                continue
            grids = [(box[a, j, k][0], 0.5 * (box[a, j, k][0] + box[a, j, k][1]), box[a, j, k][1]) for a in range(n_axes)]
            verdicts = [all(x <= 0 for x in p) and any(x < 0 for x in p) for p in itertools.product(*grids)]
            surely[j, k], possibly[j, k] = all(verdicts), any(verdicts)
    return c, box, surely, possibly


@pytest.mark.parametrize("seed", range(8))
def test_agrees_with_a_brute_force_computation_on_random_inputs(seed):
    rng = np.random.default_rng(seed)
    n_encoders, n_axes, n_boot = int(rng.integers(2, 6)), int(rng.integers(1, 5)), 60
    truth = rng.uniform(0.05, 0.4, size=(n_encoders, n_axes))
    shared = rng.normal(0, 0.05, size=(n_boot, 1, n_axes))  # the same resample moves every encoder
    own = rng.normal(0, rng.uniform(0.002, 0.03), size=(n_boot, n_encoders, n_axes))
    replicates = truth[None] + shared + own
    found = pairwise_comparisons(truth, replicates, alpha=0.1)
    c, box, surely, possibly = _brute_force(truth, replicates, 0.1)
    assert found.critical == pytest.approx(c, rel=1e-12)
    for (a, j, k), (low, high) in box.items():
        assert found.low[a, j, k] == pytest.approx(low, abs=1e-12)
        assert found.high[a, j, k] == pytest.approx(high, abs=1e-12)
    np.testing.assert_array_equal(found.surely_dominates, surely)
    np.testing.assert_array_equal(found.possibly_dominates, possibly)
    np.testing.assert_array_equal(found.confident_pareto, ~surely.any(axis=0))
    assert (found.surely_dominates <= found.possibly_dominates).all()  # sure implies possible


def test_shared_noise_cancels_so_differences_are_known_exactly():
    """Three encoders, two axes; every replicate moves all encoders by the same (large) amount, so every
    difference is the point difference in every replicate (se 0, interval = the point):
    A (0.1, 0.2) beats B (0.2, 0.3) on both axes: A surely dominates B. C (0.05, 0.4) beats A and B on
    axis 0 and loses on axis 1: no dominance either way. Confident Pareto set {A, C}."""
    point = np.array([[0.1, 0.2], [0.2, 0.3], [0.05, 0.4]])
    noise = np.random.default_rng(1).normal(0, 0.5, size=(200, 1, 2))
    found = pairwise_comparisons(point, point[None] + noise, encoders=["A", "B", "C"], axes=["x", "y"])
    assert np.allclose(found.low, found.difference, atol=1e-12) and np.allclose(found.high, found.difference, atol=1e-12)
    assert found.surely_dominates.tolist() == [[False, True, False], [False, False, False], [False, False, False]]
    assert found.possibly_dominates.tolist() == found.surely_dominates.tolist()
    assert found.confident_pareto.tolist() == [True, False, True]
    assert found.better_than("C", "x") == ["A", "B"] and found.better_than("A", "y") == ["B", "C"]
    assert found.encoder_table().loc["A", "surely_dominates"] == "B"


@pytest.mark.parametrize(("gap", "decided"), [(1.5, True), (0.5, False)])
def test_one_pair_interval_by_hand(gap, decided):
    """One axis, two encoders; A's replicate error is its point +-1 (half the replicates each way), B's is
    fixed. The difference deviates by exactly 1 in every replicate, its SD is sqrt(B / (B - 1)), so every
    |t*| = 1 / SD, the critical value is 1 / SD and the interval is d +- 1 exactly."""
    n_boot = 40
    point = np.array([[0.0], [gap]])  # A's error 0, B's error `gap`: d = e_A - e_B = -gap
    swing = np.where(np.arange(n_boot) % 2 == 0, 1.0, -1.0)
    replicates = np.stack([swing, np.full(n_boot, gap)], axis=1)[:, :, None]
    found = pairwise_comparisons(point, replicates, encoders=["A", "B"], axes=["calibration"])
    assert found.critical == pytest.approx(1 / math.sqrt(n_boot / (n_boot - 1)))
    assert (found.low[0, 0, 1], found.high[0, 0, 1]) == pytest.approx((-gap - 1, -gap + 1))
    assert bool(found.better[0, 0, 1]) is decided and not found.better[0, 1, 0]
    assert bool(found.surely_dominates[0, 1]) is decided and found.possibly_dominates[0, 1]
    row = found.table().iloc[0]
    assert row["better"] == ("A" if decided else "") and row["error_difference"] == pytest.approx(-gap)


def test_the_critical_value_covers_every_pair_and_axis_at_once():
    """With more pairs and axes the simultaneous critical value grows: it is a max over all of them."""
    rng = np.random.default_rng(3)
    replicates = rng.normal(0, 1, size=(2000, 6, 4))
    point = np.zeros((6, 4))
    one = pairwise_comparisons(point[:2, :1], replicates[:, :2, :1]).critical
    every = pairwise_comparisons(point, replicates).critical
    assert one == pytest.approx(1.96, abs=0.12) and every > one + 0.8  # 60 differences at once


def test_no_usable_replicates_decides_nothing_and_bad_shapes_say_how():
    point = np.array([[0.1], [0.3]])
    found = pairwise_comparisons(point, np.full((5, 2, 1), np.nan))
    assert not found.better.any() and not found.surely_dominates.any() and found.confident_pareto.all()
    with pytest.raises(ComparisonInputError, match=r"replicates must be \(replicates, 2 encoders, 1 axes\)"):
        pairwise_comparisons(point, np.zeros((5, 3, 1)))
