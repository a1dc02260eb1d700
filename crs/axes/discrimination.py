"""Discrimination: one-vs-rest AUROC over the classes present, ordinal AUROC and quadratic kappa.

AUROC is computed as the Mann-Whitney statistic with mid-ranks for ties, which is exactly the area
under the ROC curve (trapezoids through tied scores) that scikit-learn's ``roc_auc_score`` returns;
the oracle tests check the two agree. A class (or label) that is absent from ``y``, or present in
every row, cannot be scored: it is NaN in :func:`per_class_auroc` and left out of the macro mean,
never scored as 0 or 0.5.

:func:`auroc_standard_error` gives the standard error of the macro AUROC from the same ranks
(DeLong placement values, summed per case over the classes so the classes' correlation is kept).
"""

from __future__ import annotations

import warnings

import numpy as np

from crs.axes._inputs import AxisInputError, binary_pair, check_kind, multiclass_pair, multilabel_pair


def midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, ties at the mean of their ranks (``scipy.stats.rankdata``'s "average",
    the same float64 values: every one a whole number or a half). NaN anywhere gives NaN ranks, as there.

    In numpy so that a stage-2 worker, which ranks every condition, need not import scipy.stats
    (about half a CPU second per process)."""
    values = np.asarray(values)
    if values.dtype.kind == "f" and np.isnan(values).any():
        return np.full(values.shape, np.nan)
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    bounds = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1], [True])))
    starts, ends = bounds[:-1], bounds[1:]
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def binary_auroc(y: np.ndarray, scores: np.ndarray) -> float:
    """AUROC of scores for binary labels y in {0, 1}; NaN if y has only one value."""
    y = np.asarray(y, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = midranks(scores)  # mid-ranks: a tie counts half, as the ROC trapezoid does
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def per_class_auroc(y: np.ndarray, scores: np.ndarray, kind: str) -> np.ndarray:
    """One-vs-rest AUROC per class (or per label); NaN where the class cannot be scored.

    binary: a single entry. multiclass/ordinal: y int (N,), scores (N, K), one entry per column.
    multilabel: y float (N, L) with NaN = ignore, one entry per label over its known rows.
    """
    check_kind(kind)
    if kind == "binary":
        y_b, s_b = binary_pair(y, scores)
        return np.array([binary_auroc(y_b, s_b)])
    if kind == "multilabel":
        y_m, s_m = multilabel_pair(y, scores)
        out = np.full(y_m.shape[1], np.nan)
        for label in range(y_m.shape[1]):
            known = ~np.isnan(y_m[:, label])
            out[label] = binary_auroc(y_m[known, label] == 1.0, s_m[known, label])
        return out
    y_c, s_c = multiclass_pair(y, scores)
    return np.array([binary_auroc(y_c == k, s_c[:, k]) for k in range(s_c.shape[1])])


def _nanmean_or_nan(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or np.isnan(values).all():
        return float("nan")
    return float(np.nanmean(values))


def auroc(y: np.ndarray, scores: np.ndarray, kind: str) -> float:
    """Macro one-vs-rest AUROC over the classes (labels) that can be scored; NaN if none can."""
    return _nanmean_or_nan(per_class_auroc(y, scores, kind))


def _placement_influence(positive: np.ndarray, negative: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each case's influence on one binary AUROC (0 for a case that is neither); NaN if unscorable.

    DeLong's placement values: for a positive, V10 = share of negatives below it (ties 1/2); for
    a negative, V01 = share of positives above it (ties 1/2). The influence is (V10 - A) / n_pos
    for a positive and (V01 - A) / n_neg for a negative, so Var(A) is about the sum of squares.
    One sort: within each run of tied scores, counts before the run and inside it give both.
    """
    n_pos, n_neg = int(positive.sum()), int(negative.sum())
    if n_pos == 0 or n_neg == 0:
        return np.full(len(scores), np.nan)
    known = np.flatnonzero(positive | negative)
    order = known[np.argsort(scores[known], kind="stable")]
    sorted_scores = scores[order]
    is_positive = positive[order].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    run = np.cumsum(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]]) - 1  # run of each sorted case
    positives_before = np.r_[0.0, np.cumsum(is_positive)][starts][run]
    positives_in = np.add.reduceat(is_positive, starts)[run]
    negatives_before = starts[run] - positives_before
    negatives_in = np.diff(np.r_[starts, len(order)])[run] - positives_in
    below = (negatives_before + 0.5 * negatives_in) / n_neg  # V10, read at positives
    above = (n_pos - positives_before - 0.5 * positives_in) / n_pos  # V01, read at negatives
    area = float(below[is_positive == 1.0].mean())
    out = np.zeros(len(scores))
    out[order] = np.where(is_positive == 1.0, (below - area) / n_pos, (above - area) / n_neg)
    return out


def auroc_standard_error(y: np.ndarray, scores: np.ndarray, kind: str, groups: np.ndarray | None = None) -> float:
    """Standard error of :func:`auroc` (the macro one-vs-rest AUROC) on this test set.

    Per case, the influences of the scorable classes (:func:`_placement_influence`) are averaged as
    the macro mean averages the classes; the variance is the sum over cases of their squares (the
    large-sample DeLong variance, which for one class is DeLong's S10 / n_pos + S01 / n_neg with
    n instead of n - 1). Cases are taken as independent unless ``groups`` (one patient or lesion id
    per case) is given: then the influences are summed within each group first and the variance is
    the sum over groups of those sums squared, Obuchowski's (1997) clustered DeLong variance
    S10 / M + S01 / N + 2 S11 / (M N) with its within-patient covariance (issue 30; without it the
    SE of about two images a patient was 18-20 % small). One case a group gives the unclustered SE
    exactly. NaN when no class can be scored.
    """
    check_kind(kind)
    if kind == "binary":
        y_b, s_b = binary_pair(y, scores)
        problems = [(y_b == 1.0, y_b == 0.0, s_b)]
    elif kind == "multilabel":
        y_m, s_m = multilabel_pair(y, scores)
        problems = [(y_m[:, k] == 1.0, y_m[:, k] == 0.0, s_m[:, k]) for k in range(y_m.shape[1])]
    else:
        y_c, s_c = multiclass_pair(y, scores)
        problems = [(y_c == k, y_c != k, s_c[:, k]) for k in range(s_c.shape[1])]
    influences = [_placement_influence(positive, negative, column) for positive, negative, column in problems]
    scorable = [influence for influence in influences if not np.isnan(influence).any()]
    if not scorable:
        return float("nan")
    per_case = np.mean(scorable, axis=0)
    if groups is not None:
        groups = np.asarray(groups)
        if len(groups) != len(per_case):
            raise AxisInputError(f"{len(groups)} group ids for {len(per_case)} cases; give one id per case")
        _, index = np.unique(groups, return_inverse=True)
        per_case = np.bincount(index.ravel(), weights=per_case)
    return float(np.sqrt(np.sum(per_case**2)))


def ordinal_auroc(y: np.ndarray, probs: np.ndarray) -> float:
    """Mean over thresholds k = 1..K-1 of the AUROC for ``y >= k`` scored by P(grade >= k).

    Thresholds where every (or no) case has ``y >= k`` are left out; NaN if none remain.
    """
    y_c, p_c = multiclass_pair(y, probs)
    values = [binary_auroc(y_c >= k, p_c[:, k:].sum(axis=1)) for k in range(1, p_c.shape[1])]
    return _nanmean_or_nan(np.array(values))


def quadratic_kappa(y: np.ndarray, probs: np.ndarray) -> float:
    """Cohen's kappa with quadratic weights between y and the arg-max grade of probs.

    Weights are (i - j)^2 over the K grades given by the columns of probs (as scikit-learn's
    ``cohen_kappa_score(..., weights="quadratic", labels=range(K))``); NaN when the expected
    disagreement is 0 (for example a single grade in both y and the predictions).
    """
    y_c, p_c = multiclass_pair(y, probs)
    n_grades = p_c.shape[1]
    predicted = p_c.argmax(axis=1)
    observed = np.zeros((n_grades, n_grades))
    np.add.at(observed, (y_c, predicted), 1.0)
    total = observed.sum()
    if total == 0:
        return float("nan")
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / total
    grades = np.arange(n_grades)
    weights = (grades[:, None] - grades[None, :]) ** 2.0
    expected_disagreement = float((weights * expected).sum())
    if expected_disagreement == 0.0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(1.0 - (weights * observed).sum() / expected_disagreement)
