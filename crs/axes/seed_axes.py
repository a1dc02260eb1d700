"""From run records (one row per probe evaluation) to the four axes per encoder x task x seed.

Run record columns (written by stage 2): encoder, task, task_kind, label_fraction, seed,
condition ("clean" | "corrupt" | "shift"), corruption, severity, target, auroc, ece, brier, nll
(+ kappa, ordinal_auroc for ordinal tasks). Other columns are carried along untouched elsewhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from crs.axes._inputs import AxisInputError
from crs.axes.label_efficiency import label_efficiency
from crs.axes.robustness import RETENTION_FLOOR, retention

REQUIRED_COLUMNS = ("encoder", "task", "task_kind", "label_fraction", "seed", "condition", "auroc", "ece")
CONDITIONS = ("clean", "corrupt", "shift")
SEED_AXES_COLUMNS = (
    "encoder", "task", "task_kind", "seed",
    "auroc", "ece", "brier", "nll", "kappa", "ordinal_auroc",
    "label_efficiency", "corruption_retention", "shift_retention", "retention",
    "corrupt_ece", "shift_ece",
)  # fmt: skip


def _column_mean(rows: pd.DataFrame, column: str) -> float:
    if column not in rows or rows[column].isna().all():
        return float("nan")
    return float(rows[column].mean())


def _one_seed(rows: pd.DataFrame, full_fraction: float, retention_floor: float) -> dict:
    clean = rows[rows["condition"] == "clean"]
    at_full = np.isclose(rows["label_fraction"].to_numpy(dtype=float), full_fraction)
    clean_full = rows[at_full & (rows["condition"] == "clean").to_numpy()]
    if len(clean_full) > 1:
        raise AxisInputError(
            f"encoder {rows['encoder'].iat[0]!r}, task {rows['task'].iat[0]!r}, seed {rows['seed'].iat[0]}: "
            f"{len(clean_full)} clean rows at label fraction {full_fraction}; expected one"
        )
    clean_auroc = float(clean_full["auroc"].iat[0]) if len(clean_full) else float("nan")

    curve = clean.groupby("label_fraction")["auroc"].mean()
    efficiency = (
        label_efficiency(curve.index.to_numpy(dtype=float), curve.to_numpy()) if len(curve) else np.nan
    )

    corrupt = rows[at_full & (rows["condition"] == "corrupt").to_numpy()]
    shift = rows[at_full & (rows["condition"] == "shift").to_numpy()]
    corruption_retention = (
        float(np.mean(retention(corrupt["auroc"].to_numpy(dtype=float), clean_auroc, retention_floor)))
        if len(corrupt)
        else float("nan")
    )
    shift_retention = (
        float(np.mean(retention(shift["auroc"].to_numpy(dtype=float), clean_auroc, retention_floor)))
        if len(shift)
        else float("nan")
    )
    present = [
        value for value, rows_ in ((corruption_retention, corrupt), (shift_retention, shift)) if len(rows_)
    ]
    combined = float(np.mean(present)) if present else float("nan")  # NaN part -> NaN, by design

    return {
        "auroc": clean_auroc,
        "ece": _column_mean(clean_full, "ece"),
        "brier": _column_mean(clean_full, "brier"),
        "nll": _column_mean(clean_full, "nll"),
        "kappa": _column_mean(clean_full, "kappa"),
        "ordinal_auroc": _column_mean(clean_full, "ordinal_auroc"),
        "label_efficiency": efficiency,
        "corruption_retention": corruption_retention,
        "shift_retention": shift_retention,
        "retention": combined,
        "corrupt_ece": _column_mean(corrupt, "ece"),
        "shift_ece": _column_mean(shift, "ece"),
    }


def seed_axes(
    records: pd.DataFrame, full_fraction: float = 1.0, retention_floor: float = RETENTION_FLOOR
) -> pd.DataFrame:
    """One row per (encoder, task, seed) with the axes of DESIGN section 7.

    * auroc, ece (and brier, nll, kappa, ordinal_auroc): clean test split at ``full_fraction``;
    * label_efficiency: the clean AUROC curve over every label fraction of that seed;
    * corruption_retention: mean over corruptions x severities of the clipped, floored retention
      against the clean AUROC, at ``full_fraction``; shift_retention likewise over shift targets;
    * retention: the mean of the two where a shift target exists, else corruption retention alone.
      NaN if any part that exists is NaN, so a missing measurement is never averaged away;
    * corrupt_ece, shift_ece: calibration under corruption and shift, reported beside the axes.
    """
    missing = [column for column in REQUIRED_COLUMNS if column not in records.columns]
    if missing:
        raise AxisInputError(f"run records lack columns {missing}; stage 2 writes {list(REQUIRED_COLUMNS)}")
    unknown = sorted(set(records["condition"].unique()) - set(CONDITIONS))
    if unknown:
        raise AxisInputError(f"run records have unknown condition values {unknown}; expected {CONDITIONS}")
    rows = []
    for (encoder, task, seed), group in records.groupby(["encoder", "task", "seed"], sort=True):
        row = {"encoder": encoder, "task": task, "task_kind": group["task_kind"].iat[0], "seed": seed}
        row.update(_one_seed(group, full_fraction, retention_floor))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(SEED_AXES_COLUMNS))
