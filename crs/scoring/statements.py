"""The headline's statements, all from one simultaneous family (issue 47 items 1-3, DESIGN 8e, decision 0166).

Everything the headline says (who leads, who is better or worse on which axis, whether a candidate
beats the reference) is read off one set of decisions that hold together with probability about
1 - alpha. The family is one studentised max-|t| over

* every pairwise difference of axis errors, e_j - e_k, every axis and every pair of scored encoders
  (a named reference too), on the raw scale: the same patient resamples for both, shared noise cancels;
* every competing encoder's axis error against that axis's error floor, g(e_j) - g(floor) on the
  box's working scale g (:data:`crs.scoring.projection.AXIS_SCALES`): whether j is surely above or
  below the floor, where the CRS stops telling errors apart.

Decisions are made by the Romano-Wolf step-down on |t| (the critical value recomputed over the
hypotheses still undecided until nothing changes; ``stepdown=False``: one step). The intervals
printed on the comparisons are the single step's, d -+ c se, so they hold all at once too.

**The tier, valid at exact ties by construction.** The CRS is monotone in the floored axis errors:
if k's floored error is at most j's on every axis and below it on one, then u_k >= u_j on every axis
(the reference is shared, so u's order is the floored errors'), every encoder j dominates k dominates
too, every encoder dominating k dominates j, k dominates j, and balance (a geometric mean of u) is
strictly higher: CRS_k > CRS_j. So k is **surely above** j when, on every axis, k is decided better
than j, or the two are known equal (a difference that never moves and is 0), or k is decided below the
floor; and on one axis k is decided better and j decided above the floor. Whenever the family holds,
every "surely above" is true of the true CRS. Encoder j leaves the leading tier only when some
competing encoder is surely above it, so encoders that truly tie for first are all kept whenever the
family holds: at least 1 - alpha, through exact ties, whatever the dominance term does there (the
rank sets of the CRS replicates, decision 0009, lost an equal encoder in about 10 % of test sets with
four identical overconfident encoders, issue 47). Rank sets follow the same way: rank_low = 1 + the
number of competitors surely above, rank_high = their count - the number surely below.

The strict step needs balance in the CRS (weight above 0), or dominance with no margin: with neither,
nothing is surely above anything and the tier is every competing encoder.

**The smooth part** (decision 0180, ``smooth=True``, ``[score] headline = "smooth"``, the default): the CRS
is w0 dominance + S with S = w1 balance + w2 worst axis; only dominance jumps at ties. The pairwise
differences of S join the family as more studentised coordinates, and k is also surely above j when
w0 (dom_low_k - dom_high_j) + (S_k - S_j - c se) > 0, the dominance range over the Pareto relations the
family leaves open (:func:`smooth_difference_low`): away from ties, S's own interval; at ties, wider.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.bootstrap import BootstrapResult
from crs.scoring.box import _backward, _forward
from crs.scoring.comparisons import Comparisons
from crs.scoring.formula import ALL_AXES, PointEstimate, crs_components
from crs.scoring.projection import AXIS_SCALES
from crs.scoring.rank_sets import max_t_decisions
from crs.scoring.settings import component_weights

_SE_FLOOR = 1e-12
"""A coordinate whose replicate SD is below this (relative to its size) never moves: it is known exactly."""


@dataclass(frozen=True)
class Statements:
    """The decisions of one simultaneous family over the pairwise axis differences and the floors.

    ``comparisons``: the pairwise differences (intervals from the single step, ``better`` from the
    step-down); ``above`` (E, E): above[k, j] when k's true CRS is surely above j's; ``above_floor`` /
    ``below_floor`` (E, A): an error surely above / below its axis's floor (competing encoders only);
    ``contestants``: the competing encoders, best point CRS first; ``reference``: a named reference that
    does not compete (None otherwise); ``critical_values``: c at each step (the first is the single step's).
    """

    encoders: tuple[str, ...]
    axes: tuple[str, ...]
    contestants: tuple[str, ...]
    comparisons: Comparisons
    above: np.ndarray
    above_floor: np.ndarray
    below_floor: np.ndarray
    critical_values: tuple[float, ...]
    alpha: float
    stepdown: bool
    reference: str | None = None
    smooth: bool = False
    """Whether the smooth part's differences joined the family (decision 0180)."""
    error_low: np.ndarray | None = None
    error_high: np.ndarray | None = None
    """(E, A): the family's box over every axis error (the single step's)."""
    difference_low: np.ndarray | None = None
    """(E, E): the lower bound of CRS_k - CRS_j that decided "surely above" (the best route's; -inf where none
    applies; None for the step-down, which decides without one): what a detectable difference is read from."""

    def holds(self, true_errors: np.ndarray) -> bool:
        """Whether every interval of the family holds ``true_errors`` (E, A): the event on which every
        statement is true (for simulations with a known truth)."""
        true_errors = np.asarray(true_errors, dtype=np.float64)
        difference = true_errors.T[:, :, None] - true_errors.T[:, None, :]
        tolerance = 1e-12
        pairs = bool(((self.comparisons.low <= difference + tolerance) & (difference <= self.comparisons.high + tolerance)
                      ).all())
        box = self.error_low is None or self.error_high is None or bool(((self.error_low <= true_errors + tolerance)
                                               & (true_errors <= self.error_high + tolerance)).all())
        return pairs and box

    def _contest(self) -> tuple[list[int], np.ndarray]:
        index = [self.encoders.index(name) for name in self.contestants]
        return index, self.above[np.ix_(index, index)]

    @property
    def leading_tier(self) -> tuple[str, ...]:
        """The competing encoders no other competing encoder is surely above, best point CRS first."""
        _, above = self._contest()
        return tuple(name for j, name in enumerate(self.contestants) if not above[:, j].any())

    def rank_sets(self) -> pd.DataFrame:
        """Per competing encoder (index ``encoder``): rank_low, rank_high, in_leading_tier."""
        _, above = self._contest()
        n = len(self.contestants)
        rank_low = 1 + above.sum(axis=0)
        return pd.DataFrame({"rank_low": rank_low, "rank_high": n - above.sum(axis=1), "in_leading_tier": rank_low == 1},
                            index=pd.Index(list(self.contestants), name="encoder"))

    @property
    def beat_reference(self) -> tuple[str, ...]:
        """Competing encoders whose true CRS is surely above the named reference's (empty without one)."""
        if self.reference is None:
            return ()
        r = self.encoders.index(self.reference)
        return tuple(name for name in self.contestants if self.above[self.encoders.index(name), r])

    def surely_below(self, encoder: str) -> tuple[str, ...]:
        """Competing encoders whose true CRS is surely below ``encoder``'s (a named reference, for instance)."""
        k = self.encoders.index(encoder)
        return tuple(name for name in self.contestants if name != encoder and self.above[k, self.encoders.index(name)])

    def summary(self) -> dict:
        return {"alpha": self.alpha, "level": 1.0 - self.alpha, "stepdown": self.stepdown, "smooth": self.smooth,
                "critical_values": [float(c) for c in self.critical_values],
                "leading_tier": list(self.leading_tier), "beat_reference": list(self.beat_reference),
                "below_reference": list(self.surely_below(self.reference)) if self.reference is not None else [],
                "difference_low": _stored_bounds(self.encoders, self.difference_low)}


def _stored_bounds(encoders: Sequence[str], bounds: np.ndarray | None) -> dict[str, dict[str, float | None]] | None:
    """The CRS-difference lower bounds as JSON (row encoder -> column encoder -> bound; -inf as null), so a score
    read back from disk says what the family could detect as the fresh one did."""
    if bounds is None:
        return None
    return {str(k): {str(j): (float(bounds[a, b]) if np.isfinite(bounds[a, b]) else None)
                     for b, j in enumerate(encoders) if a != b} for a, k in enumerate(encoders)}


def stored_difference_low(stored: dict | None):
    """:attr:`Statements.difference_low` back from a stored summary, as an encoders x encoders DataFrame (None when
    the score was stored without it)."""
    import pandas as pd

    found = (stored or {}).get("difference_low")
    if not found:
        return None
    names = list(found)
    table = pd.DataFrame(-np.inf, index=names, columns=names)
    for k, row in found.items():
        for j, value in row.items():
            table.loc[k, j] = -np.inf if value is None else float(value)
    return table


def stepdown_decisions(t_observed: np.ndarray, t_replicates: np.ndarray, alpha: float, stepdown: bool = True
                       ) -> tuple[np.ndarray, list[float]]:
    """Which hypotheses (K,) are rejected by the max-|t| bootstrap, single step or stepping down (Romano and
    Wolf): the one loop the rank sets use too (:func:`crs.scoring.rank_sets.max_t_decisions`)."""
    return max_t_decisions(t_observed, t_replicates, alpha, stepdown)


def simultaneous_statements(
    errors: np.ndarray,
    replicates: np.ndarray,
    floor: np.ndarray,
    scales: Sequence[str],
    contestants: Sequence[str],
    *,
    alpha: float = 0.05,
    stepdown: bool = False,
    strict: bool = True,
    weights: Sequence[float] = (1 / 3, 1 / 3, 1 / 3),
    margin: float = 0.0,
    reference_index: int | None = None,
    encoders: Sequence[str] | None = None,
    axes: Sequence[str] | None = None,
    reference: str | None = None,
    smooth: bool = False,
    pretest: float | None = None,
) -> Statements:
    """The headline's family on arrays: ``errors`` (E, A) point axis errors, ``replicates`` (B, E, A) the same
    in every bootstrap replicate (a replicate with a non-finite error is left out), ``floor`` (A,) the
    CRS's error floor, ``scales`` (A,) the working scale of each axis error, ``contestants`` the names of
    the competing encoders among ``encoders``, best point CRS first (the tier keeps that order);
    ``strict``: whether a floored error strictly lower on one axis means a strictly higher CRS (the
    weights and margin allow it); ``weights``, ``margin``, ``reference_index`` (None: the median) the
    CRS's rules, for the bound on CRS differences. ``stepdown``: decide the axis orders and floors by the
    Romano-Wolf step-down instead of the single step's intervals (more decisions; the family-wise
    argument is then per hypothesis, not one event). ``smooth``: add every pairwise difference of the CRS's
    smooth part (weighted balance + worst axis) to the family, and bound CRS differences from it and the
    dominance term's range too (:func:`smooth_difference_low`, decision 0180). ``pretest`` (with ``smooth``):
    moment selection, a threshold kappa on |t| above which an axis order or a floor counts as settled for
    that dominance range (Andrews and Soares; valid only as kappa grows with n: an option the bench measures,
    decision 0180)."""
    errors = np.asarray(errors, dtype=np.float64)
    n_encoders, n_axes = errors.shape
    names = tuple(str(e) for e in encoders) if encoders is not None else tuple(f"encoder_{j}" for j in range(n_encoders))
    axis_names = tuple(str(a) for a in axes) if axes is not None else tuple(f"axis_{a}" for a in range(n_axes))
    unknown = sorted(set(contestants) - set(names))
    if unknown:
        raise ValueError(f"contestants {unknown} are not among the encoders {list(names)}")
    contest = tuple(str(name) for name in contestants)
    replicates = np.asarray(replicates, dtype=np.float64)
    drawn = replicates[np.isfinite(replicates).all(axis=(1, 2))]
    floor = np.asarray(floor, dtype=np.float64)
    kinds = np.asarray(list(scales), dtype=object)

    # the family: every pairwise difference (axis-major), then every error on its working scale
    first, second = np.triu_indices(n_encoders, 1)
    n_pairs = len(first)
    centre = _forward(errors.copy(), kinds)
    point = np.concatenate([(errors[first] - errors[second]).T.ravel(), centre.ravel()])
    boot = np.concatenate([(drawn[:, first] - drawn[:, second]).transpose(0, 2, 1).reshape(len(drawn), -1),
                           _forward(drawn.copy(), kinds).reshape(len(drawn), -1)], axis=1)
    n_family = len(point)
    if smooth:  # the smooth part's pairwise differences join the same family
        part, part_drawn = (smooth_part(values, floor, weights, margin, reference_index) for values in (errors, drawn))
        point = np.concatenate([point, part[first] - part[second]])
        boot = np.concatenate([boot, part_drawn[:, first] - part_drawn[:, second]], axis=1)
    usable = len(drawn) >= 2
    spread = boot.std(axis=0, ddof=1) if usable else np.full(point.shape, np.nan)
    certain = np.isfinite(spread) & (spread <= _SE_FLOOR * np.maximum(1.0, np.abs(point)))
    scale = np.where(certain | ~np.isfinite(spread), 1.0, spread)
    t_replicates = np.where(certain[None, :], 0.0, np.abs(boot - point[None, :]) / scale[None, :])
    largest = t_replicates.max(axis=1) if usable else np.zeros(1)
    critical = float(np.quantile(largest, 1.0 - alpha)) if usable else float("nan")
    half = np.where(certain, 0.0, critical * spread) if usable else np.full(point.shape, np.inf)

    # the pairwise differences, as comparisons (A, E, E)
    difference = errors.T[:, :, None] - errors.T[:, None, :]
    standard_error = np.zeros(difference.shape)
    standard_error[:, first, second] = standard_error[:, second, first] = np.where(
        certain, 0.0, np.nan_to_num(spread, nan=np.inf))[: n_axes * n_pairs].reshape(n_axes, n_pairs)
    pair_half = np.zeros(difference.shape)
    pair_half[:, first, second] = pair_half[:, second, first] = half[: n_axes * n_pairs].reshape(n_axes, n_pairs)
    low, high = difference - pair_half, difference + pair_half
    # the box over every error (E, A)
    box_half = half[n_axes * n_pairs: n_family].reshape(n_encoders, n_axes)
    every = np.tile(kinds, n_encoders)
    with np.errstate(over="ignore", invalid="ignore"):
        error_low = np.where(np.isfinite(box_half), _backward((centre - box_half).ravel(), every).reshape(
            n_encoders, n_axes), 0.0)
        error_high = np.where(np.isfinite(box_half), _backward((centre + box_half).ravel(), every).reshape(
            n_encoders, n_axes), np.inf)
    error_low[box_half == 0], error_high[box_half == 0] = errors[box_half == 0], errors[box_half == 0]
    floor_on_scale = _forward(floor.copy(), kinds)

    critical_values = [critical]
    if stepdown and usable:
        gap = point[:n_family] - np.concatenate([np.zeros(n_axes * n_pairs), np.tile(floor_on_scale, n_encoders)])
        t_observed = np.where(certain[:n_family], np.where(gap != 0.0, np.inf, 0.0), np.abs(gap) / scale[:n_family])
        decided, critical_values = stepdown_decisions(t_observed, t_replicates[:, :n_family], alpha, True)
        d = difference[:, first, second]
        pair_decided = decided[: n_axes * n_pairs].reshape(n_axes, n_pairs)
        better = np.zeros(difference.shape, dtype=bool)
        better[:, first, second] = pair_decided & (d < 0)
        better[:, second, first] = pair_decided & (d > 0)
        error_decided = decided[n_axes * n_pairs:].reshape(n_encoders, n_axes)
        above_floor = error_decided & (centre > floor_on_scale)
        below_floor = error_decided & (centre < floor_on_scale)
    else:
        better = high < 0.0
        above_floor, below_floor = error_low > floor, error_high < floor
    comparisons = Comparisons(names, axis_names, difference, standard_error, low, high, critical, alpha, len(drawn),
                              better if stepdown else None)

    known_equal = (standard_error == 0) & (difference == 0) & usable
    # at_least[a, k, j]: k's floored error surely <= j's on axis a; strictly[a, k, j]: surely below it
    at_least = better | known_equal | below_floor.T[:, :, None]
    strictly = better & above_floor.T[:, None, :]
    surely_dominates = at_least.all(axis=0) & strictly.any(axis=0)
    np.fill_diagonal(surely_dominates, False)
    above = surely_dominates & strict
    difference_low = None
    if not stepdown and usable:  # the CRS itself bounded over the family's set (one event)
        difference_low = crs_difference_low(errors, low, error_low, error_high, floor, better, known_equal,
                                            above_floor, below_floor, weights, margin, reference_index)
        above |= difference_low > 0.0
        if smooth:
            smooth_low = np.full((n_encoders, n_encoders), -np.inf)
            gained = point[n_family:] - half[n_family:]  # part_k - part_j for k < j, its lower end
            lost = point[n_family:] + half[n_family:]
            smooth_low[first, second], smooth_low[second, first] = gained, -lost
            settled = better, above_floor, below_floor
            if pretest is not None:
                settled = _pretest(point[:n_family], scale[:n_family], certain[:n_family], floor_on_scale, pretest,
                                   n_axes, n_encoders)
            smooth_bound = smooth_difference_low(smooth_low, settled[0], known_equal, settled[1], settled[2],
                                                 weights, margin)
            above |= smooth_bound > 0.0
            difference_low = np.maximum(difference_low, smooth_bound)
    np.fill_diagonal(above, False)
    return Statements(names, axis_names, contest, comparisons, above, above_floor, below_floor,
                      tuple(critical_values), alpha, stepdown, reference, smooth, error_low, error_high,
                      difference_low)


def crs_difference_low(errors, low, error_low, error_high, floor, better, known_equal, above_floor, below_floor,
                       weights, margin, reference_index) -> np.ndarray:
    """(E, E): a lower bound of CRS_k - CRS_j over every set of true errors the family's intervals allow.

    Floored errors f = max(e, floor); u = r / (r + f) with r the reference's floored error (the median over
    encoders, or the named one), bounded by the medians (the named one's) of the box's ends. Per term:
    dominance from the pairs surely / possibly dominated; balance through log u_k - log u_j =
    log(1 + (f_j - f_k) / (r + f_k)); worst axis through min_a u_k - min_a u_j >= min_a (u_k - u_j),
    u_k - u_j >= (f_j - f_k) max r / (r + f_j)^2 when negative. ``low`` (A, E, E): low[a, j, k] the lower end
    of e_j - e_k."""
    n_encoders, n_axes = errors.shape
    floored_low, floored_high = np.maximum(error_low, floor), np.maximum(error_high, floor)
    if reference_index is None:
        ref_low, ref_high = np.median(floored_low, axis=0), np.median(floored_high, axis=0)
    else:
        ref_low, ref_high = floored_low[reference_index], floored_high[reference_index]
    # D[a, k, j]: lower bound of f_j - f_k (the floor is 1-Lipschitz and non-decreasing)
    gap = low.transpose(0, 2, 1)  # gap[a, k, j] = lower end of e_j - e_k
    above_j = np.maximum(0.0, error_low.T - floor[:, None])[:, None, :]  # (A, 1, j)
    floored_gap = np.where(gap < 0, gap, np.minimum(gap, above_j))
    # dominance: surely / possibly, on the floored order (no margin: a margin leaves only "possibly")
    dominance_low, dominance_high = dominance_range(better, known_equal, above_floor, below_floor, margin)
    # balance
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = np.where(floored_gap >= 0, (ref_high[:, None] + floored_high.T)[:, :, None],
                               (ref_low[:, None] + floored_low.T)[:, :, None])  # (A, k, 1)
        ratio = 1.0 + floored_gap / denominator
        log_gain = np.where(ratio > 0, np.log(np.where(ratio > 0, ratio, 1.0)), -np.inf).mean(axis=0)  # (k, j)
        u_low = ref_low[None, :] / (ref_low[None, :] + floored_high)  # (E, A)
        u_high = ref_high[None, :] / (ref_high[None, :] + floored_low)
        balance_low, balance_high = np.exp(np.log(u_low).mean(axis=1)), np.exp(np.log(u_high).mean(axis=1))
        balance_gain = np.where(log_gain >= 0, balance_low[None, :], balance_high[None, :]) * np.expm1(log_gain)
        # worst axis: the steepest u can fall per unit of f_j, max over r of r / (r + f_j)^2
        nearest = np.clip(floored_low.T, ref_low[:, None], ref_high[:, None])  # (A, j)
        slope = nearest / (nearest + floored_low.T) ** 2
        worst_gain = np.where(floored_gap >= 0, 0.0, floored_gap * slope[:, None, :]).min(axis=0)
    w = np.asarray(weights, dtype=np.float64)
    bound = (w[0] * (dominance_low[:, None] - dominance_high[None, :]) + w[1] * balance_gain + w[2] * worst_gain)
    return np.where(np.isfinite(bound), bound, -np.inf)


def _pretest(point, scale, certain, floor_on_scale, kappa, n_axes, n_encoders):
    """(better (A, E, E), above_floor (E, A), below_floor (E, A)) settled by |t| >= kappa (moment selection)."""
    first, second = np.triu_indices(n_encoders, 1)
    n_pairs = len(first)
    gap = point - np.concatenate([np.zeros(n_axes * n_pairs), np.tile(floor_on_scale, n_encoders)])
    settled = np.where(certain, gap != 0.0, np.abs(gap) / scale >= kappa)
    pair_gap = gap[: n_axes * n_pairs].reshape(n_axes, n_pairs)
    pair_settled = settled[: n_axes * n_pairs].reshape(n_axes, n_pairs)
    better = np.zeros((n_axes, n_encoders, n_encoders), dtype=bool)
    better[:, first, second] = pair_settled & (pair_gap < 0)
    better[:, second, first] = pair_settled & (pair_gap > 0)
    error_gap = gap[n_axes * n_pairs:].reshape(n_encoders, n_axes)
    error_settled = settled[n_axes * n_pairs:].reshape(n_encoders, n_axes)
    return better, error_settled & (error_gap > 0), error_settled & (error_gap < 0)


def smooth_part(errors: np.ndarray, floor: np.ndarray, weights: Sequence[float], margin: float,
                reference_index: int | None) -> np.ndarray:
    """(..., E): the CRS without its dominance term, w1 balance + w2 worst axis, of error tables (..., E, A),
    by the same code as the CRS (:func:`crs.scoring.formula.crs_components`); it moves continuously with
    the errors, where dominance jumps at ties."""
    found = crs_components(errors, reference_index, np.asarray(weights, dtype=np.float64), floor=floor, margin=margin)
    w = np.asarray(weights, dtype=np.float64)
    return w[1] * found["balance"] + w[2] * found["worst_axis"]


def smooth_difference_low(smooth_low, better, known_equal, above_floor, below_floor, weights, margin) -> np.ndarray:
    """(E, E): a lower bound of CRS_k - CRS_j from the family: the smooth parts' difference at its interval's
    lower end (``smooth_low`` (E, E)) plus w0 times the dominance terms' worst case
    (:func:`dominance_range`). Away from ties every Pareto relation is settled and this is the smooth
    part's own studentised interval; at ties the dominance range widens it (decision 0180)."""
    dominance_low, dominance_high = dominance_range(better, known_equal, above_floor, below_floor, margin)
    bound = float(weights[0]) * (dominance_low[:, None] - dominance_high[None, :]) + smooth_low
    np.fill_diagonal(bound, -np.inf)
    return np.where(np.isfinite(bound), bound, -np.inf)


def dominance_range(better, known_equal, above_floor, below_floor, margin) -> tuple[np.ndarray, np.ndarray]:
    """(E,), (E,): the lowest and highest dominance term of each encoder over every set of true errors the
    family allows: from the pairs surely dominated (every axis surely no worse on the floored errors,
    one surely better; only with no margin) and possibly dominated (no axis surely worse, one not surely
    no better). ``better`` / ``known_equal`` (A, E, E), ``above_floor`` / ``below_floor`` (E, A)."""
    n_encoders = better.shape[1]
    surely_ge = better | known_equal | below_floor.T[:, :, None]  # [a, i, m]: f_i <= f_m surely
    surely_gt = better & above_floor.T[:, None, :]  # f_i < f_m surely
    surely = surely_ge.all(axis=0) & surely_gt.any(axis=0) & (margin <= 0.0)
    possibly = (~surely_gt.transpose(0, 2, 1)).all(axis=0) & (~surely_ge.transpose(0, 2, 1)).any(axis=0)
    np.fill_diagonal(surely, False)
    np.fill_diagonal(possibly, False)
    others = max(n_encoders - 1, 1)
    return ((1.0 + surely.sum(axis=1) / others - possibly.sum(axis=0) / others) / 2.0,
            (1.0 + possibly.sum(axis=1) / others - surely.sum(axis=0) / others) / 2.0)


def strict_order(weights: Sequence[float], margin: float, tolerance: float) -> bool:
    """Whether a floored error surely lower on one axis (and no higher on any) means a higher CRS: balance
    counts, or dominance counts with no margin beyond the float tolerance."""
    return float(weights[1]) > 0.0 or (float(weights[0]) > 0.0 and margin <= tolerance)


PRETEST_KAPPA = 2.0
"""``headline = "pretest"``: |t| at or above which an axis order or floor counts as settled for the dominance
range (about sqrt(2 log log n) for n of 400-1,500 patients, Andrews and Soares' smallest choice)."""
HEADLINE_OPTIONS: dict[str, dict] = {"smooth": {"smooth": True}, "bound": {}, "stepdown": {"stepdown": True},
                                     "pretest": {"smooth": True, "pretest": PRETEST_KAPPA}}
"""[score] headline -> the keywords of :func:`simultaneous_statements` (decision 0180)."""


def headline_statements(point: PointEstimate, replicate_errors: np.ndarray, contestants: Sequence[str],
                        stepdown: bool | None = None) -> Statements:
    """The family of :func:`simultaneous_statements` for a score: the point estimate's scored axes, floor,
    rules, level and ``headline`` method (:data:`HEADLINE_OPTIONS`); ``replicate_errors`` (B, E, A) the
    bootstrap's axis errors in :data:`crs.scoring.formula.ALL_AXES` order (row 0 not among them);
    ``contestants`` the competing encoders, best point CRS first. ``stepdown`` True / False overrides the
    method with the step-down / the bound alone."""
    settings = point.settings
    options = HEADLINE_OPTIONS[getattr(settings, "headline", "smooth")]
    if stepdown is not None:
        options = {"stepdown": True} if stepdown else {}
    weights = [float(w) for w in component_weights(settings.weights)]  # already normalised: only the type
    names = point.encoders
    columns = [list(ALL_AXES).index(axis) for axis in point.axes]
    errors = point.errors.reindex(index=names, columns=list(point.axes)).to_numpy(dtype=np.float64)
    drawn = np.asarray(replicate_errors, dtype=np.float64)[:, :, columns]
    reference = None
    if not settings.median_reference and not settings.reference_competes and settings.reference in names:
        reference = settings.reference
    return simultaneous_statements(
        errors, drawn, point.floor.reindex(list(point.axes)).to_numpy(dtype=np.float64),
        [AXIS_SCALES[axis] for axis in point.axes], contestants,
        alpha=float(settings.alpha),
        strict=strict_order(weights, settings.dominance_margin, settings.dominance_tolerance),
        weights=weights, margin=settings.dominance_margin, reference_index=point.reference_index,
        encoders=names, axes=point.axes, reference=reference, **options,
    )


def with_statements_tier(boot: BootstrapResult, statements: Statements) -> BootstrapResult:
    """The bootstrap result with its rank sets and leading tier taken from the statements (the CRS's own rank
    sets jump at ties, decision 0166); every other column as it was."""
    table = boot.table.copy()
    sets = statements.rank_sets()
    low, high = sets["rank_low"].reindex(table.index), sets["rank_high"].reindex(table.index)
    if table["rank_low"].dtype == "Int64" or low.isna().any():
        low, high = low.astype("Int64"), high.astype("Int64")
    table["rank_low"], table["rank_high"] = low, high
    table["in_leading_tier"] = sets["in_leading_tier"].reindex(table.index).fillna(False).astype(bool)
    return dataclasses.replace(boot, table=table, leading_tier=statements.leading_tier)
