"""How often AUROC and the CRS order a pair of encoders oppositely, and how many reversals noise alone makes.

From bootstrap replicates of both scores (the same replicates, so the comparison is paired):

* per pair, the share of replicates in which AUROC and CRS order it strictly oppositely, and the
  share for each of the two orientations (a ahead on AUROC and b on CRS, or the other way round);
* a **robust reversal** is a pair held in one orientation in at least ``level`` (95 %) of the
  replicates: both orders, AUROC's and the CRS's, survive the resampling;
* the point count of reversed pairs (with Kendall tau-b and the mean rank displacement, from
  :func:`crs.scoring.rankings.rank_reversals`), the count in every replicate and its percentile interval;
* the **noise baseline**: the number of pairs two independent replicates of the same score order
  oppositely (replicate b against replicate b + B/2), its mean and 5-95 % range. A headline count
  of reversals means little unless it stands clear of the count noise alone produces;
* with the default interval (the projected box, decision 0128), bounds on the count that hold whenever
  the true AUROCs and CRS lie in their simultaneous intervals (:func:`reversal_count_bounds`).

:func:`bootstrap_reversals` reads all of it from a score's bootstrap result (the same replicates as the CRS).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.bootstrap import AXES_FROM_BOX, BootstrapResult, simultaneous_crs
from crs.scoring.formula import ScoreInputError
from crs.scoring.rankings import rank_reversals
from crs.scoring.settings import ScoreSettings

DEFAULT_LEVEL = 0.95
NOISE_QUANTILES = (0.05, 0.95)


@dataclass(frozen=True)
class Reversals:
    """AUROC-vs-CRS reversals with their bootstrap uncertainty and the noise baseline.

    ``pairs``: one row per unordered pair, ``first`` the encoder AUROC's point estimate puts ahead
    (ties: the first name): auroc_gap and crs_gap (first minus second, point), reversed (point),
    p_reversed (either orientation), p_as_point (first ahead on AUROC, second on CRS), p_opposite
    (the other orientation), robust. ``replicate_counts``: reversed pairs in each replicate.
    ``noise``: rows "crs" and "auroc", columns mean, low, high: pairs two independent replicates
    of that score order oppositely.
    """

    pairs: pd.DataFrame
    n_pairs: int
    n_reversed: int
    n_robust: int
    kendall_tau: float
    mean_abs_displacement: float
    replicate_counts: np.ndarray
    count_low: float
    count_high: float
    noise: pd.DataFrame
    level: float
    alpha: float

    def summary(self) -> dict:
        """Plain numbers for summary.json and the report's opening sentence."""
        return {
            "n_pairs": self.n_pairs,
            "n_reversed": self.n_reversed,
            "n_robust": self.n_robust,
            "robust_pairs": [
                list(p) for p in self.pairs.loc[self.pairs["robust"], ["first", "second"]].to_numpy()
            ],
            "kendall_tau": self.kendall_tau,
            "mean_abs_displacement": self.mean_abs_displacement,
            "count_mean": float(np.mean(self.replicate_counts)),
            "count_low": self.count_low,
            "count_high": self.count_high,
            "noise_crs": self.noise.loc["crs"].to_dict(),
            "noise_auroc": self.noise.loc["auroc"].to_dict(),
            "level": self.level,
            "alpha": self.alpha,
            "robust_level": self.level,
            "interval_level": 1.0 - self.alpha,
            "n_boot": int(len(self.replicate_counts)),
        }


def _as_frame(replicates: pd.DataFrame | np.ndarray, names: list[str], what: str) -> np.ndarray:
    if isinstance(replicates, pd.DataFrame):
        columns = [str(c) for c in replicates.columns]
        missing = sorted(set(names) - set(columns))
        if missing:
            raise ScoreInputError(f"{what} replicates lack encoders {missing}; pass one column per encoder")
        array = replicates.set_axis(columns, axis=1)[names].to_numpy(dtype=np.float64)
    else:
        array = np.asarray(replicates, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != len(names):
        raise ScoreInputError(
            f"{what} replicates must be (replicates, {len(names)} encoders), got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ScoreInputError(
            f"{what} replicates contain NaN or infinity; score every encoder in every replicate"
        )
    return array


def pair_orders(replicates: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(B, pairs) sign of score[first] - score[second] in every replicate: 1, -1, or 0 for a tie."""
    return np.sign(replicates[:, first] - replicates[:, second]).astype(np.int8)


def opposite_count(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairs strictly ordered oppositely by two sign arrays (..., pairs)."""
    return ((a * b) < 0).sum(axis=-1)


def noise_baseline(
    replicates: np.ndarray, quantiles: tuple[float, float] = NOISE_QUANTILES
) -> tuple[float, float, float]:
    """Mean and quantiles of the pairs replicate b and replicate b + B/2 order oppositely (disjoint, independent draws)."""
    half = len(replicates) // 2
    if half < 1:
        raise ScoreInputError("the noise baseline needs at least 2 replicates")
    first, second = np.triu_indices(replicates.shape[1], k=1)
    orders = pair_orders(replicates, first, second)
    counts = opposite_count(orders[:half], orders[half : 2 * half])
    low, high = np.quantile(counts, quantiles)
    return float(counts.mean()), float(low), float(high)


def auroc_crs_reversals(
    auroc: pd.Series,
    crs: pd.Series,
    auroc_replicates: pd.DataFrame | np.ndarray,
    crs_replicates: pd.DataFrame | np.ndarray,
    level: float = DEFAULT_LEVEL,
    alpha: float = 0.05,
) -> Reversals:
    """Reversals between the AUROC and CRS rankings, point and bootstrap, with the noise baseline.

    ``auroc`` and ``crs``: point scores indexed by encoder (higher is better); the replicate arrays
    are (B, E), columns in the Series' encoder order (or DataFrames naming them), row b of both
    from the same bootstrap replicate.
    """
    if not 0.5 < level <= 1.0:
        raise ScoreInputError(f"level must lie in (0.5, 1], got {level}")
    if not 0.0 < alpha < 1.0:
        raise ScoreInputError(f"alpha must lie in (0, 1), got {alpha}")
    point = rank_reversals(auroc, crs)
    names = [str(e) for e in auroc.index]
    auroc_point = auroc.set_axis(names).to_numpy(dtype=np.float64)
    crs_point = crs.set_axis([str(e) for e in crs.index]).reindex(names).to_numpy(dtype=np.float64)
    auroc_boot = _as_frame(auroc_replicates, names, "AUROC")
    crs_boot = _as_frame(crs_replicates, names, "CRS")
    if len(auroc_boot) != len(crs_boot):
        raise ScoreInputError(
            f"{len(auroc_boot)} AUROC replicates but {len(crs_boot)} CRS replicates; both must come from the same draws"
        )

    i, j = np.triu_indices(len(names), k=1)
    swap = (auroc_point[j] > auroc_point[i]) | (
        (auroc_point[j] == auroc_point[i]) & (np.array(names)[j] < np.array(names)[i])
    )
    first, second = np.where(swap, j, i), np.where(swap, i, j)
    auroc_orders = pair_orders(auroc_boot, first, second)
    crs_orders = pair_orders(crs_boot, first, second)
    as_point = ((auroc_orders > 0) & (crs_orders < 0)).mean(axis=0)
    opposite = ((auroc_orders < 0) & (crs_orders > 0)).mean(axis=0)
    auroc_gap = auroc_point[first] - auroc_point[second]
    crs_gap = crs_point[first] - crs_point[second]
    pairs = pd.DataFrame(
        {
            "first": np.array(names)[first],
            "second": np.array(names)[second],
            "auroc_gap": auroc_gap,
            "crs_gap": crs_gap,
            "reversed": (auroc_gap * crs_gap) < 0,
            "p_reversed": as_point + opposite,
            "p_as_point": as_point,
            "p_opposite": opposite,
            "robust": np.maximum(as_point, opposite) >= level,
        }
    ).sort_values(["p_reversed", "first", "second"], ascending=[False, True, True], ignore_index=True)

    counts = opposite_count(auroc_orders, crs_orders)
    count_low, count_high = np.quantile(counts, [alpha / 2, 1 - alpha / 2])
    noise = pd.DataFrame(
        [noise_baseline(crs_boot), noise_baseline(auroc_boot)],
        index=pd.Index(["crs", "auroc"], name="score"),
        columns=["mean", "low", "high"],
    )
    return Reversals(
        pairs=pairs,
        n_pairs=point.n_pairs,
        n_reversed=point.n_reversed,
        n_robust=int(pairs["robust"].sum()),
        kendall_tau=point.kendall_tau,
        mean_abs_displacement=point.mean_abs_displacement,
        replicate_counts=counts,
        count_low=float(count_low),
        count_high=float(count_high),
        noise=noise,
        level=level,
        alpha=alpha,
    )


def reversal_count_bounds(
    auroc_low: np.ndarray, auroc_high: np.ndarray, crs_low: np.ndarray, crs_high: np.ndarray
) -> tuple[int, int]:
    """Bounds on how many pairs AUROC and the CRS order strictly oppositely, for any AUROCs and CRS in
    their intervals (E,) (simultaneous: the box's AUROC bounds and the projected CRS bounds).

    Lower: pairs reversed at every point (i's AUROC interval wholly above j's and i's CRS interval
    wholly below j's, or the reverse). Upper: pairs reversed at some point of the intervals (i can be
    ahead on AUROC and behind on CRS at once, taking each interval apart: an outer bound). Whenever
    the true AUROCs and CRS lie in their intervals, the true count lies in the bounds.
    """
    a_low, a_high = np.asarray(auroc_low, dtype=np.float64), np.asarray(auroc_high, dtype=np.float64)
    c_low, c_high = np.asarray(crs_low, dtype=np.float64), np.asarray(crs_high, dtype=np.float64)
    i, j = np.triu_indices(len(a_low), 1)
    surely = ((a_low[i] > a_high[j]) & (c_high[i] < c_low[j])) | ((a_low[j] > a_high[i]) & (c_high[j] < c_low[i]))
    possibly = ((a_high[i] > a_low[j]) & (c_low[i] < c_high[j])) | ((a_high[j] > a_low[i]) & (c_low[j] < c_high[i]))
    return int(surely.sum()), int(possibly.sum())


def bootstrap_reversals(table: pd.DataFrame, boot: BootstrapResult, settings: ScoreSettings) -> Reversals | None:
    """AUROC-vs-CRS reversals under the bootstrap (:func:`auroc_crs_reversals`), from the same replicates as the CRS.

    AUROC replicates are 1 - the discrimination error of each replicate. Replicates in which any
    encoder's AUROC or CRS is not finite are left out; None when fewer than two remain.
    """
    if boot.axis_error_replicates is None or "discrimination" not in boot.axis_error_replicates:
        return None
    names = [str(e) for e in table.index]
    auroc_boot = 1.0 - boot.axis_error_replicates["discrimination"][names].to_numpy(dtype=np.float64)
    crs_boot = boot.replicates[names].to_numpy(dtype=np.float64)
    finite = np.isfinite(auroc_boot).all(axis=1) & np.isfinite(crs_boot).all(axis=1)
    if finite.sum() < 2:
        return None
    found = auroc_crs_reversals(
        table["auroc"].set_axis(names), table["crs"].set_axis(names), auroc_boot[finite], crs_boot[finite],
        alpha=settings.alpha,
    )  # fmt: skip
    if settings.interval in AXES_FROM_BOX and "discrimination_error_box_low" in boot.table:  # decisions 0128, 0181
        box = boot.table.reindex(names)
        low, high = reversal_count_bounds(
            1.0 - box["discrimination_error_box_high"].to_numpy(), 1.0 - box["discrimination_error_box_low"].to_numpy(),
            box["crs_box_low"].to_numpy(), box["crs_box_high"].to_numpy())  # fmt: skip
        found = dataclasses.replace(found, count_low=float(low), count_high=float(high))
    return found


@dataclass(frozen=True)
class ContestReversals:
    """AUROC against CRS among the contestants only (a named reference that does not compete is left out:
    issue 46 item 6), with the pairs reversed with confidence (issue 47 item 5).

    ``reversed_pairs``: (ahead by AUROC, ahead by CRS) in the point estimate; ``confident_pairs``: those of
    them in which both orders are held at once by the simultaneous intervals (the AUROC difference's
    interval of the axis comparisons, or where those are missing the box's AUROC intervals, lies on one side
    of 0, and the two CRS box intervals do not overlap); ``kendall_tau``: tau-b, NaN when undefined, and
    ``tau_undefined`` then says why; ``auroc_leaders``: every contestant at the highest clean AUROC (ties).
    """

    contestants: tuple[str, ...]
    reversed_pairs: tuple[tuple[str, str], ...]
    confident_pairs: tuple[tuple[str, str], ...]
    n_pairs: int
    kendall_tau: float
    tau_undefined: str
    auroc_leaders: tuple[str, ...]
    mean_abs_displacement: float

    @property
    def n_reversed(self) -> int:
        return len(self.reversed_pairs)

    @property
    def n_confident(self) -> int:
        return len(self.confident_pairs)

    def tau_text(self, digits: int = 2) -> str:
        """'0.33', or '— (undefined: every clean AUROC is tied)'."""
        if np.isfinite(self.kendall_tau):
            return f"{self.kendall_tau:.{digits}f}"
        return f"\u2014 (undefined: {self.tau_undefined})"


def _auroc_order_held(table: pd.DataFrame, comparisons, ahead: str, behind: str) -> bool:
    """True when ``ahead``'s clean AUROC is above ``behind``'s with confidence."""
    if comparisons is not None and "discrimination" in comparisons.axes and {ahead, behind} <= set(comparisons.encoders):
        return behind in comparisons.better_than(ahead, "discrimination")
    if "discrimination_error_box_low" in table and "discrimination_error_box_high" in table:
        return bool(1.0 - table.loc[ahead, "discrimination_error_box_high"]
                    > 1.0 - table.loc[behind, "discrimination_error_box_low"])
    return False


def contest_reversals(crs: pd.DataFrame, contestants: list[str] | tuple[str, ...], comparisons=None,
                      box: pd.DataFrame | None = None) -> ContestReversals:
    """:class:`ContestReversals` of the contestants in the CRS table ``crs`` (index encoder; columns auroc,
    crs, crs_low, crs_high); ``comparisons``: the simultaneous axis comparisons (or None); ``box``: the
    bootstrap table with the box's AUROC intervals (the fallback when there are no comparisons) and its CRS
    intervals ``crs_box_low`` / ``_high``, which replace ``crs_low`` / ``crs_high`` where present: a pair held
    with confidence needs both encoders' CRS bounds at once, whatever interval is printed (decision 0181)."""
    names = [str(name) for name in contestants]
    table = simultaneous_crs(crs.set_axis([str(name) for name in crs.index]).loc[names], box)
    if box is not None:
        wanted = [c for c in box if c.startswith("discrimination_error_box") and c not in table]
        table = table.join(box.set_axis([str(name) for name in box.index]).reindex(names)[wanted])
    auroc, score = table["auroc"].astype(float), table["crs"].astype(float)
    top = float(auroc.max()) if len(auroc) else np.nan
    leaders = tuple(name for name in names if np.isfinite(top) and abs(float(auroc[name]) - top) <= 1e-12)
    if len(names) < 2:
        return ContestReversals(tuple(names), (), (), 0, float("nan"), "fewer than two contestants", leaders, 0.0)
    point = rank_reversals(auroc, score)
    confident = []
    for ahead, behind_by_auroc in point.reversed_pairs:  # (ahead by AUROC, ahead by CRS)
        crs_held = float(table.loc[ahead, "crs_high"]) < float(table.loc[behind_by_auroc, "crs_low"])
        if crs_held and _auroc_order_held(table, comparisons, ahead, behind_by_auroc):
            confident.append((ahead, behind_by_auroc))
    reason = ""
    if not np.isfinite(point.kendall_tau):
        reason = ("every clean AUROC is tied" if np.ptp(auroc.to_numpy()) == 0 else
                  "every CRS is tied" if np.ptp(score.to_numpy()) == 0 else "too few untied pairs")
    return ContestReversals(tuple(names), point.reversed_pairs, tuple(confident), point.n_pairs, point.kendall_tau,
                            reason, leaders, point.mean_abs_displacement)


def contest_reversals_of(score) -> ContestReversals:
    """:func:`contest_reversals` of a score result: its contestants (crs.evaluate.contest), comparisons and box."""
    from crs.evaluate.contest import contest_of_score

    contest = contest_of_score(score)
    return contest_reversals(score.crs, contest.contestants, getattr(score, "comparisons", None),
                             getattr(score.bootstrap, "table", None))


def contest_reversal_line(found: ContestReversals, baseline: str | None) -> str:
    """One line for the terminal: the point reversals among the contestants and those held with confidence."""
    among = f" among the contestants ({baseline}, the baseline row, left out)" if baseline else ""
    return (f"AUROC vs CRS{among}: {found.n_reversed} of {found.n_pairs} pairs reversed in the point estimate "
            f"{[list(pair) for pair in found.reversed_pairs]}, {found.n_confident} with confidence (both orders held "
            f"by the simultaneous intervals) {[list(pair) for pair in found.confident_pairs]}; Kendall tau "
            f"{found.tau_text(3)}, mean |rank displacement| {found.mean_abs_displacement:.2f}")
