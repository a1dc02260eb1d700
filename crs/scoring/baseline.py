"""A named reference is the yardstick, not a contestant (issue 40 item 3, DESIGN 8e).

A named reference scores 0.5 on every axis by definition, so it has a perfect balance and a worst axis
of 0.5, and any encoder that trades one axis for another scores below it: in ``make demo`` every one of
the four encoders ranked first when it was the reference. So by default the reference stays in the
table as a baseline row at its CRS (and in everyone's dominance count, as the real encoder it is) but
leaves the contest: P(rank 1), the rank confidence sets, the leading tier and the leader are computed
over the other encoders only. ``reference_competes = true`` restores the paper's table, in which it
competes. The median reference is virtual and never in the table, so nothing changes there.

:func:`reference_as_baseline` recomputes only the contest columns of a bootstrap result
(:func:`crs.scoring.bootstrap.summarise_bootstrap` on the other encoders' replicates); the CRS and its
interval (``crs_low``, ``crs_high``) are left exactly as they were made.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from crs.scoring.bootstrap import BootstrapResult, summarise_bootstrap
from crs.scoring.formula import rank_descending

CONTEST_COLUMNS = ("p_rank1", "diff_to_leader", "diff_low", "diff_high", "p_value", "p_holm", "rank_low",
                   "rank_high", "in_leading_tier")
"""The bootstrap table's columns that say how an encoder fares against the others: recomputed without the
reference, which gets NaN (ranks: missing) and no tier."""


def contest_columns(crs: pd.Series, competes: pd.Series) -> pd.DataFrame:
    """Per encoder: ``competes`` and ``contest_rank``, the rank of its CRS among the competing encoders
    (1 = highest, ties share the better rank; missing for an encoder that does not compete)."""
    names = [str(e) for e in crs.index]
    competes = competes.reindex(crs.index).astype(bool)
    rank = pd.Series(pd.NA, index=crs.index, dtype="Int64")
    if competes.any():
        rank[competes.to_numpy()] = rank_descending(crs[competes].to_numpy(dtype=np.float64)).astype(np.int64)
    return pd.DataFrame({"competes": competes.to_numpy(), "contest_rank": rank.to_numpy()},
                        index=pd.Index(names, name=crs.index.name))


def competing(encoders: list[str], reference: str, reference_competes: bool) -> pd.Series:
    """True for every encoder that competes for the lead: all but a named reference, unless it competes."""
    return pd.Series([reference_competes or name != reference for name in encoders], index=encoders, dtype=bool)


def reference_as_baseline(boot: BootstrapResult, reference: str) -> BootstrapResult:
    """The bootstrap result with ``reference`` out of the contest: P(rank 1), Holm p-values against the
    leader, rank sets, tier and leader over the other encoders (from the same replicates); the reference's
    contest columns NaN / missing / False. Unchanged when ``reference`` is not in the table or is alone."""
    table = boot.table
    names = [str(e) for e in table.index]
    if reference not in names or len(names) < 2:
        return boot
    others = [name for name in names if name != reference]
    point = pd.DataFrame({"crs": table.loc[others, "crs"].to_numpy(dtype=np.float64)}, index=pd.Index(others))
    point["rank"] = rank_descending(point["crs"].to_numpy())
    crs = boot.replicates[others].to_numpy(dtype=np.float64)
    contest = summarise_bootstrap(
        point, crs, boot.seed_draws.to_numpy(), list(boot.seed_draws.columns), n_boot=boot.n_boot, alpha=boot.alpha,
        seed=boot.seed,
    ).table
    out = table.copy()
    for column in CONTEST_COLUMNS:
        values = contest[column].reindex(out.index)
        if column in ("rank_low", "rank_high"):
            values = values.astype("Int64")
        elif column == "in_leading_tier":
            values = values.fillna(False).astype(bool)
        out[column] = values
    tier = tuple(str(name) for name in contest.index[contest["in_leading_tier"].to_numpy()])
    tier = tuple(sorted(tier, key=lambda name: -float(contest.loc[name, "crs"])))
    leader = others[int(np.argmax(point["crs"].to_numpy()))]
    return dataclasses.replace(boot, table=out, leader=leader, leading_tier=tier)
