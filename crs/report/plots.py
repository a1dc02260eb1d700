"""Figures of the score: axis profiles, Pareto views, AUROC-vs-CRS ranks, bootstrap ranks, weights.

Every function takes tables from :class:`crs.scoring.result.ScoreResult`, an encoder -> style map, and a
PNG path; it returns the path. Figures about the run records live in ``plots_runs``.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crs.evaluate.contest import Contest, contest_of
from crs.report.style import AXIS_TITLES, REFERENCE_GREY, EncoderStyle, report_style, save
from crs.scoring.formula import rank_descending


def axis_profiles(crs_table: pd.DataFrame, styles: dict[str, EncoderStyle], path: Path,
                  reference: str = "", contest: Contest | None = None) -> Path:
    """Small multiples: one panel per encoder, u per axis as bars, the reference level 0.5 dashed. Titles
    carry the rank among the contestants (``contest``: crs.evaluate.contest; the baseline row has none)."""
    contest = contest or contest_of(crs_table, reference)
    axes = [a for a in AXIS_TITLES if f"u_{a}" in crs_table]
    encoders = crs_table.sort_values(["rank", "auroc_rank"]).index.tolist()
    columns = min(len(encoders), 4)
    rows = math.ceil(len(encoders) / columns)
    with report_style():
        fig, panels = plt.subplots(rows, columns, figsize=(2.6 * columns, 0.55 * len(axes) * rows + 1.1 * rows),
                                   squeeze=False, sharex=True)
        for ax, encoder in zip(panels.flat, encoders, strict=False):
            values = [float(crs_table.loc[encoder, f"u_{a}"]) for a in axes]
            worst = int(np.argmin(values))
            bars = ax.barh(range(len(axes)), values, color=styles[encoder].colour, height=0.65)
            if max(values) - min(values) > 1e-9:  # an even profile (the reference) has no worst axis to mark
                bars[worst].set_hatch("//")
                bars[worst].set_edgecolor("black")
            for y, value in enumerate(values):
                ax.text(min(value + 0.02, 0.86), y, f"{value:.2f}", va="center", fontsize=9)
            ax.axvline(0.5, color=REFERENCE_GREY, linestyle="--", linewidth=1)
            ax.set_yticks(range(len(axes)), [AXIS_TITLES[a] for a in axes])
            ax.invert_yaxis()
            ax.set_xlim(0, 1)
            ax.grid(axis="y", visible=False)
            label = f"{encoder}{' (reference)' if encoder == reference else ''}"  # "median": no encoder marked
            place = contest.rank_label(str(encoder))
            place = "baseline row, not ranked" if place == "baseline" else f"rank {place}"
            ax.set_title(f"{label}\nCRS {crs_table.loc[encoder, 'crs']:.3f}, {place}", fontsize=10)
        for ax in list(panels.flat)[len(encoders):]:
            ax.set_visible(False)
        for ax in panels[-1]:
            ax.set_xlabel("u (0.5 = reference, 1 = perfect)")
        level = "cohort median" if reference == "median" else "reference encoder"
        fig.suptitle(f"Axis profile per encoder (hatched bar = worst axis; dashed line = {level})", fontsize=11)
        fig.tight_layout()
        return save(fig, path)


def _front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of points no other point beats on both x and y (both higher-is-better), sorted by x."""
    keep = [i for i in range(len(x))
            if not any((x[j] >= x[i]) and (y[j] >= y[i]) and ((x[j] > x[i]) or (y[j] > y[i])) for j in range(len(x)))]
    return np.array(sorted(keep, key=lambda i: x[i]), dtype=int)


LABEL_OFFSETS = ((6, 4, "left"), (6, -12, "left"), (-6, 4, "right"), (-6, -12, "right"), (0, 9, "center"),
                 (0, -17, "center"))


def place_labels(ax, x: np.ndarray, y: np.ndarray, names: list[str], fontsize: int = 8) -> None:
    """Name each point, trying a few offsets so a label covers neither another label nor another marker."""
    ax.figure.canvas.draw()  # fixes the limits, so data -> pixel positions are final
    points = ax.transData.transform(np.column_stack([x, y]))
    points_per_pixel = 72.0 / ax.figure.dpi
    taken = [(px - 6, py - 6, px + 6, py + 6) for px, py in points]  # the markers, in pixels
    for i, name in enumerate(names):
        width, height = 0.62 * fontsize * len(name) / points_per_pixel, 1.2 * fontsize / points_per_pixel
        choice = LABEL_OFFSETS[0]
        for dx, dy, align in LABEL_OFFSETS:
            left = points[i][0] + dx / points_per_pixel - {"left": 0, "right": width, "center": width / 2}[align]
            bottom = points[i][1] + dy / points_per_pixel
            box = (left, bottom, left + width, bottom + height)
            others = [t for j, t in enumerate(taken) if j != i]
            if not any(box[0] < t[2] and t[0] < box[2] and box[1] < t[3] and t[1] < box[3] for t in others):
                choice = (dx, dy, align)
                taken.append(box)
                break
        dx, dy, align = choice
        ax.annotate(name, (x[i], y[i]), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, ha=align)


def pareto_views(values: pd.DataFrame, styles: dict[str, EncoderStyle], path: Path) -> Path:
    """Discrimination (x) against each other axis (y), in each axis's own units, best toward the top right.

    ``values``: per encoder, columns auroc, calibration_error, label_auroc, robust_auroc
    (crs.report.tables.axis_values).
    The grey step line joins the encoders not beaten on both axes of that panel.
    """
    others = [(column, label, higher) for column, label, higher in (
        ("calibration_error", "calibration: RMS calibration error (axis flipped)", False),
        ("label_auroc", "label efficiency: AUROC below 100 % labels", True),
        ("robust_auroc", "robustness: AUROC corrupted / shifted", True),
    ) if column in values and values[column].notna().any()]
    encoders = values.index.tolist()
    x = values["auroc"].to_numpy(dtype=float)
    with report_style():
        fig, panels = plt.subplots(1, len(others), figsize=(3.4 * len(others), 3.6), squeeze=False)
        for ax, (column, label, higher) in zip(panels[0], others, strict=True):
            y = values[column].to_numpy(dtype=float)
            front = _front(x, y if higher else -y)
            ax.step(x[front], y[front], where="post", color=REFERENCE_GREY, linewidth=1.2, alpha=0.7,
                    label="Pareto front")
            for i, encoder in enumerate(encoders):
                style = styles[encoder]
                ax.scatter(x[i], y[i], color=style.colour, marker=style.marker, s=70, edgecolor="black",
                           linewidth=0.5, zorder=3, label=encoder)
            if not higher:
                ax.invert_yaxis()
            ax.set_xlabel("discrimination: macro AUROC (clean)")
            ax.set_ylabel(label)
            ax.margins(0.2)
            place_labels(ax, x, y, encoders)
        fig.suptitle("Pareto view: discrimination against each other axis (better = up and right; "
                     "grey line = Pareto front)", fontsize=11)
        fig.tight_layout()
        return save(fig, path)


def rank_slope(crs_table: pd.DataFrame, found, styles: dict[str, EncoderStyle], path: Path,
               contest: Contest) -> Path:
    """Slope chart of AUROC rank (left) against CRS rank (right) among the contestants (``contest``; a named
    reference that does not compete is left out), from :class:`crs.scoring.reversals.ContestReversals`
    ``found``: encoders in a reversed pair drawn solid, the title counting those held with confidence."""
    reversed_names = {name for pair in found.reversed_pairs for name in pair}
    encoders = list(contest.contestants)
    n = max(len(encoders), 1)
    with report_style():
        fig, ax = plt.subplots(figsize=(6.4, 0.45 * n + 2.2))
        for encoder in encoders:
            left, right = contest.auroc_rank[encoder], contest.rank[encoder]
            involved = encoder in reversed_names
            style = styles[encoder]
            ax.plot([0, 1], [left, right], color=style.colour, marker=style.marker, markersize=8,
                    linewidth=2.6 if involved else 1.2, linestyle="-" if involved else ":", alpha=1 if involved else 0.7)
            ax.annotate(encoder, (-0.04, left), ha="right", va="center", fontsize=9)
            ax.annotate(f"{encoder}  (CRS {crs_table.loc[encoder, 'crs']:.3f})", (1.04, right), va="center",
                        fontsize=9, fontweight="bold" if involved else "normal")
        ax.set_xticks([0, 1], ["rank by clean AUROC", "rank by CRS"])
        ax.set_xlim(-0.9, 1.9)
        ax.set_ylim(n + 0.6, 0.4)
        ax.set_yticks(range(1, n + 1))
        ax.set_ylabel("rank among the candidates (1 = best)")
        ax.grid(axis="x", visible=False)
        left_out = f"; {contest.baseline}, the baseline row, left out" if contest.baseline else ""
        ax.set_title(f"AUROC rank vs CRS rank: {found.n_reversed} of {found.n_pairs} pairs reversed, "
                     f"{found.n_confident} with confidence\n(solid lines: encoders whose order flips{left_out})",
                     fontsize=10)
        fig.tight_layout()
        return save(fig, path)


def share_label(share: float) -> str:
    """'23%'; a share that rounds to 0 % or 100 % but is not reads '<1%' or '>99%', so no cell claims never or always."""
    text = f"{share:.0%}"
    if text == "0%" and share > 0.0:
        return "<1%"
    if text == "100%" and share < 1.0:
        return ">99%"
    return text


def bootstrap_ranks(replicates: pd.DataFrame, order: list[str], path: Path, level: str = "paired-seed") -> Path:
    """Heat map of P(rank = k) per encoder over the bootstrap replicates; ``level`` names the bootstrap in the title."""
    crs = replicates[order].to_numpy(dtype=float)
    ranks = rank_descending(crs)
    n = len(order)
    share = np.stack([(ranks == k).mean(axis=0) for k in range(1, n + 1)], axis=1)  # (encoders, ranks)
    with report_style():
        fig, ax = plt.subplots(figsize=(1.0 * n + 3.2, 0.5 * n + 1.8))
        image = ax.imshow(share, cmap="cividis", vmin=0, vmax=1, aspect="auto")
        for i in range(n):
            for k in range(n):
                if share[i, k] > 0:
                    ax.text(k, i, share_label(share[i, k]), ha="center", va="center", fontsize=9,
                            color="black" if share[i, k] > 0.55 else "white")
        ax.set_xticks(range(n), [str(k) for k in range(1, n + 1)])
        ax.set_yticks(range(n), order)
        ax.set_xlabel("CRS rank in the bootstrap replicate (1 = best)")
        ax.grid(False)
        fig.colorbar(image, ax=ax, label="share of replicates")
        ax.set_title(f"Bootstrap rank distribution ({len(replicates)} {level} replicates)", fontsize=10)
        fig.tight_layout()
        return save(fig, path)


def weight_sensitivity(sensitivity, styles: dict[str, EncoderStyle], path: Path) -> Path:
    """Left: share of Dirichlet weight draws in which each encoder ranks first. Right: Kendall tau to the default."""
    table = sensitivity.table.sort_values("default_rank")
    encoders = table.index.tolist()
    taus = np.asarray(sensitivity.kendall_taus, dtype=float)
    taus = taus[np.isfinite(taus)]
    with report_style():
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 0.4 * len(encoders) + 2.6))
        left.barh(range(len(encoders)), table["share_rank1"] * 100, color=[styles[e].colour for e in encoders])
        for y, (share, mean_rank) in enumerate(zip(table["share_rank1"], table["mean_rank"], strict=True)):
            left.text(share * 100 + 1, y, f"{share:.0%} (mean rank {mean_rank:.1f})", va="center", fontsize=8)
        left.set_yticks(range(len(encoders)), encoders)
        left.invert_yaxis()
        left.set_xlim(0, 135)
        left.set_xlabel("weight draws in which it ranks first (%)")
        left.set_title("Who leads under other CRS weights?", fontsize=10)
        left.grid(axis="y", visible=False)
        if taus.size:
            right.hist(taus, bins=np.linspace(-1, 1, 21), color="#0072B2", edgecolor="white")
            right.axvline(np.mean(taus), color="#D55E00", linewidth=2, label=f"mean {np.mean(taus):.2f}")
            right.legend()
        else:
            right.text(0.5, 0.5, "Kendall tau undefined\n(fewer than two distinct scores)", ha="center",
                       va="center", transform=right.transAxes)
        right.set_xlim(-1.05, 1.05)
        right.set_xlabel("Kendall tau between the drawn and the default ranking")
        right.set_ylabel("weight draws (count)")
        right.set_title("How much does the ranking move?", fontsize=10)
        fig.suptitle(f"Weight sensitivity: {sensitivity.n_samples} Dirichlet({sensitivity.concentration:g}) draws of "
                     "(dominance, balance, worst-axis) weights", fontsize=11)
        fig.tight_layout()
        return save(fig, path)
