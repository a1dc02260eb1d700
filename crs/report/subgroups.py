"""Who does it fail? The subgroup tables of the score (crs.scoring.subgroups) as report text, tables
and a dot-and-whisker plot per attribute. Every number has its interval, or says why it has none."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crs.report.stability import Table


def _with_interval(value: float, low: float, high: float) -> str:
    if not np.isfinite(value):
        return "n/a"
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{value:.3f} (no interval: fewer than two finite replicates)"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def worst_group_sentences(gaps: pd.DataFrame) -> list[str]:
    """One line per encoder, task, condition and attribute naming the worst group and the gap.

    Worst-group and gap intervals come from one simultaneous box over every group (decisions 0135, 0136),
    so a gap whose interval excludes 0 is a finding whatever the number of groups."""
    lines = []
    for _, row in gaps.iterrows():
        where = f"{row['encoder']} on {row['task']} ({row['condition']}), by {row['attribute']}"
        if not row["n_groups"]:
            lines.append(f"{where}: no group large enough to score (too small: {row['too_small']}).")
            continue
        line = (f"{where}: worst group {row['worst_group']}, AUROC "
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
        if row["too_small"]:
            line += f"; too small to judge: {row['too_small']}"
        lines.append(line + ".")
    return lines


def group_table(groups: pd.DataFrame, min_images: int, min_positives: int, coverage: str | None = None) -> Table:
    """One row per encoder, task, condition, attribute and group: AUROC, calibration, positive rate with intervals."""
    rows = []
    for _, row in groups.iterrows():
        if row["scored"]:
            auroc = _with_interval(row["auroc"], row["auroc_low"], row["auroc_high"])
            calibration = _with_interval(row["calibration"], row["calibration_low"], row["calibration_high"])
        else:
            auroc = calibration = (f"too small ({row['n_images']} images, {row['min_positives']} positives of the "
                                   "rarest label)")
        rate = _with_interval(row["positive_rate"], row["positive_rate_low"], row["positive_rate_high"])
        rows.append((str(row["encoder"]), str(row["task"]), str(row["condition"]), str(row["attribute"]),
                     str(row["group"]), str(row["n_images"]), auroc, calibration, rate))
    return Table(
        f"Per subgroup, at 100\u00a0% labels: macro AUROC, the scored calibration error and the positive rate, each "
        f"with its patient-level bootstrap interval (the score's own replicates). Groups with fewer than {min_images} "
        f"test images or fewer than {min_positives} positives of a label are too small to judge: listed, not scored."
        + (f" {coverage}" if coverage else ""),
        ("encoder", "task", "condition", "attribute", "group", "images", "AUROC", "calibration error", "positive rate"),
        tuple(rows),
    )


def subgroup_plots(groups: pd.DataFrame, colours: Mapping[str, str], folder: Path,
                   level: str = "95 %") -> list[tuple[Path, str]]:
    """One dot-and-whisker PNG per (task, condition, attribute): AUROC per group and encoder with intervals."""
    out = []
    scored = groups[groups["scored"].astype(bool)]
    for (task, condition, attribute), rows in scored.groupby(["task", "condition", "attribute"], sort=True):
        names = sorted(rows["group"].astype(str).unique())
        encoders = list(dict.fromkeys(rows["encoder"].astype(str)))
        fig, ax = plt.subplots(figsize=(2.8 + 1.2 * len(names), 3.2))
        width = 0.8 / max(len(encoders), 1)
        for e, encoder in enumerate(encoders):
            mine = rows[rows["encoder"].astype(str) == encoder].set_index("group").reindex(names)
            x = np.arange(len(names)) - 0.4 + width * (e + 0.5)
            low = (mine["auroc"] - mine["auroc_low"]).clip(lower=0).fillna(0)
            high = (mine["auroc_high"] - mine["auroc"]).clip(lower=0).fillna(0)
            ax.errorbar(x, mine["auroc"], yerr=[low, high], fmt="o", capsize=3, label=encoder,
                        color=colours.get(encoder))
        ax.set_xticks(np.arange(len(names)), names)
        ax.set_ylabel("macro AUROC")
        ax.set_title(f"{task} ({condition}) by {attribute}", fontsize=9)
        ax.axhline(0.5, color="grey", lw=0.6, ls=":")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # never over a point
        fig.tight_layout()
        safe = f"{task}_{condition}_{attribute}".replace(":", "-").replace("/", "-")
        path = folder / f"subgroups_{safe}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append((path, f"Subgroup AUROC by {attribute} on {task} ({condition}), with {level} patient-level intervals."))
    return out


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
