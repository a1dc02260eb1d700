"""The candidate CRS interval methods of the coverage bench (issue 30 item 2, decision 0089), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from crs.bench import interval_methods as methods


def _replicates(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    replicates = np.column_stack([0.5 + 0.05 * rng.normal(size=2000), 0.2 + 0.03 * rng.standard_exponential(2000)])
    return np.array([0.5, 0.21]), replicates


def test_basic_reflects_the_percentile_bounds_about_the_point():
    point, replicates = _replicates()
    low, high = methods.percentile(point, replicates)
    basic_low, basic_high = methods.basic(point, replicates)
    assert basic_low == pytest.approx(2 * point - high) and basic_high == pytest.approx(2 * point - low)


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    rng = np.random.default_rng(1)
    replicates = rng.normal(size=(4001, 1))
    point = np.array([np.median(replicates)])  # half the replicates below: z0 = 0
    assert methods.bca(point, replicates, bounds=(-9, 9))[0] == pytest.approx(
        methods.percentile(point, replicates, bounds=(-9, 9))[0], abs=1e-9)
    # a point above most replicates moves both bounds up (z0 > 0)
    shifted = methods.bca(point + 0.5, replicates, bounds=(-9, 9))
    assert shifted[0][0] > methods.percentile(point, replicates, bounds=(-9, 9))[0][0]


def test_the_double_bootstrap_with_uniform_shares_keeps_the_percentile_levels():
    point, replicates = _replicates(2)
    uniform = np.tile(np.linspace(0, 1, len(replicates))[:, None], (1, 2))  # p_b ~ U(0, 1): a calibrated bootstrap
    low, high = methods.double_bootstrap(point, replicates, uniform)
    expected = methods.percentile(point, replicates)
    assert low == pytest.approx(expected[0], abs=2e-3) and high == pytest.approx(expected[1], abs=2e-3)
    # inner intervals that miss the point low too often: the lower level moves out
    skewed = np.clip(uniform * 0.8, 0, 1)
    assert (methods.double_bootstrap(point, replicates, skewed)[0] <= low).all()


def test_m_out_of_n_rescales_the_spread_and_every_method_stays_in_range():
    point, replicates = _replicates(3)
    low, high = methods.m_out_of_n(point, replicates, 0.25)
    q_low, q_high = np.percentile(replicates, [2.5, 97.5], axis=0)
    assert high - low == pytest.approx(0.5 * (q_high - q_low))
    wide = np.column_stack([np.linspace(-0.5, 1.5, 500)] * 2)
    for found in (methods.basic(point, wide), methods.m_out_of_n(point, wide, 0.9), methods.bca(point, wide)):
        assert (found[0] >= 0).all() and (found[1] <= 1).all()


def test_resamples_keep_their_strata_sizes():
    rng = np.random.default_rng(5)
    patient = np.repeat(np.arange(10), 2)
    y = (patient < 3).astype(float)
    counts = methods.m_out_of_n_counts(patient, y, 0.5, 50, rng, stratified=True)
    per_patient = counts[:, ::2]
    assert (per_patient[:, :3].sum(axis=1) == 2).all() and (per_patient[:, 3:].sum(axis=1) == 4).all()
    outer = np.array([2, 0, 1, 0, 3, 1, 1, 0, 2, 0], dtype=float)
    strata = (np.arange(10) < 3).astype(int)
    inner = methods.inner_counts(outer, strata, 40, rng)
    assert (inner[:, outer == 0] == 0).all()  # only what the outer resample drew
    assert (inner[:, strata == 1].sum(axis=1) == outer[strata == 1].sum()).all()
    assert (inner[:, strata == 0].sum(axis=1) == outer[strata == 0].sum()).all()
