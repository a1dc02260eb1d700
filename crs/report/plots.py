"""Report figures (matplotlib, Agg), each saved as PNG; colours from the colour-blind-safe Okabe-Ito palette."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
AXIS_LABELS = {
    "discrimination": "discrimination", "calibration": "calibration",
    "label_efficiency": "label efficiency", "robustness": "robustness",
}


def colours(names: list[str]) -> dict[str, str]:
    return {name: OKABE_ITO[i % len(OKABE_ITO)] for i, name in enumerate(names)}


def axis_profiles(crs_table: pd.DataFrame, path: Path) -> Path:
    """Grouped bars of u per axis for each encoder, with the reference level 0.5 marked."""
    axes = [a for a in AXIS_LABELS if f"u_{a}" in crs_table]
    encoders = crs_table.sort_values("rank").index.tolist()
    palette = colours(encoders)
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    width = 0.8 / max(len(encoders), 1)
    for i, encoder in enumerate(encoders):
        values = [crs_table.loc[encoder, f"u_{a}"] for a in axes]
        ax.bar(np.arange(len(axes)) + i * width - 0.4 + width / 2, values, width, label=encoder, color=palette[encoder])
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1, label="reference (0.5)")
    ax.set_xticks(np.arange(len(axes)), [AXIS_LABELS[a] for a in axes])
    ax.set_ylabel("reference-relative score u (higher is better)")
    ax.set_ylim(0, 1)
    ax.set_title("Axis profile per encoder")
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def rank_slope(crs_table: pd.DataFrame, path: Path) -> Path:
    """Slope chart: each encoder's AUROC rank (left) against its CRS rank (right); crossings are reversals."""
    encoders = crs_table.index.tolist()
    palette = colours(crs_table.sort_values("rank").index.tolist())
    fig, ax = plt.subplots(figsize=(5.5, 4.2), dpi=110)
    for encoder in encoders:
        left, right = crs_table.loc[encoder, "auroc_rank"], crs_table.loc[encoder, "rank"]
        ax.plot([0, 1], [left, right], marker="o", color=palette[encoder], linewidth=2)
        ax.annotate(encoder, (1.03, right), va="center", fontsize=8)
    ax.set_xticks([0, 1], ["AUROC rank", "CRS rank"])
    ax.set_xlim(-0.2, 1.6)
    ax.set_ylim(len(encoders) + 0.5, 0.5)
    ax.set_ylabel("rank (1 = best)")
    ax.set_title("Does clean AUROC pick the same encoder?")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def label_efficiency_curves(records: pd.DataFrame, path: Path) -> Path:
    """Clean AUROC against label fraction (log scale), one panel per task, mean over seeds."""
    clean = records[records["condition"] == "clean"]
    tasks = sorted(clean["task"].unique())
    encoders = sorted(clean["encoder"].unique())
    palette = colours(encoders)
    fig, panels = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), dpi=110, squeeze=False)
    for ax, task in zip(panels[0], tasks, strict=True):
        rows = clean[clean["task"] == task]
        for encoder in encoders:
            curve = rows[rows["encoder"] == encoder].groupby("label_fraction")["auroc"].agg(["mean", "std"])
            ax.errorbar(curve.index * 100, curve["mean"], yerr=curve["std"], marker="o", capsize=2,
                        label=encoder, color=palette[encoder])
        ax.set_xscale("log")
        ax.set_xlabel("label fraction (%)")
        ax.set_ylabel("macro AUROC (clean test)")
        ax.set_title(task)
        ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    panels[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def severity_curves(records: pd.DataFrame, path: Path) -> Path:
    """AUROC (100 % labels, mean over corruptions and seeds) against severity, one panel per task."""
    full = records[records["label_fraction"] == records["label_fraction"].max()]
    tasks = sorted(full["task"].unique())
    encoders = sorted(full["encoder"].unique())
    palette = colours(encoders)
    fig, panels = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), dpi=110, squeeze=False)
    for ax, task in zip(panels[0], tasks, strict=True):
        rows = full[full["task"] == task]
        for encoder in encoders:
            mine = rows[rows["encoder"] == encoder]
            clean = mine[mine["condition"] == "clean"]["auroc"].mean()
            by_severity = mine[mine["condition"] == "corrupt"].groupby("severity")["auroc"].mean()
            xs = [0, *by_severity.index.tolist()]
            ax.plot(xs, [clean, *by_severity.tolist()], marker="o", label=encoder, color=palette[encoder])
        ax.set_xlabel("corruption severity (0 = clean)")
        ax.set_ylabel("macro AUROC")
        ax.set_title(task)
    panels[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
