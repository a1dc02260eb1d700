"""The "How stable is this ranking?" section: reference choice, leave-one-encoder-out, weights.

Text and small tables from :class:`crs.scoring.stability.Stability`; the weight figure is drawn by
:func:`crs.report.plots.weight_sensitivity`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.report.tables import percent

MEDIAN = "median"


@dataclass(frozen=True)
class Table:
    """A small display table: caption, column names, rows of strings; a title shown above it, if any."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.rows), columns=list(self.columns))


def _reference_name(choice: str) -> str:
    return "cohort median" if choice == MEDIAN else choice


def reference_table(stability) -> Table:
    """One row per candidate reference: leader, pairs reversed against the page's ranking, own rank."""
    references = stability.references
    rows = []
    for choice, row in references.iterrows():
        own = "" if choice == MEDIAN or not np.isfinite(row["reference_rank"]) else str(int(row["reference_rank"]))
        rows.append((
            _reference_name(str(choice)) + (" (this page)" if bool(row["is_default"]) else ""),
            str(row["leader"]),
            f"{int(row['n_reversed'])} of {int(row['n_pairs'])}",
            f"{row['kendall_tau']:.2f}" if np.isfinite(row["kendall_tau"]) else "n/a",
            own or "—",
        ))  # fmt: skip
    return Table(
        "The ranking under each choice of reference: its leader, the encoder pairs it orders opposite to "
        "this page's ranking, Kendall tau to this page's ranking, and where the reference itself ranks.",
        ("reference", "leader", "pairs reversed", "Kendall tau", "reference's own rank"),
        tuple(rows),
    )


def leave_one_out_table(stability) -> Table:
    """One row per encoder left out: the rest's leader, pairs reversed among them, largest move."""
    rows = []
    for left_out, row in stability.leave_one_out.iterrows():
        if row.get("note"):
            rows.append((str(left_out), "—", "—", str(row["note"])))
            continue
        moved = f"{int(row['max_rank_move'])} ({row['most_moved']})" if row["max_rank_move"] else "0"
        rows.append((str(left_out), str(row["leader"]), f"{int(row['n_reversed'])} of {int(row['n_pairs'])}", moved))
    return Table(
        "Each encoder left out in turn: the leader of the others, pairs of the others that swap order, and the "
        "largest rank move among them (who moved).",
        ("left out", "leader of the rest", "pairs reversed", "largest rank move"),
        tuple(rows),
    )


def stability_text(stability, reference: str) -> str:
    """The section's summary in three sentences: reference, cohort, weights."""
    summary = stability.summary()
    weights = summary["weights"]
    n_references = summary["n_references"]
    n_real = n_references - 1
    parts = [
        "The CRS rests on three choices a reader does not see in the leaderboard: the reference that sets u = 0.5, "
        "the cohort (dominance compares each encoder with the others), and the weights of dominance, balance "
        "and worst axis.",
        f"The leader stays first under {summary['leader_unchanged_under_references']} of {n_references} reference "
        f"choices (each encoder, and the cohort median); a choice reverses at most "
        f"{summary['max_pairs_reversed_by_reference']} encoder pair(s) of this page's ranking, and "
        f"{summary['references_ranking_themselves_first']} of {n_real} encoders rank first when they are the "
        "reference themselves.",
    ]
    if len(stability.leave_one_out):
        if summary["leave_one_out_max_rank_move"] == 0 and summary["leave_one_out_leader_changes"] == 0:
            parts.append("Leaving any one encoder out changes neither who leads the rest nor the order of the others.")
        else:
            parts.append(
                f"Leaving one encoder out changes who leads the rest {summary['leave_one_out_leader_changes']} "
                f"time(s), reverses at most {summary['leave_one_out_max_pairs_reversed']} pair(s) of the others "
                f"and moves one of them by at most {summary['leave_one_out_max_rank_move']} rank(s)."
            )
    parts.append(
        f"Under {weights['n_samples']} Dirichlet draws of the three weights (the data and the reference held "
        f"fixed at the point estimates: this says how much the ranking leans on the weights, not how sure the "
        f"data are; the leading tier says that), the point leader {weights['top']} stays first in "
        f"{percent(weights['share_top_stays_first'])} (mean Kendall tau to this ranking "
        f"{weights['mean_kendall_tau']:.2f})."
    )
    if reference != MEDIAN:
        parts.append(f"This page uses {reference} as the reference; the cohort-median row shows the ranking "
                     "without a real encoder fixed at 0.5.")
    return " ".join(parts)
