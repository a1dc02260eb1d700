"""Bootstrap replicates made fit for a percentile interval that stays in its quantity's range (issue 30).

:func:`centre_on_squares` replaces the additive centring of calibration replicates (decision 0017)
with a centring of their squares (decision 0061): the scored calibration error is the root of a
debiased mean squared gap T (decision 0035), and a resample's T sits above the data's by the noise
of each bin's gap, an additive bias on the squared scale. Shifting the squares and taking the root
again removes that bias and never gives a negative error (the additive shift of the roots gave
intervals such as ``0.040 [-0.017, 0.090]`` for a calibrated encoder).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np


def centre_on_squares(values: np.ndarray) -> np.ndarray:
    """(B + 1, ...) non-negative errors, row 0 the point estimate, rows 1.. the replicates -> the same
    with every replicate moved on the squared scale so the replicates' mean square is row 0's square:

        r_b' = sqrt(max(r_b^2 - (mean_b r_b^2 - r_0^2), 0))

    per trailing position (each encoder, seed, group apart). Row 0 is kept; a NaN replicate stays
    NaN; a shift that would raise the replicates (their mean square below the point's) is applied
    too, so the correction is symmetric.
    """
    values = np.asarray(values, dtype=np.float64)
    out = values.copy()
    if len(values) < 2:
        return out
    squares = np.square(values[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a position never measured: its NaN stays
        shift = np.nanmean(squares, axis=0) - np.square(values[0])
    out[1:] = np.sqrt(np.maximum(squares - shift, 0.0))  # NaN propagates through maximum
    return out


_LOGIT_CLIP = 1e-4
"""AUROCs are clipped to [1e-4, 1 - 1e-4] before the logit (a group ranked perfectly in a replicate)."""


def percentile_interval(values: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per column: the alpha/2 and 1 - alpha/2 percentiles of the replicates (rows), NaN ignored
    (an all-NaN column gives NaN without a warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return low, high


def simultaneous_gap_interval(
    values: np.ndarray, first: int, second: int, alpha: float, *, logit_scale: bool = False
) -> tuple[float, float, float]:
    """The (1 - alpha) interval of ``values[:, first] - values[:, second]``, simultaneous over every pair of groups.

    ``values`` (B + 1, G): row 0 the point estimate of each group, rows 1.. the replicates. The pair
    is the one the point estimate picked (best and worst group), so a plain interval for it ignores
    the choice (issue 30: with four groups of equal signal the percentile interval excluded 0 in
    16 of 100 data sets). Max-|t| over all G (G - 1) / 2 differences, as the rank sets do
    (:mod:`crs.scoring.rank_sets`): d_jk the point difference, se_jk its bootstrap SD,
    c the (1 - alpha) quantile over replicates of max_jk |d*_jk - d_jk| / se_jk; every pair's
    d_jk +- c se_jk holds together with probability 1 - alpha, so the picked pair's does too
    (decision 0062). A replicate in which a group has no value (no positives drawn) counts over
    the pairs it has.

    ``logit_scale`` (AUROCs): the pairs are studentised on the logit scale, where an AUROC's
    spread no longer shrinks as it nears 1 (on the raw scale the group that is best by chance has
    the smallest SE, which inflated its t: 8.5 % null findings at eight groups against 3.5 % on the
    logit scale, same data sets). The picked pair's logit interval D +- c s is mapped back with the
    secant slope of the inverse logit between the two groups, d / D (the point's own ratio), so the
    AUROC interval d +- c s d / D excludes 0 exactly when the logit one does.

    Returns (low, high, c); NaN where fewer than two replicates are finite.
    """
    values = np.asarray(values, dtype=np.float64)
    raw_gap = float(values[0, first] - values[0, second])
    if logit_scale:
        clipped = np.clip(values, _LOGIT_CLIP, 1.0 - _LOGIT_CLIP)
        values = np.log(clipped) - np.log1p(-clipped)
    point, replicates = values[0], values[1:]
    n_groups = values.shape[1]
    j, k = np.triu_indices(n_groups, 1)
    difference = point[j] - point[k]
    deviations = (replicates[:, j] - replicates[:, k]) - difference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        se = np.nanstd(replicates[:, j] - replicates[:, k], axis=0, ddof=1)
        t = np.abs(deviations) / np.where(se > 0, se, np.nan)
        largest = np.nanmax(np.where(np.isfinite(t), t, np.nan), axis=1)
    largest = largest[np.isfinite(largest)]
    pair = int(np.flatnonzero((j == min(first, second)) & (k == max(first, second)))[0]) if first != second else -1
    if pair < 0 or len(largest) < 2 or not np.isfinite(se[pair]):
        return float("nan"), float("nan"), float("nan")
    critical = float(np.quantile(largest, 1.0 - alpha))
    gap = float(point[first] - point[second])
    half = critical * float(se[pair])
    if logit_scale:
        mean = 0.5 * (point[first] + point[second])
        slope = raw_gap / gap if gap != 0.0 else float(np.exp(-np.logaddexp(0.0, -mean) - np.logaddexp(0.0, mean)))
        return raw_gap - half * slope, raw_gap + half * slope, critical
    return gap - half, gap + half, critical


@dataclass(frozen=True)
class GroupBox:
    """A simultaneous (1 - alpha) box over K group AUROCs (every group of every encoder, task and attribute
    of one condition): ``low`` and ``high`` (K,) hold all K true AUROCs at once with probability about
    1 - alpha; ``critical`` the studentised max-|t| critical value on the logit scale."""

    low: np.ndarray
    high: np.ndarray
    critical: float


def simultaneous_group_box(values: np.ndarray, alpha: float) -> GroupBox:
    """The studentised max-|t| box over every column of ``values`` (B + 1, K): row 0 the point AUROCs, rows 1..
    the replicates (decision 0135).

    On the logit scale (an AUROC's spread no longer shrinks near 1, as for the gaps, decision 0062):
    L_k the point's logit, s_k its replicates' SD, c the (1 - alpha) quantile over replicates of
    max_k |L*_k - L_k| / s_k; each column's interval is expit(L_k +- c s_k). All K hold at once, so any
    statistic monotone in every group AUROC (the worst group: a minimum; a gap between two groups) is
    covered by its values at the box's corners (:func:`box_minimum`, :func:`box_gap`), through ties
    between groups, with no derivative. A column with no finite replicate gets NaN; a column whose
    replicates never move (s_k = 0) its point at both ends; a replicate's NaN column (no positives drawn)
    is left out of that replicate's maximum. Returns NaN bounds when fewer than two replicates are finite.
    """
    from crs.scoring.box import simultaneous_box

    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"group AUROCs of shape {values.shape}; give (replicates + 1, groups)")
    measured = np.isfinite(values[1:]).sum(axis=0) >= 2  # a column with no spread to judge gets NaN
    if len(values) < 3 or not measured.any():
        nan = np.full(values.shape[1], np.nan)
        return GroupBox(nan, nan.copy(), float("nan"))
    # the one max-|t| box of crs.scoring.box, on the logit scale (the CRS's AUROC axes use the same)
    found = simultaneous_box(values[0], values[1:], alpha, "logit")
    low = np.where(measured, found.low, np.nan)
    high = np.where(measured, found.high, np.nan)
    return GroupBox(low, high, found.critical)


def box_minimum(low: np.ndarray, high: np.ndarray) -> tuple[float, float]:
    """The worst group's interval from a box over its groups: the minimum is monotone in every group AUROC,
    so over the box it runs from the minimum of the lower ends to the minimum of the upper ends."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()) or len(low) == 0:
        return float("nan"), float("nan")
    return float(low.min()), float(high.min())


def box_gap(low: np.ndarray, high: np.ndarray, first: int, second: int) -> tuple[float, float]:
    """``first`` minus ``second`` over a box: from first's lower end less second's upper to the reverse."""
    return float(low[first] - high[second]), float(high[first] - low[second])


MEASURED_COVERAGE: dict[str, dict[str, float]] = {
    "crs": {"mean_low": 0.897, "mean_high": 0.985, "worst_encoder": 0.667},
    "auroc": {"mean_low": 0.922, "mean_high": 0.948, "worst_encoder": 0.892},
    "calibration": {"mean_low": 0.943, "mean_high": 0.983, "worst_encoder": 0.883},
    "label_efficiency": {"mean_low": 0.917, "mean_high": 0.938, "worst_encoder": 0.833},
    "robustness": {"mean_low": 0.910, "mean_high": 0.963, "worst_encoder": 0.900},
    "group_auroc": {"mean_low": 0.996, "mean_high": 0.999, "worst_encoder": 0.983},
    "group_calibration": {"mean_low": 0.981, "mean_high": 0.993, "worst_encoder": 0.950},
    "positive_rate": {"mean_low": 0.986, "mean_high": 0.992, "worst_encoder": 0.975},
    "worst_group_auroc": {"mean_low": 0.998, "mean_high": 1.0, "worst_encoder": 0.992},
    "auroc_gap": {"mean_low": 1.0, "mean_high": 1.0, "worst_encoder": 1.0},
}
"""Coverage of the case-level percentile intervals at the nominal 95 %, measured by
``python -m crs.bench.interval_coverage`` (120 test sets x 200 replicates, five encoders, clustered
and independent patients, random and stratified test sets; docs/crs.md section 7b;
``crs.bench.interval_coverage.measured_figures``): the range of the mean over encoders (over group x
encoder cells for the per-group intervals) across the designs, and the worst encoder (cell) in the
worst design; the CRS's over the two- and the four-axis cohort. Monte Carlo SE about 0.02 a figure,
and a worst of five (fifteen) such figures sits about 0.02 (0.04) below the worst true coverage.
Every printed interval is here; the report, the summary and ``crs score`` name these figures beside
the nominal level wherever one is below :data:`LABEL_BELOW` for its worst encoder (issue 30,
decisions 0063, 0090). Update them with the table when the method moves. The three subgroup AUROC
intervals (per group, worst group, gap) come from the box of decisions 0135-0136; where groups tie
(``python -m crs.bench.subgroup_coverage``, docs/crs.md 7b) they cover 0.97-1.00 for the worst encoder.
The per-group positive rate comes from a box over the attribute's groups too (decision 0150)."""

MEASURED_COVERAGE_BOX: dict[str, dict[str, float]] = {
    "crs": {"mean_low": 1.0, "mean_high": 1.0, "worst_encoder": 1.0},
    "auroc": {"mean_low": 0.998, "mean_high": 1.0, "worst_encoder": 0.995},
    "calibration": {"mean_low": 0.997, "mean_high": 1.0, "worst_encoder": 0.985},
    "label_efficiency": {"mean_low": 0.997, "mean_high": 1.0, "worst_encoder": 0.99},
    "robustness": {"mean_low": 0.995, "mean_high": 1.0, "worst_encoder": 0.99},
}
"""Coverage of the box's intervals (``[score] interval = "box"``, decision 0128; the axes' also under the default "adaptive", 0181): the CRS bounded through
the sharper box over ratios and differences (decision 0167: 1.000 again, 80 test sets), and the box's own bounds of each axis, measured by
``python -m crs.bench.interval_coverage`` as :data:`MEASURED_COVERAGE` (docs/crs.md 7b; 200 test sets x
200 replicates in each of six designs, near-ties included; ``measured_box_figures``); the intervals not
made from the box (subgroup tables) keep their percentile figures."""

MEASURED_COVERAGE_ADAPTIVE: dict[str, dict[str, float]] = {
    "crs": {"mean_low": 0.993, "mean_high": 1.0, "worst_encoder": 0.96},
}
"""Coverage of the adaptive CRS interval (``[score] interval = "adaptive"``, the default: decisions 0180, 0181),
measured by ``python -m crs.bench.interval_coverage`` (60 test sets x 200 replicates, four designs, two and four
axes: mean 0.993-1.000, worst encoder 0.983) and ``crs.bench.decision_coverage`` (14 designs, 100 test sets:
worst encoder 0.960-1.000); the axis intervals are the box's (:data:`MEASURED_COVERAGE_BOX`)."""

INTERVAL_NAMES = {
    "crs": "CRS", "auroc": "AUROC", "calibration": "calibration error", "label_efficiency": "label efficiency",
    "robustness": "robustness", "group_auroc": "per-group AUROC", "group_calibration": "per-group calibration error",
    "positive_rate": "per-group positive rate", "worst_group_auroc": "worst-group AUROC (the equity axis)",
    "auroc_gap": "subgroup AUROC gap (box corners)",
}  # fmt: skip
"""How each measured interval is named in the printed sentence."""
LEADERBOARD_INTERVALS = ("crs", "auroc", "calibration", "label_efficiency", "robustness")
"""The intervals of the leaderboard, the cards and the headline (with ``worst_group_auroc`` when equity is scored)."""
SUBGROUP_INTERVALS = ("group_auroc", "group_calibration", "positive_rate", "worst_group_auroc", "auroc_gap")
"""The intervals of the subgroup tables."""
LABEL_BELOW = 0.93
"""An interval whose worst encoder covers less than this is printed with its measured level, never as a bare 95 %."""

MEASURED_AT_ALPHA = 0.05
"""The level the coverage figures were measured at; another alpha is labelled by its nominal level alone."""


def measured_coverage(alpha: float, method: str = "percentile") -> dict[str, dict[str, float]] | None:
    """The measured coverage figures when ``alpha`` is the level they were measured at, else None; with
    ``method`` "box" the box's figures replace the percentile's for the intervals made from the box; with
    "adaptive" (the default) the adaptive CRS interval's figures and the box's for the axes (decision 0181)."""
    if alpha != MEASURED_AT_ALPHA:
        return None
    chosen = {**MEASURED_COVERAGE, **{"box": MEASURED_COVERAGE_BOX,
                                      "adaptive": {**MEASURED_COVERAGE_BOX, **MEASURED_COVERAGE_ADAPTIVE}}.get(method, {})}
    return {name: dict(found) for name, found in chosen.items()}


def lowest_measured(alpha: float, intervals: tuple[str, ...] = LEADERBOARD_INTERVALS,
                    method: str = "percentile") -> float | None:
    """The lowest worst-encoder coverage among ``intervals`` when it is below :data:`LABEL_BELOW`, else None
    (nothing measured at ``alpha``, or every one reaches it)."""
    found = measured_coverage(alpha, method)
    if found is None:
        return None
    worst = min((found[name]["worst_encoder"] for name in intervals if name in found), default=1.0)
    return worst if worst < LABEL_BELOW else None


def coverage_sentence(alpha: float, intervals: tuple[str, ...] | None = None, method: str = "percentile") -> str | None:
    """One sentence naming each interval's measured coverage (all, or ``intervals``), or None when none
    was measured at ``alpha``."""
    found = measured_coverage(alpha, method)
    if found is None:
        return None
    chosen = [name for name in (intervals or tuple(found)) if name in found]
    parts = [f"{INTERVAL_NAMES[name]} {found[name]['mean_low']:.3f}-{found[name]['mean_high']:.3f} on average, "
             f"{found[name]['worst_encoder']:.3f} for the worst encoder" for name in chosen]
    return ("Nominal level 95 %; coverage measured by simulation of fresh patient samples (docs/crs.md "
            "section 7b): " + "; ".join(parts) + ".")
