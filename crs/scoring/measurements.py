"""Run records -> the per-task measurement arrays the CRS is made of (:class:`crs.scoring.formula.TaskMetrics`).

Every (encoder, task) must be there, and within a task every encoder must have every seed, label
fraction and condition the others have: a hole is an error naming the encoder and what is missing,
never a value silently dropped from a mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.formula import (
    AXES,
    ScoreInputError,
    TaskMetrics,
    axis_errors_from_metrics,
    axis_standard_errors,
)
from crs.scoring.settings import ScoreSettings

REQUIRED = ("encoder", "task", "label_fraction", "seed", "condition", "auroc")
CALIBRATION_COLUMN = "ece_debiased"
"""Run-record column scored as the calibration error."""
STANDARD_ERROR_COLUMNS = {"auroc": "auroc_se", CALIBRATION_COLUMN: "ece_se"}
"""Run-record column holding the standard error of each scored measurement."""


@dataclass(frozen=True)
class TaskLayout:
    """What one task's arrays hold, in their order: label fractions below the full one,
    corruption conditions ``"<corruption>/<severity>"``, shift targets."""

    fractions: tuple[float, ...]
    corruptions: tuple[str, ...]
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Measurements:
    """Per-task measurement arrays of every encoder, seeds in ascending order, encoders by name.

    ``values[task]`` holds AUROCs and the debiased calibration error; ``standard_errors[task]`` the
    standard error of each (None when the records carry no ``auroc_se`` / ``ece_se``).
    """

    encoders: tuple[str, ...]
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    values: dict[str, TaskMetrics]
    standard_errors: dict[str, TaskMetrics] | None
    layouts: dict[str, TaskLayout]

    def task_list(self) -> list[TaskMetrics]:
        return [self.values[task] for task in self.tasks]

    def axis_errors(self) -> pd.DataFrame:
        """Axis errors per encoder (columns :data:`crs.scoring.formula.AXES`; NaN = not measured)."""
        return self._table(axis_errors_from_metrics(self.task_list()))

    def axis_standard_errors(self) -> pd.DataFrame | None:
        if self.standard_errors is None:
            return None
        return self._table(axis_standard_errors([self.standard_errors[task] for task in self.tasks]))

    def _table(self, values: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(values, index=pd.Index(list(self.encoders), name="encoder"), columns=list(AXES))


def _cube(rows: pd.DataFrame, keys: list[str], levels: Sequence[Sequence], column: str, where: str) -> np.ndarray:
    """``column`` as an array over the product of ``levels`` (encoder, [condition,] seed); every cell once."""
    shape = tuple(len(level) for level in levels)
    codes = [pd.Index(level).get_indexer(rows[key]) for key, level in zip(keys, levels, strict=True)]
    flat = np.ravel_multi_index(codes, shape) if len(rows) else np.zeros(0, dtype=np.int64)
    count = np.bincount(flat, minlength=int(np.prod(shape)))
    if (count > 1).any():
        duplicate = np.unravel_index(int(np.argmax(count > 1)), shape)
        cell = {key: level[int(i)] for key, level, i in zip(keys, levels, duplicate, strict=True)}
        raise ScoreInputError(
            f"{where}: more than one run record for {cell}; each probe evaluation must appear once (merge duplicate runs)"
        )
    if (count == 0).any():
        hole = np.unravel_index(int(np.argmax(count == 0)), shape)
        cell = {key: level[int(i)] for key, level, i in zip(keys, levels, hole, strict=True)}
        encoder = cell.pop("encoder")
        raise ScoreInputError(
            f"{where}: no run record for encoder {encoder!r} at {cell}, which other encoders or seeds have "
            f"({int((count == 0).sum())} missing); rerun `crs probe` for {encoder!r}"
        )
    out = np.empty(int(np.prod(shape)))
    out[flat] = rows[column].to_numpy(dtype=np.float64)
    return out.reshape(shape)


def measure(records: pd.DataFrame, settings: ScoreSettings) -> Measurements:
    """Run records -> :class:`Measurements`; every encoder must have every task, seed and condition."""
    missing = [column for column in (*REQUIRED, CALIBRATION_COLUMN) if column not in records.columns]
    if missing:
        raise ScoreInputError(
            f"run records lack columns {missing}; records written before scoring v2 lack the debiased "
            "calibration error: rerun `crs probe`"
        )
    if records.empty:
        raise ScoreInputError("run records are empty: no probe evaluation to score")
    records = records.assign(
        **{column: default for column, default in (("corruption", ""), ("severity", 0), ("target", ""))
           if column not in records.columns},  # fmt: skip
    ).assign(
        encoder=records["encoder"].astype(str),
        task=records["task"].astype(str),
        seed=records["seed"].astype(np.int64),
        label_fraction=records["label_fraction"].astype(np.float64),
    )
    encoders = sorted(records["encoder"].unique())
    tasks = sorted(records["task"].unique())
    seeds = sorted(int(s) for s in records["seed"].unique())
    has_errors = all(column in records.columns for column in STANDARD_ERROR_COLUMNS.values())

    present = records.groupby("task")["encoder"].unique()
    for task in tasks:
        absent = sorted(set(encoders) - set(present[task]))
        if absent:
            raise ScoreInputError(
                f"task {task!r} has no run records for encoder {absent[0]!r} (other encoders have them); "
                f"run `crs probe` for {absent[0]!r} on {task!r}, or score without that task"
            )

    values, errors, layouts = {}, {}, {}
    for task, rows in records.groupby("task", sort=True):
        at_full = np.isclose(rows["label_fraction"].to_numpy(), settings.full_fraction)
        clean = (rows["condition"] == "clean").to_numpy()
        full_clean = rows[at_full & clean]
        lower = rows[clean & ~at_full & (rows["label_fraction"] < settings.full_fraction).to_numpy()]
        corrupt = rows[at_full & (rows["condition"] == "corrupt").to_numpy()]
        corrupt = corrupt.assign(name=corrupt["corruption"].astype(str) + "/" + corrupt["severity"].astype(str))
        shift = rows[at_full & (rows["condition"] == "shift").to_numpy()]
        shift = shift.assign(name=shift["target"].astype(str))
        if full_clean.empty:
            raise ScoreInputError(
                f"task {task!r}: no clean run records at the full label fraction {settings.full_fraction}; "
                "discrimination and calibration are read there"
            )
        layout = TaskLayout(
            fractions=tuple(sorted(float(f) for f in lower["label_fraction"].unique())),
            corruptions=tuple(sorted(corrupt["name"].unique())),
            targets=tuple(sorted(shift["name"].unique())),
        )
        where = f"task {task!r}"

        def arrays(auroc: str, calibration: str, task_rows=(full_clean, lower, corrupt, shift), where=where, layout=layout):
            full_rows, lower_rows, corrupt_rows, shift_rows = task_rows
            return TaskMetrics(
                clean_auroc=_cube(full_rows, ["encoder", "seed"], [encoders, seeds], auroc, where),
                fraction_auroc=_cube(lower_rows, ["encoder", "label_fraction", "seed"],
                                     [encoders, layout.fractions, seeds], auroc, where),
                corrupt_auroc=_cube(corrupt_rows, ["encoder", "name", "seed"],
                                    [encoders, layout.corruptions, seeds], auroc, where),
                shift_auroc=_cube(shift_rows, ["encoder", "name", "seed"], [encoders, layout.targets, seeds],
                                  auroc, where),
                calibration_error=_cube(full_rows, ["encoder", "seed"], [encoders, seeds], calibration, where),
            )  # fmt: skip

        values[task] = arrays("auroc", CALIBRATION_COLUMN)
        if has_errors:
            errors[task] = arrays(STANDARD_ERROR_COLUMNS["auroc"], STANDARD_ERROR_COLUMNS[CALIBRATION_COLUMN])
        layouts[task] = layout
    return Measurements(
        encoders=tuple(encoders),
        tasks=tuple(tasks),
        seeds=tuple(seeds),
        values=values,
        standard_errors=errors if has_errors else None,
        layouts=layouts,
    )
