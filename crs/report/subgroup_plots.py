"""Who does it fail? One dot-and-whisker figure per (task, condition, attribute) with at least two
groups large enough to compare: AUROC per group and encoder with intervals, the groups too small to
judge named on the axis without a point (a figure of one group compares nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crs.report.style import report_style, save


def subgroup_plots(groups: pd.DataFrame, colours: Mapping[str, str], folder: Path,
                   level: str = "95 %") -> list[tuple[Path, str]]:
    """The figures, each as (PNG path, caption); none for an attribute with fewer than two scored groups."""
    out = []
    for (task, condition, attribute), rows in groups.groupby(["task", "condition", "attribute"], sort=True):
        scored = rows[rows["scored"].astype(bool)]
        names = sorted(rows["group"].astype(str).unique())
        if scored["group"].nunique() < 2:
            continue
        small = set(rows.loc[~rows["scored"].astype(bool), "group"].astype(str)) - set(scored["group"].astype(str))
        encoders = list(dict.fromkeys(scored["encoder"].astype(str)))
        with report_style():
            fig, ax = plt.subplots(figsize=(2.8 + 1.2 * len(names), 3.2))
            width = 0.8 / max(len(encoders), 1)
            for e, encoder in enumerate(encoders):
                mine = scored[scored["encoder"].astype(str) == encoder].set_index("group").reindex(names)
                x = np.arange(len(names)) - 0.4 + width * (e + 0.5)
                low = (mine["auroc"] - mine["auroc_low"]).clip(lower=0).fillna(0)
                high = (mine["auroc_high"] - mine["auroc"]).clip(lower=0).fillna(0)
                ax.errorbar(x, mine["auroc"], yerr=[low, high], fmt="o", capsize=3, label=encoder,
                            color=colours.get(encoder))
            ax.set_xticks(np.arange(len(names)), [f"{n}\n(too small)" if n in small else n for n in names])
            for label in ax.get_xticklabels():
                if label.get_text().endswith("(too small)"):
                    label.set_color("grey")
            ax.set_ylabel("macro AUROC")
            ax.set_title(f"{task} ({condition})\nby {attribute}", fontsize=9, loc="left")
            ax.axhline(0.5, color="grey", lw=0.6, ls=":")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # never over a point
            safe = f"{task}_{condition}_{attribute}".replace(":", "-").replace("/", "-")
            path = save(fig, folder / f"subgroups_{safe}.png")  # tight bounding box: no title clipped
        out.append((path, f"Subgroup AUROC by {attribute} on {task} ({condition}), with {level} patient-level "
                          "intervals; groups too small to judge are named without a point."))
    return out
