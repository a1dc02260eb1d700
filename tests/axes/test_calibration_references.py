"""Calibration errors against packages nobody on this project wrote (issue 23; docs/verification.md).

* uncertainty-calibration (Kumar, Liang and Ma 2019, ``import calibration``): the per-bin debiased
  L2 error ``unbiased_l2_ce`` and its bins. Where the definitions differ:
  - its debiasing term is the outcomes' sample variance ybar (1 - ybar) / (n_b - 1); ours is the
    residuals' (outcome - confidence) sample variance / n_b, which also removes the confidences'
    spread inside a bin (our target is the population gap E[outcome - confidence | bin], whose
    estimate carries that spread too). The two are equal when a bin's confidences are all equal,
    and otherwise differ by exactly sum_b share_b (s_y^2 - s_r^2) / n_b, checked below;
  - its equal-width edges are (a, b] (``bisect_left``), ours [a, b) with 1 in the last bin
    (torchmetrics'): equal off the edges, so the inputs below avoid them;
  - its equal-mass bins cut half-way between neighbouring sorted values of ``np.array_split``'s
    groups; ours assign the groups themselves: the same bins when no two confidences are equal;
  - its "marginal" mode is the root of the mean of the classes' squared errors; our multilabel score
    is the mean of the labels' errors (as for the plain ECE); not compared.
* netcal (``netcal.metrics.ECE``): the plain binned ECE reported beside the scored error; equal-width
  ``np.histogramdd`` bins, [a, b) with 1 in the last, the same as ours, so equal to 1e-12. Its
  equal-mass option cuts at ``np.quantile`` values, not ours; not compared.
* relplot: smooth ECE, in test_axes_oracle.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from crs import axes

calibration = pytest.importorskip("calibration")  # uncertainty-calibration
from calibration import utils as kumar  # noqa: E402


def _miscalibrated(rng, n, a=0.6, b=0.3):
    confidence = 1.0 / (1.0 + np.exp(-rng.normal(-0.5, 1.5, n)))
    truth = 1.0 / (1.0 + np.exp(-(a * np.log(confidence / (1 - confidence)) + b)))
    return confidence, (rng.uniform(size=n) < truth).astype(np.int64)


@pytest.mark.parametrize("seed", range(5))
def test_equals_kumar_unbiased_l2_when_each_bin_holds_one_confidence(seed):
    # confidences at the 15 bin centres: both variance terms coincide, so the values must be equal
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 3000))
    confidence = (rng.integers(0, 15, n) + 0.5) / 15
    labels = (rng.uniform(size=n) < confidence ** rng.uniform(0.5, 2.0)).astype(np.int64)
    theirs = kumar.lower_bound_scaling_ce(confidence, labels, p=2, debias=True, num_bins=15,
                                          binning_scheme=kumar.get_equal_prob_bins)
    assert axes.debiased_ece(labels, confidence, "binary") == pytest.approx(theirs, abs=1e-12)


def _kumar_squared(confidence, labels, binning_scheme, n_bins=15):
    bins = binning_scheme(list(confidence), num_bins=n_bins)
    return kumar.unbiased_square_ce(kumar.bin(list(zip(confidence, labels, strict=True)), bins))


@pytest.mark.parametrize("binning", ["width", "mass"])
@pytest.mark.parametrize("seed", range(4))
def test_differs_from_kumar_by_exactly_the_confidence_spread_term(binning, seed):
    rng = np.random.default_rng(10 + seed)
    confidence, labels = _miscalibrated(rng, int(rng.integers(300, 4000)))
    scheme = kumar.get_equal_prob_bins if binning == "width" else kumar.get_equal_bins
    theirs = _kumar_squared(confidence, labels, scheme)
    # the bins by hand: floor(15 c) for width, array_split of the sorted confidences for mass
    if binning == "width":
        index = np.floor(confidence * 15).astype(int)
    else:
        index = np.empty(len(confidence), int)
        for k, members in enumerate(np.array_split(np.argsort(confidence), 15)):
            index[members] = k
    correction = 0.0
    for k in range(15):
        y, r = labels[index == k], (labels - confidence)[index == k]
        if len(y) >= 2:
            correction += len(y) / len(labels) * (y.var(ddof=1) - r.var(ddof=1)) / len(y)
    ours = axes.debiased_ece(labels, confidence, "binary", binning=binning)
    assert ours**2 == pytest.approx(theirs + correction, rel=1e-9)
    assert abs(ours - np.sqrt(max(theirs, 0))) < 0.005  # the spread term is small beside the error


def test_top_label_matches_kumar_top_label_mode():
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 1.5, size=(2000, 8))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(8, p=row) for row in np.exp(0.6 * logits) / np.exp(0.6 * logits).sum(1, keepdims=True)])
    theirs = kumar.lower_bound_scaling_ce(probs, labels, p=2, debias=True, num_bins=15, mode="top-label",
                                          binning_scheme=kumar.get_equal_bins)
    ours = axes.debiased_ece(labels, probs, "multiclass", binning="mass")
    assert ours == pytest.approx(theirs, abs=0.005) and theirs > 0.05  # miscalibrated: a real gap


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_plain_ece_equals_kumar_guo_ece(kind):
    # get_ece: L1, equal width, plug-in ("as computed by Guo et al.")
    rng = np.random.default_rng(4)
    if kind == "binary":
        probs, labels = _miscalibrated(rng, 1500)
    else:
        probs = rng.dirichlet(np.ones(5) * 0.6, size=1500)
        labels = rng.integers(0, 5, 1500)
    assert axes.ece(labels, probs, kind) == pytest.approx(kumar.get_ece(probs, labels, num_bins=15), abs=1e-12)


def test_standard_error_matches_a_bootstrap_of_kumars_estimator():
    # strong miscalibration, 2,000 cases: our closed-form SE against the SD of uncertainty-calibration's
    # own estimator over 300 bootstrap resamples (its bootstrap_std), both on equal-width bins
    rng = np.random.default_rng(6)
    confidence, labels = _miscalibrated(rng, 2000)
    np.random.seed(6)  # kumar.resample draws from numpy's global generator

    def estimator(data):
        c, y = (np.array(column) for column in zip(*data, strict=True))
        return kumar.lower_bound_scaling_ce(c, y.astype(np.int64), p=2, debias=True, num_bins=15,
                                            binning_scheme=kumar.get_equal_prob_bins)

    theirs = kumar.bootstrap_std(list(zip(confidence, labels, strict=True)), estimator=estimator, num_samples=300)
    assert axes.ece_standard_error(labels, confidence, "binary") == pytest.approx(theirs, rel=0.2)


netcal_metrics = pytest.importorskip("netcal.metrics")


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("seed", range(3))
def test_plain_ece_equals_netcal(kind, seed):
    rng = np.random.default_rng(20 + seed)
    n = int(rng.integers(50, 3000))
    if kind == "binary":
        probs, labels = _miscalibrated(rng, n)
    else:
        probs = rng.dirichlet(np.ones(4) * rng.choice([0.3, 1.0, 3.0]), size=n)
        labels = rng.integers(0, 4, n)
    assert axes.ece(labels, probs, kind) == pytest.approx(netcal_metrics.ECE(bins=15).measure(probs, labels), abs=1e-12)
