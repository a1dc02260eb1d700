"""Uncertainty and rank comparison for the CRS: paired-seed bootstrap, tiers, reversals, weights.

* :func:`paired_seed_bootstrap`: each replicate draws one multiset of seeds (with replacement)
  and applies it to every encoder and every task, which keeps the pairing that shared label
  subsets create; the axis errors, the reference ratios, dominance, balance, worst axis and CRS
  are all recomputed inside the replicate.
* :func:`rank_reversals`: how two rankings of the same encoders disagree.
* :func:`weight_sensitivity`: how the ranking moves under Dirichlet-sampled CRS weights.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.formula import (
    DEFAULT_EPSILON,
    ScoreInputError,
    axis_errors,
    clinical_reliability_score,
    component_weights,
    crs_components,
)

# seed-axes column -> (axis name, error transform)
_AXIS_SOURCES = {
    "discrimination": ("auroc", lambda v: 1.0 - v),
    "calibration": ("ece", lambda v: v),
    "label_efficiency": ("label_efficiency", lambda v: 1.0 - v),
    "robustness": ("retention", lambda v: 1.0 - v),
}


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
    (two-sided bootstrap p for CRS(leader) - CRS(e) = 0), p_holm, in_leading_tier.
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
    case_draws: Mapping[str, np.ndarray] | None = None
    """seed+case only: per task, (n_boot, N_test) counts of each test case in each replicate."""
    shift_case_draws: Mapping[str, np.ndarray] | None = None
    """seed+case only: per task with a shift target, (n_boot, N_target) counts of its cases."""
    axis_error_replicates: Mapping[str, pd.DataFrame] | None = None
    """seed+case only: per axis (crs.scoring.formula.AXES), one row per replicate and one error column per
    encoder, every axis measured (also one the CRS leaves out); lets the report give each axis an
    interval from the same replicates as the CRS interval."""


def _seed_cube(
    seed_axes_table: pd.DataFrame, axes: list[str]
) -> tuple[np.ndarray, list[str], list[str], list]:
    """Axis errors as an (encoders, tasks, seeds, axes) array; every cell must exist exactly once."""
    keys = ["encoder", "task", "seed"]
    if seed_axes_table.duplicated(keys).any():
        raise ScoreInputError("seed-axes table has more than one row per (encoder, task, seed)")
    encoders = sorted(seed_axes_table["encoder"].astype(str).unique())
    tasks = sorted(seed_axes_table["task"].astype(str).unique())
    seeds = sorted(seed_axes_table["seed"].unique())
    full = pd.MultiIndex.from_product([encoders, tasks, seeds], names=keys)
    table = seed_axes_table.assign(
        encoder=seed_axes_table["encoder"].astype(str), task=seed_axes_table["task"].astype(str)
    )
    table = table.set_index(keys)
    missing = full.difference(table.index)
    if len(missing):
        raise ScoreInputError(
            f"the paired bootstrap needs every seed for every encoder and task; missing {list(missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''}; rerun those probes or drop the seed"
        )
    table = table.reindex(full)
    columns = [
        _AXIS_SOURCES[axis][1](table[_AXIS_SOURCES[axis][0]].to_numpy(dtype=np.float64)) for axis in axes
    ]
    cube = np.stack(columns, axis=-1).reshape(len(encoders), len(tasks), len(seeds), len(axes))
    return cube, encoders, tasks, seeds


def _errors_for_draws(cube: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(replicates, encoders, axes): seed-weighted mean per task, then mean over tasks."""
    known = ~np.isnan(cube)
    total = np.einsum("bs,etsa->beta", counts, np.where(known, cube, 0.0))
    weight = np.einsum("bs,etsa->beta", counts, known.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_task = total / weight
        return np.nanmean(per_task, axis=2)  # tasks count once each, as in crs.scoring.formula.axis_errors


def paired_seed_bootstrap(
    seed_axes_table: pd.DataFrame,
    reference: str,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    epsilon: float = DEFAULT_EPSILON,
    dominance_margin: float = 0.0,
) -> BootstrapResult:
    """Percentile intervals, P(rank = 1) and the Holm-corrected leading tier of the CRS.

    The leader is the encoder with the highest point-estimate CRS (ties: the first by name). An
    encoder joins the leading tier when the Holm-adjusted bootstrap p-value of
    CRS(leader) - CRS(e) = 0 exceeds ``alpha``, i.e. its Holm-level interval covers 0. In
    replicates where several encoders tie for first, P(rank = 1) splits that replicate equally.
    """
    check_bootstrap_settings(n_boot, alpha)
    point = clinical_reliability_score(
        axis_errors(seed_axes_table), reference, weights, epsilon, dominance_margin
    )
    axes = list(point.attrs["axes"])
    cube, encoders, _tasks, seeds = _seed_cube(seed_axes_table, axes)
    point = point.reindex(encoders)
    reference_index = encoders.index(reference)

    counts = draw_seed_counts(len(seeds), n_boot, seed)
    replicate_errors = _errors_for_draws(cube, counts)
    crs = crs_components(
        replicate_errors, reference_index, component_weights(weights), epsilon, dominance_margin
    )["crs"]
    return summarise_bootstrap(point, crs, counts, seeds, n_boot=n_boot, alpha=alpha, seed=seed)


def check_bootstrap_settings(n_boot: int, alpha: float) -> None:
    """Refuse a bootstrap that cannot give an interval."""
    if n_boot < 1:
        raise ScoreInputError(f"n_boot must be at least 1, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ScoreInputError(f"alpha must lie in (0, 1), got {alpha}")


def draw_seed_counts(n_seeds: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_seeds) float counts: one seed multiset per replicate, shared by every encoder and task."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot).astype(np.float64)


def summarise_bootstrap(
    point: pd.DataFrame,
    crs: np.ndarray,
    seed_counts: np.ndarray,
    seeds: Sequence,
    n_boot: int,
    alpha: float,
    seed: int,
    level: str = "seed",
    case_draws: Mapping[str, np.ndarray] | None = None,
    shift_case_draws: Mapping[str, np.ndarray] | None = None,
    axis_error_replicates: Mapping[str, pd.DataFrame] | None = None,
) -> BootstrapResult:
    """Intervals, P(rank = 1) and the Holm tier from replicate CRS (n_boot, encoders).

    ``point`` is the point-estimate CRS table with its rows in the column order of ``crs``.
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
    in_tier = np.zeros(len(encoders), dtype=bool)
    in_tier[leader_index] = True
    in_tier[others] = p_holm[others] > alpha
    p_value[leader_index] = np.nan

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
    )


# --- rank reversals -------------------------------------------------------------------------------








# --- weight sensitivity ---------------------------------------------------------------------------




