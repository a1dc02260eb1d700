"""Batched AUROC and NLL over stacks of probes, and the choice of C on the validation split.

``batched_auroc`` scores many probes (subsets x C values, or subsets x evaluation conditions) on one
label vector at once: one rank computation per column instead of one ``roc_auc_score`` call per
probe. It equals scikit-learn's ``roc_auc_score`` (average ranks for ties, the Mann-Whitney form).
"""

from __future__ import annotations

import sys

import numpy as np

from crs.probes import auroc_kernel
from crs.probes.base import LinearProbeSet, ProbeError
from crs.spec import SELECTIONS

NLL_EPS = 1e-12


def lower_is_better(selection: str) -> bool:
    """Whether the criterion is a loss (log-loss): reported with its natural sign, negated to select."""
    return selection in ("logloss", "nll")
"""Probabilities are clipped to [1e-12, 1] before the log in the validation NLL."""


def label_matrix(y: np.ndarray, n_columns: int) -> np.ndarray:
    """Labels as float ``(N, K)``: one-hot of int class indices, or multilabel (NaN = ignore) as given."""
    y = np.asarray(y)
    if y.ndim == 1:
        if not np.issubdtype(y.dtype, np.integer):
            raise ProbeError(f"1-D labels must be int class indices, got {y.dtype}")
        return np.eye(n_columns)[y]
    if y.shape[1] != n_columns:
        raise ProbeError(f"labels have {y.shape[1]} columns, scores have {n_columns}")
    return y.astype(np.float64)


def batched_auroc(y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per-column one-vs-rest AUROC of a stack of score matrices.

    ``y``: int ``(N,)`` class indices or float ``(N, K)`` multilabel with NaN = ignore.
    ``scores``: ``(..., N, K)``. Returns ``(..., K)``; NaN for a column whose labels hold one value
    only (macro AUROC is then ``np.nanmean`` over the last axis, as scikit-learn's macro OvR over
    the classes present).
    """
    return batched_auroc_influence(y, scores, influence=False)[0]


def batched_auroc_influence(
    y: np.ndarray, scores: np.ndarray, influence: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`batched_auroc` and, with ``influence``, per case the sum of its influences on the
    scorable columns' AUROCs ``(..., N)`` (DeLong's placement values: (V10 - A) / n_pos at a
    positive, (V01 - A) / n_neg at a negative; a case whose label is unknown, or a column with no
    positive or no negative, adds nothing), from the same sort. The macro AUROC's standard error
    needs only these sums (:func:`crs.probes.metrics.auroc_standard_error`), so the per-column
    influences are never held in case order."""
    scores = np.asarray(scores)
    if scores.ndim < 2 or scores.shape[-2] != len(y):
        raise ProbeError(f"scores must be (..., N={len(y)}, K), got shape {scores.shape}")
    targets = label_matrix(y, scores.shape[-1])
    batch, n, k = scores.shape[:-2], scores.shape[-2], scores.shape[-1]
    out = np.full(batch + (k,), np.nan)
    complete = ~np.isnan(targets).any(axis=0)
    if complete.all():  # no copy of the scores (multiclass, complete labels)
        out[...], totals = _auroc_columns(targets, scores, influence)
        return out, totals
    totals = np.zeros(batch + (n,)) if influence else None
    if complete.any():
        cols = np.flatnonzero(complete)
        out[..., cols], values = _auroc_columns(targets[:, cols], scores[..., cols], influence)
        if totals is not None and values is not None:
            totals += values
    for col in np.flatnonzero(~complete):
        rows = np.flatnonzero(~np.isnan(targets[:, col]))
        column = scores[..., col][..., rows]  # (..., n_rows): only this column's known rows are copied
        area, values = _auroc_columns(targets[rows][:, [col]], column[..., None], influence)
        out[..., col] = area[..., 0]
        if totals is not None and values is not None:
            totals[..., rows] += values
    return out, totals


INDEX_BITS = 31
"""Low bits of a float32 sort key that carry the case's position (so at most 2**31 cases)."""


def _sorted_keys(targets: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row of float32 ``columns`` (..., k, N) sorted once as 64-bit keys: the score as an
    order-preserving integer (high word), then the label bit and the case's position (low word), one
    SIMD sort, about 4x faster than ``rankdata``'s argsort along a strided axis. ``targets`` (k, N)
    are the columns' complete 0/1 labels. Returns the sorted (low, high) words, (rows, N) uint32
    each, rows = the columns in order. The label bit sorts the negatives of a tie group first."""
    k, n = targets.shape
    rows = columns.size // n
    bits = np.ascontiguousarray(columns + np.float32(0.0)).view(np.uint32).reshape(rows, n)  # + 0.0: -0.0 -> +0.0
    flip = (bits.view(np.int32) >> 31).view(np.uint32)
    flip |= np.uint32(1 << 31)
    flip ^= bits  # order-preserving integer key of each score
    # low word: the label bit, then the case's position (one (k, N) pattern shared by the batch)
    tail = (targets.astype(np.uint32) << np.uint32(INDEX_BITS)) | np.arange(n, dtype=np.uint32)
    # 64-bit keys as (low, high) 32-bit words: written and read without 64-bit shifts (5x faster)
    words = np.empty((rows // k, k, n, 2), dtype=np.uint32)
    high_word, low_word = (1, 0) if sys.byteorder == "little" else (0, 1)
    words[..., high_word] = flip.reshape(rows // k, k, n)
    words[..., low_word] = tail
    keys = words.view(np.uint64).reshape(rows, n)
    keys.sort(axis=-1)
    sorted_words = keys.view(np.uint32).reshape(rows, n, 2)
    return sorted_words[..., low_word], sorted_words[..., high_word]


def _auroc_columns(
    targets: np.ndarray, scores: np.ndarray, influence: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Mann-Whitney AUROC of complete 0/1 ``targets`` (N, k) against ``scores`` (..., N, k), and
    with ``influence`` per case the sum of its placement influences over the scorable columns
    ``(..., N)``.

    float32 scores are sorted as packed keys (:func:`_sorted_keys`); with numba the compiled kernel
    (:mod:`crs.probes.auroc_kernel`) turns them into both in two walks of each sorted row. Otherwise,
    in numpy: the rank sum of the positives counts every (negative, positive) pair with the negative
    below; ties count half, as ``roc_auc_score`` does: the label bit sorts the negatives of a tie
    group first, so half the group's positives x negatives is taken off, from the tied elements
    alone. The float64 path (argsort) counts per tie group.
    """
    n, k = targets.shape
    batch = scores.shape[:-2]
    items = int(np.prod(batch, dtype=np.int64))
    rows = items * k
    columns = np.moveaxis(scores, -2, -1)  # (..., k, N)
    order: np.ndarray | None = None
    labels_by_row = np.moveaxis(targets, 0, -1)  # (k, N)
    if n == 0:  # no case: no column is scorable
        return np.full(batch + (k,), np.nan), np.zeros(batch + (0,)) if influence else None
    if columns.dtype == np.float32:
        low, high = _sorted_keys(labels_by_row, columns)
        if auroc_kernel.available() and auroc_kernel.sorted_rows is not None:
            area = np.empty(rows)
            totals = np.zeros((items, n) if influence else (0, 0))
            auroc_kernel.sorted_rows(low, high, k, influence, area, totals)
            return area.reshape(batch + (k,)), totals.reshape(batch + (n,)) if influence else None
        label_values = (low >> np.uint32(INDEX_BITS)).astype(np.float64)
        tied = high[:, 1:] == high[:, :-1]
        if influence:
            order = (low & np.uint32((1 << INDEX_BITS) - 1)).astype(np.int64)
        del low, high
    else:
        columns = columns.reshape(rows, n)
        order = np.argsort(columns, axis=-1, kind="stable")
        values = np.take_along_axis(columns, order, axis=-1)
        labels = np.broadcast_to(labels_by_row.astype(bool), batch + (k, n)).reshape(rows, n)
        label_values = np.take_along_axis(labels, order, axis=-1).astype(np.float64)
        tied = values[:, 1:] == values[:, :-1]
    positives = np.broadcast_to(targets.sum(axis=0), batch + (k,)).reshape(rows)
    negatives = n - positives
    # Without ties: sum over positives of (negatives ranked below) = sum of their ranks - P(P+1)/2.
    rank_sum = label_values @ np.arange(1, n + 1, dtype=np.float64)
    numerator = rank_sum - positives * (positives + 1) / 2
    with_ties = np.flatnonzero(tied.any(axis=1))
    if len(with_ties) and columns.dtype == np.float32:
        numerator[with_ties] -= 0.5 * _tied_pairs(label_values[with_ties], tied[with_ties])
    elif len(with_ties):
        numerator[with_ties] = _tied_numerator(label_values[with_ties] > 0, tied[with_ties])
    with np.errstate(invalid="ignore", divide="ignore"):
        auroc = numerator / (positives * negatives)
    auroc = np.where((positives > 0) & (negatives > 0), auroc, np.nan)
    if not influence or order is None:
        return auroc.reshape(batch + (k,)), None
    sorted_influence = _placement_influence(label_values, tied, auroc, positives, negatives)
    sorted_influence[np.isnan(auroc)] = 0.0  # an unscorable column adds nothing
    # every row's influences added into its batch item's per-case totals, in case order
    flat = order + (np.arange(rows, dtype=np.int64) // k * n)[:, None]
    case_totals = np.bincount(flat.ravel(), weights=sorted_influence.ravel(), minlength=items * n)
    return auroc.reshape(batch + (k,)), case_totals.reshape(batch + (n,))


def _placement_influence(
    label_values: np.ndarray, tied: np.ndarray, auroc: np.ndarray, positives: np.ndarray, negatives: np.ndarray
) -> np.ndarray:
    """Influence of each sorted case on its row's AUROC (rows, n), as ``crs.axes``' DeLong form:
    (share of negatives below a positive, ties half, - A) / n_pos and (share of positives above a
    negative, ties half, - A) / n_neg. Computed for untied cases in a few passes, then overwritten
    for the (few) cases in tie groups with the group's counts."""
    rows, n = label_values.shape
    with np.errstate(invalid="ignore", divide="ignore"):
        inverse_positives = (1.0 / positives)[:, None]
        inverse_negatives = (1.0 / negatives)[:, None]
    area = auroc[:, None]
    positives_before = np.cumsum(label_values, axis=1)
    positives_before -= label_values
    # untied positive: (negatives below / n_neg - A) / n_pos; untied negative: (1 - positives below / n_pos - A) / n_neg
    with np.errstate(invalid="ignore"):  # unscorable rows (no positive or no negative) are NaN
        at_positive = np.arange(n, dtype=np.float64) - positives_before
        at_positive *= inverse_negatives
        at_positive -= area
        at_positive *= inverse_positives
        at_negative = positives_before * -inverse_positives
        at_negative += 1.0 - area
        at_negative *= inverse_negatives
    influence = np.where(label_values == 1.0, at_positive, at_negative)
    in_group = np.zeros((rows, n), dtype=bool)
    in_group[:, 1:] = tied
    in_group[:, :-1] |= tied
    row, position = np.nonzero(in_group)
    if len(row):
        left_tied = np.zeros(len(position), dtype=bool)
        inner = position > 0
        left_tied[inner] = tied[row[inner], position[inner] - 1]
        group = np.cumsum(~left_tied) - 1
        first = np.flatnonzero(~left_tied)
        labels = label_values[row, position]
        group_positives = np.bincount(group, weights=labels)
        group_negatives = np.bincount(group) - group_positives
        before_positives = positives_before[row[first], position[first]][group]
        before_negatives = position[first][group] - before_positives
        with np.errstate(invalid="ignore", divide="ignore"):
            below = (before_negatives + 0.5 * group_negatives[group]) / negatives[row]
            above = (positives[row] - before_positives - 0.5 * group_positives[group]) / positives[row]
            influence[row, position] = np.where(
                labels == 1.0, (below - auroc[row]) / positives[row], (above - auroc[row]) / negatives[row]
            )
    return influence


def _tied_pairs(sorted_labels: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """Sum over tie groups of (positives x negatives in the group), per sorted row; touches only
    the elements that are tied with a neighbour (few, next to the whole row)."""
    rows, n = sorted_labels.shape
    in_group = np.zeros((rows, n), dtype=bool)
    in_group[:, 1:] = tied
    in_group[:, :-1] |= tied
    row, position = np.nonzero(in_group)  # row-major: each tie group is one contiguous run
    left_tied = np.zeros(len(position), dtype=bool)
    inner = position > 0
    left_tied[inner] = tied[row[inner], position[inner] - 1]
    group = np.cumsum(~left_tied) - 1
    positives = np.bincount(group, weights=sorted_labels[row, position])
    negatives = np.bincount(group) - positives
    return np.bincount(row[~left_tied], weights=positives * negatives, minlength=rows)


def _tied_numerator(sorted_labels: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """Sum over positives of (negatives below + half the negatives tied with it), per sorted row."""
    rows, n = sorted_labels.shape
    starts = np.ones((rows, n), dtype=bool)
    starts[:, 1:] = ~tied
    group = np.cumsum(starts.ravel()) - 1  # tie groups, never spanning two rows
    n_groups = int(group[-1]) + 1
    pos_in = np.bincount(group, weights=sorted_labels.ravel(), minlength=n_groups)
    neg_in = np.bincount(group, minlength=n_groups) - pos_in
    neg_before = np.cumsum(neg_in) - neg_in  # negatives in earlier groups, across rows
    group_row = np.repeat(np.arange(rows), starts.sum(axis=1))
    first_group = np.flatnonzero(np.r_[True, group_row[1:] != group_row[:-1]])
    neg_less = neg_before - neg_before[first_group][group_row]
    return np.bincount(group_row, weights=pos_in * (neg_less + 0.5 * neg_in), minlength=rows)


def macro_auroc(y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Mean of :func:`batched_auroc` over the columns where it is defined: ``(...,)``."""
    per_column = batched_auroc(y, scores)
    defined = ~np.isnan(per_column)
    return np.where(defined, per_column, 0).sum(axis=-1) / np.maximum(defined.sum(axis=-1), 1)


def batched_nll(y: np.ndarray, proba: np.ndarray) -> np.ndarray:
    """Mean negative log-likelihood per probe: ``(...,)``.

    Multiclass: mean of -log p[y]. Multilabel: per label the mean binary cross-entropy over its
    non-NaN rows, then the mean over labels.
    """
    proba = np.asarray(proba, dtype=np.float64)
    y = np.asarray(y)
    if y.ndim == 1:
        picked = np.take_along_axis(proba, np.broadcast_to(y[:, None], proba.shape[:-1] + (1,)), axis=-1)
        return -np.log(np.clip(picked[..., 0], NLL_EPS, 1.0)).mean(axis=-1)
    mask = ~np.isnan(y)
    targets = np.where(mask, y, 0.0)
    p = np.clip(proba, NLL_EPS, 1 - NLL_EPS)
    loss = -(targets * np.log(p) + (1 - targets) * np.log1p(-p)) * mask
    per_label = loss.sum(axis=-2) / np.maximum(mask.sum(axis=0), 1)
    return per_label.mean(axis=-1)


def validation_scores(y_val: np.ndarray, proba: np.ndarray, selection: str) -> np.ndarray:
    """Selection criterion per probe, oriented so that larger is better (NLL is negated)."""
    if selection == "auroc":
        return macro_auroc(y_val, proba)
    if lower_is_better(selection):
        return -batched_nll(y_val, proba)
    raise ProbeError(f"selection {selection!r} is not one of {SELECTIONS}")


def subset_validation_scores(problem, proba_of, unique_ids, selection: str) -> np.ndarray:
    """Validation criterion per unique subset of ``unique_ids`` on that subset's own validation rows.

    ``proba_of(i, rows)`` returns the probabilities ``(..., n_rows, K)`` of the i-th entry of
    ``unique_ids`` on validation rows ``rows`` (``None``: every row). With one shared validation set
    (``problem.val_subsets is None``) this is one call per entry on all rows.
    """
    scores = []
    for i, u in enumerate(unique_ids):
        rows = problem.validation_rows(u)
        labels = problem.y_val if rows is None else problem.y_val[rows]
        scores.append(validation_scores(labels, proba_of(i, rows), selection))
    return np.stack(scores)


SELECTION_RTOL = 1e-5
"""Validation scores within this relative distance of the best count as tied (the tie goes to the
smaller C). The path's scores come from fits stopped at a loose tolerance: next to the best C they
moved by up to ~1e-6 relative between BLAS kernels on the demo (far from it, at the largest C, up
to 7e-3), while the best and second-best C were never closer than 3.9e-4; a tolerance between the
two keeps the machine's rounding from flipping a near-tie (docs/reproducibility.md)."""


def select_C(scores: np.ndarray, rtol: float = SELECTION_RTOL) -> np.ndarray:
    """Index of the best C per row of ``scores`` ``(n_subsets, n_Cs)`` (larger is better), Cs in
    ascending order.

    A C whose score is within ``rtol`` (relative, :data:`SELECTION_RTOL`) of the row's best counts as
    tied with it, and ties go to the smaller C (the first), the more regularised probe; NaN (a C the
    path never reached) never wins.
    """
    filled = np.where(np.isnan(scores), -np.inf, scores)
    best = filled.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        tied = filled >= best - rtol * np.abs(best)
    return np.argmax(tied, axis=1)


def assemble_linear(
    problem,
    backend: str,
    family: str,
    selection: str,
    scores: np.ndarray,
    weights_per_C: np.ndarray,
    bias_per_C: np.ndarray,
    converged: np.ndarray,
    link: str | None = None,
    best: np.ndarray | None = None,
):
    """Choose C per unique subset and expand to one probe per requested subset.

    ``scores`` (U, n_Cs) larger-is-better; ``weights_per_C`` (U, n_Cs, D, K) folded weights;
    ``bias_per_C`` (U, n_Cs, K); a backend that keeps only the chosen fits passes them as (U, D, K)
    and (U, K) with ``best``. ``val_score``/``val_scores`` report the criterion itself (AUROC,
    or NLL with its natural sign). ``best`` (U,) C indices chosen by the caller (a backend that
    refines the selected fit after choosing); default: :func:`select_C` of ``scores``.
    """
    best = select_C(scores) if best is None else np.asarray(best)
    rows = np.arange(len(best))
    m = problem.subset_to_unique
    sign = -1.0 if lower_is_better(selection) else 1.0
    return LinearProbeSet(
        kind=problem.kind,
        n_classes=problem.n_classes,
        backend=backend,
        family=family,
        selection=selection,
        Cs=problem.Cs,
        selected_C=np.asarray(problem.Cs)[best][m],
        val_score=sign * scores[rows, best][m],
        val_scores=sign * scores[m],
        converged=np.asarray(converged, dtype=bool)[m],
        link=link or problem.link,
        center=problem.center,
        weights=(weights_per_C if weights_per_C.ndim == 3 else weights_per_C[rows, best])[m],
        bias=(bias_per_C if bias_per_C.ndim == 2 else bias_per_C[rows, best])[m],
    )
