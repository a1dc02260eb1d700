"""Backends agree: torch (and cuML where importable) against the sklearn reference on every task kind."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from crs.probes import batched_nll, fit_probes, macro_auroc
from crs.probes.base import subset_standardiser


def learnable(kind: str, n: int = 700, dim: int = 24, k: int = 4, seed: int = 0):
    """Correlated, offset features with a planted linear signal (so rotation and standardising matter)."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    X = (rng.normal(size=(n, dim)) @ mixing * rng.uniform(0.5, 3, dim) + rng.normal(size=dim)).astype(np.float32)
    signal = (X - X.mean(0)) / X.std(0) @ rng.normal(size=(dim, k)) * 0.6
    if kind == "multilabel":
        y = (signal + rng.logistic(size=signal.shape) > 0.3).astype(np.float32)
        y[rng.random(y.shape) < 0.1] = np.nan
    else:
        y = np.argmax(signal + rng.gumbel(size=signal.shape), axis=1).astype(np.int64)
    return X, y


def objective(probe_set, X_train, y_train, subsets, kind):
    """scikit-learn's objective per subset at its selected C: C * sum of losses + ||w||^2 / 2.

    Weights on standardised features are the folded weights times the subset's std; the loss uses
    the probe's own predictions on its training rows. Multilabel: summed over labels on non-NaN rows.
    """
    values = []
    proba = probe_set.predict_proba(X_train)
    for s, subset in enumerate(subsets):
        _, std = subset_standardiser(X_train[subset], probe_set.center)
        w_std = probe_set.weights[s] * std[:, None]
        p = np.clip(proba[s, subset].astype(np.float64), 1e-300, 1)
        y = y_train[subset]
        if kind == "multilabel":
            mask = ~np.isnan(y)
            t = np.where(mask, y, 0)
            loss = -(t * np.log(p) + (1 - t) * np.log(np.clip(1 - p, 1e-300, 1))) * mask
            loss_sum = loss.sum()
        else:
            loss_sum = -np.log(p[np.arange(len(y)), y]).sum()
        values.append(probe_set.selected_C[s] * loss_sum + 0.5 * np.square(w_std).sum())
    return np.array(values)


BACKENDS = [("torch", {"path": "warm"}), ("torch", {"path": "batched"}), ("torch", {"dtype": "float64"})]
if importlib.util.find_spec("cuml") is not None:
    BACKENDS.append(("cuml", {}))


@pytest.mark.parametrize("kind", ["multiclass", "ordinal", "multilabel"])
@pytest.mark.parametrize("backend,options", BACKENDS)
def test_backend_matches_sklearn(kind, backend, options):
    X, y = learnable(kind, seed={"multiclass": 0, "ordinal": 1, "multilabel": 2}[kind])
    X_train, y_train, X_val, y_val, X_test, y_test = X[:400], y[:400], X[400:550], y[400:550], X[550:], y[550:]
    subsets = []
    for seed in range(2):
        order = np.random.default_rng(seed).permutation(400)
        subsets += [order[:20], order[:100], order]  # 20 rows < 24 features: the row-space case
    Cs = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
    reference = fit_probes(X_train, y_train, X_val, y_val, subsets, kind, Cs=Cs, n_classes=4)
    candidate = fit_probes(
        X_train, y_train, X_val, y_val, subsets, kind, backend=backend, Cs=Cs, n_classes=4, **options
    )
    assert reference.converged.all() and candidate.converged.all()
    np.testing.assert_array_equal(candidate.selected_C, reference.selected_C)
    p_ref, p_new = reference.predict_proba(X_test), candidate.predict_proba(X_test)
    np.testing.assert_allclose(macro_auroc(y_test, p_new), macro_auroc(y_test, p_ref), atol=0.002)
    np.testing.assert_allclose(batched_nll(y_test, p_new), batched_nll(y_test, p_ref), rtol=0.01)
    f_ref = objective(reference, X_train, y_train, subsets, kind)
    f_new = objective(candidate, X_train, y_train, subsets, kind)
    # No worse than scikit-learn's, up to float32 rounding of the loss (1e-6 relative).
    assert (f_new <= f_ref * (1 + 1e-6)).all(), (f_new - f_ref) / f_ref


def test_warm_path_stops_after_validation_falls_and_never_selects_a_skipped_C():
    X, y = learnable("multiclass", seed=3)
    Cs = tuple(np.logspace(-4, 3, 10))
    probe_set = fit_probes(
        X[:400], y[:400], X[400:550], y[400:550], [np.arange(60)], "multiclass", backend="torch", Cs=Cs, patience=1,
        selection="auroc",
    )
    scores = probe_set.val_scores[0]
    reached = ~np.isnan(scores)
    last = np.flatnonzero(reached)[-1]
    assert last < len(Cs) - 1, "a small noisy subset should overfit well before C = 1000"
    assert scores[last] < np.nanmax(scores[:last]) and not reached[last + 1 :].any()
    assert probe_set.selected_C[0] == Cs[int(np.nanargmax(scores))]


def test_cuml_missing_gives_a_clear_error():
    if importlib.util.find_spec("cuml") is not None:
        pytest.skip("cuML is installed here")
    X, y = learnable("multiclass", n=80)
    with pytest.raises(ImportError, match="cuml"):
        fit_probes(X[:60], y[:60], X[60:], y[60:], [np.arange(60)], "multiclass", backend="cuml")


def test_shared_basis_reaches_the_same_probes_and_is_refused_for_a_rank_deficient_unit():
    """Rotating every subset with more rows than features into the largest subset's eigenbasis is
    only a change of coordinates: the fitted probes equal those from each subset's own basis. When
    the largest subset is rank-deficient (a duplicated feature), no basis is shared."""
    import torch

    from crs.probes.base import prepare
    from crs.probes.torch_batched import shared_basis

    X, y = learnable("multiclass", seed=4)
    subsets = [np.arange(0, 400, 2), np.arange(1, 400, 2), np.arange(400)]
    common = dict(backend="torch", Cs=(1e-2, 1e-1, 1.0), n_classes=4, tol=1e-7, path_tol=1e-7)
    shared = fit_probes(X[:400], y[:400], X[400:550], y[400:550], subsets, "multiclass", **common)
    own = fit_probes(X[:400], y[:400], X[400:550], y[400:550], subsets, "multiclass", share_basis=False, **common)
    np.testing.assert_array_equal(shared.selected_C, own.selected_C)
    np.testing.assert_allclose(shared.predict_proba(X[550:]), own.predict_proba(X[550:]), atol=2e-4)

    data = prepare(X[:400], y[:400], X[400:550], y[400:550], subsets, "multiclass", (1.0,), 4)
    basis = shared_basis(data, torch.device("cpu"), torch.float32)
    assert basis is not None and basis.V.shape == (24, 24)
    # the projection of every row, made once, is the largest subset's standardised rows rotated
    standardised = (X[:400].astype(np.float64) - data.center - basis.mean) / basis.std
    np.testing.assert_allclose(basis.Z[:, :24].numpy(), standardised @ basis.V.double().numpy(), atol=1e-4)
    assert (basis.Z[:, 24] == 1).all()
    X_dup = np.concatenate([X, X[:, :1] * 2.0], axis=1)  # a feature that is twice another: rank 24 of 25
    data = prepare(X_dup[:400], y[:400], X_dup[400:550], y[400:550], subsets, "multiclass", (1.0,), 4)
    assert shared_basis(data, torch.device("cpu"), torch.float32) is None


def test_subset_moments_equal_each_subsets_two_pass_standardiser():
    from crs.probes.base import subset_moments

    rng = np.random.default_rng(5)
    X = (rng.normal(size=(3000, 7)) * rng.uniform(0.01, 50, 7) + rng.normal(size=7) * 100).astype(np.float16)
    X[:, 3] = 2.5  # a constant feature: std floored
    center = X.astype(np.float64).mean(axis=0)
    subsets = [np.sort(rng.choice(3000, n, replace=False)) for n in (5, 300, 2999)] + [np.arange(3000)]
    means, stds = subset_moments(X, center, subsets, block=512)
    for u, subset in enumerate(subsets):
        mean, std = subset_standardiser(X, center, subset)
        np.testing.assert_allclose(means[u], mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(stds[u], std, rtol=1e-9)
    assert (stds[:, 3] == 1e-6).all()


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_warm_started_label_fractions_reach_the_same_probes_in_fewer_steps(kind, monkeypatch):
    """Each fraction's path starting from the smaller nested fraction's solution (shared basis) is
    only a different starting point: the probes equal those fitted from zero, and L-BFGS evaluates
    the objective fewer times at the first C of the fractions it starts (the later C of a path start
    warm either way, so only those solves differ by construction)."""
    import crs.probes.torch_batched as torch_batched

    X, y = learnable(kind, n=1400, seed=6)
    rng = np.random.default_rng(0)
    order = rng.permutation(1000)
    subsets = [np.sort(order[:n]) for n in (100, 250, 500, 1000)]  # nested fractions, all with > D rows
    Cs = (1e-2, 1e-1, 1.0)
    common = dict(backend="torch", Cs=Cs, n_classes=4, tol=1e-7, path_tol=1e-7)
    evaluations = {}
    fitted = {}
    original = torch_batched.lbfgs
    for warm in (False, True):
        count = [0]

        def counting(problem, Cs_solved, W0, options, frozen=None, count=count):
            first_C_of_a_later_fraction = problem.Z.shape[1] > 100 and Cs_solved.numel() == 1 and (
                abs(float(Cs_solved.flatten()[0]) - Cs[0]) < 1e-9) and W0.shape[1] == 1
            evaluate = problem.value_and_grad

            def counted(W, lam):
                count[0] += first_C_of_a_later_fraction
                return evaluate(W, lam)

            problem.value_and_grad = counted
            try:
                return original(problem, Cs_solved, W0, options, frozen)
            finally:
                del problem.value_and_grad

        monkeypatch.setattr(torch_batched, "lbfgs", counting)
        fitted[warm] = fit_probes(X[:1000], y[:1000], X[1000:1200], y[1000:1200], subsets, kind,
                                  warm_groups=warm, **common)
        evaluations[warm] = count[0]
    monkeypatch.setattr(torch_batched, "lbfgs", original)
    np.testing.assert_array_equal(fitted[True].selected_C, fitted[False].selected_C)
    np.testing.assert_allclose(fitted[True].predict_proba(X[1200:]), fitted[False].predict_proba(X[1200:]), atol=1e-4)
    assert 0 < evaluations[True] < evaluations[False], evaluations


@pytest.mark.parametrize("multilabel", [False, True])
def test_objective_in_row_blocks_equals_one_pass(multilabel, monkeypatch):
    """The objective and gradient summed over blocks of rows (each block's logits and gradient back to
    back) equal the one-pass ones: only the order of the float sums differs."""
    import torch

    import crs.probes.torch_batched as torch_batched

    rng = np.random.default_rng(7)
    S, n, R, K, Cb = 3, 101, 9, 4, 2
    Z = torch.as_tensor(rng.normal(size=(S, n, R)), dtype=torch.float64)
    Z[:, :, -1] = 1.0
    if multilabel:
        y = (rng.random((S, n, K)) < 0.3).astype(float)
        valid = rng.random((S, n, K)) < 0.9
        extra = {"row_weights": torch.as_tensor(valid / valid.sum(axis=1, keepdims=True)), "class_mask": None}
        targets = torch.as_tensor(np.where(valid, y, 0.0))
    else:
        labels = rng.integers(0, K, size=(S, n))
        targets = torch.as_tensor(np.eye(K)[labels])
        extra = {"row_weights": None, "class_mask": torch.zeros(S, K, dtype=torch.float64)}
    problem = torch_batched.GroupProblem(Z=Z, targets=targets, variance=torch.ones(S, R, dtype=torch.float64),
                                         label_rows=torch.full((S, K), float(n), dtype=torch.float64),
                                         multilabel=multilabel, **extra)
    W = torch.as_tensor(rng.normal(size=(S, Cb, R, K)) * 0.3)
    lam = problem.penalty(torch.tensor([0.1, 1.0], dtype=torch.float64))
    monkeypatch.setattr(torch_batched, "EVALUATION_ROWS", 10**9)
    f_one, g_one = problem.value_and_grad(W, lam)
    monkeypatch.setattr(torch_batched, "EVALUATION_ROWS", 16)  # 7 blocks, the last one partial
    f_blocks, g_blocks = problem.value_and_grad(W, lam)
    torch.testing.assert_close(f_blocks, f_one, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_blocks, g_one, rtol=1e-12, atol=1e-12)
    assert float(g_one.abs().max()) > 1e-3  # a gradient that can disagree


@pytest.mark.parametrize("multilabel", [False, True])
def test_compiled_float32_pass_gives_torchs_objective(multilabel, monkeypatch):
    """The float32 path's compiled pass (crs.probes.path_kernel, groups of FUSED_ROWS rows and up)
    against torch's blocks on the same float32 problem, and both against the float64 objective: the
    same function to float32 rounding, with a row count that is no multiple of four, two C values at
    once, an ignored label entry (weight 0) and (softmax) a class the group lacks."""
    import torch

    import crs.probes.torch_batched as torch_batched
    from crs.probes import path_kernel

    if path_kernel.group_pass is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(8)
    S, n, R, K, Cb = 2, 203, 33, 4, 2
    Z = rng.normal(size=(S, n, R))
    Z[:, :, -1] = 1.0
    if multilabel:
        y = (rng.random((S, n, K)) < 0.3).astype(float)
        valid = rng.random((S, n, K)) < 0.9
        extra = {"row_weights": valid / valid.sum(axis=1, keepdims=True), "class_mask": None}
        targets = np.where(valid, y, 0.0)
    else:
        labels = rng.integers(0, K - 1, size=(S, n))  # class K - 1 absent
        targets = np.eye(K)[labels]
        extra = {"row_weights": None, "class_mask": np.where(np.arange(K) == K - 1, -np.inf, 0.0)[None].repeat(S, 0)}
    W = rng.normal(size=(S, Cb, R, K)) * 0.3

    def problem(dtype):
        tensors = {key: None if value is None else torch.as_tensor(value, dtype=dtype) for key, value in extra.items()}
        return torch_batched.GroupProblem(Z=torch.as_tensor(Z, dtype=dtype), targets=torch.as_tensor(targets, dtype=dtype),
                                          variance=torch.ones(S, R, dtype=dtype),
                                          label_rows=torch.full((S, K), float(n), dtype=dtype),
                                          multilabel=multilabel, **tensors)

    results = {}
    original = torch_batched.GroupProblem._data_block
    for name, dtype, fused in (("exact", torch.float64, False), ("torch", torch.float32, False), ("compiled", torch.float32, True)):
        monkeypatch.setenv("CRS_NO_NUMBA", "0" if fused else "1")
        monkeypatch.setattr(torch_batched, "FUSED_ROWS", 1)
        called: list[int] = []
        monkeypatch.setattr(torch_batched.GroupProblem, "_data_block",
                            lambda self, *a, called=called: called.append(1) or original(self, *a))
        group = problem(dtype)
        f, g = group.value_and_grad(torch.as_tensor(W, dtype=dtype), group.penalty(torch.tensor([0.1, 1.0], dtype=dtype)))
        assert bool(called) != fused  # the compiled pass replaces torch's blocks
        results[name] = (f.double(), g.double())
    f_exact, g_exact = results["exact"]
    for name in ("torch", "compiled"):
        f, g = results[name]
        torch.testing.assert_close(f, f_exact, rtol=1e-6, atol=0)
        assert float((g - g_exact).abs().max()) <= 1e-6 * float(g_exact.abs().max()), name
    assert torch.isfinite(results["compiled"][1]).all()
