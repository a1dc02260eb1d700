"""Axis functions against the reference implementations people already trust, on random inputs.

scikit-learn: roc_auc_score, brier_score_loss, log_loss, cohen_kappa_score.
torchmetrics: binary / multiclass calibration error (l1 = ECE, max = MCE), same 15 equal-width bins.
relplot: smooth ECE (a discretised estimator, so agreement is to 2e-3 rather than 1e-6).
Inputs include tiny sets, heavy class imbalance and classes absent from y.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, cohen_kappa_score, log_loss, roc_auc_score

from crs import axes

TOLERANCE = 1e-6
N_CASES = 40


def _multiclass_case(rng: np.random.Generator, ties: bool = True):
    """Random (y, probs) with 2-6 classes, 3-80 cases, sometimes imbalanced or with absent classes.

    ``ties`` rounds some cases' scores to one decimal: tied scores for AUROC. Calibration oracles
    turn it off, because rounded confidences sit exactly on bin edges (k / 15 for k = 6) where
    torchmetrics' float32 cast and our float64 place a case in different bins.
    """
    n_classes = int(rng.integers(2, 7))
    n = int(rng.integers(3, 81))
    class_weights = rng.dirichlet(np.full(n_classes, rng.choice([0.2, 1.0, 5.0])))
    y = rng.choice(n_classes, size=n, p=class_weights)
    probs = rng.dirichlet(np.full(n_classes, rng.uniform(0.2, 3.0)), size=n)
    if ties and rng.uniform() < 0.3:  # ties in scores
        probs = np.round(probs, 1) + 1e-9
        probs /= probs.sum(axis=1, keepdims=True)
    return y, probs


def _multilabel_case(rng: np.random.Generator):
    n_labels = int(rng.integers(1, 6))
    n = int(rng.integers(2, 60))
    prevalence = rng.uniform(0.02, 0.98, size=n_labels)
    y = (rng.uniform(size=(n, n_labels)) < prevalence).astype(np.float64)
    y[rng.uniform(size=y.shape) < rng.uniform(0, 0.4)] = np.nan
    probs = rng.uniform(size=(n, n_labels))
    return y, probs


@pytest.mark.parametrize("case", range(N_CASES))
def test_multiclass_auroc_matches_sklearn_over_present_classes(case):
    rng = np.random.default_rng(case)
    y, probs = _multiclass_case(rng)
    per_class = axes.per_class_auroc(y, probs, "multiclass")
    for k in range(probs.shape[1]):
        positives = y == k
        if 0 < positives.sum() < len(y):
            assert per_class[k] == pytest.approx(roc_auc_score(positives, probs[:, k]), abs=TOLERANCE)
        else:
            assert np.isnan(per_class[k])  # absent (or universal) class: reported, not scored as 0
    scorable = [k for k in range(probs.shape[1]) if 0 < (y == k).sum() < len(y)]
    expected = np.mean([roc_auc_score(y == k, probs[:, k]) for k in scorable]) if scorable else np.nan
    assert axes.auroc(y, probs, "multiclass") == pytest.approx(expected, abs=TOLERANCE, nan_ok=True)
    if len(set(y.tolist())) == probs.shape[1] > 2:  # all classes present: sklearn's own macro OvR
        oracle = roc_auc_score(
            y, probs, multi_class="ovr", average="macro", labels=list(range(probs.shape[1]))
        )
        assert axes.auroc(y, probs, "multiclass") == pytest.approx(oracle, abs=TOLERANCE)


@pytest.mark.parametrize("case", range(N_CASES))
def test_multilabel_auroc_matches_sklearn_per_label(case):
    rng = np.random.default_rng(1000 + case)
    y, probs = _multilabel_case(rng)
    values = []
    for label in range(y.shape[1]):
        known = ~np.isnan(y[:, label])
        if len(set(y[known, label].tolist())) == 2:
            values.append(roc_auc_score(y[known, label], probs[known, label]))
    expected = np.mean(values) if values else np.nan
    assert axes.auroc(y, probs, "multilabel") == pytest.approx(expected, abs=TOLERANCE, nan_ok=True)


@pytest.mark.parametrize("case", range(N_CASES))
def test_brier_and_nll_match_sklearn(case):
    rng = np.random.default_rng(2000 + case)
    y, probs = _multiclass_case(rng)
    labels = list(range(probs.shape[1]))
    assert axes.nll(y, probs, "multiclass") == pytest.approx(log_loss(y, probs, labels=labels), abs=TOLERANCE)
    # scikit-learn's multiclass Brier without scale_by_half is the per-case sum over classes
    expected_brier = (
        brier_score_loss(y, probs, labels=labels, scale_by_half=False)
        if probs.shape[1] > 2
        else (2 * brier_score_loss(y, probs[:, 1], labels=[0, 1]))
    )
    assert axes.brier(y, probs, "multiclass") == pytest.approx(expected_brier, abs=TOLERANCE)

    y_binary = (rng.uniform(size=len(y)) < 0.2).astype(int)
    p_binary = rng.uniform(size=len(y))
    assert axes.brier(y_binary, p_binary, "binary") == pytest.approx(
        brier_score_loss(y_binary, p_binary, labels=[0, 1]), abs=TOLERANCE
    )
    assert axes.nll(y_binary, p_binary, "binary") == pytest.approx(
        log_loss(y_binary, p_binary, labels=[0, 1]), abs=TOLERANCE
    )


@pytest.mark.parametrize("case", range(N_CASES))
def test_multilabel_brier_and_nll_are_means_of_sklearn_per_label(case):
    rng = np.random.default_rng(3000 + case)
    y, probs = _multilabel_case(rng)
    briers, losses = [], []
    for label in range(y.shape[1]):
        known = ~np.isnan(y[:, label])
        if known.any():
            briers.append(brier_score_loss(y[known, label], probs[known, label], labels=[0, 1]))
            losses.append(log_loss(y[known, label], probs[known, label], labels=[0, 1]))
    assert axes.brier(y, probs, "multilabel") == pytest.approx(
        np.mean(briers) if briers else np.nan, abs=TOLERANCE, nan_ok=True
    )
    assert axes.nll(y, probs, "multilabel") == pytest.approx(
        np.mean(losses) if losses else np.nan, abs=TOLERANCE, nan_ok=True
    )


@pytest.mark.parametrize("case", range(N_CASES))
def test_quadratic_kappa_matches_sklearn(case):
    rng = np.random.default_rng(4000 + case)
    y, probs = _multiclass_case(rng)
    predicted = probs.argmax(axis=1)
    with np.errstate(all="ignore"):
        oracle = cohen_kappa_score(y, predicted, weights="quadratic", labels=list(range(probs.shape[1])))
    assert axes.quadratic_kappa(y, probs) == pytest.approx(oracle, abs=TOLERANCE, nan_ok=True)


@pytest.mark.parametrize("case", range(N_CASES))
def test_ordinal_auroc_is_mean_threshold_auroc(case):
    rng = np.random.default_rng(5000 + case)
    y, probs = _multiclass_case(rng)
    values = []
    for k in range(1, probs.shape[1]):
        target = y >= k
        if 0 < target.sum() < len(y):
            values.append(roc_auc_score(target, probs[:, k:].sum(axis=1)))
    assert axes.ordinal_auroc(y, probs) == pytest.approx(
        np.mean(values) if values else np.nan, abs=TOLERANCE, nan_ok=True
    )


torch = pytest.importorskip("torch")
tm = pytest.importorskip("torchmetrics.functional.classification")


@pytest.mark.parametrize("case", range(N_CASES))
def test_ece_and_mce_match_torchmetrics(case):
    rng = np.random.default_rng(6000 + case)
    y, probs = _multiclass_case(rng, ties=False)
    n_classes = probs.shape[1]
    for norm, ours in (("l1", axes.ece), ("max", axes.mce)):
        oracle = tm.multiclass_calibration_error(
            torch.tensor(probs), torch.tensor(y), num_classes=n_classes, n_bins=15, norm=norm
        ).item()
        assert ours(y, probs, "multiclass") == pytest.approx(oracle, abs=TOLERANCE)
        assert ours(y, probs, "ordinal") == pytest.approx(oracle, abs=TOLERANCE)

    y_multi, p_multi = _multilabel_case(rng)
    per_label = []
    for label in range(y_multi.shape[1]):
        known = ~np.isnan(y_multi[:, label])
        if known.any():
            per_label.append(
                tm.binary_calibration_error(
                    torch.tensor(p_multi[known, label]),
                    torch.tensor(y_multi[known, label].astype(int)),
                    n_bins=15,
                ).item()
            )
    expected = np.mean(per_label) if per_label else np.nan
    assert axes.ece(y_multi, p_multi, "multilabel") == pytest.approx(expected, abs=TOLERANCE, nan_ok=True)


@pytest.mark.parametrize("case", range(20))
def test_classwise_ece_is_mean_of_torchmetrics_binary_ece_per_class(case):
    rng = np.random.default_rng(7000 + case)
    y, probs = _multiclass_case(rng, ties=False)
    expected = np.mean(
        [
            tm.binary_calibration_error(
                torch.tensor(probs[:, k]), torch.tensor((y == k).astype(int)), n_bins=10
            ).item()
            for k in range(probs.shape[1])
        ]
    )
    assert axes.classwise_ece(y, probs, "multiclass", n_bins=10) == pytest.approx(expected, abs=TOLERANCE)


def test_smooth_ece_agrees_with_relplot():
    relplot = pytest.importorskip("relplot")
    for case in range(5):
        rng = np.random.default_rng(8000 + case)
        n = int(rng.integers(100, 2000))
        confidence = rng.uniform(size=n)
        outcome = (rng.uniform(size=n) < confidence ** rng.uniform(0.5, 2.5)).astype(np.float64)
        assert axes.smooth_ece(outcome, confidence, "binary") == pytest.approx(
            relplot.smECE(confidence, outcome), abs=2e-3
        )


# --- the debiased calibration error and the standard errors, against simulation --------------------


def test_calibrated_ece_moments_match_label_resampling():
    # the definition: the mean and SD of the binned ECE of labels resampled from the probe's own
    # probabilities (the L1 null moments; the scored error since decision 0035 is tested in
    # test_calibration_simulation.py)
    rng = np.random.default_rng(3)
    probs = rng.uniform(size=400)
    resampled = [axes.ece((rng.uniform(size=400) < probs).astype(float), probs, "binary") for _ in range(600)]
    index = np.clip(np.floor(probs * 15).astype(int), 0, 14)
    mean, sd = axes.calibrated_ece_moments(np.bincount(index, probs * (1 - probs), 15), 400.0)
    assert mean == pytest.approx(np.mean(resampled), abs=0.003)
    assert sd == pytest.approx(np.std(resampled), rel=0.15)


def test_binary_auroc_standard_error_is_delong():
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(10, 80))
        y = (rng.uniform(size=n) < 0.4).astype(int)
        if y.min() == y.max():
            continue
        scores = rng.integers(0, 8, n).astype(float)  # many ties
        positives, negatives = scores[y == 1], scores[y == 0]
        v10 = ((negatives[None, :] < positives[:, None]) + 0.5 * (negatives[None, :] == positives[:, None])).mean(1)
        v01 = ((positives[None, :] > negatives[:, None]) + 0.5 * (positives[None, :] == negatives[:, None])).mean(1)
        delong = np.var(v10) / len(positives) + np.var(v01) / len(negatives)  # with n, not n - 1
        assert axes.auroc_standard_error(y, scores, "binary") == pytest.approx(np.sqrt(delong), rel=1e-9)


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_macro_auroc_standard_error_matches_the_spread_over_fresh_test_sets(kind):
    rng = np.random.default_rng(12)
    n, k = 300, 4
    values, errors = [], []
    for _ in range(300):
        if kind == "multiclass":
            y = rng.integers(0, k, n)
            logits = rng.normal(size=(n, k)) + 1.2 * np.eye(k)[y]
            scores = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        else:
            y = (rng.uniform(size=(n, k)) < 0.3).astype(float)
            scores = rng.normal(size=(n, k)) + 1.0 * y
        values.append(axes.auroc(y, scores, kind))
        errors.append(axes.auroc_standard_error(y, scores, kind))
    assert np.mean(errors) == pytest.approx(np.std(values), rel=0.15)


def test_midranks_are_scipys_average_ranks():
    """binary_auroc's numpy mid-ranks are scipy.stats.rankdata's, value for value (ties, NaN, ints)."""
    from scipy.stats import rankdata

    from crs.axes.discrimination import midranks

    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 500):
        for values in (rng.normal(size=n), rng.integers(0, 4, n).astype(float),
                       np.round(rng.random(n), 1).astype(np.float32), rng.integers(0, 3, n)):
            expected, got = rankdata(values), midranks(values)
            assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert np.isnan(midranks(np.array([1.0, np.nan, 2.0]))).all()
    assert np.array_equal(midranks(np.array([0.0, -0.0, 1.0])), [1.5, 1.5, 3.0])
