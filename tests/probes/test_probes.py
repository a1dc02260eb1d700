"""Probe interface, sklearn backend and batched metrics, checked against scikit-learn directly."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.preprocessing import StandardScaler

import crs.probes as probes
from crs.probes import ProbeError, batched_auroc, batched_nll, fit_probes, macro_auroc


def learnable(kind: str, n: int = 500, dim: int = 16, k: int = 4, seed: int = 0):
    """Features with a planted linear signal plus noise, offset and scaled so standardising matters."""
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, dim)) * rng.uniform(0.5, 3, dim) + rng.normal(size=dim)).astype(np.float32)
    W = rng.normal(size=(dim, k))
    logits = (X - X.mean(0)) / X.std(0) @ W
    if kind == "multilabel":
        y = (logits + rng.logistic(size=logits.shape) * 2 > 0).astype(np.float32)
        y[rng.random(y.shape) < 0.1] = np.nan
    else:
        y = np.argmax(logits + rng.gumbel(size=logits.shape) * 2, axis=1).astype(np.int64)
    return X, y


def optimum(C: float) -> LogisticRegression:
    """scikit-learn fitted to the float64 optimum (its default tol 1e-4 stops ~1e-4 short in
    probability; the backends polish every selected probe to the optimum). Fit it on float64 rows:
    on float32 rows scikit-learn solves in float32."""
    return LogisticRegression(C=C, max_iter=100_000, tol=1e-12)


# --- batched metrics -------------------------------------------------------------------------


@pytest.mark.usefixtures("numba_path")
def test_batched_auroc_matches_sklearn_with_ties():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 200)
    scores = np.round(rng.random((4, 200, 3)), 1)  # rounding makes many ties
    got = batched_auroc(y, scores)
    for i in range(4):
        for k in range(3):
            assert got[i, k] == pytest.approx(roc_auc_score(y == k, scores[i, :, k]), abs=1e-12)
    macro = macro_auroc(y, scores)
    assert macro[2] == pytest.approx(np.mean([roc_auc_score(y == k, scores[2, :, k]) for k in range(3)]))


@pytest.mark.usefixtures("numba_path")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_auroc_float32_keys_handle_ties_signs_and_signed_zeros(dtype):
    """The sort-key path (float32) and the argsort path (float64) on scores with many exact ties,
    negative values and both signed zeros (equal values, so they must tie), against roc_auc_score."""
    rng = np.random.default_rng(7)
    y = rng.integers(0, 4, 90)
    scores = np.round(rng.random((3, 90, 4)) * 2 - 1, 1).astype(dtype)
    scores[:, :10] = -0.0
    scores[:, 10:20] = 0.0
    scores[1] = rng.random((90, 4)).astype(dtype)  # one probe without ties (the fast path)
    got = batched_auroc(y, scores)
    for i in range(3):
        for k in range(4):
            assert got[i, k] == pytest.approx(roc_auc_score(y == k, scores[i, :, k]), abs=1e-12)


@pytest.mark.usefixtures("numba_path")
def test_batched_auroc_multilabel_ignores_nan_rows_and_marks_undefined_columns():
    rng = np.random.default_rng(2)
    y = (rng.random((150, 3)) < 0.4).astype(np.float32)
    y[rng.random((150, 3)) < 0.2] = np.nan
    y[:, 2] = np.where(np.isnan(y[:, 2]), np.nan, 1.0)  # one value only: AUROC undefined
    scores = rng.random((2, 150, 3))
    got = batched_auroc(y, scores)
    for k in range(2):
        rows = ~np.isnan(y[:, k])
        assert got[1, k] == pytest.approx(roc_auc_score(y[rows, k], scores[1, rows, k]), abs=1e-12)
    assert np.isnan(got[:, 2]).all()
    assert macro_auroc(y, scores)[0] == pytest.approx(got[0, :2].mean())


def test_batched_nll_matches_sklearn_log_loss():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 100)
    proba = rng.dirichlet(np.ones(4), size=(3, 100))
    assert batched_nll(y, proba)[1] == pytest.approx(log_loss(y, proba[1], labels=range(4)))
    ym = (rng.random((100, 2)) < 0.5).astype(float)
    ym[:10, 0] = np.nan
    pm = rng.uniform(0.05, 0.95, (100, 2))
    expected = np.mean([log_loss(ym[10:, 0], pm[10:, 0]), log_loss(ym[:, 1], pm[:, 1])])
    assert batched_nll(ym, pm[None])[0] == pytest.approx(expected)


# --- sklearn backend against a hand-written scikit-learn loop --------------------------------


@pytest.mark.parametrize("kind", ["multiclass", "ordinal"])
def test_sklearn_backend_equals_direct_loop(kind):
    X, y = learnable(kind)
    X_train, y_train, X_val, y_val, X_test = X[:300], y[:300], X[300:400], y[300:400], X[400:]
    rng = np.random.default_rng(0)
    subsets = [rng.choice(300, 80, replace=False), np.arange(300)]
    Cs = (1e-3, 1e-2, 1e-1, 1.0)
    probe_set = fit_probes(X_train, y_train, X_val, y_val, subsets, kind, Cs=Cs, n_classes=4, selection="auroc")
    assert probe_set.converged.all()
    proba = probe_set.predict_proba(X_test)
    assert proba.shape == (2, 100, 4)
    np.testing.assert_allclose(proba.sum(-1), 1, atol=1e-5)
    X_train, X_val, X_test = (a.astype(np.float64) for a in (X_train, X_val, X_test))  # sklearn fits float32 in float32
    for s, subset in enumerate(subsets):
        scaler = StandardScaler().fit(X_train[subset])
        models = [
            optimum(C).fit(scaler.transform(X_train[subset]), y_train[subset])
            for C in Cs
        ]
        val = [roc_auc_score(y_val, m.predict_proba(scaler.transform(X_val)), multi_class="ovr") for m in models]
        best = int(np.argmax(val))
        assert probe_set.selected_C[s] == Cs[best]
        assert probe_set.val_score[s] == pytest.approx(val[best], abs=1e-9)
        expected = models[best].predict_proba(scaler.transform(X_test))
        np.testing.assert_allclose(proba[s], expected, atol=1e-6)


def test_absent_class_gets_a_column_with_zero_probability():
    X, y = learnable("multiclass", k=4)
    keep = np.flatnonzero(y[:300] != 3)[:120]  # the training subset never sees class 3
    probe_set = fit_probes(X[:300], y[:300], X[300:400], y[300:400], [keep], "multiclass", Cs=(0.1,), n_classes=5)
    proba = probe_set.predict_proba(X[400:])
    assert proba.shape == (1, 100, 5)
    assert proba[..., 3].max() < 1e-12 and proba[..., 4].max() < 1e-12
    np.testing.assert_allclose(proba.sum(-1), 1, atol=1e-5)


def test_two_present_classes_give_the_multinomial_optimum():
    # With two classes the multinomial L2 optimum is the binary model with 2C split as (-w/2, w/2):
    # the softmax depends on w2 - w1 = d only and |w1|^2 + |w2|^2 is smallest (|d|^2 / 2) there.
    X, y = learnable("multiclass", k=3)
    keep = np.flatnonzero(y[:300] != 2)
    probe_set = fit_probes(X[:300], y[:300], X[300:], y[300:], [keep], "multiclass", Cs=(0.05,))
    X = X.astype(np.float64)
    scaler = StandardScaler().fit(X[keep])
    binary = optimum(0.1).fit(scaler.transform(X[keep]), y[keep])
    proba = probe_set.predict_proba(X[300:])[0]
    np.testing.assert_allclose(proba[:, 1], binary.predict_proba(scaler.transform(X[300:]))[:, 1], atol=1e-6)


def test_multilabel_fits_one_binary_model_per_label_and_constant_label_predicts_prevalence():
    X, y = learnable("multilabel", k=3)
    y[:300, 2] = np.where(np.isnan(y[:300, 2]), np.nan, 0.0)  # label 2 all negative in training
    subset = np.arange(300)
    probe_set = fit_probes(X[:300], y[:300], X[300:400], y[300:400], [subset], "multilabel", Cs=(0.1,))
    proba = probe_set.predict_proba(X[400:])[0]
    X = X.astype(np.float64)
    scaler = StandardScaler().fit(X[:300])
    rows = ~np.isnan(y[:300, 0])
    model = optimum(0.1).fit(scaler.transform(X[:300][rows]), y[:300][rows, 0])
    np.testing.assert_allclose(proba[:, 0], model.predict_proba(scaler.transform(X[400:]))[:, 1], atol=1e-6)
    np.testing.assert_allclose(proba[:, 2], probes.base.PREVALENCE_CLIP, rtol=1e-3)


def test_ties_go_to_the_smaller_C():
    # One feature that separates the classes perfectly: every C gives validation AUROC 1, so the
    # rule "ties to the smaller C" must pick the first C.
    x = np.concatenate([np.linspace(-2, -1, 20), np.linspace(1, 2, 20)]).astype(np.float32)[:, None]
    y = np.repeat([0, 1], 20)
    probe_set = fit_probes(x, y, x, y, [np.arange(40)], "multiclass", Cs=(10.0, 0.01, 1.0), selection="auroc")
    assert probe_set.selected_C[0] == 0.01 and probe_set.val_score[0] == 1.0


@pytest.mark.parametrize("selection", ["logloss", "nll"])
def test_logloss_selection_picks_the_lowest_validation_log_loss(selection):
    X, y = learnable("multiclass", seed=4)
    Cs = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
    probe_set = fit_probes(X[:200], y[:200], X[200:300], y[200:300], [np.arange(200)], "multiclass", Cs=Cs, selection=selection)
    X = X.astype(np.float64)
    scaler = StandardScaler().fit(X[:200])
    losses = [
        log_loss(y[200:300], optimum(C).fit(scaler.transform(X[:200]), y[:200]).predict_proba(scaler.transform(X[200:300])), labels=range(4))
        for C in Cs
    ]
    assert probe_set.selected_C[0] == Cs[int(np.argmin(losses))]
    assert probe_set.val_score[0] == pytest.approx(min(losses), rel=1e-6)


def test_identical_subsets_are_fitted_once_and_agree():
    X, y = learnable("multiclass")
    everything = np.arange(300)
    probe_set = fit_probes(X[:300], y[:300], X[300:], y[300:], [everything, everything[::-1].copy()], "multiclass", Cs=(0.1, 1.0))
    proba = probe_set.predict_proba(X[300:])
    np.testing.assert_array_equal(proba[0], proba[1])


def test_bad_options_name_the_valid_choices():
    X, y = learnable("multiclass", n=60)
    args = (X[:40], y[:40], X[40:], y[40:], [np.arange(40)], "multiclass")
    with pytest.raises(ProbeError, match="sklearn"):
        fit_probes(*args, backend="sparkml")
    with pytest.raises(ProbeError, match="logistic"):
        fit_probes(*args, family="forest")
    with pytest.raises(ProbeError, match="auroc"):
        fit_probes(*args, selection="accuracy")
    with pytest.raises(ProbeError, match="kind"):
        fit_probes(X[:40], y[:40], X[40:], y[40:], [np.arange(40)], "regression")
    with pytest.raises(ProbeError, match="subsets\\[0\\]"):
        fit_probes(X[:40], y[:40], X[40:], y[40:], [np.arange(35, 45)], "multiclass")
    bad = X[:40].copy()
    bad[3, 2] = np.nan
    with pytest.raises(ProbeError, match="NaN"):
        fit_probes(bad, y[:40], X[40:], y[40:], [np.arange(40)], "multiclass")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_last_axis_max_and_sum_equal_numpy_bit_for_bit(dtype):
    """The softmax's row max and row sum are computed as elementwise passes; they must equal numpy's
    own reductions exactly (stored predictions and the golden records depend on it)."""
    from crs.probes.base import max_last, sum_last

    rng = np.random.default_rng(5)
    for K in [*range(1, 20), 23, 64, 130]:
        values = (rng.random((40, 30, K)) * rng.choice([1e-4, 1.0, 1e4], size=(40, 30, K))).astype(dtype)
        np.testing.assert_array_equal(sum_last(values), values.sum(axis=-1), err_msg=f"K={K}")
        np.testing.assert_array_equal(max_last(values), values.max(axis=-1), err_msg=f"K={K}")
