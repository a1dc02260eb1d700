"""The paired-seed bootstrap of the CRS: intervals, P(rank = 1) and the leading tier from rank confidence sets.

:func:`paired_seed_bootstrap` draws one multiset of seeds per replicate (with replacement) and
applies it to every encoder and every task, which keeps the pairing that shared label subsets
create; the axis errors come from :func:`crs.scoring.formula.axis_errors_from_metrics` under the
replicate's seed counts and the whole CRS (reference ratios, dominance, balance, worst axis) is
recomputed by :meth:`crs.scoring.formula.PointEstimate.score`, with the point estimate's reference
rule and error floor. :func:`summarise_bootstrap` turns replicate CRS into intervals, the
simultaneous rank confidence sets (:mod:`crs.scoring.rank_sets`) and the leading tier (every
encoder whose rank set contains 1) for this and the case-level bootstrap. The Holm test against the
leader is still computed and reported (``p_holm``) but no longer defines the tier
(docs/decisions/0009-rank-confidence-sets.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from crs.scoring.draws import draw_seed_counts
from crs.scoring.formula import AXES, PointEstimate, ScoreInputError, axis_errors_from_metrics
from crs.scoring.measurements import Measurements
from crs.scoring.projection import box_intervals
from crs.scoring.rank_sets import rank_confidence_sets


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


def paired_seed_bootstrap(measurements: Measurements, point: PointEstimate) -> BootstrapResult:
    """Percentile intervals, P(rank = 1), rank confidence sets and the leading tier of the CRS.

    The leader is the encoder with the highest point-estimate CRS (ties: the first by name). The
    leading tier is every encoder whose simultaneous rank set contains 1. In replicates where
    several encoders tie for first, P(rank = 1) splits that replicate equally.
    """
    settings = point.settings
    _check_encoders(measurements, point)
    counts = draw_seed_counts(len(measurements.seeds), settings.n_boot, settings.seed)
    replicate_errors = axis_errors_from_metrics(measurements.task_list(), counts)  # (B, E, 4)
    crs = point.score(replicate_errors)["crs"]
    result = summarise_bootstrap(
        point.table, crs, counts, measurements.seeds, n_boot=settings.n_boot, alpha=settings.alpha,
        seed=settings.seed, axis_error_replicates=axis_error_frames(replicate_errors, point.encoders),
    )  # fmt: skip
    with_box(result.table, point, replicate_errors)
    flat = zero_width(result.table)
    if flat:
        warnings.warn(
            f"seed-only bootstrap: the CRS interval of {', '.join(flat)} has zero width (every seed gave the same "
            "measurements, and the test set is not resampled); it is reported as seed-only, not as a confidence "
            "interval: set case_bootstrap = true to resample the test set (score_records: case_level=True "
            "with run_folder=the run's folder)",
            stacklevel=2,
        )
    return result


BOX_COLUMNS = ("crs_percentile_low", "crs_percentile_high", "box_critical", "interval_method")
"""Columns :func:`with_box` adds beside the ``<quantity>_box_low`` / ``_high`` of crs.scoring.projection."""


def with_box(table: pd.DataFrame, point: PointEstimate, replicate_errors: np.ndarray) -> None:
    """Add the projected box's bounds to a bootstrap table (in place) and make ``crs_low`` / ``crs_high``
    the method ``point.settings.interval`` names (decision 0128): the box's, or the percentile's as
    summarised. The percentile bounds stay as ``crs_percentile_low`` / ``_high`` either way.
    ``replicate_errors`` (B, E, A): the replicates' axis errors, row 0 not among them."""
    bounds, critical = box_intervals(point, replicate_errors, float(point.settings.alpha))
    table["crs_percentile_low"], table["crs_percentile_high"] = table["crs_low"], table["crs_high"]
    for column in bounds.columns:
        table[column] = bounds[column].reindex(table.index)
    table["box_critical"] = critical
    table["interval_method"] = point.settings.interval
    if point.settings.interval == "box":
        table["crs_low"], table["crs_high"] = table["crs_box_low"], table["crs_box_high"]


def interval_method(bootstrap) -> str:
    """"box" when the result's ``crs_low`` / ``crs_high`` are the projected box's (decision 0128), else
    "percentile" (``[score] interval = "percentile"``, or a score stored before the box)."""
    table = getattr(bootstrap, "table", None)
    if table is None or "crs_box_low" not in table:
        return "percentile"
    if "interval_method" in table and len(table):
        return str(table["interval_method"].iloc[0])
    same = np.allclose(table["crs_low"], table["crs_box_low"], equal_nan=True) and np.allclose(
        table["crs_high"], table["crs_box_high"], equal_nan=True)
    return "box" if same else "percentile"


def zero_width(table: pd.DataFrame, tolerance: float = 1e-12) -> list[str]:
    """Encoders whose CRS interval has (numerically) zero width: no interval at all, only the point."""
    width = (table["crs_high"] - table["crs_low"]).abs()
    return [str(name) for name in table.index[(width <= tolerance).to_numpy()]]


def _check_encoders(measurements: Measurements, point: PointEstimate) -> None:
    if list(measurements.encoders) != point.encoders:
        raise ScoreInputError(
            f"the measurements cover encoders {list(measurements.encoders)} but the point estimate {point.encoders}; "
            "make both from the same run records"
        )


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
    top = np.isclose(crs, np.nanmax(crs, axis=1, keepdims=True), rtol=0.0, atol=1e-12)
    p_rank1 = (top / top.sum(axis=1, keepdims=True)).mean(axis=0)

    point_crs = point["crs"].to_numpy()
    leader_index = int(np.argmax(point_crs))  # encoders are sorted by name, so ties go to the first name
    diffs = crs[:, [leader_index]] - crs
    quantiles = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        crs_low, crs_high = np.nanpercentile(crs, quantiles, axis=0)
        diff_low, diff_high = np.nanpercentile(diffs, quantiles, axis=0)
    p_value = np.minimum(1.0, 2.0 * np.minimum((diffs <= 0).mean(axis=0), (diffs >= 0).mean(axis=0)))
    others = [i for i in range(len(encoders)) if i != leader_index]
    p_holm = np.full(len(encoders), np.nan)
    p_holm[others] = holm_adjust(p_value[others])
    p_value[leader_index] = np.nan
    finite = np.isfinite(crs).all(axis=1)
    if finite.sum() >= 2:
        sets = rank_confidence_sets(point_crs, crs[finite], encoders, alpha=alpha).table.reindex(encoders)
        rank_low, rank_high = sets["rank_low"].to_numpy(), sets["rank_high"].to_numpy()
    else:  # too few usable replicates to bound any rank: every set is 1..E
        rank_low, rank_high = np.ones(len(encoders), dtype=np.int64), np.full(len(encoders), len(encoders))
    in_tier = rank_low == 1
    in_tier[leader_index] = True

    table = pd.DataFrame(
        {
            "crs": point_crs,
            "crs_low": crs_low,
            "crs_high": crs_high,
            "crs_boot_mean": np.nanmean(crs, axis=0),
            "p_rank1": p_rank1,
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
