"""The bootstrap's result: the replicates' axis errors turned into the CRS's intervals, ranks and tier.

:func:`bootstrap_result` takes the axis errors of every replicate (:mod:`crs.scoring.replicates`:
measurements x draws) and assembles what the later steps make of them: the whole CRS of each replicate
(:meth:`crs.scoring.formula.PointEstimate.score`, with the point estimate's reference rule and error
floor), its percentile interval (:func:`crs.scoring.intervals.percentile_interval`), P(rank = 1) and
the simultaneous rank confidence sets with the leading tier (:mod:`crs.scoring.rank_sets`: every
encoder whose rank set contains 1), and the projected box (:func:`with_box`,
:mod:`crs.scoring.projection`). :func:`paired_seed_bootstrap` (seeds resampled) and
:func:`paired_seed_case_bootstrap` (seeds and test cases) are the two levels end to end. The Holm test
against the leader is still computed and reported (``p_holm``) but no longer defines the tier
(docs/decisions/0009-rank-confidence-sets.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from crs.evaluate.artifacts import RunFolder
from crs.scoring.formula import AXES, PointEstimate
from crs.scoring.intervals import percentile_interval
from crs.scoring.measurements import Measurements
from crs.scoring.projection import adaptive_intervals, box_intervals
from crs.scoring.rank_sets import leading_tier, p_rank_one, rank_bounds
from crs.scoring.replicates import Replicates, case_replicates, seed_replicates

PREDICTION_TOLERANCE = 0.005
"""Largest |CRS from stored predictions - CRS from run records| accepted without a warning."""


def holm_adjust(p_values: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (as statsmodels ``multipletests(method="holm")``)."""
    p_values = np.asarray(p_values, dtype=np.float64)
    m = len(p_values)
    if m == 0:
        return p_values
    order = np.argsort(p_values, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p_values[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


@dataclass(frozen=True)
class BootstrapResult:
    """Paired-seed bootstrap of the CRS.

    ``table`` (index encoder): crs (point estimate on all seeds), crs_low / crs_high (percentile
    interval), crs_boot_mean, p_rank1, rank, diff_to_leader with diff_low / diff_high, p_value
    (two-sided bootstrap p for CRS(leader) - CRS(e) = 0), p_holm (reported, not the tier),
    rank_low / rank_high (simultaneous rank confidence set), in_leading_tier (rank set contains 1).
    ``replicates``: one row per replicate, one CRS column per encoder. ``seed_draws``: how many
    times each seed was drawn in each replicate.
    """

    table: pd.DataFrame
    replicates: pd.DataFrame
    seed_draws: pd.DataFrame
    leader: str
    leading_tier: tuple[str, ...]
    n_boot: int
    alpha: float
    seed: int
    level: str = "seed"
    """"seed" (seeds resampled) or "seed+case" (seeds and test cases, crs.scoring.case_bootstrap)."""
    case_draws: Mapping[str, Any] | None = None
    """seed+case only: per task, its :class:`crs.scoring.resample.GroupBootstrap` of the test rows
    (``.counts([b])[0]``: replicate b's count of each test row; drawn on demand, never stored)."""
    shift_case_draws: Mapping[str, Any] | None = None
    """seed+case only: per task with shift targets, {target name: the GroupBootstrap of its rows}."""
    sampling_designs: Sequence[Mapping[str, str]] | None = None
    """seed+case only: one row per data set resampled (a task's test rows, each shift target): its
    sampling design, whether recorded or inferred, and how it was resampled (decision 0085)."""
    axis_error_replicates: Mapping[str, pd.DataFrame] | None = None
    """Per axis (crs.scoring.formula.AXES), one row per replicate and one error column per encoder,
    every axis that has a value (an axis never measured is left out); lets the report give each axis an interval
    from the same replicates as the CRS interval."""


def axis_error_frames(errors: np.ndarray, encoders: Sequence[str]) -> dict[str, pd.DataFrame]:
    """(B, E, 4) replicate axis errors -> per axis of :data:`crs.scoring.formula.AXES`, a (replicate x encoder) table.

    An axis with no value in any replicate (robustness of a clean-only spec: nothing was corrupted
    or shifted) is left out rather than stored as a table of NaN; readers treat a missing axis as
    not measured (``crs.report.tables.axis_value_replicates``)."""
    return {
        axis: pd.DataFrame(errors[:, :, a], columns=list(encoders)).rename_axis("replicate")
        for a, axis in enumerate(AXES)
        if not np.isnan(errors[:, :, a]).all()
    }


def bootstrap_result(point: PointEstimate, replicates: Replicates) -> BootstrapResult:
    """The replicates' CRS, summarised (:func:`summarise_bootstrap`) with the projected box's bounds beside
    (:func:`with_box`); at the case level also ``crs_from_predictions``, the CRS of row 0 (every seed and
    case once).

    Warns when a seed-level interval has zero width (no interval at all) and when the CRS from the stored
    predictions strays from the run records' by more than :data:`PREDICTION_TOLERANCE`.
    """
    settings = point.settings
    case_level = replicates.level == "seed+case"
    if case_level:  # row 0 scored too: the CRS from the stored predictions
        every = point.score(replicates.errors)["crs"]
        crs, from_predictions = every[1:], every[0]
    else:
        crs = point.score(replicates.drawn)["crs"]
    result = summarise_bootstrap(
        point.table, crs, replicates.seed_counts, replicates.seeds, n_boot=settings.n_boot, alpha=settings.alpha,
        seed=settings.seed, level=replicates.level, case_draws=replicates.case_draws,
        shift_case_draws=replicates.shift_case_draws,
        axis_error_replicates=axis_error_frames(replicates.drawn, point.encoders),
        sampling_designs=replicates.sampling_designs,
    )  # fmt: skip
    with_box(result.table, point, replicates.drawn)
    if case_level:
        result.table["crs_from_predictions"] = from_predictions
        gap = float(np.nanmax(np.abs(result.table["crs_from_predictions"] - result.table["crs"])))
        if gap > PREDICTION_TOLERANCE:
            warnings.warn(
                f"the CRS recomputed from the stored per-case predictions differs from the run records' by up to "
                f"{gap:.3f} (column crs_from_predictions): predictions stored at low precision (float16 probabilities "
                "tie near 0 and 1) shift the case-level intervals; store them as float32 or log-probabilities",
                stacklevel=2,
            )
    else:
        flat = zero_width(result.table)
        if flat:
            warnings.warn(
                f"seed-only bootstrap: the CRS interval of {', '.join(flat)} has zero width (every seed gave the "
                "same measurements, and the test set is not resampled); it is reported as seed-only, not as a "
                "confidence interval: set case_bootstrap = true to resample the test set (score_records: "
                "case_level=True with run_folder=the run's folder)",
                stacklevel=2,
            )
    return result


def paired_seed_bootstrap(measurements: Measurements, point: PointEstimate) -> BootstrapResult:
    """Percentile intervals, P(rank = 1), rank confidence sets and the leading tier of the CRS, seeds resampled
    (:func:`crs.scoring.replicates.seed_replicates`, then :func:`bootstrap_result`).

    The leader is the encoder with the highest point-estimate CRS (ties: the first by name). The
    leading tier is every encoder whose simultaneous rank set contains 1. In replicates where
    several encoders tie for first, P(rank = 1) splits that replicate equally.
    """
    return bootstrap_result(point, seed_replicates(measurements, point))


def paired_seed_case_bootstrap(
    measurements: Measurements,
    folder: RunFolder,
    point: PointEstimate,
    kinds: Mapping[str, str],
    workers: int | None = None,
    extra_axes: np.ndarray | None = None,
    layouts: Mapping[str, Any] | None = None,
) -> BootstrapResult:
    """Two-level paired bootstrap: seed multiset x stratified group-level test-row resample per replicate
    (:func:`crs.scoring.replicates.case_replicates`, then :func:`bootstrap_result`).

    ``point`` is the run records' point estimate (made once, :func:`crs.scoring.formula.point_estimate`):
    its table, reference rule, error floor and settings are reused, never recomputed. The seed draws are
    identical to :func:`paired_seed_bootstrap`'s for the same ``seed``, so the two can be compared replicate
    by replicate. Adds ``crs_from_predictions``: the CRS recomputed from the stored per-case predictions
    with every seed and case once. ``case_draws`` holds each task's
    :class:`crs.scoring.resample.GroupBootstrap` (``.counts([b])`` gives replicate b's row counts),
    ``shift_case_draws`` per task with shift targets, one per target name. ``extra_axes`` (n_boot + 1, E, k):
    axis errors measured elsewhere on the same draws (the ``equity`` axis, crs.scoring.equity), appended
    after the four; ``layouts``: the tasks' rows and draws when already made
    (:func:`crs.scoring.layouts.task_layouts`).
    """
    return bootstrap_result(point, case_replicates(measurements, folder, point, kinds, workers, extra_axes, layouts))


BOX_COLUMNS = ("crs_percentile_low", "crs_percentile_high", "box_critical", "interval_method")
"""Columns :func:`with_box` adds beside the ``<quantity>_box_low`` / ``_high`` of crs.scoring.projection."""
AXES_FROM_BOX = ("box", "adaptive")
"""The interval methods whose axis intervals are the simultaneous box's (decisions 0128, 0181)."""


def with_box(table: pd.DataFrame, point: PointEstimate, replicate_errors: np.ndarray) -> None:
    """Add the projected box's bounds to a bootstrap table (in place) and make ``crs_low`` / ``crs_high``
    the method ``point.settings.interval`` names: the adaptive one (default, decisions 0180, 0181), the
    box's (decision 0128), or the percentile's as summarised. The percentile bounds stay as
    ``crs_percentile_low`` / ``_high`` and the box's as ``crs_box_low`` / ``_high`` either way.
    ``replicate_errors`` (B, E, A): the replicates' axis errors, row 0 not among them."""
    bounds, critical = box_intervals(point, replicate_errors, float(point.settings.alpha))
    table["crs_percentile_low"], table["crs_percentile_high"] = table["crs_low"], table["crs_high"]
    for column in bounds.columns:
        table[column] = bounds[column].reindex(table.index)
    table["box_critical"] = critical
    table["interval_method"] = point.settings.interval
    if point.settings.interval == "box":
        table["crs_low"], table["crs_high"] = table["crs_box_low"], table["crs_box_high"]
    elif point.settings.interval == "adaptive":  # decisions 0180, 0181: the CRS only; the axes are the box's
        low, high = adaptive_intervals(point, replicate_errors, float(point.settings.alpha))
        table["crs_low"] = pd.Series(low, index=point.encoders).reindex(table.index)
        table["crs_high"] = pd.Series(high, index=point.encoders).reindex(table.index)


def interval_method(bootstrap) -> str:
    """"box" when the result's ``crs_low`` / ``crs_high`` are the projected box's (decision 0128), "adaptive"
    (decisions 0180, 0181) when the score says so, else "percentile" (``[score] interval = "percentile"``,
    or a score stored before the box)."""
    table = getattr(bootstrap, "table", None)
    if table is None or "crs_box_low" not in table:
        return "percentile"
    if "interval_method" in table and len(table):
        return str(table["interval_method"].iloc[0])
    same = np.allclose(table["crs_low"], table["crs_box_low"], equal_nan=True) and np.allclose(
        table["crs_high"], table["crs_box_high"], equal_nan=True)
    return "box" if same else "percentile"


def axes_from_box(bootstrap) -> bool:
    """True when the result's axis intervals are the simultaneous box's (:data:`AXES_FROM_BOX`)."""
    return interval_method(bootstrap) in AXES_FROM_BOX


def simultaneous_crs(table: pd.DataFrame, box_table: pd.DataFrame | None) -> pd.DataFrame:
    """``table`` (index encoder, with crs_low / crs_high) with its CRS bounds replaced by the box's
    ``crs_box_low`` / ``_high`` from ``box_table`` (a bootstrap table) where it has them: the bounds that hold
    for every encoder at once, which statements about several encoders need whatever ``[score] interval``
    prints (decision 0181); ``table`` unchanged (a copy) where there is no box."""
    found = table.copy()
    if box_table is None or "crs_box_low" not in box_table or "crs_box_high" not in box_table:
        return found
    box = box_table.set_axis([str(name) for name in box_table.index])
    names = [str(name) for name in found.index]
    found["crs_low"] = box["crs_box_low"].reindex(names).to_numpy(dtype=np.float64)
    found["crs_high"] = box["crs_box_high"].reindex(names).to_numpy(dtype=np.float64)
    return found


def zero_width(table: pd.DataFrame, tolerance: float = 1e-12) -> list[str]:
    """Encoders whose CRS interval has (numerically) zero width: no interval at all, only the point."""
    width = (table["crs_high"] - table["crs_low"]).abs()
    return [str(name) for name in table.index[(width <= tolerance).to_numpy()]]


def summarise_bootstrap(
    point: pd.DataFrame,
    crs: np.ndarray,
    seed_counts: np.ndarray,
    seeds: Sequence,
    n_boot: int,
    alpha: float,
    seed: int,
    level: str = "seed",
    case_draws: Mapping[str, Any] | None = None,
    shift_case_draws: Mapping[str, Any] | None = None,
    axis_error_replicates: Mapping[str, pd.DataFrame] | None = None,
    sampling_designs: Sequence[Mapping[str, str]] | None = None,
) -> BootstrapResult:
    """Intervals, P(rank = 1), rank confidence sets and the tier from replicate CRS (n_boot, encoders).

    ``point`` is the point-estimate CRS table with its rows in the column order of ``crs``. A
    replicate in which an encoder's CRS is not finite is left out of the rank sets.
    """
    encoders = [str(name) for name in point.index]
    point_crs = point["crs"].to_numpy()
    leader_index = int(np.argmax(point_crs))  # encoders are sorted by name, so ties go to the first name
    crs_low, crs_high = percentile_interval(crs, alpha)
    diffs = crs[:, [leader_index]] - crs
    diff_low, diff_high = percentile_interval(diffs, alpha)
    p_value = np.minimum(1.0, 2.0 * np.minimum((diffs <= 0).mean(axis=0), (diffs >= 0).mean(axis=0)))
    others = [i for i in range(len(encoders)) if i != leader_index]
    p_holm = np.full(len(encoders), np.nan)
    p_holm[others] = holm_adjust(p_value[others])
    p_value[leader_index] = np.nan
    rank_low, rank_high = rank_bounds(point_crs, crs, encoders, alpha)
    in_tier = leading_tier(rank_low, leader_index)

    table = pd.DataFrame(
        {
            "crs": point_crs,
            "crs_low": crs_low,
            "crs_high": crs_high,
            "crs_boot_mean": np.nanmean(crs, axis=0),
            "p_rank1": p_rank_one(crs, tolerance=1e-12),
            "rank": point["rank"].to_numpy(),
            "diff_to_leader": point_crs[leader_index] - point_crs,
            "diff_low": diff_low,
            "diff_high": diff_high,
            "p_value": p_value,
            "p_holm": p_holm,
            "rank_low": rank_low,
            "rank_high": rank_high,
            "in_leading_tier": in_tier,
        },
        index=pd.Index(encoders, name="encoder"),
    )
    tier = tuple(table.index[in_tier].to_series().sort_values(key=lambda s: -table.loc[s, "crs"]))
    return BootstrapResult(
        table=table,
        replicates=pd.DataFrame(crs, columns=encoders).rename_axis("replicate"),
        seed_draws=pd.DataFrame(seed_counts.astype(np.int64), columns=[str(s) for s in seeds]).rename_axis(
            "replicate"
        ),
        leader=encoders[leader_index],
        leading_tier=tier,
        n_boot=n_boot,
        alpha=alpha,
        seed=seed,
        level=level,
        case_draws=case_draws,
        shift_case_draws=shift_case_draws,
        axis_error_replicates=axis_error_replicates,
        sampling_designs=sampling_designs,
    )
