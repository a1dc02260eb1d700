"""Who does it fail? The subgroup tables of the score (crs.scoring.subgroups) as report text and
tables: the findings first (gaps whose interval excludes 0), a one-line summary, then every row.
Every number has its interval, or says why it has none. The figures are crs.report.subgroup_plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crs.report.stability import Table

TWO_INTERVALS = ("Why a group can show two intervals: a worst-group interval is the worst group's statistic "
                 "recomputed in every replicate (whichever group is lowest there), which allows for the group "
                 "having been picked after looking; the per-group table gives that group's own interval.")
"""Said where both appear (the worst-group lines and the per-group table), issue 39 item 19."""


def _with_interval(value: float, low: float, high: float) -> str:
    if not np.isfinite(value):
        return "n/a"
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{value:.3f} (no interval: fewer than two finite replicates)"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _where(row: pd.Series) -> str:
    return f"{row['encoder']} on {row['task']} ({row['condition']}), by {row['attribute']}"


def _findings(gaps: pd.DataFrame) -> list[tuple[float, pd.Series, str]]:
    """(size, row, kind) of every gap whose simultaneous interval excludes 0, largest first; kind is
    "auroc" or "calibration" (decision 0062: such a gap is a finding whatever the number of groups)."""
    found = []
    for _, row in gaps.iterrows():
        if row["n_groups"] < 2:
            continue
        if float(row.get("auroc_gap_low", np.nan)) > 0:
            found.append((float(row["auroc_gap"]), row, "auroc"))
        if float(row.get("calibration_gap_low", np.nan)) > 0:
            found.append((float(row["calibration_gap"]), row, "calibration"))
    return sorted(found, key=lambda item: -item[0])


def finding_sentences(gaps: pd.DataFrame) -> list[str]:
    """One sentence per real finding (a gap whose interval excludes 0), largest gap first."""
    out = []
    for _, row, kind in _findings(gaps):
        if kind == "auroc":
            best = float(row["worst_auroc"]) + float(row["auroc_gap"])
            out.append(f"{_where(row)}: AUROC {row['worst_auroc']:.3f} for {row['worst_group']} against {best:.3f} "
                       f"for {row['best_group']}; gap "
                       f"{_with_interval(row['auroc_gap'], row['auroc_gap_low'], row['auroc_gap_high'])}, "
                       "interval excludes 0.")
        else:
            out.append(f"{_where(row)}: calibration error higher for {row['worst_calibrated_group']} than for "
                       f"{row['best_calibrated_group']} by "
                       f"{_with_interval(row['calibration_gap'], row['calibration_gap_low'], row['calibration_gap_high'])}"
                       ", interval excludes 0.")
    return out


def _too_small(groups: pd.DataFrame) -> pd.DataFrame:
    """The groups too small to judge, once each (the same groups are too small for every encoder)."""
    small = groups[~groups["scored"].astype(bool)]
    return small.drop_duplicates(["task", "condition", "attribute", "group"]).sort_values(
        ["task", "condition", "attribute", "group"])


def summary_line(gaps: pd.DataFrame, groups: pd.DataFrame) -> str:
    """The section's first line: how many findings, how many rows compare groups, how many groups are too small."""
    found = _findings(gaps)
    lead = (f"{len(found)} finding{'s' if len(found) != 1 else ''}: a gap between subgroups whose interval excludes 0 "
            "(below)." if found else "No finding: no AUROC or calibration gap between subgroups has an interval that "
            "excludes 0.")
    groups_per_row = gaps["n_groups"].astype(int)
    compared, one, none = int((groups_per_row > 1).sum()), int((groups_per_row == 1).sum()), int((groups_per_row == 0).sum())
    small = len(_too_small(groups))
    return (f"{lead} Of {len(gaps)} encoder \u00d7 task \u00d7 condition \u00d7 attribute rows, {compared} compare two or "
            f"more groups, {one} have one group large enough to score (no gap) and {none} have none; "
            f"{small} group{'s are' if small != 1 else ' is'} too small to judge (listed at the end).")


def opening_line(gaps: pd.DataFrame) -> str:
    """One line for the report's opening summary: the real subgroup findings, or that there are none."""
    found = _findings(gaps)
    compared = int((gaps["n_groups"].astype(int) > 1).sum())
    if not compared:
        return ("Who does it fail? No two subgroups could be compared: no attribute has two groups large enough to "
                "score.")
    if not found:
        return (f"Who does it fail? No subgroup gap is clear of noise ({compared} comparisons of two or more "
                "groups; no gap's interval excludes 0).")
    named = []
    for _, row, kind in found[:2]:
        if kind == "auroc":
            named.append(f"{row['encoder']} on {row['task']} ({row['condition']}) does worse for {row['worst_group']} "
                         f"than for {row['best_group']} (AUROC gap "
                         f"{_with_interval(row['auroc_gap'], row['auroc_gap_low'], row['auroc_gap_high'])})")
        else:
            named.append(f"{row['encoder']} on {row['task']} ({row['condition']}) is worse calibrated for "
                         f"{row['worst_calibrated_group']} than for {row['best_calibrated_group']} (gap "
                         f"{_with_interval(row['calibration_gap'], row['calibration_gap_low'], row['calibration_gap_high'])})")
    more = f"; and {len(found) - 2} more" if len(found) > 2 else ""
    return (f"Who does it fail? {len(found)} subgroup finding{'s' if len(found) != 1 else ''} (an interval that "
            f"excludes 0): {'; '.join(named)}{more}.")


def worst_group_sentences(gaps: pd.DataFrame) -> list[str]:
    """One line per encoder, task, condition and attribute with a group large enough to score, naming
    the worst group and the gaps (the rows without one are counted in :func:`summary_line`, their
    groups listed once by :func:`too_small_lines`).

    Worst-group and gap intervals come from one simultaneous box over every group (decisions 0135, 0136),
    so a gap whose interval excludes 0 is a finding whatever the number of groups."""
    lines = []
    for _, row in gaps.iterrows():
        if not row["n_groups"]:
            continue
        line = (f"{_where(row)}: worst group {row['worst_group']}, worst-group AUROC "
                f"{_with_interval(row['worst_auroc'], row['worst_auroc_low'], row['worst_auroc_high'])}")
        if row["n_groups"] > 1:
            excludes = bool(row["auroc_gap_low"] > 0)
            line += (f"; AUROC gap to {row['best_group']} "
                     f"{_with_interval(row['auroc_gap'], row['auroc_gap_low'], row['auroc_gap_high'])}"
                     f"{' (interval excludes 0)' if excludes else ''}; calibration gap "
                     f"{_with_interval(row['calibration_gap'], row['calibration_gap_low'], row['calibration_gap_high'])}"
                     f" ({row['worst_calibrated_group']} vs {row['best_calibrated_group']})")
        else:
            line += "; no gap: only one group large enough to score"
        lines.append(line + ".")
    return lines


def too_small_lines(groups: pd.DataFrame) -> list[str]:
    """One line per task, condition and attribute naming its groups too small to judge, with their sizes."""
    lines = []
    for (task, condition, attribute), rows in _too_small(groups).groupby(["task", "condition", "attribute"], sort=True):
        named = ", ".join(f"{row['group']} ({row['n_images']} images, {row['min_positives']} positives)"
                          for _, row in rows.iterrows())
        lines.append(f"{task} ({condition}), by {attribute}: {named}.")
    return lines


def group_table(groups: pd.DataFrame, min_images: int, min_positives: int, coverage: str | None = None) -> Table:
    """One row per encoder, task, condition, attribute and scored group: AUROC, calibration, positive
    rate with intervals (the groups too small to judge are listed once, by :func:`too_small_lines`)."""
    rows = []
    for _, row in groups[groups["scored"].astype(bool)].iterrows():
        auroc = _with_interval(row["auroc"], row["auroc_low"], row["auroc_high"])
        calibration = _with_interval(row["calibration"], row["calibration_low"], row["calibration_high"])
        rate = _with_interval(row["positive_rate"], row["positive_rate_low"], row["positive_rate_high"])
        rows.append((str(row["encoder"]), str(row["task"]), str(row["condition"]), str(row["attribute"]),
                     str(row["group"]), str(row["n_images"]), auroc, calibration, rate))
    return Table(
        f"Per subgroup, at 100\u00a0% labels: macro AUROC, the scored calibration error and the positive rate, each "
        f"with its patient-level bootstrap interval (the score's own replicates). Groups with fewer than {min_images} "
        f"test images or fewer than {min_positives} positives of a label are too small to judge: listed below, not "
        f"scored. {TWO_INTERVALS}" + (f" {coverage}" if coverage else ""),
        ("encoder", "task", "condition", "attribute", "group", "images", "AUROC", "calibration error", "positive rate"),
        tuple(rows),
    )


def card_lines(gaps: pd.DataFrame, encoder: str) -> list[str]:
    """Subgroup lines of one encoder's reliability card: the worst clean group per task and attribute."""
    mine = gaps[(gaps["encoder"].astype(str) == encoder) & (gaps["condition"] == "clean") & (gaps["n_groups"] > 0)]
    return [f"{row['task']}, {row['attribute']}: worst {row['worst_group']} "
            f"{_with_interval(row['worst_auroc'], row['worst_auroc_low'], row['worst_auroc_high'])}"
            for _, row in mine.iterrows()]


def equity_table(stability: pd.DataFrame) -> Table:
    """With and without the equity axis: per encoder its worst-group AUROC and its CRS and rank both ways."""
    rows = tuple(
        (str(name), f"{row['worst_group_auroc']:.3f}", f"{row['crs_with_equity']:.3f}", str(int(row["rank_with_equity"])),
         f"{row['crs_without_equity']:.3f}", str(int(row["rank_without_equity"])))
        for name, row in stability.sort_values("rank_with_equity").iterrows()
    )
    return Table(
        "The equity axis (worst-group AUROC, mean over tasks and subgroup attributes) is on: CRS and rank with it, "
        "and the four-axis CRS and rank without it (same errors, floors and reference).",
        ("encoder", "worst-group AUROC", "CRS with equity", "rank", "CRS without", "rank without"), rows,
        title="With and without equity",
    )
