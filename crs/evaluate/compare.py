"""Compare two run folders under the reproducibility contract (docs/reproducibility.md).

A reviewer re-runs a published spec (``crs reproduce``) or holds two runs side by side (``crs
compare``); every run record, seed aggregate and score table is compared column by column with the
tolerance the contract states for it, and the verdict says whether the contract holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from crs.evaluate.artifacts import RunFolder, RunFolderError

ABSOLUTE_TOLERANCE = 1e-6
"""Every float column of the records and score tables agrees to this, absolute, or relative for
values above 1 (NLL is unbounded: an overconfident probe's 14.43 moved by 1.3e-6 between BLAS
kernels on the demo, 9e-8 of its value): |a - b| <= 1e-6 max(1, |a|) (the contract)."""
BINNED_COLUMNS = ("ece", "ece_debiased", "ece_se", "mce")
"""Binned calibration errors jump when a probability crosses a bin edge: they may exceed the
tolerance in at most :data:`BINNED_SHARE` of the rows."""
BINNED_SHARE = 0.005
SCORE_TABLES = (
    "seed_axes", "axis_errors", "point", "reported", "crs", "bootstrap", "rank_pairs",
    "reversal_counts", "reversal_pairs", "reversal_noise", "stability_references", "stability_reference_ranks",
    "stability_leave_one_out", "weight_sensitivity", "weight_kendall_taus", "subgroups", "subgroup_gaps",
)
"""Score tables compared when the published folder holds them (the per-replicate tables are
summarised by these: intervals, rank sets, tiers, reversal counts and their noise)."""


@dataclass(frozen=True)
class ColumnCheck:
    """One column of one table: how far apart the two runs are and whether the contract holds."""

    table: str
    column: str
    max_difference: float  # NaN for exact (non-float) columns that differ, 0 when equal
    rows_over: int
    rows: int
    allowed_share: float
    example: str  # the first differing row's keys, or ""

    @property
    def holds(self) -> bool:
        return self.rows_over <= self.allowed_share * self.rows


VERDICT_PARTS = 3
"""Broken columns named in the verdict line; the rest are counted (the table below lists them all)."""
SPEC_PLACES = ("output", "cache", "source")
"""Spec fields that say where a run lies, not what it computed: not compared (nor data roots)."""


def spec_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Dotted names of the spec fields in which two embedded specs differ (``extract.severities``,
    ``datasets[1].options``), leaving out where the runs lie (:data:`SPEC_PLACES`, data roots)."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    return [key for key in sorted(set(flat_a) | set(flat_b))
            if key not in SPEC_PLACES and not key.endswith(".root") and flat_a.get(key) != flat_b.get(key)]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list | tuple) and value and all(isinstance(item, Mapping) for item in value):
        out = {f"{prefix}.count": len(value)}
        for number, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{number}]"))
        return out
    return {prefix: value}


@dataclass(frozen=True)
class Comparison:
    """Every column compared; ``problems`` names what could not be compared at all;
    ``spec_differences`` the spec fields in which the two runs' embedded specs differ."""

    checks: tuple[ColumnCheck, ...]
    problems: tuple[str, ...]
    spec_differences: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        return not self.problems and all(check.holds for check in self.checks)

    def table(self, differing_only: bool = True) -> pd.DataFrame:
        rows = [
            {"table": c.table, "column": c.column, "max_difference": c.max_difference, "rows_over": c.rows_over,
             "rows": c.rows, "allowed_share": c.allowed_share, "holds": c.holds, "example": c.example}
            for c in self.checks if not differing_only or c.rows_over or c.max_difference > 0
        ]
        return pd.DataFrame(rows, columns=["table", "column", "max_difference", "rows_over", "rows",
                                           "allowed_share", "holds", "example"])

    def verdict(self) -> str:
        """One short line: whether the contract holds, the first few broken columns and how many more;
        first of all, when the runs were made with different specs, that and where they differ."""
        broken = [c for c in self.checks if not c.holds]
        compared = len({c.table for c in self.checks})
        specs = ""
        if self.spec_differences:
            named = ", ".join(self.spec_differences[:VERDICT_PARTS])
            hidden = len(self.spec_differences) - VERDICT_PARTS
            specs = (f"the two runs were made with different specs ({named}{f' and {hidden} more' if hidden > 0 else ''}); "
                     "differences are expected. ")
        if self.holds:
            worst = max((c.max_difference for c in self.checks if np.isfinite(c.max_difference)), default=0.0)
            return (f"{specs}reproduced: {compared} tables, {len(self.checks)} columns agree within the contract "
                    f"(largest difference {worst:.2g}; tolerance {ABSOLUTE_TOLERANCE:g}, relative above 1)")
        parts = [f"{c.table}.{c.column} ({c.rows_over} of {c.rows} rows)" for c in broken] + list(self.problems)
        shown = "; ".join(parts[:VERDICT_PARTS])
        more = f"; and {len(parts) - VERDICT_PARTS} more (listed below)" if len(parts) > VERDICT_PARTS else ""
        return f"{specs}NOT reproduced: {shown}{more}"


def _key_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if not pd.api.types.is_float_dtype(table[c])]


def _text(column: pd.Series) -> pd.Series:
    """A column as text with missing values spelled out (NaN never equals NaN)."""
    return column.astype(object).where(column.notna(), "<missing>").astype(str)


def _describe(row: pd.Series, keys: list[str]) -> str:
    return ", ".join(f"{k}={row[k]}" for k in keys[:8])


def compare_tables(name: str, published: pd.DataFrame, rerun: pd.DataFrame) -> tuple[list[ColumnCheck], list[str]]:
    """Column checks of one table. Rows are matched by their non-float columns (sorted on them);
    a float column agrees within :data:`ABSOLUTE_TOLERANCE` (relative above 1; binned calibration columns in all but
    :data:`BINNED_SHARE` of the rows), every other column exactly."""
    problems = []
    missing = sorted(set(published.columns) - set(rerun.columns))
    if missing:
        problems.append(f"{name}: columns {missing} missing from the re-run")
    if len(published) != len(rerun):
        return [], problems + [f"{name}: {len(published)} rows published, {len(rerun)} re-run"]
    keys = [c for c in _key_columns(published) if c in rerun.columns]
    order = lambda t: t.sort_values(keys, kind="stable").reset_index(drop=True) if keys else t.reset_index(drop=True)  # noqa: E731
    as_text = lambda t: t.assign(**{k: _text(t[k]) for k in keys})  # noqa: E731
    a, b = order(as_text(published)), order(as_text(rerun))
    checks = []
    for column in published.columns:
        if column not in rerun.columns:
            continue
        if pd.api.types.is_float_dtype(published[column]):
            x, y = a[column].to_numpy(dtype=float), b[column].to_numpy(dtype=float)
            both_nan = np.isnan(x) & np.isnan(y)
            difference = np.where(both_nan, 0.0, np.abs(x - y))
            difference = np.where(np.isnan(difference), np.inf, difference)  # NaN on one side only
            over = difference > ABSOLUTE_TOLERANCE * np.maximum(1.0, np.nan_to_num(np.abs(x), nan=1.0))
            share = BINNED_SHARE if column in BINNED_COLUMNS else 0.0
            worst = float(difference.max()) if len(difference) else 0.0
        else:
            over = (_text(a[column]) != _text(b[column])).to_numpy()
            share, worst = 0.0, (np.nan if over.any() else 0.0)
        example = _describe(a.loc[int(np.flatnonzero(over)[0])], keys) if over.any() else ""
        checks.append(ColumnCheck(name, column, worst, int(over.sum()), len(a), share, example))
    return checks, problems


def compare_run_folders(published: RunFolder, rerun: RunFolder, score: bool = True) -> Comparison:
    """Every record, seed aggregate and (with ``score``) score table of ``published`` against ``rerun``."""
    checks: list[ColumnCheck] = []
    problems: list[str] = []
    pairs: list[tuple[str, Callable[[], pd.DataFrame], Callable[[], pd.DataFrame]]] = [
        ("records", published.read_records, rerun.read_records),
        ("records_seed_aggregated", published.read_aggregate, rerun.read_aggregate),
    ]
    if score:
        for table in SCORE_TABLES:
            pairs.append((f"score_{table}", partial(published.read_score_table, table),
                          partial(rerun.read_score_table, table)))
    for name, read_published, read_rerun in pairs:
        try:
            left = read_published()
        except RunFolderError:
            if name.startswith("score_"):
                continue  # an optional table the published folder does not hold
            raise
        try:
            right = read_rerun()
        except RunFolderError as error:
            problems.append(f"{name}: {error}")
            continue
        table_checks, table_problems = compare_tables(name, left, right)
        checks += table_checks
        problems += table_problems
    recorded = [folder.provenance().get("spec") for folder in (published, rerun)]
    differ = spec_differences(*recorded) if all(isinstance(spec, Mapping) for spec in recorded) else []  # type: ignore[arg-type]
    return Comparison(tuple(checks), tuple(problems), tuple(differ))
