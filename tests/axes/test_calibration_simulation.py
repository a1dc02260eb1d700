"""The scored calibration error against its population value, calibrated and miscalibrated (issue 23).

Outcomes are drawn as Bernoulli(sigmoid(a logit(c) + b)) for calibrated (a = 1, b = 0), mild
(a = 0.8) and strong (a = 0.6, b = 0.3) miscalibration; binary, 8-class top label and 5 labels
(the probe shapes of :mod:`crs.bench.calibration_error`); 732 (APTOS) and 5,000 (ISIC) cases.
The truth is computed here, independently of the estimator: the root-mean-square of the population
gap E[q - c | bin] over the 15 equal-width bins, with q the true outcome probability, by numerical
integration over the normal logit density (binary, each label) or on two million confidences
(top label, whose density has no closed form). Repetitions are vectorised: per-bin sums of many
test sets at once, then the same arithmetic every caller uses (crs.axes.calibration_error_moments).

Done when (issue 23): bias at most 0.007 at 5,000 cases and 0.018 at 732 in every cell, and the mean
standard error within 20 % of the estimator's spread.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit
from scipy.stats import norm

from crs import axes
from crs.bench.calibration_error import (
    LEVELS,
    MULTILABEL_MEANS,
    bin_sums,
    draw_confidences,
    true_probability,
)

REPETITIONS = 400
BIAS_LIMIT = {732: 0.018, 5000: 0.007}


def _rms_gap(share: np.ndarray, gap: np.ndarray) -> float:
    return float(np.sqrt(np.sum(share * gap**2)))


def _logit_normal_truth(mean: float, sd: float, level: str) -> float:
    """Population RMS binned gap for c = sigmoid(s), s ~ N(mean, sd^2), by integration over s per bin."""
    a, b = LEVELS[level]
    edges = logit(np.clip(np.linspace(0, 1, 16), 1e-300, 1 - 1e-16))
    edges[0], edges[-1] = mean - 12 * sd, mean + 12 * sd
    share, gap = np.zeros(15), np.zeros(15)
    for k in range(15):
        s = np.linspace(edges[k], edges[k + 1], 4001)
        density = norm.pdf(s, mean, sd)
        share[k] = np.trapezoid(density, s)
        if share[k] > 0:
            gap[k] = np.trapezoid((expit(a * s + b) - expit(s)) * density, s) / share[k]
    return _rms_gap(share, gap)


def population_value(shape: str, level: str) -> float:
    if shape == "binary":
        return _logit_normal_truth(-0.5, 1.5, level)
    if shape == "multilabel":
        return float(np.mean([_logit_normal_truth(mu, 1.2, level) for mu in MULTILABEL_MEANS]))
    confidence = draw_confidences("top_label", (2_000_000,), np.random.default_rng(99))[0]
    index = np.clip(np.floor(confidence * 15).astype(int), 0, 14)
    count = np.bincount(index, minlength=15)
    gap = np.bincount(index, true_probability(confidence, level) - confidence, 15) / np.maximum(count, 1)
    return _rms_gap(count / count.sum(), gap)


def simulate(shape: str, level: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(errors, standard errors) over REPETITIONS fresh test sets, 100 at a time."""
    rng = np.random.default_rng([23, ["binary", "top_label", "multilabel"].index(shape), list(LEVELS).index(level), n])
    errors, standard_errors = [], []
    for _ in range(REPETITIONS // 100):
        confidence = draw_confidences(shape, (100, n), rng)
        outcome = (rng.uniform(size=confidence.shape) < true_probability(confidence, level)).astype(float)
        sums = bin_sums(confidence, outcome, "width")
        error, standard_error = axes.calibration_error_moments(
            sums["count"], sums["y"] - sums["c"], sums["y"] - 2 * sums["yc"] + sums["cc"]
        )
        errors.append(error.mean(axis=0))  # multilabel: the mean over labels, as crs.axes scores it
        standard_errors.append(np.sqrt((standard_error**2).sum(axis=0)) / len(standard_error))
    return np.concatenate(errors), np.concatenate(standard_errors)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["binary", "top_label", "multilabel"])
def test_scored_calibration_error_is_nearly_unbiased_with_an_honest_standard_error(shape):
    failures = []
    for level in LEVELS:
        truth = population_value(shape, level)
        for n in (732, 5000):
            errors, standard_errors = simulate(shape, level, n)
            bias = errors.mean() - truth
            ratio = standard_errors.mean() / errors.std(ddof=1)
            if abs(bias) > BIAS_LIMIT[n] or not 0.8 <= ratio <= 1.2:
                failures.append(f"{level} n={n}: truth {truth:.4f} bias {bias:+.4f} SE/SD {ratio:.2f}")
    assert not failures, failures


def test_the_vectorised_sums_are_what_crs_axes_scores():
    # the simulation's arithmetic on per-bin sums equals the public per-probe functions
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(8) * 0.5, size=600)
    y = rng.integers(0, 8, 600)
    confidence, correct = probs.max(axis=1), (probs.argmax(axis=1) == y).astype(float)
    sums = bin_sums(confidence[None], correct[None], "width")
    error, standard_error = axes.calibration_error_moments(
        sums["count"], sums["y"] - sums["c"], sums["y"] - 2 * sums["yc"] + sums["cc"]
    )
    assert axes.debiased_ece(y, probs, "multiclass") == pytest.approx(error[0], rel=1e-9)
    assert axes.ece_standard_error(y, probs, "multiclass") == pytest.approx(standard_error[0], rel=1e-9)


def test_the_truth_integrals_agree_with_a_large_sample():
    # the integration above against the bench's sample-based population value (two methods, one number)
    from crs.bench.calibration_error import population_value as sampled

    for level in ("mild", "strong"):
        assert population_value("binary", level) == pytest.approx(sampled("l2_width", "binary", level), abs=5e-4)


def test_calibration_error_alone_is_the_moments_error():
    # the same arithmetic without the standard error's quadrature: equal bit for bit, empty rows NaN
    from crs.axes.calibration import calibration_error

    rng = np.random.default_rng(3)
    count = rng.integers(0, 6, size=(50, 3, 15)).astype(float)
    count[0] = 0.0
    residual_sum = rng.normal(size=count.shape) * count * 0.2
    square_sum = residual_sum**2 / np.maximum(count, 1) + rng.uniform(size=count.shape) * count
    expected = axes.calibration_error_moments(count, residual_sum, square_sum)[0]
    np.testing.assert_array_equal(calibration_error(count, residual_sum, square_sum), expected)
    assert np.isnan(expected[0]).all() and np.isfinite(expected[1:]).all()
