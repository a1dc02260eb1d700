"""Two runs side by side: each run's leader, leading tier and reference, and which encoders' CRS ranks
moved (``crs compare`` prints this first; the column-by-column contract check of
:mod:`crs.evaluate.compare` only means something for two runs of the same spec)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from crs.evaluate.artifacts import RunFolder, RunFolderError


@dataclass(frozen=True)
class Standing:
    """One run's overall leaderboard as stored in its score: rank, CRS and tier per encoder."""

    name: str
    reference: str
    table: pd.DataFrame  # index encoder; columns rank, crs, crs_low, crs_high, in_leading_tier

    @property
    def leader(self) -> str:
        return str(self.table["rank"].idxmin())

    @property
    def tier(self) -> list[str]:
        return [str(e) for e in self.table.sort_values("rank").index if bool(self.table.loc[e, "in_leading_tier"])]


def standing(folder: RunFolder, name: str) -> Standing:
    """The stored score's leaderboard of ``folder``; a RunFolderError naming the folder when it has none."""
    table = folder.read_score_table("crs").set_index("encoder")
    summary = folder.read_score_summary()
    return Standing(name, str(summary.get("reference", "?")),
                    table[["rank", "crs", "crs_low", "crs_high", "in_leading_tier"]])


def _column(width: int, *cells: str) -> str:
    return "  ".join(cell.ljust(width) for cell in cells).rstrip()


def side_by_side(a: Standing, b: Standing) -> list[str]:
    """Lines: leader, leading tier and reference of each run, then one row per encoder with both ranks
    and CRS and how far it moved, then a line naming the encoders whose rank moved."""
    width = max(24, len(a.name) + 2, len(b.name) + 2)
    label = 16
    lines = [" " * label + _column(width, a.name, b.name)]
    for what, left, right in (
        ("leader", f"{a.leader} (CRS {a.table.loc[a.leader, 'crs']:.3f})", f"{b.leader} (CRS {b.table.loc[b.leader, 'crs']:.3f})"),
        ("leading tier", ", ".join(a.tier) or "none", ", ".join(b.tier) or "none"),
        ("reference", a.reference, b.reference),
    ):
        lines.append(what.ljust(label) + _column(width, left, right))
    encoders = sorted(set(a.table.index) | set(b.table.index),
                      key=lambda e: (b.table["rank"].get(e, 1e9), a.table["rank"].get(e, 1e9), str(e)))
    rows, moved = [], []
    for encoder in encoders:
        cells = []
        for run in (a, b):
            if encoder in run.table.index:
                row = run.table.loc[encoder]
                tier = " leading" if bool(row["in_leading_tier"]) else ""
                cells.append(f"{int(row['rank'])}. CRS {row['crs']:.3f}{tier}")
            else:
                cells.append("not in this run")
        if encoder in a.table.index and encoder in b.table.index:
            shift = int(a.table.loc[encoder, "rank"]) - int(b.table.loc[encoder, "rank"])
            change = "same rank" if not shift else f"{'up' if shift > 0 else 'down'} {abs(shift)}"
            if shift:
                moved.append(f"{encoder} {int(a.table.loc[encoder, 'rank'])} -> {int(b.table.loc[encoder, 'rank'])}")
        else:
            change = "only in " + (a.name if encoder in a.table.index else b.name)
        rows.append(str(encoder)[: label - 1].ljust(label) + _column(width, *cells) + f"  {change}")
    lines += ["", "encoder".ljust(label) + _column(width, "rank, CRS, tier", "rank, CRS, tier") + "  from first to second",
              *rows, ""]
    lines.append(f"ranks moved: {'; '.join(moved)}" if moved else "ranks moved: none (every encoder in both runs keeps its rank)")
    return lines


def standings_or_reason(a: RunFolder, b: RunFolder, names: tuple[str, str]) -> list[str]:
    """:func:`side_by_side` of two folders, or one line saying which folder has no stored score."""
    try:
        return side_by_side(standing(a, names[0]), standing(b, names[1]))
    except RunFolderError as error:
        return [f"no side-by-side ranking: {error}"]
