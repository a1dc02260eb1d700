"""The Clinical Reliability Score: reference-relative axes, dominance, balance, worst axis.

Our reading of the paper (DESIGN section 8, docs/crs.md):

1. each axis as an error e (1 - AUROC, ECE, 1 - label efficiency, 1 - retention), averaged over
   seeds, then over tasks with each task counting once, floored at ``epsilon``;
2. rho = e / e_reference and u = 1 / (1 + rho): the reference scores 0.5 on every axis;
3. dominance = (1 + S - Q) / 2 with S (Q) the share of other encoders it Pareto-dominates (that
   dominate it) on u;
4. balance = geometric mean of u; worst axis = min(u);
5. CRS = weighted mean of dominance, balance and worst axis (equal weights by default).

The arithmetic lives in :func:`crs_components`, which works on a stack of error tables at once, so
the bootstrap and the weight-sensitivity analysis recompute everything (dominance included) with
the very code that produces the point estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from crs.spec import AXES, COMPONENTS

DEFAULT_EPSILON = 1e-3
"""Floor on every axis error before the reference ratio (see docs/decisions/0002-error-floor.md)."""


class ScoreInputError(ValueError):
    """The inputs to the CRS are inconsistent; the message names the input and the fix."""


# --- weights ---------------------------------------------------------------------------------------


def component_weights(weights: Mapping[str, float] | Sequence[float] | None) -> np.ndarray:
    """Weights of (dominance, balance, worst_axis), normalised to sum to 1."""
    if weights is None:
        return np.full(len(COMPONENTS), 1.0 / len(COMPONENTS))
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(COMPONENTS))
        if unknown:
            raise ScoreInputError(f"unknown CRS weight names {unknown}; use {COMPONENTS}")
        values = np.array([float(weights.get(name, 0.0)) for name in COMPONENTS])
    else:
        values = np.asarray(list(weights), dtype=np.float64)
        if values.shape != (len(COMPONENTS),):
            raise ScoreInputError(
                f"CRS weights need {len(COMPONENTS)} values for {COMPONENTS}, got {values.tolist()}"
            )
    if np.any(values < 0) or not np.isfinite(values).all() or values.sum() <= 0:
        raise ScoreInputError(
            f"CRS weights must be finite, non-negative and not all zero, got {values.tolist()}"
        )
    return values / values.sum()


# --- the arithmetic ----------------------------------------------------------------------------------


def crs_components(
    errors: np.ndarray,
    reference_index: int,
    weights: np.ndarray | None = None,
    epsilon: float = DEFAULT_EPSILON,
    dominance_margin: float = 0.0,
) -> dict[str, np.ndarray]:
    """Every CRS term for error tables of shape (..., n_encoders, n_axes).

    Encoder i dominates j when u_i >= u_j on every axis and u_i > u_j + dominance_margin on at
    least one. Leading dimensions (bootstrap replicates, weight draws) are carried through.
    ``weights`` may be (3,) or (..., 3) to score many weightings at once.
    """
    errors = np.maximum(np.asarray(errors, dtype=np.float64), epsilon)
    n_encoders = errors.shape[-2]
    rho = errors / errors[..., reference_index : reference_index + 1, :]
    u = 1.0 / (1.0 + rho)
    gap = u[..., :, None, :] - u[..., None, :, :]  # gap[..., i, j, a] = u_i - u_j on axis a
    dominates = np.all(gap >= 0.0, axis=-1) & np.any(gap > dominance_margin, axis=-1)
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
    """Competition ranks, 1 = highest; equal values share the best rank (1, 1, 3)."""
    return rankdata(-np.asarray(values, dtype=np.float64), method="min", axis=-1).astype(np.int64)


# --- tables ---------------------------------------------------------------------------------------


def _check_axis_errors(axis_errors: pd.DataFrame, reference: str) -> list[str]:
    if not isinstance(axis_errors, pd.DataFrame):
        raise ScoreInputError("axis_errors must be a DataFrame indexed by encoder with one column per axis")
    encoders = [str(name) for name in axis_errors.index]
    if reference not in encoders:
        raise ScoreInputError(
            f"reference encoder {reference!r} is not among the encoders scored: {sorted(encoders)}"
        )
    if len(set(encoders)) != len(encoders):
        raise ScoreInputError(f"axis_errors has duplicate encoders: {sorted(encoders)}")
    axes = [axis for axis in AXES if axis in axis_errors.columns and not axis_errors[axis].isna().all()]
    if not axes:
        raise ScoreInputError(f"axis_errors has none of the axes {AXES} with a value")
    partial = [axis for axis in axes if axis_errors[axis].isna().any()]
    if partial:
        missing = {axis: sorted(axis_errors.index[axis_errors[axis].isna()].astype(str)) for axis in partial}
        raise ScoreInputError(
            f"axis errors missing for some encoders only: {missing}; score every encoder on every axis"
        )
    if (axis_errors[axes].to_numpy() < 0).any():
        raise ScoreInputError(
            "axis errors must be non-negative (1 - AUROC, ECE, 1 - label efficiency, 1 - retention)"
        )
    return axes


def clinical_reliability_score(
    axis_errors: pd.DataFrame,
    reference: str,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    epsilon: float = DEFAULT_EPSILON,
    dominance_margin: float = 0.0,
) -> pd.DataFrame:
    """One row per encoder: u per axis, S, Q, dominance, balance, worst axis, CRS and rank.

    ``axis_errors`` is indexed by encoder with columns among :data:`AXES` (errors, lower is better).
    An axis with no value for any encoder (for example robustness when no corruption was run) is
    left out and the CRS is computed over the others; an axis missing for only some encoders is an
    error. Rank 1 is the highest CRS; ties share the best rank.
    """
    axes = _check_axis_errors(axis_errors, reference)
    encoders = [str(name) for name in axis_errors.index]
    parts = crs_components(
        axis_errors[axes].to_numpy(dtype=np.float64),
        encoders.index(reference),
        component_weights(weights),
        epsilon,
        dominance_margin,
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
        reference=reference, axes=list(axes), epsilon=epsilon, dominance_margin=dominance_margin
    )
    return table


def axis_errors(seed_axes_table: pd.DataFrame) -> pd.DataFrame:
    """Axis errors per encoder: mean over seeds per task, then mean over tasks (each counts once).

    Columns: discrimination = 1 - AUROC, calibration = ECE, label_efficiency = 1 - label
    efficiency, robustness = 1 - retention. Every encoder must have been run on the same tasks,
    or the averages would not be comparable.
    """
    needed = ("encoder", "task", "auroc", "ece", "label_efficiency", "retention")
    missing = [column for column in needed if column not in seed_axes_table.columns]
    if missing:
        raise ScoreInputError(
            f"seed-axes table lacks columns {missing}; build it with crs.axes.seed_axes(records)"
        )
    if seed_axes_table.empty:
        raise ScoreInputError("seed-axes table is empty: no run records to score")
    per_task = seed_axes_table.groupby(["encoder", "task"])[
        ["auroc", "ece", "label_efficiency", "retention"]
    ].mean()
    tasks = per_task.reset_index().groupby("encoder")["task"].apply(lambda s: tuple(sorted(s)))
    if tasks.nunique() > 1:
        raise ScoreInputError(
            f"encoders were run on different tasks: {tasks.to_dict()}; run every encoder on every task"
        )
    per_encoder = per_task.groupby("encoder").mean()
    errors = pd.DataFrame(
        {
            "discrimination": 1.0 - per_encoder["auroc"],
            "calibration": per_encoder["ece"],
            "label_efficiency": 1.0 - per_encoder["label_efficiency"],
            "robustness": 1.0 - per_encoder["retention"],
        }
    )
    errors.index = errors.index.astype(str)
    errors.index.name = "encoder"
    return errors


# --- the one call the CLI and the report use --------------------------------------------------------








