"""The Clinical Reliability Score: measurements -> axis errors -> u -> dominance, balance, worst axis.

Our reading of the paper (DESIGN section 8, docs/crs.md):

1. each axis as an error, from absolute measurements only, so the CRS is monotone in every
   AUROC and calibration error (:func:`axis_errors_from_metrics`, the one mapping):
   discrimination 1 - clean AUROC; calibration the debiased calibration error; label efficiency
   1 - mean AUROC below the full label fraction; robustness 1 - mean AUROC over every corruption x
   severity and the mean over the shift targets (each half where both exist). Mean over seeds, then over
   conditions, then over tasks (each task once);
2. every error floored at the noise level of the reference's error on that axis (:func:`error_floor`);
3. rho = e / e_reference and u = 1 / (1 + rho); the reference is a named encoder or the virtual
   cohort-median encoder (per-axis median error);
4. dominance = (1 + S - Q) / 2 with S (Q) the share of other encoders it Pareto-dominates (that
   dominate it) on u; u differences within a float tolerance are ties, an optional margin more;
5. balance = geometric mean of u; worst axis = min(u); CRS = weighted mean of the three.

:func:`crs_components` works on stacks of error tables (bootstrap replicates, weight draws), so
every replicate is scored by the code that makes the point estimate. The point estimate is made
once (:func:`point_estimate`) and handed to the bootstraps and the stability analyses.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.settings import (
    COMPONENTS,
    DOMINANCE_TOLERANCE,
    NOISE_FLOOR,
    ScoreInputError,
    ScoreSettings,
    component_weights,
)
from crs.spec import AXES

EQUITY = "equity"
"""The optional fifth axis: 1 - the worst-group AUROC (crs.scoring.subgroups; ``[score] equity = true``)."""
ALL_AXES = (*AXES, EQUITY)
"""Every axis that can be scored, in column order: the four, then ``equity`` when it is on."""

MIN_FLOOR = 1e-6
"""Smallest error floor: keeps e / e_reference finite when a standard error is 0."""

__all__ = [
    "ALL_AXES",
    "AXES",
    "EQUITY",
    "COMPONENTS",
    "MIN_FLOOR",
    "PointEstimate",
    "ScoreInputError",
    "TaskMetrics",
    "axis_errors_from_metrics",
    "axis_standard_errors",
    "clinical_reliability_score",
    "component_weights",
    "crs_components",
    "error_floor",
    "point_estimate",
    "rank_descending",
]


# --- measurements -> axis errors: the one mapping ------------------------------------------------------


@dataclass(frozen=True)
class TaskMetrics:
    """One task's measurements for every encoder and seed, with any leading dimensions ``...``.

    Every array ends in (E encoders, [conditions,] S seeds); the leading dimensions (none for the
    point estimate, (B,) for B bootstrap replicates) must be the same for all five.

    * ``clean_auroc`` (..., E, S): clean macro AUROC at the full label fraction;
    * ``fraction_auroc`` (..., E, F, S): clean AUROC at each label fraction below the full one
      (F = 0 when only the full fraction was run: label efficiency is then not measured);
    * ``corrupt_auroc`` (..., E, C, S): AUROC at the full fraction under each corruption x severity;
    * ``shift_auroc`` (..., E, G, S): AUROC at the full fraction on each shift target;
      (C = G = 0: robustness not measured on this task);
    * ``calibration_error`` (..., E, S): the debiased calibration error, clean, full fraction.

    The same container carries the standard errors of these measurements
    (:func:`axis_standard_errors`).
    """

    clean_auroc: np.ndarray
    fraction_auroc: np.ndarray
    corrupt_auroc: np.ndarray
    shift_auroc: np.ndarray
    calibration_error: np.ndarray

    def __post_init__(self) -> None:
        for name in ("clean_auroc", "fraction_auroc", "corrupt_auroc", "shift_auroc", "calibration_error"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        shape = self.clean_auroc.shape
        if self.calibration_error.shape != shape:
            raise ScoreInputError(
                f"calibration_error has shape {self.calibration_error.shape}, clean_auroc {shape}; they must match"
            )
        for name in ("fraction_auroc", "corrupt_auroc", "shift_auroc"):
            array = getattr(self, name)
            if array.ndim != len(shape) + 1 or array.shape[:-2] + array.shape[-1:] != shape:
                raise ScoreInputError(
                    f"{name} has shape {array.shape}; expected (..., E, conditions, S) around clean_auroc's {shape}"
                )


def _seed_mean(values: np.ndarray, seed_weights: np.ndarray | None, inner: int) -> np.ndarray:
    """Weighted mean over the last (seed) axis; NaN in a seed that carries weight stays NaN.

    ``inner``: how many axes sit between the leading dimensions and the seeds (1 for (E, S), 2 for
    (E, conditions, S)), so seed weights (B, S) broadcast as (B, 1, [1,] S) even onto measurements
    without leading dimensions (the seed bootstrap of the run records).
    """
    if seed_weights is None:
        return values.mean(axis=-1)
    weights = seed_weights.reshape(seed_weights.shape[:-1] + (1,) * inner + seed_weights.shape[-1:])
    if np.isnan(values).any():  # a NaN in a seed that is not drawn must not poison the mean (NaN x 0)
        total = np.where(weights > 0, values * weights, 0.0).sum(axis=-1)
    else:  # no (B, E, C, S) product in memory: einsum reduces as it goes
        total = np.einsum("...s,...s->...", values, weights)
    return total / weights.sum(axis=-1)


def _mean_last(values: np.ndarray) -> np.ndarray:
    return values.mean(axis=-1)


def _independent_mean_se(values: np.ndarray) -> np.ndarray:
    """Standard error of a mean of independent estimates from their standard errors (last axis)."""
    if values.shape[-1] == 1:  # one estimate: its own standard error, bit for bit
        return values[..., 0]
    return np.sqrt(np.square(values).sum(axis=-1)) / values.shape[-1]


def _task_parts(
    task: TaskMetrics, seed_weights: np.ndarray | None, over_targets=_mean_last
) -> dict[str, list[np.ndarray]]:
    """Per axis, the independent parts of its value on this task, each (..., E); [] = not measured.

    A part averages seeds and then conditions that share one test set; robustness has two parts
    when the task has corruptions and shift targets (different test sets), each counting half: the
    mean over corruption x severity, and the mean over the shift targets (each target once).
    ``over_targets`` reduces the shift targets' axis: the mean for values; for standard errors
    :func:`_independent_mean_se` (each target is its own test set).
    """

    def conditions(values: np.ndarray, reduce=_mean_last) -> list[np.ndarray]:
        return [reduce(_seed_mean(values, seed_weights, 2))] if values.shape[-2] else []

    return {
        "discrimination": [_seed_mean(task.clean_auroc, seed_weights, 1)],
        "calibration": [_seed_mean(task.calibration_error, seed_weights, 1)],
        "label_efficiency": conditions(task.fraction_auroc),
        "robustness": conditions(task.corrupt_auroc) + conditions(task.shift_auroc, over_targets),
    }


def _combine(per_task: list[dict[str, list[np.ndarray]]], combine) -> np.ndarray:
    """(..., E, 4): ``combine(values)`` per axis over the tasks that measure it; NaN if none does."""
    columns = {}
    for axis in AXES:
        values = [combine(parts[axis]) for parts in per_task if parts[axis]]
        if values:
            columns[axis] = combine(values)
    shape = np.broadcast_shapes(*(column.shape for column in columns.values())) if columns else ()
    out = np.full(shape + (len(AXES),), np.nan)
    for a, axis in enumerate(AXES):
        if axis in columns:
            out[..., a] = columns[axis]
    return out


def _check_tasks(tasks: Sequence[TaskMetrics]) -> None:
    if not tasks:
        raise ScoreInputError("no tasks to score: the run records hold no task")
    shape = tasks[0].clean_auroc.shape[:-1]  # (..., E)
    for task in tasks[1:]:
        if task.clean_auroc.shape[:-1] != shape:
            raise ScoreInputError(
                f"tasks disagree on (..., encoders): {shape} vs {task.clean_auroc.shape[:-1]}; "
                "every task needs every encoder"
            )


def axis_errors_from_metrics(
    tasks: Sequence[TaskMetrics], seed_weights: np.ndarray | None = None
) -> np.ndarray:
    """The four axis errors, (..., E, 4) in :data:`AXES` order, from per-task measurements.

    The one place measurements become axis errors; the point estimate (from run records) and both
    bootstraps call it. ``tasks``: one :class:`TaskMetrics` per task, all with the same leading
    dimensions ``...`` and the same encoders E (seeds, fractions and conditions may differ by task).
    ``seed_weights`` (..., S) or (S,): how often each seed counts (a bootstrap's seed multiset);
    None counts every seed once. The bootstrap integration calls it with leading dims (B,) for B
    replicates and seed_weights (B, S).

    Per task: discrimination = 1 - mean clean AUROC; calibration = mean calibration error; label
    efficiency = 1 - mean AUROC over the fractions below the full one; robustness = 1 - mean of
    (mean corruption AUROC, mean shift AUROC over the task's shift targets), each half where both exist. Seeds are averaged
    first (weighted), then conditions. Then the mean over the tasks that measure the axis, each task
    once; an axis no task measures is NaN for every encoder. A NaN measurement gives a NaN error
    (never dropped from a mean), which the CRS refuses with the encoder's name.
    Every error is linear and non-increasing in every AUROC, and increasing in every calibration
    error: the monotonicity that DESIGN section 7 asks of the CRS starts here.
    """
    _check_tasks(tasks)
    weights = None if seed_weights is None else np.asarray(seed_weights, dtype=np.float64)
    values = _combine([_task_parts(task, weights) for task in tasks], lambda parts: np.mean(parts, axis=0))
    auroc_axes = [AXES.index(axis) for axis in AXES if axis != "calibration"]
    values[..., auroc_axes] = 1.0 - values[..., auroc_axes]  # AUROC -> error; calibration is an error
    return values


def axis_standard_errors(task_errors: Sequence[TaskMetrics]) -> np.ndarray:
    """Standard error of each axis error, (..., E, 4), from per-measurement standard errors.

    ``task_errors`` holds, in :class:`TaskMetrics` form, the standard error of every measurement
    (``auroc_se`` and ``ece_se`` of the run records). A part (seeds and conditions on one test
    set) takes the mean of its standard errors, the bound for perfectly correlated estimates;
    independent parts, shift targets and tasks combine as a mean of independent estimates:
    sqrt(sum se^2) / count. Mirrors :func:`axis_errors_from_metrics` part for part.
    """
    _check_tasks(task_errors)

    def independent(parts: list[np.ndarray]) -> np.ndarray:
        return np.sqrt(np.sum(np.square(parts), axis=0)) / len(parts)

    return _combine([_task_parts(task, None, _independent_mean_se) for task in task_errors], independent)


# --- the arithmetic ----------------------------------------------------------------------------------


def error_floor(standard_errors: np.ndarray, reference_index: int | None) -> np.ndarray:
    """Per-axis error floor, (A,): the standard error of the reference's axis error.

    ``standard_errors`` (E, A) from :func:`axis_standard_errors`; ``reference_index`` None for the
    median reference, whose standard error is the median over encoders. Never below
    :data:`MIN_FLOOR`. An error below the floor is within one standard error of it, so every
    error below it counts as equal (the floor itself).
    """
    standard_errors = np.asarray(standard_errors, dtype=np.float64)
    if reference_index is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            level = np.median(standard_errors, axis=0)
    else:
        level = standard_errors[reference_index]
    return np.maximum(level, MIN_FLOOR)


def crs_components(
    errors: np.ndarray,
    reference_index: int | None,
    weights: np.ndarray | None = None,
    floor: np.ndarray | float = MIN_FLOOR,
    tolerance: float = DOMINANCE_TOLERANCE,
    margin: float = 0.0,
) -> dict[str, np.ndarray]:
    """Every CRS term for error tables of shape (..., n_encoders, n_axes).

    Errors are floored at ``floor`` (a number, or one per axis: (n_axes,) or (..., n_axes)); the
    reference is encoder ``reference_index`` or, for None, the per-axis median of the floored
    errors over the encoders (the virtual median encoder). Encoder i dominates j when u_i >= u_j -
    tolerance on every axis and u_i > u_j + max(margin, tolerance) on at least one, so differences
    within float noise never decide a dominance. Leading dimensions (bootstrap replicates, weight
    draws) are carried through; ``weights`` may be (3,) or (..., 3) to score many weightings at once.
    """
    errors = np.maximum(np.asarray(errors, dtype=np.float64), np.asarray(floor, dtype=np.float64))
    n_encoders = errors.shape[-2]
    if reference_index is None:
        reference = np.median(errors, axis=-2, keepdims=True)
    else:
        reference = errors[..., reference_index : reference_index + 1, :]
    u = 1.0 / (1.0 + errors / reference)
    gap = u[..., :, None, :] - u[..., None, :, :]  # gap[..., i, j, a] = u_i - u_j on axis a
    dominates = np.all(gap >= -tolerance, axis=-1) & np.any(gap > max(margin, tolerance), axis=-1)
    others = max(n_encoders - 1, 1)
    share_dominated = dominates.sum(axis=-1) / others  # S: how many it dominates
    share_dominating = dominates.sum(axis=-2) / others  # Q: how many dominate it
    dominance = (1.0 + share_dominated - share_dominating) / 2.0
    balance = np.exp(np.mean(np.log(u), axis=-1))
    worst = u.min(axis=-1)
    w = component_weights(None) if weights is None else np.asarray(weights, dtype=np.float64)
    stacked = np.stack([dominance, balance, worst], axis=-1)
    crs = (stacked * w[..., None, :]).sum(axis=-1) if w.ndim > 1 else stacked @ w
    return {
        "u": u,
        "S": share_dominated,
        "Q": share_dominating,
        "dominance": dominance,
        "balance": balance,
        "worst_axis": worst,
        "worst_axis_index": u.argmin(axis=-1),
        "crs": crs,
    }


def rank_descending(values: np.ndarray) -> np.ndarray:
    """Competition ranks, 1 = highest; equal values share the best rank (1, 1, 3); a NaN ranks last (a
    replicate that could not measure an axis: not a rank cast from NaN)."""
    from scipy.stats import rankdata  # about 0.5 s to import: only the stages that rank pay it

    found = np.asarray(values, dtype=np.float64)
    return rankdata(-np.where(np.isnan(found), -np.inf, found), method="min", axis=-1).astype(np.int64)


# --- tables ---------------------------------------------------------------------------------------


def _check_axis_errors(axis_errors: pd.DataFrame, reference: str | None) -> list[str]:
    if not isinstance(axis_errors, pd.DataFrame):
        raise ScoreInputError("axis_errors must be a DataFrame indexed by encoder with one column per axis")
    encoders = [str(name) for name in axis_errors.index]
    if reference is not None and reference not in encoders:
        raise ScoreInputError(
            f"reference encoder {reference!r} is not among the encoders scored: {sorted(encoders)}; "
            "name one of them or use reference = 'median'"
        )
    if len(set(encoders)) != len(encoders):
        raise ScoreInputError(f"axis_errors has duplicate encoders: {sorted(encoders)}")
    axes = [axis for axis in ALL_AXES if axis in axis_errors.columns and not axis_errors[axis].isna().all()]
    if not axes:
        raise ScoreInputError(f"axis_errors has none of the axes {AXES} with a value")
    partial = [axis for axis in axes if axis_errors[axis].isna().any()]
    if partial:
        missing = {axis: sorted(axis_errors.index[axis_errors[axis].isna()].astype(str)) for axis in partial}
        raise ScoreInputError(
            f"axis errors missing (NaN) for some encoders only: {missing}; a measurement behind them is NaN "
            "(for example no class scorable); score every encoder on every axis"
        )
    auroc_axes = [axis for axis in axes if axis != "calibration"]
    if (axis_errors[auroc_axes].to_numpy() < 0).any():
        raise ScoreInputError("AUROC axis errors (1 - AUROC) must be non-negative: an AUROC above 1 was given")
    return axes


def reference_index(encoders: Sequence[str], settings: ScoreSettings) -> int | None:
    """Position of the reference encoder, or None for the median reference."""
    if settings.median_reference:
        return None
    names = [str(name) for name in encoders]
    if settings.reference not in names:
        raise ScoreInputError(
            f"reference encoder {settings.reference!r} is not among the encoders scored: {sorted(names)}; "
            "name one of them or use reference = 'median'"
        )
    return names.index(settings.reference)


def clinical_reliability_score(
    axis_errors: pd.DataFrame,
    settings: ScoreSettings,
    floor: pd.Series | Sequence[float] | None = None,
) -> pd.DataFrame:
    """One row per encoder: u per axis, S, Q, dominance, balance, worst axis, CRS and rank.

    ``axis_errors`` is indexed by encoder with columns among :data:`ALL_AXES` (errors, lower is better;
    ``equity`` only when the spec turns it on).
    ``floor``: per-axis error floor (a Series by axis or values in :data:`AXES` order); None takes
    ``settings.error_floor``, which must then be a number. An axis with no value for any encoder
    (for example robustness when no corruption was run) is left out and the CRS is computed over
    the others; an axis missing for only some encoders is an error. Rank 1 is the highest CRS;
    ties share the best rank.
    """
    reference = None if settings.median_reference else settings.reference
    axes = _check_axis_errors(axis_errors, reference)
    encoders = [str(name) for name in axis_errors.index]
    floors = _floor_values(floor, settings, axes)
    parts = crs_components(
        axis_errors[axes].to_numpy(dtype=np.float64),
        reference_index(encoders, settings),
        np.asarray(settings.weights),
        floors,
        settings.dominance_tolerance,
        settings.dominance_margin,
    )
    table = pd.DataFrame(index=pd.Index(encoders, name="encoder"))
    for position, axis in enumerate(axes):
        table[f"u_{axis}"] = parts["u"][:, position]
    for name in ("S", "Q", "dominance", "balance", "worst_axis"):
        table[name] = parts[name]
    table["worst_axis_name"] = [axes[i] for i in parts["worst_axis_index"]]
    table["crs"] = parts["crs"]
    table["rank"] = rank_descending(parts["crs"])
    table.attrs.update(
        reference=settings.reference,
        axes=list(axes),
        floor=dict(zip(axes, floors.tolist(), strict=True)),
        dominance_tolerance=settings.dominance_tolerance,
        dominance_margin=settings.dominance_margin,
    )
    return table


def _floor_values(floor, settings: ScoreSettings, axes: Sequence[str]) -> np.ndarray:
    if floor is None:
        if settings.error_floor == NOISE_FLOOR:
            raise ScoreInputError(
                "error_floor = 'noise' needs the per-axis noise floor (crs.scoring.formula.error_floor); "
                "pass floor=... or set error_floor to a number"
            )
        return np.full(len(axes), float(settings.error_floor))
    if isinstance(floor, pd.Series):
        return floor.reindex(list(axes)).to_numpy(dtype=np.float64)
    values = np.asarray(floor, dtype=np.float64)
    if values.ndim == 0:
        return np.full(len(axes), float(values))
    if len(values) in (len(AXES), len(ALL_AXES)):
        return values[[ALL_AXES.index(axis) for axis in axes]]
    return values


# --- the point estimate, made once --------------------------------------------------------------------


@dataclass(frozen=True)
class PointEstimate:
    """The CRS point estimate and everything the bootstraps and stability analyses reuse.

    ``errors`` (index encoder, columns :data:`AXES`; NaN where an axis is not measured);
    ``standard_errors`` likewise (None when the records carry none); ``axes``: the axes scored;
    ``floor``: the error floor per scored axis; ``reference_index``: None for the median reference;
    ``table``: :func:`clinical_reliability_score`'s table. Encoders are sorted by name.
    """

    settings: ScoreSettings
    errors: pd.DataFrame
    standard_errors: pd.DataFrame | None
    axes: tuple[str, ...]
    floor: pd.Series
    reference_index: int | None
    table: pd.DataFrame

    @property
    def encoders(self) -> list[str]:
        return [str(name) for name in self.errors.index]

    @property
    def axis_columns(self) -> list[int]:
        """Positions of the scored axes in :data:`ALL_AXES` (to select them from (..., E, 4) arrays, or
        (..., E, 5) with ``equity`` last when it is scored)."""
        return [ALL_AXES.index(axis) for axis in self.axes]

    def score(self, errors: np.ndarray, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """:func:`crs_components` of (..., E, 4) errors (E, 5 with ``equity``) with this estimate's reference,
        floor and rules."""
        return crs_components(
            np.asarray(errors)[..., self.axis_columns],
            self.reference_index,
            np.asarray(self.settings.weights) if weights is None else weights,
            self.floor.to_numpy(dtype=np.float64),
            self.settings.dominance_tolerance,
            self.settings.dominance_margin,
        )


def noise_floor(
    standard_errors: pd.DataFrame | None, settings: ScoreSettings, encoders: Sequence[str]
) -> pd.Series:
    """Per-axis floor (index :data:`AXES`, and ``equity`` where the standard errors have it) under
    ``settings.error_floor``."""
    if settings.error_floor != NOISE_FLOOR:
        return pd.Series(float(settings.error_floor), index=list(ALL_AXES))
    if standard_errors is None:
        raise ScoreInputError(
            "error_floor = 'noise' needs the run records' standard errors (auroc_se, ece_se), written by "
            "crs probe since scoring v2; rerun `crs probe`, or set error_floor to a number"
        )
    axes = [axis for axis in ALL_AXES if axis in standard_errors.columns or axis in AXES]
    values = standard_errors.reindex(list(encoders)).reindex(columns=axes).to_numpy(dtype=np.float64)
    return pd.Series(error_floor(values, reference_index(encoders, settings)), index=axes)


def point_estimate(
    errors: pd.DataFrame, standard_errors: pd.DataFrame | None, settings: ScoreSettings
) -> PointEstimate:
    """The CRS of every encoder from its axis errors, once; the bootstraps reuse its floor and reference."""
    errors = errors.set_axis(errors.index.astype(str)).sort_index().rename_axis("encoder")
    encoders = list(errors.index)
    if standard_errors is not None:
        standard_errors = standard_errors.set_axis(standard_errors.index.astype(str)).reindex(encoders)
    floor = noise_floor(standard_errors, settings, encoders)
    table = clinical_reliability_score(errors, settings, floor)
    axes = tuple(table.attrs["axes"])
    floor = floor.reindex(list(axes))
    if floor.isna().any():
        missing = list(floor.index[floor.isna()])
        raise ScoreInputError(
            f"no standard error for axes {missing} of the reference {settings.reference!r}; the run records' "
            "auroc_se / ece_se are NaN there; set error_floor to a number"
        )
    return PointEstimate(
        settings=settings,
        errors=errors,
        standard_errors=standard_errors,
        axes=axes,
        floor=floor,
        reference_index=reference_index(encoders, settings),
        table=table,
    )
