"""Reference backend: one scikit-learn ``LogisticRegression`` (L-BFGS, L2) per (subset, C).

Everything else is checked against this. Multiclass and ordinal tasks fit a multinomial model over
the classes present in the subset; multilabel tasks fit one binary model per label on its non-NaN
rows. Convergence is checked, not assumed: a ``ConvergenceWarning`` marks the subset unconverged in
``ProbeSet.converged``.
"""

from __future__ import annotations

import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from crs.probes.base import (
    ProblemData,
    constant_label_bias,
    fold_standardisation,
    link_function,
    subset_moments,
    subset_standardiser,
)
from crs.probes.polish import polish, validation_score
from crs.probes.selection import assemble_linear, select_C, subset_validation_scores

MAX_ITER = 5000
TOL = 1e-4
"""scikit-learn's default tolerance, as the loop a careful user writes; MAX_ITER is raised so that
fits converge (checked through ConvergenceWarning)."""


def fit_logistic(
    X: np.ndarray, y: np.ndarray, C: float, kind: str, n_classes: int, random_state: int, fit_one=None
) -> tuple[np.ndarray, np.ndarray, bool]:
    """One probe on standardised ``X``: returns weights (D, K), bias (K,), converged.

    Multiclass with two classes present is fitted as the binary model with 2C and split
    symmetrically, which is exactly the multinomial L2 optimum (scikit-learn would otherwise fit a
    binary model with C, a different penalty). Absent classes get bias -inf.
    """
    dim = X.shape[1]
    _fit_one = fit_one or _fit_sklearn
    if kind == "multilabel":
        weights = np.zeros((dim, n_classes))
        bias = np.zeros(n_classes)
        converged = True
        for label in range(n_classes):
            rows = ~np.isnan(y[:, label])
            values = y[rows, label]
            if len(values) == 0 or values.min() == values.max():
                bias[label] = constant_label_bias(values.mean() if len(values) else 0.5)
                continue
            w, b, ok = _fit_one(X[rows], values.astype(np.int64), C, random_state)
            weights[:, label], bias[label] = w[:, 0], b[0]
            converged &= ok
        return weights, bias, converged
    present = np.unique(y)
    weights = np.zeros((dim, n_classes))
    bias = np.full(n_classes, -np.inf)
    if len(present) == 1:
        bias[present[0]] = 0.0
        return weights, bias, True
    if len(present) == 2:
        w, b, ok = _fit_one(X, (y == present[1]).astype(np.int64), 2 * C, random_state)
        weights[:, present] = np.concatenate([-w / 2, w / 2], axis=1)
        bias[present] = [-b[0] / 2, b[0] / 2]
        return weights, bias, ok
    w, b, ok = _fit_one(X, y, C, random_state)
    weights[:, present] = w
    bias[present] = b
    return weights, bias, ok


def _fit_sklearn(X: np.ndarray, y: np.ndarray, C: float, random_state: int) -> tuple[np.ndarray, np.ndarray, bool]:
    model = LogisticRegression(C=C, solver="lbfgs", max_iter=MAX_ITER, tol=TOL, random_state=random_state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return model.coef_.T.copy(), model.intercept_.copy(), converged


def _fit_subset(problem: ProblemData, unique: int, random_state: int, fit_one=None) -> dict:
    """All C values of one unique subset: folded weights per C and probabilities per C on its
    validation rows."""
    subset = problem.unique_subsets[unique]
    X = problem.X_train[subset]
    mean, std = subset_standardiser(X, problem.center)
    standardised = (X - problem.center - mean) / std
    rows = problem.validation_rows(unique)
    val_centered = (problem.X_val if rows is None else problem.X_val[rows]) - problem.center
    out: dict = {"weights": [], "bias": [], "proba": [], "converged": True}
    for C in problem.Cs:
        w, b, ok = fit_logistic(standardised, problem.y_train[subset], C, problem.kind, problem.n_classes, random_state, fit_one)
        folded, folded_bias = fold_standardisation(w, b, mean, std)
        out["weights"].append(folded)
        out["bias"].append(folded_bias)
        out["proba"].append(link_function(val_centered @ folded + folded_bias, problem.link))
        out["converged"] &= ok
    return out


def fit(
    problem: ProblemData,
    selection: str,
    random_state: int = 0,
    n_jobs: int = 1,
    family: str = "logistic",
    fit_one=None,
    backend: str = "sklearn",
):
    """Fit every (unique subset, C), choose C per subset on validation, return the probe set."""
    fits = Parallel(n_jobs=n_jobs)(
        delayed(_fit_subset)(problem, u, random_state, fit_one) for u in range(len(problem.unique_subsets))
    )
    # (U, n_Cs): each subset's C path scored on its own validation rows
    scores = subset_validation_scores(
        problem, lambda i, rows: np.stack(fits[i]["proba"]), range(len(fits)), selection
    )
    weights = np.stack([np.stack(f["weights"]) for f in fits])
    bias = np.stack([np.stack(f["bias"]) for f in fits])
    converged = np.array([f["converged"] for f in fits])
    best, weights, bias, converged = polish_selected(problem, selection, scores, weights, bias)
    return assemble_linear(problem, backend, family, selection, scores, weights, bias, converged, best=best)


def polish_selected(problem: ProblemData, selection: str, scores: np.ndarray, weights: np.ndarray, bias: np.ndarray):
    """Choose C per unique subset and polish each chosen probe in float64 (:mod:`crs.probes.polish`),
    so a record does not depend on where the backend's solver stopped. Updates ``scores`` at the
    chosen C to the polished probe's; returns (best, weights (U, D, K), bias (U, K), converged)."""
    best = select_C(scores)
    means, stds = subset_moments(problem.X_train, problem.center, problem.unique_subsets)
    U = len(best)
    chosen_weights, chosen_bias = np.empty((U,) + weights.shape[2:]), np.empty((U,) + bias.shape[2:])
    converged = np.zeros(U, dtype=bool)
    for u in range(U):
        chosen_weights[u], chosen_bias[u], converged[u] = polish(
            problem, u, float(problem.Cs[best[u]]), weights[u, best[u]], bias[u, best[u]], means[u], stds[u]
        )
        scores[u, best[u]] = validation_score(problem, u, chosen_weights[u], chosen_bias[u], selection)
    return best, chosen_weights, chosen_bias, converged
