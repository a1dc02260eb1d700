"""The batched temperature fits (crs.evaluate.temperature) against a reference optimiser, set by set.

Every (label fraction, seed) of a unit has its own validation rows; they are fitted together. The
reference is scipy's L-BFGS on one set's log-loss (the earlier per-set fit), written here in full so
the two share no code: the batched Newton fit must reach the same optimum for every set, and a set's
result must not depend on which other sets are fitted beside it.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_softmax

from crs.evaluate.temperature import fit_temperatures


def reference_fit(cosine, labels, kind, scale, bias):
    """argmin over (log T, b) of the mean log-loss, by scipy (b only for multilabel)."""
    def loss(theta):
        a = scale * np.exp(-theta[0])
        if kind == "multilabel":
            p = np.clip(expit(a * cosine + theta[1]), 1e-300, 1 - 1e-16)
            known = ~np.isnan(labels)
            y = np.nan_to_num(labels)
            return float(-(y * np.log(p) + (1 - y) * np.log1p(-p))[known].mean())
        return float(-log_softmax(a * cosine, axis=1)[np.arange(len(labels)), labels].mean())

    start = [0.0, bias if kind == "multilabel" else 0.0]
    result = minimize(loss, start, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000})
    return float(np.exp(result.x[0])), float(result.x[1]) if kind == "multilabel" else bias


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_batched_fits_match_the_reference_set_by_set(kind):
    rng = np.random.default_rng(11)
    n, k = 900, 4
    cosine = rng.normal(0.0, 0.12, size=(n, k))
    if kind == "multilabel":
        labels = (rng.random((n, k)) < expit(20.0 * cosine - 0.7)).astype(float)
        labels[rng.random((n, k)) < 0.05] = np.nan  # unknown labels are ignored
        scale, bias = 10.0, -10.0  # SigLIP's initial values: far from the optimum
    else:
        labels = np.argmax(20.0 * cosine + rng.gumbel(size=(n, k)), axis=1)
        scale, bias = 100.0, 0.0
    row_sets = [np.sort(rng.choice(n, size, replace=False)) for size in (40, 150, 400)] + [np.arange(n)]
    temperatures, biases = fit_temperatures(cosine, labels, kind, scale, bias, row_sets)
    for rows, temperature, fitted_bias in zip(row_sets, temperatures, biases, strict=True):
        want_t, want_b = reference_fit(cosine[rows], labels[rows], kind, scale, bias)
        assert temperature == pytest.approx(want_t, rel=1e-5)
        assert fitted_bias == pytest.approx(want_b, abs=1e-5)
    # a set's fit does not depend on its neighbours in the batch
    alone = fit_temperatures(cosine, labels, kind, scale, bias, row_sets[1:2])
    assert alone[0][0] == pytest.approx(temperatures[1], rel=1e-10)
    assert alone[1][0] == pytest.approx(biases[1], abs=1e-10)


def test_a_set_whose_labels_carry_no_signal_stops_at_the_bound():
    rng = np.random.default_rng(5)
    cosine = rng.normal(0.0, 0.1, size=(300, 3))
    labels = rng.integers(0, 3, 300)  # independent of the cosines: the best scale is ~0, T at its bound
    temperatures, _ = fit_temperatures(cosine, labels, "multiclass", 100.0, 0.0, [np.arange(300)])
    assert temperatures[0] > 50.0 and np.isfinite(temperatures[0])


def test_a_saturated_shipped_scale_starts_the_sigmoid_fit_near_its_optimum(monkeypatch):
    """CLIP's scale 100 saturates sigmoid(100 cos): damped Newton from there took ~20-70 loss evaluations.
    The moment start (crs.evaluate.temperature._sigmoid_start) reaches the same optimum in a few."""
    from crs.evaluate import temperature

    rng = np.random.default_rng(3)
    n, k = 3000, 5
    cosine = rng.normal(0.25, 0.03, size=(n, k))
    labels = (rng.random((n, k)) < expit(40.0 * (cosine - 0.25) - 1.5)).astype(float)
    labels[rng.random((n, k)) < 0.2] = np.nan
    row_sets = [np.sort(rng.choice(n, size, replace=False)) for size in (60, 300)] + [np.arange(n)]
    calls = []
    original = temperature._sigmoid_terms

    def counted(c, *rest):
        calls.append(len(c))
        return original(c, *rest)

    monkeypatch.setattr(temperature, "_sigmoid_terms", counted)
    temperatures, biases = fit_temperatures(cosine, labels, "multilabel", 100.0, 0.0, row_sets)
    assert len(calls) <= 12, len(calls)
    for rows, found_t, found_b in zip(row_sets, temperatures, biases, strict=True):
        want_t, want_b = reference_fit(cosine[rows], labels[rows], "multilabel", 100.0, 0.0)
        assert found_t == pytest.approx(want_t, rel=1e-5)
        assert found_b == pytest.approx(want_b, abs=1e-4)
