"""Which encoder is better than which, on which axis, with confidence (issue 40 item 2, DESIGN 8e).

Pure functions on arrays. For every axis a and every pair of encoders (j, k) the difference of their
axis errors d = e_j - e_k is taken in the point estimate and in every bootstrap replicate (the same
patient-level resamples for both encoders, so noise they share cancels). Studentised max-|t| over
every pair and every axis at once:

    se      = SD over replicates of d*                      (per pair and axis)
    t*_b    = max over pairs and axes of |d*_b - d| / se     (per replicate)
    c       = the (1 - alpha) quantile of t*_b
    d +- c se                                                 (every interval, simultaneously)

All intervals hold together with probability 1 - alpha (asymptotically), so every statement read off
them holds together too:

* j is **better** than k on axis a when the interval of e_j - e_k lies below 0.
* j **surely dominates** k when j dominates k at every point of the box of intervals: on every axis
  the upper end is <= 0, on at least one < 0 (an exact tie, an interval [0, 0], counts as equal).
* j **possibly dominates** k when j dominates k at some point of the box: on every axis the lower
  end is <= 0, on at least one < 0.
* The **confident Pareto set**: the encoders no other encoder surely dominates.

A difference that never moves over the replicates (se = 0) is known exactly: its interval is the
point, and it adds nothing to the maximum. Errors are compared as measured (no noise floor, which
is a device of the CRS's dominance count: here the intervals carry the noise).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.bootstrap import BootstrapResult
from crs.scoring.formula import PointEstimate

_SE_FLOOR = 1e-12
"""A difference whose replicate SD is below this never moves: it is known exactly."""


class ComparisonInputError(ValueError):
    """The errors or replicates handed to the comparisons are malformed; the message says how."""


@dataclass(frozen=True)
class Comparisons:
    """Simultaneous intervals on every pairwise difference of axis errors, and what follows from them.

    Arrays are indexed (axis, first encoder, second encoder) in the order of ``axes`` and
    ``encoders``; ``difference[a, j, k]`` = error of j minus error of k on axis a (lower error is
    better, so a negative difference favours j); ``low`` / ``high`` its simultaneous interval
    (antisymmetric: low[a, j, k] = -high[a, k, j]). ``critical``: the max-|t| critical value c (NaN
    when fewer than two replicates were usable: then every interval is unbounded and nothing is decided).
    """

    encoders: tuple[str, ...]
    axes: tuple[str, ...]
    difference: np.ndarray
    standard_error: np.ndarray
    low: np.ndarray
    high: np.ndarray
    critical: float
    alpha: float
    n_boot: int
    decided: np.ndarray | None = None
    """(axis, j, k): j's error below k's with confidence by a step-down over the family the intervals
    come from (:mod:`crs.scoring.statements`); None: read off the intervals (``high < 0``)."""

    @property
    def better(self) -> np.ndarray:
        """(axis, j, k): j's error is below k's on that axis with confidence (the interval lies below 0, or the
        step-down decided it)."""
        if self.decided is not None:
            return np.asarray(self.decided, dtype=bool)
        return self.high < 0.0

    @property
    def surely_dominates(self) -> np.ndarray:
        """(j, k): j dominates k at every point of the confidence box (never j on the diagonal): better or
        known equal on every axis, better on one."""
        if self.decided is None:
            return dominance_from_bounds(self.high)
        known_equal = (self.low == 0.0) & (self.high == 0.0)
        return dominance_from_bounds(np.where(self.better, -1.0, np.where(known_equal, 0.0, 1.0)))

    @property
    def possibly_dominates(self) -> np.ndarray:
        """(j, k): j dominates k at some point of the confidence box."""
        return dominance_from_bounds(self.low)

    @property
    def confident_pareto(self) -> np.ndarray:
        """(j,): no other encoder surely dominates j."""
        return np.asarray(~self.surely_dominates.any(axis=0), dtype=bool)

    def better_than(self, encoder: str, axis: str) -> list[str]:
        """The encoders ``encoder`` is better than on ``axis`` with confidence, in encoder order."""
        j, a = self.encoders.index(encoder), self.axes.index(axis)
        return [name for k, name in enumerate(self.encoders) if self.better[a, j, k]]

    def table(self) -> pd.DataFrame:
        """One row per axis and unordered pair (first before second in encoder order): difference of the
        errors (first minus second), its SE and simultaneous interval, and which is better (or "")."""
        rows = []
        first, second = np.triu_indices(len(self.encoders), 1)
        for a, axis in enumerate(self.axes):
            for j, k in zip(first.tolist(), second.tolist(), strict=True):
                better = self.encoders[j] if self.better[a, j, k] else self.encoders[k] if self.better[a, k, j] else ""
                rows.append({"axis": axis, "first": self.encoders[j], "second": self.encoders[k],
                             "error_difference": float(self.difference[a, j, k]),
                             "se": float(self.standard_error[a, j, k]),
                             "low": float(self.low[a, j, k]), "high": float(self.high[a, j, k]), "better": better})
        columns = ["axis", "first", "second", "error_difference", "se", "low", "high", "better"]
        return pd.DataFrame(rows, columns=columns)

    def encoder_table(self) -> pd.DataFrame:
        """Per encoder (index ``encoder``): the encoders it surely and possibly dominates (comma-separated
        names), and whether it is in the confident Pareto set."""
        surely, possibly = self.surely_dominates, self.possibly_dominates
        names = list(self.encoders)
        return pd.DataFrame(
            {
                "surely_dominates": [", ".join(n for k, n in enumerate(names) if surely[j, k]) for j in range(len(names))],
                "possibly_dominates": [", ".join(n for k, n in enumerate(names) if possibly[j, k])
                                       for j in range(len(names))],
                "confident_pareto": self.confident_pareto,
            },
            index=pd.Index(names, name="encoder"),
        )

    def summary(self) -> dict:
        return {
            "encoders": list(self.encoders),
            "alpha": self.alpha,
            "critical_value": None if not np.isfinite(self.critical) else float(self.critical),
            "level": 1.0 - self.alpha,
            "n_boot": self.n_boot,
            "axes": list(self.axes),
            "stepdown": self.decided is not None,
            "confident_pareto_set": [n for n, flag in zip(self.encoders, self.confident_pareto, strict=True) if flag],
        }


def dominance_from_bounds(bound: np.ndarray) -> np.ndarray:
    """(axis, j, k) one end of the intervals of e_j - e_k -> (j, k): j dominates k at that end
    (no axis above 0, at least one below); the diagonal is False."""
    bound = np.asarray(bound, dtype=np.float64)
    found = np.asarray((bound <= 0.0).all(axis=0) & (bound < 0.0).any(axis=0), dtype=bool)
    np.fill_diagonal(found, False)
    return found


def pairwise_comparisons(
    point: np.ndarray,
    replicates: np.ndarray,
    alpha: float = 0.05,
    encoders: Sequence[str] | None = None,
    axes: Sequence[str] | None = None,
) -> Comparisons:
    """Simultaneous (1 - alpha) intervals on every pairwise difference of the same axis's errors.

    ``point``: (E, A) axis errors (lower is better); ``replicates``: (B, E, A) the same errors in each
    bootstrap replicate, the replicates shared by every encoder. A replicate with a non-finite error
    anywhere is left out; with fewer than two left, every interval is (-inf, inf).
    """
    point = np.asarray(point, dtype=np.float64)
    replicates = np.asarray(replicates, dtype=np.float64)
    if point.ndim != 2:
        raise ComparisonInputError(f"point errors must be (encoders, axes), got shape {point.shape}")
    n_encoders, n_axes = point.shape
    if replicates.ndim != 3 or replicates.shape[1:] != point.shape:
        raise ComparisonInputError(
            f"replicates must be (replicates, {n_encoders} encoders, {n_axes} axes), got shape {replicates.shape}"
        )
    if not np.isfinite(point).all():
        raise ComparisonInputError("point errors contain NaN or infinity; compare only measured axes")
    if not 0.0 < alpha < 1.0:
        raise ComparisonInputError(f"alpha must lie in (0, 1), got {alpha}")
    names = tuple(str(e) for e in encoders) if encoders is not None else tuple(f"encoder_{j}" for j in range(n_encoders))
    axis_names = tuple(str(a) for a in axes) if axes is not None else tuple(f"axis_{a}" for a in range(n_axes))
    if len(names) != n_encoders or len(axis_names) != n_axes:
        raise ComparisonInputError(f"need {n_encoders} encoder names and {n_axes} axis names, "
                                   f"got {len(names)} and {len(axis_names)}")

    usable = replicates[np.isfinite(replicates).all(axis=(1, 2))]
    # (A, E, E): d[a, j, k] = e_j - e_k
    difference = point.T[:, :, None] - point.T[:, None, :]
    if len(usable) < 2:
        nothing = np.full(difference.shape, np.inf)
        return Comparisons(names, axis_names, difference, np.full(difference.shape, np.nan), -nothing, nothing,
                           float("nan"), alpha, len(usable))
    boot = usable.transpose(0, 2, 1)  # (B, A, E)
    boot_difference = boot[:, :, :, None] - boot[:, :, None, :]  # (B, A, E, E)
    standard_error = boot_difference.std(axis=0, ddof=1)
    moves = standard_error > _SE_FLOOR
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        deviation = np.abs(boot_difference - difference[None]) / np.where(moves, standard_error, 1.0)[None]
    deviation = np.where(moves[None], deviation, 0.0)
    largest = deviation.reshape(len(usable), -1).max(axis=1) if deviation[0].size else np.zeros(len(usable))
    critical = float(np.quantile(largest, 1.0 - alpha))
    half = np.where(moves, critical * standard_error, 0.0)
    return Comparisons(names, axis_names, difference, np.where(moves, standard_error, 0.0), difference - half,
                       difference + half, critical, alpha, len(usable))


def comparisons_from_table(table: pd.DataFrame, summary: dict) -> Comparisons:
    """Rebuild :class:`Comparisons` from :meth:`Comparisons.table` and :meth:`Comparisons.summary` (a stored score)."""
    names, axes = tuple(summary["encoders"]), tuple(summary["axes"])
    shape = (len(axes), len(names), len(names))
    difference, standard_error = np.zeros(shape), np.zeros(shape)
    low, high = np.zeros(shape), np.zeros(shape)
    for row in table.itertuples(index=False):
        a, j, k = axes.index(row.axis), names.index(row.first), names.index(row.second)
        difference[a, j, k], difference[a, k, j] = row.error_difference, -row.error_difference
        standard_error[a, j, k] = standard_error[a, k, j] = row.se
        low[a, j, k], high[a, j, k] = row.low, row.high
        low[a, k, j], high[a, k, j] = -row.high, -row.low
    decided = None
    if summary.get("stepdown"):  # the stored "better" column is the step-down's decision
        decided = np.zeros(shape, dtype=bool)
        for row in table.itertuples(index=False):
            if isinstance(row.better, str) and row.better:
                a, first, second = axes.index(row.axis), names.index(row.first), names.index(row.second)
                winner, loser = (first, second) if row.better == row.first else (second, first)
                decided[a, winner, loser] = True
    critical = summary.get("critical_value")
    return Comparisons(names, axes, difference, standard_error, low, high,
                       float("nan") if critical is None else float(critical), float(summary["alpha"]),
                       int(summary["n_boot"]), decided)


def axis_comparisons(point: PointEstimate, boot: BootstrapResult, alpha: float) -> Comparisons | None:
    """Simultaneous intervals on every pairwise difference of the scored axes' errors, from the bootstrap's
    axis replicates (the same patient-level resamples and seed draws as the CRS); None without them."""
    kept = boot.axis_error_replicates or {}
    axes = [axis for axis in point.axes if axis in kept]
    if not axes:
        return None
    names = [str(name) for name in point.encoders]
    errors = point.errors.set_axis(point.errors.index.astype(str))[axes].reindex(names).to_numpy(dtype=np.float64)
    replicates = np.stack([kept[axis].set_axis([str(c) for c in kept[axis].columns], axis=1)[names]
                           .to_numpy(dtype=np.float64) for axis in axes], axis=-1)
    return pairwise_comparisons(errors, replicates, alpha, names, axes)
