"""Reliability cards: one encoder's tier, axes with intervals, provenance, and its weakest point in words.

The sentence for the worst axis names the concrete condition behind it, found in the run records:
the corruption and severity (or the shifted site) that cost the most above-chance AUROC, the task
with the worst calibration or discrimination, or the smallest label fraction's share of the
full-label AUROC.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.report.provenance import ExposureFlag, Provenance
from crs.report.tables import format_interval, percent

CHANCE = 0.5
DENOMINATOR_FLOOR = 0.05  # as the retention axis: no wild ratios from probes near chance


@dataclass(frozen=True)
class Card:
    encoder: str
    rank: int
    crs: str
    tier: str
    p_rank1: float
    axes: tuple[tuple[str, str, str, float], ...]  # (axis label, value, interval, u)
    worst_axis: str
    worst_sentence: str
    provenance: Provenance
    flags: tuple[ExposureFlag, ...]


def split_interval(text: str) -> tuple[str, str]:
    """'0.812 [0.801, 0.824]' -> ('0.812', '[0.801, 0.824]')."""
    value, _, interval = text.partition(" ")
    return value, interval


def _full(records: pd.DataFrame) -> pd.DataFrame:
    return records[np.isclose(records["label_fraction"].astype(float), records["label_fraction"].astype(float).max())]


def _above_chance_share(value: float, clean: float) -> float:
    return (value - CHANCE) / max(clean - CHANCE, DENOMINATOR_FLOOR)


def worst_robustness(records: pd.DataFrame, encoder: str) -> str:
    """'loses 31 % of its above-chance AUROC under motion blur at severity 4 (derm)'."""
    mine = _full(records[records["encoder"] == encoder])
    clean = mine[mine["condition"] == "clean"].groupby("task")["auroc"].mean()
    candidates = []
    corrupt = mine[mine["condition"] == "corrupt"]
    if len(corrupt):
        by_condition = corrupt.groupby(["task", "corruption", "severity"])["auroc"].mean()
        for (task, name, severity), value in by_condition.items():
            loss = 1.0 - _above_chance_share(value, clean.get(task, np.nan))
            candidates.append((loss, f"under {str(name).replace('_', ' ')} at severity {int(severity)} ({task})"))
    shift = mine[mine["condition"] == "shift"]
    if len(shift):
        for (task, target), value in shift.groupby(["task", "target"])["auroc"].mean().items():
            loss = 1.0 - _above_chance_share(value, clean.get(task, np.nan))
            candidates.append((loss, f"on the shifted site {target} ({task} probe)"))
    candidates = [(loss, where) for loss, where in candidates if np.isfinite(loss)]
    if not candidates:
        return "robustness could not be measured (no corrupted or shifted evaluations)"
    loss, where = max(candidates, key=lambda item: item[0])
    if loss <= 0:
        return f"keeps all of its above-chance AUROC even in its hardest condition, {where}"
    return f"loses {percent(min(loss, 1.0))} of its above-chance AUROC {where}"


def worst_calibration(records: pd.DataFrame, encoder: str, reference_ece: float | None) -> str:
    clean = _full(records[(records["encoder"] == encoder) & (records["condition"] == "clean")])
    per_task = clean.groupby("task")["ece"].mean()
    if per_task.empty or per_task.isna().all():
        return "calibration could not be measured"
    task = per_task.idxmax()
    mean = per_task.mean()
    against = f"; reference {reference_ece:.3f}" if reference_ece is not None and np.isfinite(reference_ece) else ""
    return (f"has probabilities off by {mean:.3f} on average (ECE{against}), "
            f"worst on {task} at {per_task[task]:.3f}")


def worst_discrimination(records: pd.DataFrame, encoder: str, reference_auroc: float | None) -> str:
    clean = _full(records[(records["encoder"] == encoder) & (records["condition"] == "clean")])
    per_task = clean.groupby("task")["auroc"].mean()
    if per_task.empty:
        return "discrimination could not be measured"
    task = per_task.idxmin()
    against = f" (reference {reference_auroc:.3f})" if reference_auroc is not None and np.isfinite(reference_auroc) else ""
    return (f"separates the classes least well of its axes: macro AUROC {per_task.mean():.3f}{against}, "
            f"lowest on {task} at {per_task[task]:.3f}")


def worst_label_efficiency(records: pd.DataFrame, encoder: str) -> str:
    clean = records[(records["encoder"] == encoder) & (records["condition"] == "clean")]
    fractions = sorted(clean["label_fraction"].astype(float).unique())
    if len(fractions) < 2:
        return "label efficiency needs at least two label fractions"
    curve = clean.groupby(["task", "label_fraction"])["auroc"].mean()
    smallest, full = fractions[0], fractions[-1]
    shares = {}
    for task in clean["task"].unique():
        shares[task] = _above_chance_share(curve.get((task, smallest), np.nan), curve.get((task, full), np.nan))
    shares = {task: share for task, share in shares.items() if np.isfinite(share)}
    if not shares:
        return "label efficiency could not be measured"
    task = min(shares, key=lambda name: shares[name])
    return (f"keeps only {percent(max(shares[task], 0.0))} of its full-label above-chance AUROC "
            f"with {percent(smallest)} of the labels on {task}")


def worst_axis_sentence(axis: str, records: pd.DataFrame, encoder: str, reference: str) -> str:
    """The encoder's weakest axis, said in words about the condition that makes it weak."""
    def reference_mean(column: str) -> float | None:
        rows = _full(records[(records["encoder"] == reference) & (records["condition"] == "clean")])
        return float(rows.groupby("task")[column].mean().mean()) if len(rows) and encoder != reference else None

    if axis == "robustness":
        return worst_robustness(records, encoder)
    if axis == "calibration":
        return worst_calibration(records, encoder, reference_mean("ece"))
    if axis == "discrimination":
        return worst_discrimination(records, encoder, reference_mean("auroc"))
    if axis == "label_efficiency":
        return worst_label_efficiency(records, encoder)
    return f"worst axis {axis}"


def build_cards(score, records: pd.DataFrame, board: pd.DataFrame, provenance: dict[str, Provenance],
                flags: dict[str, list[ExposureFlag]]) -> list[Card]:
    """One card per encoder, in leaderboard order."""
    labels = {"auroc": "discrimination (macro AUROC)", "ece": "calibration (ECE, lower is better)",
              "label_efficiency": "label efficiency (area)", "retention": "robustness (AUROC retention)"}
    u_columns = {"auroc": "u_discrimination", "ece": "u_calibration", "label_efficiency": "u_label_efficiency",
                 "retention": "u_robustness"}
    cards = []
    for row in board.itertuples(index=False):
        axes = tuple(
            (label, *split_interval(format_interval(getattr(row, value), getattr(row, f"{value}_low"),
                                                    getattr(row, f"{value}_high"))),
             float(getattr(row, u_columns[value], np.nan)))
            for value, label in labels.items()
        )
        worst = str(score.crs.loc[row.encoder, "worst_axis_name"])
        cards.append(Card(
            encoder=row.encoder, rank=int(row.rank), crs=format_interval(row.crs, row.crs_low, row.crs_high),
            tier="leading tier" if row.tier else "outside the leading tier", p_rank1=float(row.p_rank1),
            axes=axes, worst_axis=worst.replace("_", " "),
            worst_sentence=worst_axis_sentence(worst, records, row.encoder, score.reference),
            provenance=provenance[row.encoder], flags=tuple(flags.get(row.encoder, ())),
        ))
    return cards
