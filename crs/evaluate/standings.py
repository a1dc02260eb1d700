"""Two runs side by side: each run's leader, leading tier and reference, and which encoders' CRS ranks
moved (``crs compare`` prints this first; the column-by-column contract check of
:mod:`crs.evaluate.compare` only means something for two runs of the same spec)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from crs.evaluate.artifacts import RunFolder, RunFolderError
from crs.evaluate.contest import Contest, contest_of


@dataclass(frozen=True)
class Standing:
    """One run's overall leaderboard as stored in its score: rank, CRS and tier per encoder."""

    name: str
    reference: str
    table: pd.DataFrame  # index encoder; columns rank, crs, crs_low, crs_high, in_leading_tier
    reference_competes: bool = False

    @property
    def contest(self) -> Contest:
        """Who competes and where each stands (crs.evaluate.contest, the rule every view reads)."""
        return contest_of(self.table, self.reference, self.reference_competes)

    @property
    def leader(self) -> str:
        return str(self.contest.leader)

    @property
    def tier(self) -> list[str]:
        return list(self.contest.tier)

    def rank_text(self, encoder: str) -> str:
        """'1', '1–2' (a shared lead) or 'baseline' (the reference's row)."""
        return self.contest.rank_label(str(encoder))

    def rank_number(self, encoder: str) -> float:
        """The rank among the contestants (inf for the baseline row), for sorting and moves."""
        return float(self.contest.rank.get(str(encoder), float("inf")))


def standing(folder: RunFolder, name: str) -> Standing:
    """The stored score's leaderboard of ``folder``; a RunFolderError naming the folder when it has none."""
    table = folder.read_score_table("crs").set_index("encoder")
    summary = folder.read_score_summary()
    settings = summary.get("settings") or {}
    columns = [c for c in ("rank", "crs", "crs_low", "crs_high", "in_leading_tier", "competes", "auroc") if c in table]
    return Standing(name, str(summary.get("reference", "?")), table[columns],
                    bool(settings.get("reference_competes", False)))


def _column(width: int, *cells: str) -> str:
    return "  ".join(cell.ljust(width) for cell in cells).rstrip()


def side_by_side(a: Standing, b: Standing) -> list[str]:
    """Lines: leader, leading tier and reference of each run, then one row per encoder with both ranks
    and CRS and how far it moved, then a line naming the encoders whose rank moved."""
    width = max(24, len(a.name) + 2, len(b.name) + 2)
    label = 16
    lines = [" " * label + _column(width, a.name, b.name)]

    def lead(run: Standing) -> str:
        found = run.contest
        if found.shared_lead:
            return found.leader_words()
        return f"{found.leader} (CRS {found.crs[str(found.leader)]:.3f})"

    for what, left, right in (
        ("leader", lead(a), lead(b)),
        ("leading tier", ", ".join(a.tier) or "none", ", ".join(b.tier) or "none"),
        ("reference", a.reference + (" (baseline row)" if a.contest.baseline else ""),
         b.reference + (" (baseline row)" if b.contest.baseline else "")),
    ):
        lines.append(what.ljust(label) + _column(width, left, right))
    encoders = sorted(set(a.table.index) | set(b.table.index),
                      key=lambda e: (b.rank_number(e) if e in b.table.index else 1e9,
                                     a.rank_number(e) if e in a.table.index else 1e9, str(e)))
    rows, moved = [], []
    for encoder in encoders:
        cells = []
        for run in (a, b):
            if encoder in run.table.index:
                row = run.table.loc[encoder]
                tier = " leading" if encoder in run.tier else ""
                place = run.rank_text(encoder)
                cells.append(f"{place}{'' if place == 'baseline' else '.'} CRS {row['crs']:.3f}{tier}")
            else:
                cells.append("not in this run")
        if encoder in a.table.index and encoder in b.table.index:
            first, second = a.rank_text(encoder), b.rank_text(encoder)
            if first == second:
                change = "same rank"
            elif "baseline" in (first, second) or a.contest.shared_lead or b.contest.shared_lead:
                change = f"{first} -> {second}"
                moved.append(f"{encoder} {first} -> {second}")
            else:
                shift = int(first) - int(second)
                change = f"{'up' if shift > 0 else 'down'} {abs(shift)}"
                moved.append(f"{encoder} {first} -> {second}")
        else:
            change = "only in " + (a.name if encoder in a.table.index else b.name)
        rows.append(str(encoder)[: label - 1].ljust(label) + _column(width, *cells) + f"  {change}")
    lines += ["", "encoder".ljust(label) + _column(width, "rank, CRS, tier", "rank, CRS, tier") + "  from first to second",
              *rows, ""]
    lines.append(f"ranks moved: {'; '.join(moved)}" if moved else "ranks moved: none (every encoder in both runs keeps its rank)")
    lines.append("ranks are among the candidates (crs.evaluate.contest): a named reference that does not compete is "
                 "the baseline row; a shared lead reads 1-k.")
    return lines


def standings_or_reason(a: RunFolder, b: RunFolder, names: tuple[str, str]) -> list[str]:
    """:func:`side_by_side` of two folders, or one line saying which folder has no stored score."""
    try:
        return side_by_side(standing(a, names[0]), standing(b, names[1]))
    except RunFolderError as error:
        return [f"no side-by-side ranking: {error}"]
