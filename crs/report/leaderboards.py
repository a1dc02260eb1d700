"""The "Leaderboards per task" section: who is ranked where and why, and one leaderboard per task.

Shown only when the spec lets some encoders run on some data sets only (``datasets`` on an encoder,
docs/decisions/0038): the page's main leaderboard is then the overall one, over the encoders that
run on every task, and a specialist (RETFound on fundus) is ranked in its own tasks' leaderboards.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from crs.report.cards import Card, build_cards
from crs.report.stability import Table
from crs.report.tables import leaderboard, leaderboard_text, percent
from crs.scoring.reversals import contest_reversals_of


def has_task_leaderboards(score) -> bool:
    return bool(getattr(score, "leaderboards", None)) and getattr(score, "placement", None) is not None


def not_overall(score) -> list[str]:
    """Encoders ranked in some task leaderboards but not overall (they lack a task by design)."""
    if not has_task_leaderboards(score):
        return []
    return [str(name) for name, row in score.placement.iterrows() if not bool(row["overall"])]


def overall_sentence(score) -> str:
    """One sentence for the headline: which encoders the overall leaderboard holds and who is elsewhere."""
    if not has_task_leaderboards(score):
        return ""
    others = ", ".join(f"{name} ({score.placement.loc[name, 'tasks']} only)" for name in not_overall(score))
    return (f"This is the overall leaderboard, over the encoders that run on every task "
            f"({', '.join(map(str, score.crs.index))}). Not ranked overall, by the spec's design: {others}; "
            "each is ranked in its own tasks' leaderboards (Leaderboards per task).")


def placement_table(score) -> Table:
    """One row per encoder: the tasks it runs on, its overall rank (or none), its rank in each task, why."""
    rows = []
    for name, row in score.placement.iterrows():
        overall = str(int(row["overall_rank"])) if np.isfinite(row["overall_rank"]) else "not ranked"
        rows.append((str(name), str(row["tasks"]), overall, str(row["task_ranks"]), str(row["why"])))
    return Table("Who is ranked where and why: the overall CRS is over the encoders that run on every task; "
                 "each task's leaderboard is over the encoders that run on it.",
                 ("encoder", "runs on", "overall rank", "rank per task", "why"), tuple(rows),
                 title="Who is ranked where")


def task_tables(score, flags: dict[str, list[str]] | None = None) -> list[Table]:
    """One leaderboard per task, as on the main table: CRS on that task alone with its own bootstrap tier."""
    tables = []
    for task, board in score.leaderboards.items():
        text = leaderboard_text(leaderboard(board, flags))
        stable = board.stability.summary()
        reversals = contest_reversals_of(board)  # among the contestants (crs.evaluate.contest)
        encoders = ", ".join(map(str, board.crs.sort_values(["rank", "auroc_rank"]).index))
        leader = board.bootstrap.leader
        p_first = board.crs.loc[leader, "p_rank1"] if leader in board.crs.index else float("nan")
        caption = (
            f"Leaderboard of {task}: {len(board.crs)} encoders ({encoders}), CRS on this task alone. "
            f"Leading tier: {', '.join(board.bootstrap.leading_tier)}"
            + (f"; {leader} ranks first in {percent(p_first)} of {board.bootstrap.n_boot} replicates"
               if np.isfinite(p_first) else "")
            + f". AUROC vs CRS among the candidates: {reversals.n_reversed} of {reversals.n_pairs} pairs reversed, "
            f"{reversals.n_confident} with confidence. "
            f"The leader stays first under {stable['leader_unchanged_under_references']} of {stable['n_references']} "
            "reference choices."
        )
        rows = tuple(tuple(str(v) for v in row) for row in text.itertuples(index=False))
        tables.append(Table(caption, tuple(text.columns), rows, title=f"Leaderboard: {task}"))
    return tables


def specialist_cards(score, records: pd.DataFrame, provenance, flags) -> list[Card]:
    """A reliability card for each encoder not ranked overall, one per task leaderboard it is ranked in,
    with that leaderboard's rank, tier and reference (``Card.scope`` names the leaderboard)."""
    cards = []
    short = {name: [flag.short() for flag in found] for name, found in flags.items()}
    for name in not_overall(score):
        for task, board in score.leaderboards.items():
            if name not in board.crs.index:
                continue
            rows = leaderboard(board, short)
            mine = records[(records["task"].astype(str) == task) & records["encoder"].astype(str).isin(board.crs.index)]
            (card,) = build_cards(board, mine, rows[rows["encoder"] == name], provenance, flags)
            cards.append(dataclasses.replace(card, scope=f"{task} leaderboard"))
    return cards
