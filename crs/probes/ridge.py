"""Ridge classifier family: a closed-form least-squares probe, a different probe from logistic regression.

Per subset and C: targets in {-1, +1} (one column per class or label), standardised features,
intercept unpenalised, weights minimising ||Y - X W - b||^2 + ||W||^2 / C (scikit-learn's
``RidgeClassifier`` with ``alpha = 1 / C``). One eigendecomposition per subset gives every C at once.
Probabilities follow scikit-learn's convention for linear one-vs-rest scores: sigmoid of the
decision value, normalised over classes for multiclass (independent per label for multilabel).
"""

from __future__ import annotations

import numpy as np

from crs.probes.base import (
    ProblemData,
    constant_label_bias,
    fold_standardisation,
    link_function,
    subset_standardiser,
)
from crs.probes.selection import assemble_linear, validation_scores


def _ridge_path(X: np.ndarray, targets: np.ndarray, Cs: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Weights (n_Cs, D, K) and bias (n_Cs, K) of ridge on X for every C, from one eigendecomposition."""
    target_mean = targets.mean(axis=0)
    Xc = X - X.mean(axis=0)
    n, dim = Xc.shape
    if n > dim:
        eigenvalues, V = np.linalg.eigh(Xc.T @ Xc)
        projected = V.T @ (Xc.T @ (targets - target_mean))
    else:
        eigenvalues, U = np.linalg.eigh(Xc @ Xc.T)
        keep = eigenvalues > 1e-10 * eigenvalues.max()
        eigenvalues, U = eigenvalues[keep], U[:, keep]
        V = Xc.T @ U / np.sqrt(eigenvalues)
        projected = V.T @ (Xc.T @ (targets - target_mean))
    eigenvalues = np.maximum(eigenvalues, 0)
    weights = np.stack([V @ (projected / (eigenvalues + 1.0 / C)[:, None]) for C in Cs])
    bias = target_mean - X.mean(axis=0) @ weights
    return weights, bias


def fit(problem: ProblemData, selection: str, **_options):
    K, D = problem.n_classes, problem.X_train.shape[1]
    U, nC = len(problem.unique_subsets), len(problem.Cs)
    weights = np.zeros((U, nC, D, K))
    bias = np.zeros((U, nC, K))
    scores = np.zeros((U, nC))
    link = "sigmoid" if problem.kind == "multilabel" else "ovr"
    for u, subset in enumerate(problem.unique_subsets):
        mean, std = subset_standardiser(problem.X_train[subset], problem.center)
        X = (problem.X_train[subset] - problem.center - mean) / std
        y = problem.y_train[subset]
        w = np.zeros((nC, D, K))
        b = np.full((nC, K), -np.inf if problem.kind != "multilabel" else 0.0)
        if problem.kind == "multilabel":
            for label in range(K):
                rows = ~np.isnan(y[:, label])
                values = y[rows, label]
                if len(values) == 0 or values.min() == values.max():
                    b[:, label] = constant_label_bias(values.mean() if len(values) else 0.5)
                    continue
                wl, bl = _ridge_path(X[rows], (2 * values - 1)[:, None], problem.Cs)
                w[:, :, label], b[:, label] = wl[:, :, 0], bl[:, 0]
        else:
            present = np.flatnonzero(np.bincount(y, minlength=K))
            targets = np.where(y[:, None] == present[None, :], 1.0, -1.0)
            wp, bp = _ridge_path(X, targets, problem.Cs)
            w[:, :, present], b[:, present] = wp, bp
        for c in range(nC):
            weights[u, c], bias[u, c] = fold_standardisation(w[c], b[c], mean, std)
        rows = problem.validation_rows(u)
        val_centered = (problem.X_val if rows is None else problem.X_val[rows]) - problem.center
        logits = np.einsum("nd,cdk->cnk", val_centered, weights[u]) + bias[u][:, None, :]
        labels = problem.y_val if rows is None else problem.y_val[rows]
        scores[u] = validation_scores(labels, link_function(logits, link), selection)
    converged = np.ones(U, dtype=bool)  # closed form
    return assemble_linear(problem, "numpy", "ridge", selection, scores, weights, bias, converged, link=link)

