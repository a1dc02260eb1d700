"""Intervals for the CRS and its parts projected from a simultaneous box over the axis errors (issue 40 item 1).

The CRS is non-smooth (dominance counts, a median, floors, a minimum over axes), so no bootstrap
interval of it is valid near ties (decision 0089). But it is **monotone with known signs** in the
axis errors (docs/crs.md section 4, property-tested in tests/scoring/test_projection.py): encoder
i's CRS never rises when one of its own errors rises and never falls when another encoder's error
rises. Given a box [low, high] (E encoders x A axes) that holds every true error at once
(:func:`crs.scoring.box.simultaneous_box`), i's CRS over the box is therefore lowest at the corner
where i's errors sit at their upper ends and every other encoder's at their lower ends, and highest
at the reverse corner (:func:`corners`). The interval is the CRS at those two corners: it holds the
true CRS of every encoder at once whenever the box holds the true errors, through ties, with no
derivative.

The same two corners bound each part of i's CRS, each monotone the same way: u_i on every axis
(e_i / reference never falls as e_i rises, the reference never falls as anyone's error rises),
hence balance (a geometric mean of u_i) and the worst axis (the minimum of u_i); dominance
(i dominates j when u_i is ahead on every axis and strictly on one: with the margin 0 this is the
order of the floored errors, which only i's own errors move against i). With a dominance margin
above 0 a third encoder's error can move a u gap across the margin, so the dominance bounds then
count the pairs i surely (possibly) dominates from the per-axis extremes of u instead
(:func:`_margin_dominance`), which holds whatever the margin.

Since decision 0167 the printed CRS bounds come from a sharper box (:func:`sharper_bounds`): the same
monotonicity, but over the log ratios to the reference and the pairwise differences of the floored
errors, in which the noise encoders share cancels (about 15-25 % narrower, coverage as the corners'
in the bench); the corners (:func:`project`) remain for the axis boxes' own projection and the tests.

The AUROC-vs-CRS reversal count is bounded pair by pair from these bounds
(:func:`crs.scoring.reversals.reversal_count_bounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

Score = Callable[[np.ndarray], Mapping[str, np.ndarray]]
"""(..., E, A) errors -> the CRS terms of :func:`crs.scoring.formula.crs_components` ("crs", "u",
"dominance", "balance", "worst_axis"), each (..., E) ("u" (..., E, A))."""
PROJECTED = ("crs", "dominance", "balance", "worst_axis")
"""The quantities :func:`project` bounds, per encoder."""


def corners(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E, A) bounds -> the (E, E, A) stacks of extreme corners: ``worst[i]`` has encoder i's errors at
    ``high`` and every other encoder's at ``low`` (where i's CRS is lowest); ``best[i]`` the reverse."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    own = np.eye(low.shape[0], dtype=bool)[:, :, None]
    return np.where(own, high[None], low[None]), np.where(own, low[None], high[None])


def project(
    low: np.ndarray,
    high: np.ndarray,
    score: Score,
    *,
    weights: np.ndarray | None = None,
    margin: float = 0.0,
    tolerance: float = 0.0,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per quantity of :data:`PROJECTED`, the (low (E,), high (E,)) bounds over the box [low, high] (E, A).

    ``score`` scores stacks of error tables with the point estimate's reference, floor and rules
    (:meth:`crs.scoring.formula.PointEstimate.score`). ``weights``, ``margin`` and ``tolerance`` are
    those rules' (dominance, balance, worst) weights and dominance margin and tolerance: with
    ``margin`` above ``tolerance`` the dominance bounds come from :func:`_margin_dominance`.
    """
    worst_corner, best_corner = corners(low, high)
    at_worst, at_best = score(worst_corner), score(best_corner)
    diagonal = np.arange(np.asarray(low).shape[0])
    out = {name: (np.asarray(at_worst[name])[diagonal, diagonal], np.asarray(at_best[name])[diagonal, diagonal])
           for name in PROJECTED}
    if margin > tolerance:
        u_low = np.asarray(at_worst["u"])[diagonal, diagonal]  # (E, A): u_i at its lowest on every axis
        u_high = np.asarray(at_best["u"])[diagonal, diagonal]
        dominance = _margin_dominance(u_low, u_high, margin, tolerance)
        w = np.full(3, 1.0 / 3.0) if weights is None else np.asarray(weights, dtype=np.float64)
        out["dominance"] = dominance
        out["crs"] = tuple(w[0] * dominance[k] + w[1] * out["balance"][k] + w[2] * out["worst_axis"][k]
                           for k in range(2))  # type: ignore[assignment]
    return out


def _margin_dominance(
    u_low: np.ndarray, u_high: np.ndarray, margin: float, tolerance: float
) -> tuple[np.ndarray, np.ndarray]:
    """Dominance bounds from per-(encoder, axis) bounds of u: i surely dominates j when it does so with
    u_i at its lowest and u_j at its highest; possibly when it does with the reverse."""
    n = u_low.shape[0]

    def dominates(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        gap = first[:, None, :] - second[None, :, :]
        found = np.all(gap >= -tolerance, axis=-1) & np.any(gap > max(margin, tolerance), axis=-1)
        np.fill_diagonal(found, False)
        return found

    surely, possibly = dominates(u_low, u_high), dominates(u_high, u_low)
    others = max(n - 1, 1)
    low = (1.0 + surely.sum(axis=1) / others - possibly.sum(axis=0) / others) / 2.0
    high = (1.0 + possibly.sum(axis=1) / others - surely.sum(axis=0) / others) / 2.0
    return low, high


AXIS_SCALES = {"discrimination": "logit", "calibration": "square", "label_efficiency": "logit",
               "robustness": "logit", "equity": "logit"}
"""Working scale of each axis error in the box (:mod:`crs.scoring.box`): 1 - AUROC on the logit scale,
the calibration error on the squared scale its replicates are centred on (decision 0061)."""


def box_intervals(point, replicate_errors: np.ndarray, alpha: float) -> tuple[pd.DataFrame, float]:
    """Per encoder, the bounds of the CRS and its parts (:func:`sharper_bounds`, decision 0167) and the box's
    bounds of every axis error.

    ``point``: the :class:`crs.scoring.formula.PointEstimate` (its errors are the box's centre, its
    rules score the corners); ``replicate_errors`` (B, E, A): the bootstrap's axis errors in
    :data:`crs.scoring.formula.ALL_AXES` order (NaN where an axis is not measured). Returns the table
    (columns ``<quantity>_box_low`` / ``_high`` for :data:`PROJECTED`, ``<axis>_error_box_low`` /
    ``_high`` for the scored axes) and the critical value c of the box.
    """
    from crs.scoring.box import simultaneous_box
    from crs.scoring.formula import ALL_AXES

    encoders = point.encoders
    axes = list(ALL_AXES[: np.asarray(replicate_errors).shape[-1]])
    centre = point.errors.reindex(index=encoders, columns=axes).to_numpy(dtype=np.float64)  # (E, A)
    scored = [axes.index(axis) for axis in point.axes]
    drawn = np.asarray(replicate_errors, dtype=np.float64)[:, :, scored]
    found = simultaneous_box(centre[:, scored].ravel(), drawn.reshape(len(drawn), -1), alpha,
                             [AXIS_SCALES[axis] for _ in encoders for axis in point.axes])
    low = np.full(centre.shape, np.nan)
    high = np.full(centre.shape, np.nan)
    low[:, scored] = found.low.reshape(len(encoders), -1)
    high[:, scored] = found.high.reshape(len(encoders), -1)
    settings = point.settings
    # the CRS and its parts from the sharper box over ratios and differences (decision 0167); the axis
    # intervals stay the box's own bounds
    bounds = sharper_bounds(centre[:, scored], drawn, point.floor.reindex(list(point.axes)).to_numpy(dtype=np.float64),
                            point.reference_index, weights=np.asarray(settings.weights),
                            margin=settings.dominance_margin, tolerance=settings.dominance_tolerance, alpha=alpha)
    table = pd.DataFrame(index=pd.Index(encoders, name="encoder"))
    for name, (lower, upper) in bounds.items():
        table[f"{name}_box_low"], table[f"{name}_box_high"] = lower, upper
    for a in scored:
        table[f"{axes[a]}_error_box_low"], table[f"{axes[a]}_error_box_high"] = low[:, a], high[:, a]
    return table, found.critical


ADAPTIVE_PRETEST = 2.0
"""``[score] interval = "adaptive"``: the pretest threshold kappa of :func:`adaptive_crs_bounds` (decision 0180)."""


def adaptive_intervals(point, replicate_errors: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per encoder of ``point`` (a :class:`crs.scoring.formula.PointEstimate`), the adaptive CRS interval of
    :func:`adaptive_crs_bounds` with the pretest (``[score] interval = "adaptive"``, decision 0180);
    ``replicate_errors`` (B, E, A) as :func:`box_intervals` takes them."""
    from crs.scoring.formula import ALL_AXES

    axes = list(ALL_AXES[: np.asarray(replicate_errors).shape[-1]])
    scored = [axes.index(axis) for axis in point.axes]
    centre = point.errors.reindex(index=point.encoders, columns=axes).to_numpy(dtype=np.float64)[:, scored]
    settings = point.settings
    return adaptive_crs_bounds(centre, np.asarray(replicate_errors, dtype=np.float64)[:, :, scored],
                               point.floor.reindex(list(point.axes)).to_numpy(dtype=np.float64), point.reference_index,
                               weights=np.asarray(settings.weights), margin=settings.dominance_margin,
                               tolerance=settings.dominance_tolerance, alpha=alpha, pretest=ADAPTIVE_PRETEST)


def sharper_bounds(
    errors: np.ndarray,
    replicates: np.ndarray,
    floor: np.ndarray,
    reference_index: int | None,
    *,
    weights: np.ndarray | None = None,
    margin: float = 0.0,
    tolerance: float = 0.0,
    alpha: float = 0.05,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The sharper box of decision 0128, the default since decision 0167: per quantity of :data:`PROJECTED`, bounds
    from one max-|t| over the log ratios log(f_i / r) (E x A) and the pairwise differences f_i - f_k
    (pairs x A) of the floored errors f = max(e, floor), r the reference's (the median's) floored error,
    each in the point estimate and in every replicate (shared noise cancels in both).

    Balance and the worst axis are bounded from the ratios (u = 1 / (1 + rho)), dominance from the signs of
    the differences (surely / possibly dominated; with a margin, from u's bounds as :func:`project` does).
    ``errors`` (E, A), ``replicates`` (B, E, A), ``floor`` (A,)."""
    from crs.scoring.box import simultaneous_box

    errors, replicates = np.asarray(errors, dtype=np.float64), np.asarray(replicates, dtype=np.float64)
    floor = np.asarray(floor, dtype=np.float64)
    n_encoders, n_axes = errors.shape

    def parts(values: np.ndarray) -> np.ndarray:
        floored = np.maximum(values, floor)
        reference = (np.median(floored, axis=-2, keepdims=True) if reference_index is None
                     else floored[..., reference_index: reference_index + 1, :])
        ratio = np.log(floored / reference)
        first, second = np.triu_indices(n_encoders, 1)
        pairs = floored[..., first, :] - floored[..., second, :]
        return np.concatenate([ratio.reshape(*values.shape[:-2], -1), pairs.reshape(*values.shape[:-2], -1)], axis=-1)

    found = simultaneous_box(parts(errors), parts(replicates), alpha)
    ratio_low = found.low[: n_encoders * n_axes].reshape(n_encoders, n_axes)
    ratio_high = found.high[: n_encoders * n_axes].reshape(n_encoders, n_axes)
    u_low, u_high = 1.0 / (1.0 + np.exp(ratio_high)), 1.0 / (1.0 + np.exp(ratio_low))
    first, second = np.triu_indices(n_encoders, 1)
    low, high = np.zeros((n_encoders, n_encoders, n_axes)), np.zeros((n_encoders, n_encoders, n_axes))
    pair_low = found.low[n_encoders * n_axes:].reshape(len(first), n_axes)
    pair_high = found.high[n_encoders * n_axes:].reshape(len(first), n_axes)
    low[first, second], high[first, second] = pair_low, pair_high
    low[second, first], high[second, first] = -pair_high, -pair_low
    if margin > tolerance:
        dominance = _margin_dominance(u_low, u_high, margin, tolerance)
    else:  # [i, m, a]: f_i - f_m; i dominates m when no axis above 0 and one below
        surely = np.asarray((high <= 0.0).all(axis=-1) & (high < 0.0).any(axis=-1), dtype=bool)
        possibly = np.asarray((low <= 0.0).all(axis=-1) & (low < 0.0).any(axis=-1), dtype=bool)
        np.fill_diagonal(surely, False)
        np.fill_diagonal(possibly, False)
        others = max(n_encoders - 1, 1)
        dominance = ((1.0 + surely.sum(axis=1) / others - possibly.sum(axis=0) / others) / 2.0,
                     (1.0 + possibly.sum(axis=1) / others - surely.sum(axis=0) / others) / 2.0)
    balance = (np.exp(np.log(u_low).mean(axis=1)), np.exp(np.log(u_high).mean(axis=1)))
    worst = (u_low.min(axis=1), u_high.min(axis=1))
    w = np.full(3, 1.0 / 3.0) if weights is None else np.asarray(weights, dtype=np.float64)
    crs = tuple(w[0] * dominance[k] + w[1] * balance[k] + w[2] * worst[k] for k in range(2))
    return {"crs": crs, "dominance": dominance, "balance": balance, "worst_axis": worst}  # type: ignore[dict-item]


def adaptive_crs_bounds(
    errors: np.ndarray,
    replicates: np.ndarray,
    floor: np.ndarray,
    reference_index: int | None,
    *,
    weights: np.ndarray | None = None,
    margin: float = 0.0,
    tolerance: float = 0.0,
    alpha: float = 0.05,
    pretest: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per encoder (E,), (E,): a CRS interval that is the smooth part's studentised interval away from ties and
    kinks, and widens only where a Pareto relation or a floor is unsettled (decision 0180).

    The CRS is w0 dominance + S, S = w1 balance + w2 worst axis (continuous in the errors; computed per
    replicate by :func:`crs.scoring.formula.crs_components`). Per encoder k, one max-|t| over S_k, k's
    pairwise floored differences f_k,a - f_m,a (every other m, every axis) and every error against its
    floor, e_m,a - floor_a; whenever it holds:

    * k's dominance, which depends only on the signs of k's differences, lies in [surely, possibly]
      counted from their intervals (a settled difference has one sign, an unsettled one either);
    * an error not surely above its floor may truly sit at it (the floor's kink, where the bootstrap of
      max(e, floor) is off: a calibrated encoder's error is often within a standard error of the floor),
      so S_k is also taken with those errors at the floor: with k's own there (S_k highest) and with the
      others' there (lowest, through the reference);
    * CRS_k lies in [w0 dom_low + min S_k - c s, w0 dom_high + max S_k + c s].

    About 1 - alpha per encoder (not all encoders at once, unlike :func:`sharper_bounds`). ``pretest`` kappa
    (moment selection, Andrews and Soares): a difference or a floor counts as settled when its own |t| is
    at least kappa, and the max-|t| is over S_k alone, so away from ties and kinks the interval is S_k's
    plain studentised one; valid only as kappa grows with n, measured by the bench. With a
    dominance margin the signs of f do not decide dominance: :func:`sharper_bounds`' interval is returned."""
    from crs.scoring.formula import crs_components

    errors, replicates = np.asarray(errors, dtype=np.float64), np.asarray(replicates, dtype=np.float64)
    floor = np.asarray(floor, dtype=np.float64)
    w = np.full(3, 1.0 / 3.0) if weights is None else np.asarray(weights, dtype=np.float64)
    if margin > tolerance:
        return sharper_bounds(errors, replicates, floor, reference_index, weights=w, margin=margin,
                              tolerance=tolerance, alpha=alpha)["crs"]
    drawn = replicates[np.isfinite(replicates).all(axis=(1, 2))]
    n_encoders = errors.shape[0]
    if len(drawn) < 2:
        return np.full(n_encoders, np.nan), np.full(n_encoders, np.nan)

    def smooth(values: np.ndarray) -> np.ndarray:
        found = crs_components(values, reference_index, w, floor=floor, tolerance=tolerance)
        return w[1] * found["balance"] + w[2] * found["worst_axis"]

    part, part_drawn = smooth(errors), smooth(drawn)  # (E,), (B, E)
    gap = np.maximum(errors, floor)[:, None, :] - np.maximum(errors, floor)[None, :, :]  # [k, m, a]
    gap_drawn = np.maximum(drawn, floor)[:, :, None, :] - np.maximum(drawn, floor)[:, None, :, :]
    over_floor, over_floor_drawn = (errors - floor).ravel(), (drawn - floor).reshape(len(drawn), -1)
    own = np.eye(n_encoders, dtype=bool)[:, :, None]
    others = max(n_encoders - 1, 1)
    low, high = np.empty(n_encoders), np.empty(n_encoders)
    for k in range(n_encoders):
        rest = [m for m in range(n_encoders) if m != k]
        point = np.concatenate([part[k: k + 1], gap[k, rest].ravel(), over_floor])
        boot = np.concatenate([part_drawn[:, k: k + 1], gap_drawn[:, k, rest].reshape(len(drawn), -1),
                               over_floor_drawn], axis=1)
        spread = boot.std(axis=0, ddof=1)
        moving = spread > 1e-12 * np.maximum(1.0, np.abs(point))
        family = moving if pretest is None else moving & (np.arange(len(point)) == 0)
        t = np.abs(boot[:, family] - point[family]) / spread[family]
        critical = float(np.quantile(t.max(axis=1), 1.0 - alpha)) if family.any() else 0.0
        half = np.where(moving, critical * spread, 0.0)
        if pretest is not None:  # settled once |t| >= kappa, else open
            half[1:] = np.where(moving[1:] & (np.abs(point[1:]) < pretest * spread[1:]), np.inf, 0.0)
        n_pairs = len(rest) * errors.shape[1]
        # [m, a]: f_k - f_m; the shape is explicit so that one encoder alone (no m) works too
        pair_low = (point - half)[1: 1 + n_pairs].reshape(len(rest), errors.shape[1])
        pair_high = (point + half)[1: 1 + n_pairs].reshape(len(rest), errors.shape[1])
        # k dominates m when f_k <= f_m on every axis and < on one; m dominates k the reverse
        surely_over = ((pair_high <= 0).all(axis=1) & (pair_high < 0).any(axis=1)).sum()
        possibly_over = ((pair_low <= 0).all(axis=1) & (pair_low < 0).any(axis=1)).sum()
        surely_under = ((pair_low >= 0).all(axis=1) & (pair_low > 0).any(axis=1)).sum()
        possibly_under = ((pair_high >= 0).all(axis=1) & (pair_high > 0).any(axis=1)).sum()
        dominance_low = (1.0 + surely_over / others - possibly_under / others) / 2.0
        dominance_high = (1.0 + possibly_over / others - surely_under / others) / 2.0
        # the floor's kink: errors above the floor but not surely
        unsettled = ((point - half)[1 + n_pairs:] <= 0).reshape(errors.shape) & (errors > floor)
        part_low = part_high = part[k]
        if unsettled.any():
            at_floor = np.where(unsettled, floor, errors)
            part_low = min(part[k], float(smooth(np.where(own[k], errors, at_floor))[k]))
            part_high = max(part[k], float(smooth(np.where(own[k], at_floor, errors))[k]))
        low[k] = w[0] * dominance_low + part_low - half[0]
        high[k] = w[0] * dominance_high + part_high + half[0]
    return low, high
