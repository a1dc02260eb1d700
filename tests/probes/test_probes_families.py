"""Named alternative probe families (ridge, kNN), each checked against its scikit-learn counterpart."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

from crs.probes import ProbeError, fit_probes, macro_auroc


def data(kind: str, n: int = 400, dim: int = 12, k: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, dim)) * rng.uniform(0.5, 2, dim) + 1).astype(np.float32)
    signal = (X - X.mean(0)) / X.std(0) @ rng.normal(size=(dim, k))
    if kind == "multilabel":
        y = (signal + rng.logistic(size=signal.shape) > 0).astype(np.float32)
        y[rng.random(y.shape) < 0.1] = np.nan
        return X, y
    return X, np.argmax(signal + rng.gumbel(size=signal.shape), axis=1).astype(np.int64)


def test_ridge_decision_equals_sklearn_ridge_classifier_with_alpha_one_over_C():
    X, y = data("multiclass")
    subset = np.arange(150)
    probe_set = fit_probes(X[:250], y[:250], X[250:320], y[250:320], [subset], "multiclass", family="ridge", Cs=(0.01,))
    scaler = StandardScaler().fit(X[subset])
    reference = RidgeClassifier(alpha=100.0).fit(scaler.transform(X[subset]), y[subset])
    decision = reference.decision_function(scaler.transform(X[320:]))
    np.testing.assert_allclose(probe_set.decision_function(X[320:])[0], decision, atol=1e-4)
    proba = probe_set.predict_proba(X[320:])[0]
    expected = 1 / (1 + np.exp(-decision))
    np.testing.assert_allclose(proba, expected / expected.sum(1, keepdims=True), atol=1e-5)


def test_ridge_multilabel_uses_non_nan_rows_per_label():
    X, y = data("multilabel")
    probe_set = fit_probes(X[:250], y[:250], X[250:320], y[250:320], [np.arange(250)], "multilabel", family="ridge", Cs=(1.0,))
    rows = ~np.isnan(y[:250, 1])
    scaler = StandardScaler().fit(X[:250])
    reference = RidgeClassifier(alpha=1.0).fit(scaler.transform(X[:250])[rows], y[:250][rows, 1])
    np.testing.assert_allclose(
        probe_set.decision_function(X[320:])[0, :, 1], reference.decision_function(scaler.transform(X[320:])), atol=1e-4
    )


def test_knn_matches_sklearn_neighbours_and_selects_k_on_validation():
    X, y = data("multiclass", seed=1)
    subset = np.arange(200)
    probe_set = fit_probes(X[:200], y[:200], X[200:300], y[200:300], [subset], "multiclass", family="knn", n_classes=3,
                           selection="auroc")
    k = int(probe_set.selected_C[0])
    assert k in (5, 10, 20, 50, 100)
    scaler = StandardScaler().fit(X[subset])
    reference = KNeighborsClassifier(n_neighbors=k).fit(scaler.transform(X[subset]), y[subset])
    np.testing.assert_allclose(probe_set.predict_proba(X[300:])[0], reference.predict_proba(scaler.transform(X[300:])))
    # The selected k is the one with the best validation AUROC (ties to the smaller k).
    val = [
        macro_auroc(y[200:300], KNeighborsClassifier(n_neighbors=kk).fit(scaler.transform(X[subset]), y[subset]).predict_proba(scaler.transform(X[200:300]))[None])[0]
        for kk in (5, 10, 20, 50, 100)
    ]
    assert k == (5, 10, 20, 50, 100)[int(np.argmax(val))]


def test_knn_multilabel_averages_labels_of_neighbours():
    X, y = data("multilabel", seed=2)
    probe_set = fit_probes(X[:200], y[:200], X[200:300], y[200:300], [np.arange(200)], "multilabel", family="knn", Cs=(7,))
    proba = probe_set.predict_proba(X[300:])
    assert proba.shape == (1, 100, 3) and ((proba >= 0) & (proba <= 1)).all()
    scaler = StandardScaler().fit(X[:200])
    rows = ~np.isnan(y[:200, 0])
    # Label 0 without NaN rows in its neighbours equals sklearn's kNN on all rows only where no
    # neighbour is NaN; check a row by hand instead: the mean of its 7 nearest non-NaN labels.
    train, query = scaler.transform(X[:200]), scaler.transform(X[300:301])
    order = np.argsort(((train - query) ** 2).sum(1), kind="stable")[:7]
    neighbours = y[:200][order, 0]
    assert proba[0, 0, 0] == pytest.approx(np.nanmean(neighbours))
    assert rows.sum() < 200


def test_knn_rejects_fractional_neighbour_counts():
    X, y = data("multiclass", n=80)
    with pytest.raises(ProbeError, match="neighbour counts"):
        fit_probes(X[:60], y[:60], X[60:], y[60:], [np.arange(60)], "multiclass", family="knn", Cs=(0.5, 2))


def test_knn_spec_without_Cs_runs_stage_2(tiny_run, tmp_path):
    """A spec with ``family = "knn"`` and no ``Cs`` tries the neighbour counts (it once failed with ProbeError)."""
    from crs.benchmark import Benchmark
    from crs.spec import DEFAULT_KS, load_spec

    from tiny import write_tiny_spec

    spec, _, _, _ = tiny_run
    path = write_tiny_spec(tmp_path, cache=spec.cache, output=tmp_path / "knn")
    text = path.read_text()
    assert "Cs = [0.01, 1.0]\n" in text
    path.write_text(text.replace("Cs = [0.01, 1.0]\n", 'family = "knn"\n'))
    knn_spec = load_spec(path)
    assert knn_spec.probe.Cs is None and knn_spec.probe.grid == tuple(float(k) for k in DEFAULT_KS)
    records = Benchmark(knn_spec).probe(progress=False).records
    assert len(records) and set(records["encoder"]) == set(spec.encoder_names)
    assert set(records["selected_C"]) <= set(DEFAULT_KS)
    assert records["auroc"].notna().any()
