"""From run records (one row per probe evaluation) to the axes per encoder x task x seed.

Run record columns (written by stage 2): encoder, task, task_kind, label_fraction, seed,
condition ("clean" | "corrupt" | "shift"), corruption, severity, target, auroc, auroc_se, ece,
ece_debiased, ece_se, brier, nll (+ kappa, ordinal_auroc for ordinal tasks). Other columns are
carried along untouched elsewhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from crs.axes._inputs import AxisInputError
from crs.axes.label_efficiency import label_efficiency, relative_label_retention
from crs.axes.robustness import RETENTION_FLOOR, retention

REQUIRED_COLUMNS = ("encoder", "task", "task_kind", "label_fraction", "seed", "condition", "auroc", "ece")
CONDITIONS = ("clean", "corrupt", "shift")
SCORED_COLUMNS = ("auroc", "ece_debiased", "label_efficiency", "corruption_auroc", "shift_auroc")
"""Per-seed parts of the CRS axes (crs.scoring.formula combines them; robustness = each half)."""
REPORTED_COLUMNS = (
    "ece", "brier", "nll", "kappa", "ordinal_auroc",
    "label_retention", "corruption_retention", "shift_retention", "retention", "corrupt_ece", "shift_ece",
)  # fmt: skip
"""Reported beside the CRS, never scored: raw ECE, proper scores, ratios, calibration under shift."""
SEED_AXES_COLUMNS = ("encoder", "task", "task_kind", "seed", *SCORED_COLUMNS, *REPORTED_COLUMNS)


def _column_mean(rows: pd.DataFrame, column: str) -> float:
    if column not in rows or rows[column].isna().all():
        return float("nan")
    return float(rows[column].mean())


def _mean_retention(rows: pd.DataFrame, clean_auroc: float, retention_floor: float) -> float:
    if not len(rows):
        return float("nan")
    return float(np.mean(retention(rows["auroc"].to_numpy(dtype=float), clean_auroc, retention_floor)))


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
    fractions, aurocs = curve.index.to_numpy(dtype=float), curve.to_numpy()
    efficiency = label_efficiency(fractions, aurocs, full_fraction) if len(curve) else np.nan
    kept = relative_label_retention(fractions, aurocs, full_fraction, retention_floor) if len(curve) else np.nan

    corrupt = rows[at_full & (rows["condition"] == "corrupt").to_numpy()]
    shift = rows[at_full & (rows["condition"] == "shift").to_numpy()]
    corruption_retention = _mean_retention(corrupt, clean_auroc, retention_floor)
    shift_retention = _mean_retention(shift, clean_auroc, retention_floor)
    present = [
        value for value, rows_ in ((corruption_retention, corrupt), (shift_retention, shift)) if len(rows_)
    ]
    combined = float(np.mean(present)) if present else float("nan")  # NaN part -> NaN, by design

    return {
        "auroc": clean_auroc,
        "ece_debiased": _column_mean(clean_full, "ece_debiased"),
        "label_efficiency": efficiency,
        "corruption_auroc": float(corrupt["auroc"].mean()) if len(corrupt) else float("nan"),
        "shift_auroc": float(shift["auroc"].mean()) if len(shift) else float("nan"),
        "ece": _column_mean(clean_full, "ece"),
        "brier": _column_mean(clean_full, "brier"),
        "nll": _column_mean(clean_full, "nll"),
        "kappa": _column_mean(clean_full, "kappa"),
        "ordinal_auroc": _column_mean(clean_full, "ordinal_auroc"),
        "label_retention": kept,
        "corruption_retention": corruption_retention,
        "shift_retention": shift_retention,
        "retention": combined,
        "corrupt_ece": _column_mean(corrupt, "ece"),
        "shift_ece": _column_mean(shift, "ece"),
    }


def seed_axes(
    records: pd.DataFrame, full_fraction: float = 1.0, retention_floor: float = RETENTION_FLOOR
) -> pd.DataFrame:
    """One row per (encoder, task, seed): the parts of the CRS axes and what is reported beside them.

    Scored parts (absolute, so the CRS is monotone in every AUROC and calibration error):

    * auroc, ece_debiased: clean test split at ``full_fraction`` (ece_debiased: NaN when the
      records predate it);
    * label_efficiency: mean clean AUROC over the label fractions below ``full_fraction``;
    * corruption_auroc: mean AUROC over every corruption x severity at ``full_fraction``;
      shift_auroc: mean over shift targets. :mod:`crs.scoring.formula` makes robustness from them.

    Reported, never scored: ece (raw binned), brier, nll, kappa, ordinal_auroc; label_retention
    (share of the full-label above-chance AUROC kept below it); corruption_retention,
    shift_retention and retention (their mean where both exist; NaN if a part that exists is NaN);
    corrupt_ece, shift_ece (calibration under corruption and shift).
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
