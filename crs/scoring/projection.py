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
