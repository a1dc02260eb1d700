"""Every per-condition evaluation metric for a stack of probes at once.

Stage 2 scores every probe of a unit (label fraction x seed) on every evaluation condition. The
per-probe functions in :mod:`crs.axes` are the reference; this module computes the same numbers for
``probs`` of shape ``(P, N, K)`` in one pass per metric: AUROC by one sort per column
(:func:`crs.probes.selection.batched_auroc`, float32 keys), the binned ECE by one ``bincount`` over
(probe, bin), Brier, NLL, quadratic kappa and ordinal AUROC as array reductions. The labels are
checked once per condition, not once per probe. Conventions are the reference's exactly (same
binning, clipping, class handling and NaN rules); the tests hold the two to 1e-12 on random inputs
with ties.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from crs.axes.calibration import calibration_error_moments
from crs.probes.base import ProbeError
from crs.probes.selection import batched_auroc, batched_auroc_influence

ECE_BINS = 15
"""Equal-width bins of the binned ECE (the reference's default, torchmetrics' convention)."""

METRICS = ("auroc", "auroc_se", "ece", "ece_debiased", "ece_se", "brier", "nll", "kappa", "ordinal_auroc")
"""Per-condition metrics. ``auroc_se``: the large-sample DeLong standard error of the macro AUROC
(per case, the placement influences averaged over the scorable classes); ``ece_debiased``: the scored
calibration error, the root-mean-square binned error debiased per bin, and ``ece_se`` its standard
error (decision 0035; the ``crs.axes`` reference's ``calibration_error_moments`` on the same sums)."""
KINDS = ("multiclass", "ordinal", "multilabel")


def _nanmean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean over ``axis`` of the defined entries; NaN where none is defined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=axis)


def check_condition_labels(y: np.ndarray, probs: np.ndarray, kind: str) -> np.ndarray:
    """Labels of one condition, checked once against the probability stack ``(P, N, K)``."""
    if kind not in KINDS:
        raise ProbeError(f"task kind {kind!r} is not one of {KINDS}")
    if probs.ndim != 3 or probs.shape[1] != len(y):
        raise ProbeError(f"probs must be (P, N={len(y)}, K), got shape {probs.shape}")
    y = np.asarray(y)
    if kind == "multilabel":
        if y.shape != probs.shape[1:]:
            raise ProbeError(f"multilabel labels must be (N, K) = {probs.shape[1:]}, got {y.shape}")
        return y.astype(np.float64)
    if y.ndim != 1 or (y.size and (y.min() < 0 or y.max() >= probs.shape[2])):
        raise ProbeError(f"class labels must be (N,) in 0..{probs.shape[2] - 1}")
    return y.astype(np.int64)


def bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """The reference's bin of each confidence, ``clip(searchsorted(edges, c, "right") - 1, 0, n_bins - 1)``
    with ``edges = linspace(0, 1, n_bins + 1)``: ``floor(c n_bins)``, with the binary search kept for
    the few values within rounding of an edge (4x faster than searching every value)."""
    scaled = confidence * n_bins
    index = np.floor(scaled).astype(np.int64)
    near_edge = np.flatnonzero(np.abs(scaled - np.rint(scaled)) < 1e-6)
    if len(near_edge):
        edges = np.linspace(0.0, 1.0, n_bins + 1)
        index[near_edge] = np.searchsorted(edges, confidence[near_edge], side="right") - 1
    return np.clip(index, 0, n_bins - 1)


def _binned_ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Binned ECE per row of ``confidence`` / ``correct`` (P, n) (the reference's bins and sums),
    and the debiased calibration error and its standard error (the reference's
    :func:`crs.axes.calibration_error_moments` on the same per-bin sums)."""
    P, n = confidence.shape
    if n == 0:
        nan = np.full(P, np.nan)
        return nan, nan.copy(), nan.copy()
    flat = confidence.ravel()
    index = bin_index(flat, n_bins)
    index += np.repeat(np.arange(P) * n_bins, n)
    size = P * n_bins
    count = np.bincount(index, minlength=size).astype(np.float64).reshape(P, n_bins)
    confidence_sum = np.bincount(index, weights=flat, minlength=size).reshape(P, n_bins)
    correct_sum = np.bincount(index, weights=correct.ravel(), minlength=size).reshape(P, n_bins)
    residual = correct.ravel() - flat
    residual_square_sum = np.bincount(index, weights=residual * residual, minlength=size).reshape(P, n_bins)
    gap = np.zeros((P, n_bins))
    filled = count > 0
    gap[filled] = np.abs(correct_sum[filled] - confidence_sum[filled]) / count[filled]
    share = count / count.sum(axis=1, keepdims=True)
    error, standard_error = calibration_error_moments(count, correct_sum - confidence_sum, residual_square_sum)
    return (gap * share).sum(axis=1), error, standard_error


def auroc_standard_error(auroc: np.ndarray, case_totals: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Standard error of the macro AUROC per probe: per case, the influences summed over the
    scorable columns (``case_totals`` (P, N), from :func:`batched_auroc_influence`) divided by their
    number (AUROC not NaN), then the square root of the sum of their squares. With ``groups`` (a
    patient or lesion id per case) the influences are summed within each group first: Obuchowski's
    clustered DeLong variance, as :func:`crs.axes.auroc_standard_error` (issue 30)."""
    if groups is not None and case_totals.shape[1]:
        _, index = np.unique(np.asarray(groups), return_inverse=True)
        order = np.argsort(index.ravel(), kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(index.ravel()[order]) != 0])
        case_totals = np.add.reduceat(case_totals[:, order], starts, axis=1)
    scorable = (~np.isnan(auroc)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scorable > 0, np.sqrt(np.einsum("pn,pn->p", case_totals, case_totals)) / scorable, np.nan)


def _clip(probs: np.ndarray) -> np.ndarray:
    eps = np.finfo(np.float64).eps
    return np.clip(probs, eps, 1.0 - eps)


def _multiclass(
    y: np.ndarray, probs: np.ndarray, n_bins: int, influence: bool, keys: np.ndarray | None = None,
    groups: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    P, N, K = probs.shape
    if N == 0:
        return {name: np.full(P, np.nan) for name in ("auroc", "auroc_se", "ece", "ece_debiased", "ece_se", "brier", "nll")}
    # (P, K, N): every reduction over the classes becomes K elementwise passes over (P, N)
    columns = np.ascontiguousarray(probs.transpose(0, 2, 1))
    confidence = columns.max(axis=1)
    predicted = np.full((P, N), K - 1)
    for k in range(K - 2, -1, -1):  # the first class at the maximum, as argmax
        predicted = np.where(columns[:, k] == confidence, k, predicted)
    ece, calibration_error, calibration_se = _binned_ece(
        confidence.astype(np.float64), (predicted == y).astype(np.float64), n_bins
    )
    squares = np.zeros((P, N))
    for k in range(K):
        squares += np.square(columns[:, k].astype(np.float64) - (y == k))
    picked = np.take_along_axis(columns, np.broadcast_to(y[None, None, :], (P, 1, N)), axis=1)[:, 0]
    ranked = columns.transpose(0, 2, 1) if keys is None else keys
    auroc, case_totals = batched_auroc_influence(y, ranked, influence)
    return {
        "auroc": _nanmean(auroc),
        "auroc_se": auroc_standard_error(auroc, case_totals, groups) if case_totals is not None else np.full(P, np.nan),
        "ece": ece,
        "ece_debiased": calibration_error,
        "ece_se": calibration_se,
        "brier": squares.mean(axis=1),
        "nll": -np.mean(np.log(_clip(picked.astype(np.float64))), axis=1),
    }


def _multilabel(
    y: np.ndarray, probs: np.ndarray, n_bins: int, influence: bool, keys: np.ndarray | None = None,
    groups: np.ndarray | None = None, rank: bool = True,
) -> dict[str, np.ndarray]:
    """``rank`` False: no AUROC (NaN), for callers that need the calibration columns only."""
    P, _, L = probs.shape
    ece, calibration_error, calibration_se, brier, nll = (np.full((P, L), np.nan) for _ in range(5))
    for label in range(L):
        known = ~np.isnan(y[:, label])
        if not known.any():
            continue
        target = y[known, label]
        p = probs[:, known, label].astype(np.float64)
        ece[:, label], calibration_error[:, label], calibration_se[:, label] = _binned_ece(
            p, np.broadcast_to(target, p.shape), n_bins
        )
        brier[:, label] = np.mean((p - target) ** 2, axis=1)
        clipped = _clip(p)
        # y log p + (1 - y) log(1 - p) with y in {0, 1} is log of the chosen one: one log, same value
        nll[:, label] = -np.mean(np.log(np.where(target == 1.0, clipped, 1.0 - clipped)), axis=1)
    if rank:
        auroc, case_totals = batched_auroc_influence(y, probs if keys is None else keys, influence)
    else:
        auroc, case_totals = np.full((P, L), np.nan), None
    # labels taken as independent: mean of the label means, sqrt(sum of label variances) / labels
    labels = (~np.isnan(calibration_error)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ece_se = np.sqrt(np.nansum(calibration_se**2, axis=1)) / labels
    return {
        "auroc": _nanmean(auroc),
        "auroc_se": auroc_standard_error(auroc, case_totals, groups) if case_totals is not None else np.full(P, np.nan),
        "ece": _nanmean(ece), "ece_debiased": _nanmean(calibration_error),
        "ece_se": np.where(labels > 0, ece_se, np.nan),
        "brier": _nanmean(brier), "nll": _nanmean(nll),
    }


def quadratic_kappa(y: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Quadratic-weighted kappa of the arg-max grade per probe: ``(P,)``; NaN where undefined."""
    P, N, K = probs.shape
    predicted = probs.argmax(axis=2)
    cells = (np.arange(P)[:, None] * K + y[None, :]) * K + predicted
    observed = np.bincount(cells.ravel(), minlength=P * K * K).astype(np.float64).reshape(P, K, K)
    total = observed.sum(axis=(1, 2))
    grades = np.arange(K)
    weights = (grades[:, None] - grades[None, :]) ** 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :] / total[:, None, None]
        disagreement = (weights * expected).sum(axis=(1, 2))
        kappa = 1.0 - (weights * observed).sum(axis=(1, 2)) / disagreement
    return np.where((total > 0) & (disagreement != 0), kappa, np.nan)


def ordinal_auroc(y: np.ndarray, probs: np.ndarray, exceed_keys: np.ndarray | None = None) -> np.ndarray:
    """Mean over thresholds k of the AUROC of ``y >= k`` scored by P(grade >= k), per probe: ``(P,)``
    (or by ``exceed_keys`` (P, N, K - 1), scores in the same order: :class:`crs.probes.base.PredictedScores`)."""
    K = probs.shape[2]
    if K < 2:
        return np.full(probs.shape[0], np.nan)
    if exceed_keys is not None:
        exceed = exceed_keys
    else:
        p = probs.astype(np.float64)
        # p[..., k:].sum() per threshold, as the reference sums them (same order, so the same ties)
        exceed = np.stack([p[..., k:].sum(axis=2) for k in range(1, K)], axis=2)
    targets = np.stack([(y >= k) for k in range(1, K)], axis=1).astype(np.float64)
    return _nanmean(batched_auroc(targets, exceed))


def distinct_probes(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Probes whose probabilities are equal bit for bit are scored once (the 100 % fraction's probe
    is the same for every seed): the first of each and, per probe, the index of its first among
    them. Candidates are matched on a sample of the values, then compared in full."""
    flat = probs.reshape(len(probs), -1)
    sample = flat[:, :: max(1, flat.shape[1] // 256)]
    first: dict[bytes, list[int]] = {}
    keep: list[int] = []
    inverse = np.empty(len(probs), dtype=np.int64)
    for p in range(len(probs)):
        for q in first.setdefault(sample[p].tobytes(), []):
            if np.array_equal(flat[keep[q]], flat[p]):
                inverse[p] = q
                break
        else:
            first[sample[p].tobytes()].append(len(keep))
            inverse[p] = len(keep)
            keep.append(p)
    return np.array(keep, dtype=np.int64), inverse


def rank_metrics(
    y: np.ndarray, keys: np.ndarray, kind: str, influence: bool = True, groups: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """AUROC and (with ``influence``) its standard error ``(P,)`` of rank keys alone (P, N, K): the
    ranked metrics of :func:`evaluation_metrics` without the probabilities, for callers whose
    calibrations share one ranking (zero-shot's multilabel calibrations: one strictly increasing map
    of the cosine each) and so need their AUROCs once. float32 keys take the fast sorted-key path."""
    y = check_condition_labels(y, keys, kind)
    P = keys.shape[0]
    if kind != "multilabel" and keys.shape[1] == 0:
        return {"auroc": np.full(P, np.nan), "auroc_se": np.full(P, np.nan)}
    auroc, case_totals = batched_auroc_influence(y, keys, influence)
    se = auroc_standard_error(auroc, case_totals, groups) if case_totals is not None else np.full(P, np.nan)
    return {"auroc": _nanmean(auroc), "auroc_se": se}


def evaluation_metrics(
    y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int = ECE_BINS, metrics: Sequence[str] = METRICS,
    ovr_keys: np.ndarray | None = None, exceed_keys: np.ndarray | None = None, groups: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The ``metrics`` (default: all of :data:`METRICS`) of each probe of ``probs`` (P, N, K) on labels
    ``y``: ``(P,)`` each.

    ``y``: int ``(N,)`` class indices (multiclass, ordinal) or float ``(N, K)`` with NaN = ignore
    (multilabel). kappa and ordinal AUROC are NaN except for ordinal tasks. The AUROC standard
    error (per-case influences) is computed only when asked for. ``ovr_keys`` and ``exceed_keys``
    (:class:`crs.probes.base.PredictedScores`): rank AUROC and ordinal AUROC on these scores, in the
    probabilities' order but free of the ties float32 rounding makes (default: the probabilities).
    ``groups``: a patient or lesion id per case; the AUROC standard error is then clustered by them.
    """
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise ProbeError(f"unknown evaluation metrics {unknown}; known: {METRICS}")
    y = check_condition_labels(y, probs, kind)
    keep, inverse = distinct_probes(probs)
    if len(keep) < len(probs):
        subset = lambda keys: None if keys is None else keys[keep]  # noqa: E731
        scored = evaluation_metrics(y, probs[keep], kind, n_bins, metrics, subset(ovr_keys), subset(exceed_keys), groups)
        return {name: values[inverse] for name, values in scored.items()}
    influence = "auroc_se" in metrics
    if kind == "multilabel":  # the AUROCs (an argsort per label and probe) only when asked for
        out = _multilabel(y, probs, n_bins, influence, ovr_keys, groups, rank=influence or "auroc" in metrics)
    else:
        out = _multiclass(y, probs, n_bins, influence, ovr_keys, groups)
    nan = np.full(probs.shape[0], np.nan)
    out["kappa"], out["ordinal_auroc"] = nan, nan.copy()
    if kind == "ordinal" and len(y):
        if "kappa" in metrics:
            out["kappa"] = quadratic_kappa(y, probs)
        if "ordinal_auroc" in metrics:
            out["ordinal_auroc"] = ordinal_auroc(y, probs, exceed_keys)
    return {name: out[name] for name in metrics}
