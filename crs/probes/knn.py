"""k-nearest-neighbour family: a non-parametric probe on the subset's standardised features.

Euclidean distance on features standardised per training subset; probabilities are the label
frequencies among the k nearest training rows (uniform weights, as scikit-learn's
``KNeighborsClassifier``); multilabel averages each label over the neighbours where it is not NaN
(the subset's prevalence when none is). ``k`` plays the role of C: chosen per subset on validation
from ``Cs`` (default :data:`crs.spec.DEFAULT_KS`), each k clipped to the subset size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crs.probes.base import ProbeError, ProbeSet, ProblemData, check_features, subset_standardiser
from crs.probes.selection import lower_is_better, select_C, validation_scores


def neighbour_labels(train: np.ndarray, query: np.ndarray, k: int, block: int = 2048) -> np.ndarray:
    """Indices (N, k) of the k nearest rows of ``train`` for each query row, nearest first."""
    train_sq = np.square(train).sum(axis=1)
    out = np.empty((len(query), k), dtype=np.int64)
    for start in range(0, len(query), block):
        q = query[start : start + block]
        dist = train_sq[None, :] - 2 * q @ train.T
        part = np.argpartition(dist, k - 1, axis=1)[:, :k] if k < len(train) else np.tile(np.arange(len(train)), (len(q), 1))
        order = np.take_along_axis(dist, part, axis=1).argsort(axis=1, kind="stable")
        out[start : start + block] = np.take_along_axis(part, order, axis=1)
    return out


def _proba_for_ks(y: np.ndarray, neighbours: np.ndarray, ks: np.ndarray, kind: str, K: int) -> np.ndarray:
    """Probabilities (n_ks, N, K) for every k from one neighbour list (cumulative counts)."""
    if kind == "multilabel":
        values = y[neighbours]  # (N, k_max, L)
        valid = ~np.isnan(values)
        sums = np.cumsum(np.where(valid, values, 0.0), axis=1)
        counts = np.cumsum(valid, axis=1)
        prevalence = np.nan_to_num(np.nanmean(y, axis=0), nan=0.5)
        out = []
        for k in ks:
            c = counts[:, k - 1]
            out.append(np.where(c > 0, sums[:, k - 1] / np.maximum(c, 1), prevalence))
        return np.stack(out)
    onehot = np.eye(K)[y[neighbours]]  # (N, k_max, K)
    cumulative = np.cumsum(onehot, axis=1)
    return np.stack([cumulative[:, k - 1] / k for k in ks])


@dataclass(frozen=True)
class KNNProbeSet(ProbeSet):
    """kNN probes: the training rows are kept (by reference) and searched at prediction time."""

    X_train: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    y_train: np.ndarray = field(default_factory=lambda: np.zeros(0))
    subsets: tuple = ()
    center: np.ndarray = field(default_factory=lambda: np.zeros(0))
    means: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    stds: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def predict_proba(self, X: np.ndarray, scratch: bool = False) -> np.ndarray:
        X = check_features(X, "X", dim=self.X_train.shape[1])
        out = []
        for s, subset in enumerate(self.subsets):
            k = min(int(self.selected_C[s]), len(subset))
            train = (self.X_train[subset] - self.center - self.means[s]) / self.stds[s]
            query = (X - self.center - self.means[s]) / self.stds[s]
            neighbours = neighbour_labels(train.astype(np.float32), query.astype(np.float32), k)
            out.append(_proba_for_ks(self.y_train[subset], neighbours, np.array([k]), self.kind, self.n_classes)[0])
        return np.stack(out)

    def probe_key(self, s: int) -> bytes:
        return np.asarray(self.subsets[s]).tobytes() + np.float64(self.selected_C[s]).tobytes()

    def _selected_parameters(self, rows: np.ndarray) -> dict[str, Any]:
        return {"subsets": tuple(self.subsets[int(r)] for r in rows), "means": self.means[rows], "stds": self.stds[rows]}


def fit(problem: ProblemData, selection: str, **_options) -> KNNProbeSet:
    ks = np.array(problem.Cs)
    if (ks < 1).any() or (ks != np.round(ks)).any():
        raise ProbeError(f"for the knn family Cs are neighbour counts (integers >= 1), got {problem.Cs}")
    ks = ks.astype(int)
    scores = np.zeros((len(problem.unique_subsets), len(ks)))
    means, stds = [], []
    for u, subset in enumerate(problem.unique_subsets):
        mean, std = subset_standardiser(problem.X_train[subset], problem.center)
        means.append(mean)
        stds.append(std)
        train = ((problem.X_train[subset] - problem.center - mean) / std).astype(np.float32)
        rows = problem.validation_rows(u)
        X_val = problem.X_val if rows is None else problem.X_val[rows]
        query = ((X_val - problem.center - mean) / std).astype(np.float32)
        usable = np.minimum(ks, len(subset))
        neighbours = neighbour_labels(train, query, int(usable.max()))
        proba = _proba_for_ks(problem.y_train[subset], neighbours, usable, problem.kind, problem.n_classes)
        scores[u] = validation_scores(problem.y_val if rows is None else problem.y_val[rows], proba, selection)
    best = select_C(scores)
    m = problem.subset_to_unique
    sign = -1.0 if lower_is_better(selection) else 1.0
    return KNNProbeSet(
        kind=problem.kind,
        n_classes=problem.n_classes,
        backend="numpy",
        family="knn",
        selection=selection,
        Cs=tuple(float(k) for k in ks),
        selected_C=ks[best][m].astype(float),
        val_score=sign * scores[np.arange(len(best)), best][m],
        val_scores=sign * scores[m],
        converged=np.ones(len(m), dtype=bool),
        X_train=problem.X_train,
        y_train=problem.y_train,
        subsets=tuple(problem.subsets),
        center=problem.center,
        means=np.stack(means)[m],
        stds=np.stack(stds)[m],
    )
