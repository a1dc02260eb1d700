"""The C-selection protocol: validation log-loss by default, validation rows drawn at the training
fraction (nested, stratified, floored), each subset scored on its own validation rows."""

from __future__ import annotations

import numpy as np
import pytest

from crs import axes
from crs.data.base import VALIDATION_STREAM, nested_label_fractions
from crs.probes import fit_probes


def planted(n: int = 3000, dim: int = 48, k: int = 5, seed: int = 0):
    """A 5-class task with planted linear signal in correlated features (test AUROC ~0.82; ECE across
    the default C grid 0.05-0.22)."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 16))
    X = (latent @ rng.normal(size=(16, dim)) / 4 + rng.normal(size=(n, dim))).astype(np.float32)
    y = np.argmax(latent @ rng.normal(size=(16, k)) * 0.6 + rng.gumbel(size=(n, k)), axis=1).astype(np.int64)
    return X, y


def test_logloss_chosen_C_is_calibrated_within_twice_the_best_ECE_on_the_grid():
    X, y = planted()
    train, val, test = np.arange(1000), np.arange(1000, 2000), np.arange(2000, 3000)
    Cs = tuple(float(c) for c in np.logspace(-4, 1, 8))
    subsets = [np.arange(1000)]

    def test_ece(probe_set):
        return axes.ece(y[test], probe_set.predict_proba(X[test])[0], "multiclass")

    grid = [test_ece(fit_probes(X[train], y[train], X[val], y[val], subsets, "multiclass", Cs=(C,))) for C in Cs]
    chosen = fit_probes(X[train], y[train], X[val], y[val], subsets, "multiclass", Cs=Cs)
    assert chosen.selection == "logloss"
    assert test_ece(chosen) <= 2 * min(grid)
    assert max(grid) > 4 * min(grid), "the grid must span badly calibrated C values for the test to mean something"


def test_validation_rows_are_nested_stratified_floored_and_independent_of_training_rows():
    rng = np.random.default_rng(1)
    labels = rng.choice(4, size=2000, p=[0.85, 0.1, 0.04, 0.01])
    fractions = (0.01, 0.1, 1.0)
    drawn = nested_label_fractions(labels, fractions, seed=3, min_per_class=3, stream=VALIDATION_STREAM)
    assert set(drawn[0.01]) <= set(drawn[0.1]) <= set(drawn[1.0]) and len(drawn[1.0]) == 2000
    assert all((labels[drawn[0.01]] == c).sum() >= 3 for c in range(4))
    training_draw = nested_label_fractions(labels, fractions, seed=3, min_per_class=3)
    assert not np.array_equal(drawn[0.1], training_draw[0.1])
    again = nested_label_fractions(labels, fractions, seed=3, min_per_class=3, stream=VALIDATION_STREAM)
    assert all(np.array_equal(drawn[f], again[f]) for f in fractions)


@pytest.mark.parametrize("backend", ["sklearn", "torch"])
def test_each_subset_chooses_C_on_its_own_validation_rows(backend):
    X, y = planted(n=1600, seed=2)
    train, val = np.arange(800), np.arange(800, 1600)
    Cs = (1e-3, 1e-1, 10.0)
    options = {"patience": 9} if backend == "torch" else {}  # the whole C path, as the reference
    everything = np.arange(800)
    small_val = np.arange(0, 800, 20)  # 40 validation rows
    together = fit_probes(X[train], y[train], X[val], y[val], [everything, everything], "multiclass",
                          backend=backend, Cs=Cs, val_subsets=[small_val, np.arange(800)], **options)
    alone = fit_probes(X[train], y[train], X[val][small_val], y[val][small_val], [everything], "multiclass",
                       backend=backend, Cs=Cs, **options)
    full = fit_probes(X[train], y[train], X[val], y[val], [everything], "multiclass", backend=backend, Cs=Cs, **options)
    # identical training rows, different validation rows: two fits, each scored like its own run
    np.testing.assert_allclose(together.val_scores[0], alone.val_scores[0], rtol=1e-5)
    np.testing.assert_allclose(together.val_scores[1], full.val_scores[0], rtol=1e-5)
    assert not np.allclose(together.val_scores[0], together.val_scores[1])
