"""Reliability cards: one encoder's tier, axes with intervals, provenance, and its weakest point in words.

The sentence for the worst axis names the concrete condition behind it, found in the run records:
the corruption and severity (or the shifted site) that cost the most above-chance AUROC, the task
with the worst calibration or discrimination, or the AUROC at the smallest label fraction. Ratios
appear in these sentences as explanations only; the axes themselves are absolute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.report.provenance import ExposureFlag, Provenance
from crs.report.tables import AXIS_DESCRIPTIONS, AXIS_VALUES, format_interval, percent

CHANCE = 0.5
DENOMINATOR_FLOOR = 0.05  # as the retention axis: no wild ratios from probes near chance


@dataclass(frozen=True)
class Card:
    encoder: str
    rank: int | str
    """Rank among the competing encoders ("1–k" for a member of a shared lead: crs.evaluate.contest); 0 or ""
    for a named reference's baseline card."""
    crs: str
    tier: str
    p_rank1: float
    axes: tuple[tuple[str, str, str, float], ...]  # (axis label, value, interval, u)
    worst_axis: str
    worst_sentence: str
    provenance: Provenance
    flags: tuple[ExposureFlag, ...]
    scope: str = ""
    """Where rank and tier hold: "" for the page's leaderboard, "fundus leaderboard" for a specialist's task."""
    subgroups: tuple[str, ...] = ()
    """Worst clean subgroup per task and attribute, with its interval (crs.report.subgroups.card_lines)."""


def split_interval(text: str) -> tuple[str, str]:
    """'0.812 [0.801, 0.824]' -> ('0.812', '[0.801, 0.824]')."""
    value, _, interval = text.partition(" ")
    return value, interval


def _full(records: pd.DataFrame) -> pd.DataFrame:
    return records[np.isclose(records["label_fraction"].astype(float), records["label_fraction"].astype(float).max())]


def _above_chance_share(value: float, clean: float) -> float:
    return (value - CHANCE) / max(clean - CHANCE, DENOMINATOR_FLOOR)


def worst_robustness(records: pd.DataFrame, encoder: str) -> str:
    """'falls from AUROC 0.900 to 0.776 under motion blur at severity 4 (derm), 31 % of its above-chance AUROC lost'.

    The condition shown is the one that costs the largest share of the clean above-chance AUROC; the
    scored robustness axis is the mean AUROC over every condition.
    """
    mine = _full(records[records["encoder"] == encoder])
    clean = mine[mine["condition"] == "clean"].groupby("task")["auroc"].mean()
    candidates = []
    corrupt = mine[mine["condition"] == "corrupt"]
    if len(corrupt):
        by_condition = corrupt.groupby(["task", "corruption", "severity"])["auroc"].mean()
        for (task, name, severity), value in by_condition.items():
            loss = 1.0 - _above_chance_share(value, clean.get(task, np.nan))
            where = f"under {str(name).replace('_', ' ')} at severity {int(severity)} ({task})"
            candidates.append((loss, value, clean.get(task, np.nan), where))
    shift = mine[mine["condition"] == "shift"]
    if len(shift):
        for (task, target), value in shift.groupby(["task", "target"])["auroc"].mean().items():
            loss = 1.0 - _above_chance_share(value, clean.get(task, np.nan))
            candidates.append((loss, value, clean.get(task, np.nan), f"on the shifted site {target} ({task} probe)"))
    candidates = [candidate for candidate in candidates if np.isfinite(candidate[0])]
    if not candidates:
        return "robustness could not be measured (no corrupted or shifted evaluations)"
    loss, value, before, where = max(candidates, key=lambda item: item[0])
    if loss <= 0:
        return f"keeps all of its above-chance AUROC even in its hardest condition, {where} (AUROC {value:.3f})"
    return (f"falls from AUROC {before:.3f} to {value:.3f} {where}, "
            f"{percent(min(loss, 1.0))} of its above-chance AUROC lost")


def _calibration_column(records: pd.DataFrame) -> tuple[str, str]:
    """The scored calibration error when the records carry it, else raw ECE (older records)."""
    if "ece_debiased" in records and records["ece_debiased"].notna().any():
        return "ece_debiased", "RMS calibration error"
    return "ece", "ECE"


def worst_calibration(records: pd.DataFrame, encoder: str, reference_error: float | None) -> str:
    column, name = _calibration_column(records)
    clean = _full(records[(records["encoder"] == encoder) & (records["condition"] == "clean")])
    per_task = clean.groupby("task")[column].mean()
    if per_task.empty or per_task.isna().all():
        return "calibration could not be measured"
    task = per_task.idxmax()
    mean = per_task.mean()
    against = f"; reference {reference_error:.3f}" if reference_error is not None and np.isfinite(reference_error) else ""
    return (f"has a calibration error of {mean:.3f} on average ({name}{against}), "
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
    """'has AUROC 0.600 with 10 % of the labels on derm (0.900 with all; 25 % of its above-chance AUROC kept)'."""
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
    return (f"has AUROC {curve[(task, smallest)]:.3f} with {percent(smallest)} of the labels on {task} "
            f"({curve[(task, full)]:.3f} with all; {percent(min(max(shares[task], 0.0), 1.0))} of its "
            "above-chance AUROC kept)")


def worst_axis_sentence(axis: str, records: pd.DataFrame, encoder: str, reference: str) -> str:
    """The encoder's weakest axis, said in words about the condition that makes it weak.

    The reference's value beside it: the reference encoder's, or for the median reference the
    median over encoders.
    """
    def reference_mean(column: str) -> float | None:
        rows = _full(records[records["condition"] == "clean"])
        per_encoder = rows.groupby(["encoder", "task"])[column].mean().groupby("encoder").mean()
        if reference == "median":
            return float(per_encoder.median()) if len(per_encoder) else None
        return float(per_encoder[reference]) if reference in per_encoder and encoder != reference else None

    if axis == "robustness":
        return worst_robustness(records, encoder)
    if axis == "calibration":
        return worst_calibration(records, encoder, reference_mean(_calibration_column(records)[0]))
    if axis == "discrimination":
        return worst_discrimination(records, encoder, reference_mean("auroc"))
    if axis == "label_efficiency":
        return worst_label_efficiency(records, encoder)
    return f"worst axis {axis}"


def build_cards(score, records: pd.DataFrame, board: pd.DataFrame, provenance: dict[str, Provenance],
                flags: dict[str, list[ExposureFlag]]) -> list[Card]:
    """One card per encoder, in leaderboard order."""
    labels = {value: AXIS_DESCRIPTIONS[value] for value, _, _ in AXIS_VALUES.values()}
    u_columns = {value: f"u_{axis}" for axis, (value, _, _) in AXIS_VALUES.items()}
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
            encoder=row.encoder, rank="" if row.baseline else row.rank_label,
            crs=format_interval(row.crs, row.crs_low, row.crs_high),
            tier=("reference (baseline row, not a contestant)" if row.baseline
                  else "leading tier" if row.tier else "outside the leading tier"), p_rank1=float(row.p_rank1),
            axes=axes, worst_axis=worst.replace("_", " "),
            worst_sentence=worst_axis_sentence(worst, records, row.encoder, score.reference),
            provenance=provenance[row.encoder], flags=tuple(flags.get(row.encoder, ())),
        ))
    return cards
