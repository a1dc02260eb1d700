"""Zero-shot's fitted calibration: one temperature (and one bias for a multilabel task) per row set, all at once.

Every (label fraction, seed) has its own validation rows, so a unit has up to fractions x seeds small
fits of one or two parameters. They are solved together: the rows of every set are concatenated
(``segments`` says which set a row belongs to), per-set sums are ``bincount``\\ s, and a damped
Newton step is taken for every set at once. The log-loss is convex in the effective scale
``a = scale / T`` (and in ``(a, b)`` for the sigmoid link), so Newton with step halving converges
from any start: the shipped one (T = 1) for the softmax link, a moment estimate for the sigmoid
link (:func:`_sigmoid_start`; CLIP's scale saturates it); no per-set Python loop, no generic optimiser.

Sums are sequential (``bincount``), never BLAS, so a fit does not depend on the thread count.
"""

from __future__ import annotations

import numpy as np

LOG_T_BOUND = 7.0  # T in [e^-7, e^7], as the earlier bounded search
BIAS_BOUND = 50.0
MAX_STEPS = 100
DECREMENT = 1e-24  # Newton decrement (log-loss units) below which a set has converged
QUADRATIC = 1e-8  # decrement below which Newton's full step is taken without a line search


def _segment_sum(values: np.ndarray, segments: np.ndarray, n_sets: int) -> np.ndarray:
    return np.bincount(segments, weights=values, minlength=n_sets)


def _softmax_terms(cosine: np.ndarray, picked: np.ndarray, a_rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row: loss, d loss / d a and d2 loss / d a2 of -log softmax(a c)[y]."""
    z = a_rows[:, None] * cosine
    top = z.max(axis=1, keepdims=True)
    e = np.exp(z - top)
    total = e.sum(axis=1)
    p = e / total[:, None]
    mean = (p * cosine).sum(axis=1)
    variance = np.maximum((p * cosine * cosine).sum(axis=1) - mean * mean, 0.0)
    loss = top[:, 0] + np.log(total) - a_rows * picked
    return loss, mean - picked, variance


def _sigmoid_terms(cosine: np.ndarray, target: np.ndarray, known: np.ndarray, a_rows: np.ndarray,
                   b_rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row (summed over the known labels): loss, gradient and Hessian entries in (a, b)."""
    z = a_rows[:, None] * cosine + b_rows[:, None]
    sign = 2.0 * target - 1.0
    loss = np.where(known, np.logaddexp(0.0, -sign * z), 0.0)
    p = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function without overflow
    residual = np.where(known, p - target, 0.0)
    curvature = np.where(known, p * (1.0 - p), 0.0)
    return (loss.sum(axis=1), (residual * cosine).sum(axis=1), residual.sum(axis=1),
            (curvature * cosine * cosine).sum(axis=1), (curvature * cosine).sum(axis=1), curvature.sum(axis=1))


def _sigmoid_start(c: np.ndarray, target: np.ndarray, known: np.ndarray, segments: np.ndarray, n_sets: int,
                   scale: float, bias: float, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Each set's starting (a, b) for the sigmoid link, from its known (cosine, label) pairs: the
    linear discriminant's slope, a = (mean cosine of the positives - of the negatives) / variance of
    the cosines (the logistic fit's moment estimate), and the bias that puts the logit of the mean
    cosine at the set's prevalence's. A set with one label value only, or constant cosines, starts
    as shipped. The shipped start saturates at CLIP's scale 100, and damped Newton then took ~70 loss
    evaluations at CheXpert's size (7 from here); the optimum (convex) is the same."""
    cosine = np.where(known, c, 0.0)
    count = _segment_sum(known.sum(axis=1).astype(np.float64), segments, n_sets)
    positives = _segment_sum(target.sum(axis=1), segments, n_sets)
    total = _segment_sum(cosine.sum(axis=1), segments, n_sets)
    squares = _segment_sum((cosine * cosine).sum(axis=1), segments, n_sets)
    on_positives = _segment_sum((cosine * target).sum(axis=1), segments, n_sets)
    negatives = count - positives
    usable = (positives > 0) & (negatives > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        variance = squares / count - mean * mean
        gap = on_positives / positives - (total - on_positives) / negatives  # mean cosine, positives - negatives
        a = gap / variance  # linear discriminant's slope: the logistic fit's moment estimate
        prevalence = positives / count
        b = np.log(prevalence) - np.log1p(-prevalence) - a * mean
    good = usable & np.isfinite(a) & np.isfinite(b) & (variance > 0) & (a > 0)
    a = np.where(good, np.clip(a, lo, hi), scale)
    b = np.where(good, np.clip(b, -BIAS_BOUND, BIAS_BOUND), bias)
    return a, b


def fit_temperatures(
    cosine: np.ndarray, labels: np.ndarray, kind: str, scale: float, bias: float, row_sets: list[np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """(temperatures, biases), one per row set of ``row_sets``, each minimising the log-loss of its rows:
    softmax(scale * cosine / T) across classes, or per finding sigmoid(scale * cosine / T + b) with b
    fitted too (multilabel, NaN labels ignored). The bias of a softmax task stays ``bias``."""
    n_sets = len(row_sets)
    if n_sets == 0:
        return np.zeros(0), np.zeros(0)
    cosine = np.asarray(cosine, np.float64)
    sizes = np.array([len(rows) for rows in row_sets])
    rows = np.concatenate(row_sets).astype(np.int64) if sizes.sum() else np.zeros(0, np.int64)
    segments = np.repeat(np.arange(n_sets), sizes)
    c = cosine[rows]
    lo, hi = scale * np.exp(-LOG_T_BOUND), scale * np.exp(LOG_T_BOUND)
    a = np.full(n_sets, float(scale))
    multilabel = kind == "multilabel"
    if multilabel:
        y = np.asarray(labels, np.float64)[rows]
        known = ~np.isnan(y)
        target = np.nan_to_num(y)
        weight = 1.0 / np.maximum(_segment_sum(known.sum(axis=1).astype(np.float64), segments, n_sets), 1.0)
        a, b = _sigmoid_start(c, target, known, segments, n_sets, float(scale), float(bias), lo, hi)
    else:
        picked = c[np.arange(len(rows)), np.asarray(labels, np.int64)[rows]]
        weight = 1.0 / np.maximum(sizes, 1)
        b = np.full(n_sets, float(bias))

    def terms_of(a_sets: np.ndarray, b_sets: np.ndarray, needed: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """Per set: loss, gradient (a, b) and Hessian (aa, ab, bb) of its mean log-loss. ``needed``: only
        those sets' rows are evaluated (the others' entries are 0 and unused); a set's sums are the
        same either way (``bincount`` adds each set's rows in their order, whatever other rows exist)."""
        cases: slice | np.ndarray = slice(None)
        at = segments
        if needed is not None and not needed.all():
            cases = np.flatnonzero(needed[segments])
            at = segments[cases]
        if multilabel:
            rows_terms = _sigmoid_terms(c[cases], target[cases], known[cases], a_sets[at], b_sets[at])
            return tuple(_segment_sum(v, at, n_sets) * weight for v in rows_terms)
        loss_rows, ga_rows, haa_rows = _softmax_terms(c[cases], picked[cases], a_sets[at])
        loss, ga, haa = (_segment_sum(v, at, n_sets) * weight for v in (loss_rows, ga_rows, haa_rows))
        zero = np.zeros(n_sets)
        return loss, ga, zero, haa, zero, zero

    terms = terms_of(a, b)
    active = sizes > 0
    for _ in range(MAX_STEPS):
        _, ga, gb, haa, hab, hbb = terms
        if multilabel:
            det = haa * hbb - hab * hab
            ok = det > 1e-300
            step_a = np.where(ok, (hbb * ga - hab * gb) / np.where(ok, det, 1.0), ga)
            step_b = np.where(ok, (haa * gb - hab * ga) / np.where(ok, det, 1.0), gb)
        else:
            ok = haa > 1e-300
            step_a, step_b = np.where(ok, ga / np.where(ok, haa, 1.0), ga), np.zeros(n_sets)
        # the Newton decrement g . step bounds the loss still to gain: stop a set once it is at rounding level
        decrement = ga * step_a + gb * step_b
        active &= decrement > DECREMENT
        if not active.any():
            break
        moved = np.zeros(n_sets, bool)
        factor = np.ones(n_sets)
        for _ in range(60):  # halve each set's step until its loss does not rise
            new_a = np.clip(a - factor * step_a, lo, hi)
            new_b = np.clip(b - factor * step_b, -BIAS_BOUND, BIAS_BOUND) if multilabel else b
            new_terms = terms_of(new_a, new_b, active & ~moved)  # converged or moved sets: not recomputed
            # near the optimum the loss changes below its rounding: there the full Newton step is taken
            take = active & ~moved & ((new_terms[0] <= terms[0]) | (decrement < QUADRATIC))
            a, b = np.where(take, new_a, a), np.where(take, new_b, b)
            terms = tuple(np.where(take, new, old) for new, old in zip(new_terms, terms, strict=True))
            moved |= take
            factor = np.where(moved, factor, 0.5 * factor)
            if (moved | ~active).all():
                break
        active &= moved
    return scale / a, b
