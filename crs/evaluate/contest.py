"""Who competes for the lead and where each stands: the one rule every view reads (issue 46 items 6 and 8).

A named reference is the yardstick, not a contestant (decision 0133, :mod:`crs.scoring.baseline`), unless
``reference_competes = true`` (the paper's table). The report (headline, leaderboard, figures), the
terminal, ``crs compare`` and the leaderboard site all ask :func:`contest_of` instead of reading the stored
``rank`` (which counts the reference), so none of them crowns the reference or ranks a contestant behind it.

Ranks are among the contestants (ties share the better rank). Where the leading tier (the confidence
statement) names several encoders, each member's rank reads "1–k" (decision 0157): a single "1" would
claim a first place the confidence statement does not support. This module reads a stored CRS table
only (pandas, no scoring), so every layer above ``evaluate`` can use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

BASELINE_LABEL = "baseline"
MEDIAN_REFERENCE = "median"


@dataclass(frozen=True)
class Contest:
    """The contest of one leaderboard.

    ``contestants``: the competing encoders, highest point CRS first; ``baseline``: the named reference's
    row when it does not compete (None when it competes, is the virtual median or is not in the table);
    ``tier``: the leading tier's members among the contestants, in CRS order; ``rank`` and
    ``auroc_rank``: ranks among the contestants (1 = best, ties share the better rank).
    """

    contestants: tuple[str, ...]
    baseline: str | None
    tier: tuple[str, ...]
    rank: dict[str, int]
    auroc_rank: dict[str, int]
    crs: dict[str, float]

    @property
    def leader(self) -> str | None:
        """The point leader among the contestants (None when nothing competes)."""
        return self.contestants[0] if self.contestants else None

    @property
    def shared_lead(self) -> bool:
        """True when the leading tier names several encoders: no single first place is supported."""
        return len(self.tier) > 1

    def rank_label(self, encoder: str) -> str:
        """'baseline' for the reference's row, '1–k' for a member of a leading tier of k, else the rank."""
        if encoder == self.baseline:
            return BASELINE_LABEL
        if encoder not in self.rank:
            return "—"
        if self.shared_lead and encoder in self.tier:
            return f"1\u2013{len(self.tier)}"
        return str(self.rank[encoder])

    def leader_words(self) -> str:
        """'vit_tiny' or 'tied for the lead: a, b' (the tier named where the confidence statement names several)."""
        if self.shared_lead:
            return f"tied for the lead: {', '.join(self.tier)}"
        return self.leader or "none"


def _ranks(values: pd.Series, ascending: bool) -> dict[str, int]:
    return {str(name): int(rank) for name, rank in values.rank(method="min", ascending=ascending).items()}


def contest_of(table: pd.DataFrame, reference: str | None = None, reference_competes: bool = False) -> Contest:
    """The contest of a stored CRS table (index or column ``encoder``; columns ``crs`` and, where stored,
    ``competes``, ``in_leading_tier``, ``auroc`` or ``auroc_rank``).

    ``competes`` in the table wins (it was written by the score with its settings); an older table
    without it competes every encoder but a named ``reference`` unless ``reference_competes``.
    """
    if "encoder" in table.columns:
        table = table.set_index("encoder")
    table = table.set_axis([str(name) for name in table.index])
    if "competes" in table:
        competes = table["competes"].fillna(False).astype(bool)
    else:
        named = reference not in (None, "", MEDIAN_REFERENCE)
        competes = pd.Series([reference_competes or not named or name != reference for name in table.index],
                             index=table.index, dtype=bool)
    baseline = next((name for name in table.index if not competes[name]), None)
    if not competes.any():  # the reference scored alone: it is the table
        competes[:] = True
        baseline = None
    crs = table["crs"].astype(float)
    order = crs[competes].sort_values(ascending=False, kind="stable")
    contestants = tuple(str(name) for name in order.index)
    rank = _ranks(order, ascending=False)
    if "auroc" in table:
        auroc_rank = _ranks(table.loc[list(contestants), "auroc"].astype(float), ascending=False)
    elif "auroc_rank" in table:
        auroc_rank = _ranks(table.loc[list(contestants), "auroc_rank"].astype(float), ascending=True)
    else:
        auroc_rank = {}
    flagged = table["in_leading_tier"].fillna(False).astype(bool) if "in_leading_tier" in table else None
    tier = tuple(name for name in contestants if flagged is not None and bool(flagged[name]))
    if not tier and contestants:
        tier = (contestants[0],)
    return Contest(contestants, baseline, tier, rank, auroc_rank, {name: float(crs[name]) for name in table.index})


def contest_of_score(score) -> Contest:
    """The contest of a :class:`crs.scoring.result.ScoreResult` (or anything with ``crs``, ``reference``
    and ``settings.reference_competes``)."""
    settings = getattr(score, "settings", None)
    return contest_of(score.crs, getattr(score, "reference", None), bool(getattr(settings, "reference_competes", False)))
