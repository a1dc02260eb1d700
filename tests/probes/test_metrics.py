"""Batched evaluation metrics against the per-probe reference (crs.axes) and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from crs import axes
from crs.probes import ProbeError
from crs.probes.metrics import METRICS, evaluation_metrics

pytestmark = pytest.mark.usefixtures("numba_path")  # every test through the compiled AUROC kernel and numpy


def reference(y, probs, kind):
    """The per-probe path: one crs.axes call per probe and metric."""
    rows = []
    for p in probs:
        row = {"auroc": axes.auroc(y, p, kind), "ece": axes.ece(y, p, kind), "brier": axes.brier(y, p, kind),
               "nll": axes.nll(y, p, kind), "kappa": np.nan, "ordinal_auroc": np.nan}
        if kind == "ordinal":
            row["kappa"] = axes.quadratic_kappa(y, p)
            row["ordinal_auroc"] = axes.ordinal_auroc(y, p)
        rows.append(row)
    return {name: np.array([r[name] for r in rows]) for name in rows[0]}


def stack(rng, P, N, K, ties: bool, dtype=np.float32):
    """Probabilities (P, N, K) rows summing to 1; rounded to 2 decimals where ``ties``, with an
    absent class (a column of exact zeros) in one probe, as a probe that never saw that class."""
    logits = rng.normal(size=(P, N, K)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)
    if ties:
        probs = np.round(probs, 2)
    probs[0, :, -1] = 0.0
    return probs.astype(dtype)


@pytest.mark.parametrize("kind", ["multiclass", "ordinal"])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_metrics_equal_the_per_probe_reference(kind, ties, dtype):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 5, 300)
    y[y == 4] = 3  # class 4 absent from the labels: its AUROC is undefined, never 0
    probs = stack(rng, 6, 300, 5, ties, dtype)
    got, expected = evaluation_metrics(y, probs, kind), reference(y, probs, kind)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12, atol=1e-14, equal_nan=True, err_msg=name)
    if kind == "ordinal":
        assert not np.isnan(got["kappa"]).any() and not np.isnan(got["ordinal_auroc"]).any()


@pytest.mark.parametrize("ties", [False, True])
def test_batched_multilabel_metrics_equal_the_per_probe_reference(ties):
    rng = np.random.default_rng(1)
    y = (rng.random((250, 4)) < 0.3).astype(np.float32)
    y[rng.random(y.shape) < 0.15] = np.nan
    y[:, 3] = np.nan  # a label with no known row: NaN everywhere, left out of the means
    y[:, 2] = np.where(np.isnan(y[:, 2]), np.nan, 1.0)  # one value only: AUROC undefined, ECE defined
    probs = 1 / (1 + np.exp(-rng.normal(size=(5, 250, 4)) * 2))
    if ties:
        probs = np.round(probs, 2)
    probs = probs.astype(np.float32)
    got, expected = evaluation_metrics(y, probs, "multilabel"), reference(y, probs, "multilabel")
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12, atol=1e-14, equal_nan=True, err_msg=name)


def test_batched_auroc_is_within_0002_of_sklearn_on_float32_probabilities_with_ties():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 2000)
    probs = stack(rng, 4, 2000, 3, ties=True)
    got = evaluation_metrics(y, probs, "multiclass")["auroc"]
    for p in range(1, 4):
        expected = roc_auc_score(y, probs[p].astype(np.float64) / probs[p].sum(1, keepdims=True), multi_class="ovr")
        assert abs(got[p] - np.mean([roc_auc_score(y == k, probs[p, :, k]) for k in range(3)])) < 1e-12
        assert abs(got[p] - expected) < 0.002


def test_hand_derived_values():
    """Two cases, two classes: probe 0 puts 0.8 on the true class of both (AUROC 1, Brier
    2 x 0.2^2 = 0.08, NLL -log 0.8, ECE |1 - 0.8| = 0.2); probe 1 is 0.5 everywhere (AUROC 0.5,
    Brier 0.5, NLL log 2; confidence 0.5, arg-max is class 0 so one of two correct: ECE 0)."""
    y = np.array([0, 1])
    probs = np.array([[[0.8, 0.2], [0.2, 0.8]], [[0.5, 0.5], [0.5, 0.5]]], dtype=np.float32)
    got = evaluation_metrics(y, probs, "multiclass")
    np.testing.assert_allclose(got["auroc"], [1.0, 0.5])
    np.testing.assert_allclose(got["brier"], [0.08, 0.5], rtol=1e-6)
    np.testing.assert_allclose(got["nll"], [-np.log(0.8), np.log(2)], rtol=1e-6)
    np.testing.assert_allclose(got["ece"], [0.2, 0.0], atol=1e-6)


def test_bad_labels_are_one_clear_error():
    probs = np.full((2, 3, 2), 0.5, dtype=np.float32)
    with pytest.raises(ProbeError, match="0..1"):
        evaluation_metrics(np.array([0, 1, 2]), probs, "multiclass")
    with pytest.raises(ProbeError, match="N=4"):
        evaluation_metrics(np.array([0, 1, 1, 0]), probs, "multiclass")


def test_bin_index_equals_the_binary_search_at_and_around_every_edge():
    from crs.probes.metrics import bin_index

    edges = np.linspace(0.0, 1.0, 16)
    around = np.concatenate([edges, np.nextafter(edges, -1), np.nextafter(edges, 2)])
    values = np.clip(np.concatenate([around, np.random.default_rng(3).random(10_000)]), 0, 1)
    expected = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, 14)
    np.testing.assert_array_equal(bin_index(values, 15), expected)
    values32 = values.astype(np.float32).astype(np.float64)  # confidences of float32 probabilities
    np.testing.assert_array_equal(bin_index(values32, 15), np.clip(np.searchsorted(edges, values32, side="right") - 1, 0, 14))


# --- noise levels: AUROC standard error and the calibrated probe's ECE, from first principles ------


def brute_force_auroc_se(y, probs, kind):
    """DeLong's placements by explicit pairwise comparison, per case averaged over scorable classes."""
    out = []
    for p in probs.astype(np.float64):
        problems = ([(y[:, k] == 1.0, y[:, k] == 0.0, p[:, k]) for k in range(p.shape[1])] if kind == "multilabel"
                    else [(y == k, y != k, p[:, k]) for k in range(p.shape[1])])
        influences = []
        for positive, negative, s in problems:
            if positive.sum() == 0 or negative.sum() == 0:
                continue
            sp, sn = s[positive], s[negative]
            wins = (sp[:, None] > sn[None, :]) + 0.5 * (sp[:, None] == sn[None, :])
            area = wins.mean()
            influence = np.zeros(len(s))
            influence[positive] = (wins.mean(axis=1) - area) / positive.sum()
            influence[negative] = (wins.mean(axis=0) - area) / negative.sum()
            influences.append(influence)
        out.append(np.sqrt(np.sum(np.mean(influences, axis=0) ** 2)) if influences else np.nan)
    return np.array(out)


def brute_force_calibration_error(confidence, correct, n_bins=15):
    """Per-bin debiased squared error, bin by bin: share x (mean residual^2 - sample variance / size)."""
    edges = np.linspace(0, 1, n_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    squared = 0.0
    for b in range(n_bins):
        residual = (correct - confidence)[index == b]
        if len(residual) >= 2:
            squared += len(residual) / len(confidence) * (residual.mean() ** 2 - residual.var(ddof=1) / len(residual))
    return np.sqrt(max(squared, 0.0))


@pytest.mark.parametrize("ties", [False, True])
def test_auroc_standard_error_equals_pairwise_delong(ties):
    rng = np.random.default_rng(8)
    y = rng.integers(0, 4, 240)
    y[y == 3] = 2  # an absent class: left out of the per-case mean
    probs = stack(rng, 4, 240, 4, ties)
    np.testing.assert_allclose(evaluation_metrics(y, probs, "multiclass")["auroc_se"],
                               brute_force_auroc_se(y, probs, "multiclass"), rtol=1e-10)
    ym = (rng.random((240, 3)) < 0.3).astype(np.float32)
    ym[rng.random(ym.shape) < 0.2] = np.nan
    pm = np.round(rng.random((3, 240, 3)), 2 if ties else 6).astype(np.float32)
    np.testing.assert_allclose(evaluation_metrics(ym, pm, "multilabel")["auroc_se"],
                               brute_force_auroc_se(ym, pm, "multilabel"), rtol=1e-10)


def test_debiased_calibration_error_follows_the_per_bin_formula():
    rng = np.random.default_rng(9)
    y = rng.integers(0, 5, 400)
    probs = stack(rng, 3, 400, 5, ties=False)
    got = evaluation_metrics(y, probs, "multiclass")
    for p in range(3):
        confidence = probs[p].max(axis=1).astype(np.float64)
        correct = (probs[p].argmax(axis=1) == y).astype(np.float64)
        assert got["ece_debiased"][p] == pytest.approx(brute_force_calibration_error(confidence, correct), rel=1e-9)
    ym = (rng.random((400, 3)) < 0.3).astype(np.float32)
    ym[:200, 1] = np.nan
    pm = rng.random((2, 400, 3)).astype(np.float32)
    got = evaluation_metrics(ym, pm, "multilabel")
    for p in range(2):
        per_label = [brute_force_calibration_error(pm[p, known, k].astype(np.float64), ym[known, k].astype(np.float64))
                     for k in range(3) for known in [~np.isnan(ym[:, k])]]
        assert got["ece_debiased"][p] == pytest.approx(np.mean(per_label), rel=1e-9)
        standard_errors = [axes.ece_standard_error(ym[known, k], pm[p, known, k], "binary")
                           for k in range(3) for known in [~np.isnan(ym[:, k])]]
        assert got["ece_se"][p] == pytest.approx(np.sqrt(np.sum(np.square(standard_errors))) / 3, rel=1e-9)


def test_calibrated_probe_scores_a_calibration_error_below_its_noise_floor():
    """Labels drawn from the probe's own probabilities at APTOS's test size: the scored error's bias at
    zero (the root of a noisy 0) is under 0.018 and under its own standard error, which the CRS floors at."""
    rng = np.random.default_rng(10)
    probs = rng.dirichlet(np.ones(5) * 0.7, size=(200, 732)).astype(np.float32)
    probs /= probs.sum(axis=2, keepdims=True)
    values, standard_errors = [], []
    for p in probs:
        y = np.array([rng.choice(5, p=row / row.sum()) for row in p.astype(np.float64)])
        row = evaluation_metrics(y, p[None], "multiclass")
        values.append(row["ece_debiased"][0])
        standard_errors.append(row["ece_se"][0])
    assert 0.0 <= np.mean(values) < 0.018
    assert np.mean(values) < np.mean(standard_errors)


@pytest.mark.parametrize("name,function", [("auroc_se", "auroc_standard_error"), ("ece_debiased", "debiased_ece"),
                                           ("ece_se", "ece_standard_error")])
def test_noise_columns_equal_the_axes_reference_where_it_exists(name, function):
    """Once the per-probe references are in crs.axes (the science branch), the batched columns equal them."""
    reference_function = getattr(axes, function, None)
    if reference_function is None:
        pytest.skip(f"crs.axes.{function} is not in this tree")
    rng = np.random.default_rng(11)
    y = rng.integers(0, 4, 300)
    probs = stack(rng, 3, 300, 4, ties=True)
    got = evaluation_metrics(y, probs, "multiclass")[name]
    np.testing.assert_allclose(got, [reference_function(y, p, "multiclass") for p in probs], rtol=1e-9)


def test_every_metric_by_default_only_those_asked_for_otherwise():
    rng = np.random.default_rng(12)
    y, probs = rng.integers(0, 3, 50), stack(rng, 2, 50, 3, ties=False)
    assert list(evaluation_metrics(y, probs, "ordinal")) == list(METRICS)
    assert list(evaluation_metrics(y, probs, "ordinal", metrics=["nll", "auroc"])) == ["nll", "auroc"]
    with pytest.raises(ProbeError, match="accuracy"):
        evaluation_metrics(y, probs, "multiclass", metrics=["accuracy"])


def test_probes_with_equal_probabilities_are_scored_once_and_agree():
    from crs.probes.metrics import distinct_probes

    rng = np.random.default_rng(13)
    y = rng.integers(0, 3, 80)
    probs = stack(rng, 4, 80, 3, ties=False)
    probs[2] = probs[0]
    probs[3] = probs[0]
    probs[3, 5, 1] = np.nextafter(probs[3, 5, 1], 1)  # one ulp apart: a different probe
    keep, inverse = distinct_probes(probs)
    assert keep.tolist() == [0, 1, 3] and inverse.tolist() == [0, 1, 0, 2]
    got = evaluation_metrics(y, probs, "multiclass")
    each = {name: np.array([evaluation_metrics(y, p[None], "multiclass")[name][0] for p in probs]) for name in got}
    for name in got:
        np.testing.assert_array_equal(got[name], each[name], err_msg=name)


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_compiled_auroc_kernel_equals_the_numpy_path(batch, monkeypatch):
    """The compiled kernel and the numpy path on float32 scores with ties, unscorable columns and
    unknown labels: the same AUROC bit for bit (both count half pairs exactly), influences to 1e-12."""
    from crs.axes import weighted_kernel
    from crs.probes import auroc_kernel
    from crs.probes.selection import batched_auroc_influence

    if auroc_kernel.sorted_rows is None:
        pytest.skip("numba is not installed (the `fast` extra)")
    rng = np.random.default_rng(12)
    y = rng.integers(0, 5, 400)
    y[y == 4] = 0  # class 4 absent: its column has no positive
    scores = np.round(rng.random(batch + (400, 5)), 2).astype(np.float32)
    ym = (rng.random((400, 4)) < 0.3).astype(np.float64)
    ym[rng.random(ym.shape) < 0.2] = np.nan
    ym[:, 3] = 1.0  # no negative
    scores_m = rng.random(batch + (400, 4)).astype(np.float32)
    for labels, values in ((y, scores), (ym, scores_m)):
        results = {}
        for path in ("1", "0"):
            monkeypatch.setenv(weighted_kernel.DISABLE_ENV, path)
            results[path] = batched_auroc_influence(labels, values)
        np.testing.assert_array_equal(results["1"][0], results["0"][0])
        np.testing.assert_allclose(results["0"][1], results["1"][1], rtol=1e-12, atol=1e-15)
        assert results["0"][1].shape == batch + (400,)


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_the_clustered_auroc_se_of_the_batched_path_equals_the_axes_reference(kind):
    """Issue 30: stage 2's AUROC SE clusters by patient where the condition has patient ids; the
    batched path and crs.axes agree, and one case a patient is the unclustered SE."""
    rng = np.random.default_rng(7)
    n = 240
    patients = rng.integers(0, 90, n).astype(str)
    if kind == "multilabel":
        y = (rng.random((n, 3)) < 0.3).astype(np.float64)
        y[rng.random(y.shape) < 0.1] = np.nan
        probs = rng.random((4, n, 3)).astype(np.float32)
    else:
        y = rng.integers(0, 3, n)
        probs = stack(rng, 4, n, 3, ties=True)
    got = evaluation_metrics(y, probs, kind, groups=patients)["auroc_se"]
    expected = [axes.auroc_standard_error(y, p, kind, patients) for p in probs]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    unclustered = evaluation_metrics(y, probs, kind)["auroc_se"]
    np.testing.assert_allclose(evaluation_metrics(y, probs, kind, groups=np.arange(n))["auroc_se"], unclustered,
                               rtol=1e-12, atol=1e-15)
    assert not np.allclose(got, unclustered)
