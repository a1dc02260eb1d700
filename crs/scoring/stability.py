"""How the CRS ranking moves when its choices move (DESIGN section 8b, stability).

* :func:`reference_stability`: the ranking under every candidate reference (each encoder) and under
  the virtual cohort-median encoder;
* :func:`leave_one_out`: how far the other encoders move when one is removed (dominance makes the
  CRS depend on the cohort);
* :func:`weight_sensitivity`: the ranking under Dirichlet-sampled (dominance, balance, worst-axis)
  weights.

Each starts from the point estimate (:class:`crs.scoring.formula.PointEstimate`) and rescores its
axis errors with the same formula; nothing is remeasured. A named reference is the yardstick, not a
contestant (crs.scoring.baseline, decision 0133): unless ``reference_competes``, each "leader" and
"first" here is over the encoders other than that ranking's own reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.formula import PointEstimate, ScoreInputError, point_estimate, rank_descending
from crs.scoring.rankings import kendall_tau, rank_reversals
from crs.scoring.settings import MEDIAN_REFERENCE


@dataclass(frozen=True)
class WeightSensitivity:
    """The CRS ranking under Dirichlet-sampled (dominance, balance, worst-axis) weights.

    ``table`` (index encoder): default_rank, share_rank1 (draws where it ranks first, ties
    included), mean_rank. ``top`` is the default leader; ``share_top_stays_first`` the share of
    draws in which it still ranks first (a tie for first counts as first).
    """

    table: pd.DataFrame
    top: str
    share_top_stays_first: float
    kendall_taus: np.ndarray
    n_samples: int
    concentration: float

    def summary(self) -> dict:
        taus = self.kendall_taus[~np.isnan(self.kendall_taus)]
        return {
            "top": self.top,
            "share_top_stays_first": self.share_top_stays_first,
            "mean_kendall_tau": float(taus.mean()) if taus.size else float("nan"),
            "kendall_tau_5_50_95": [float(q) for q in np.percentile(taus, [5, 50, 95])] if taus.size else [],
            "n_samples": self.n_samples,
            "concentration": self.concentration,
        }


def _competes(point: PointEstimate, reference: str) -> np.ndarray:
    """True for every encoder that competes for the lead when ``reference`` is the reference."""
    encoders = point.encoders
    if reference == MEDIAN_REFERENCE or point.settings.reference_competes:
        return np.ones(len(encoders), dtype=bool)
    return np.array([name != reference for name in encoders], dtype=bool)


def weight_sensitivity(point: PointEstimate, concentration: float = 1.0) -> WeightSensitivity:
    """Draw CRS weights from Dirichlet(concentration x 1) and compare each ranking with the point estimate's.

    ``point.settings``: the number of draws (``n_weight_samples``) and the seed.
    """
    if not concentration > 0:
        raise ScoreInputError(f"concentration must be positive, got {concentration}")
    settings = point.settings
    encoders = point.encoders
    draws = np.random.default_rng(settings.seed).dirichlet(np.full(3, concentration), size=settings.n_weight_samples)
    crs = point.score(point.errors.to_numpy(np.float64), weights=draws)["crs"]  # (draws, encoders)
    competes = _competes(point, settings.reference)
    ranks = rank_descending(np.where(competes, crs, -np.inf))  # a non-competing reference ranks last
    default_crs = point.table["crs"].reindex(encoders).to_numpy()
    top_index = int(np.argmax(np.where(competes, default_crs, -np.inf)))
    taus = np.array([kendall_tau(default_crs, row) for row in crs])
    table = pd.DataFrame(
        {
            "default_rank": point.table["rank"].reindex(encoders).to_numpy(),
            "share_rank1": (ranks == 1).mean(axis=0),
            "mean_rank": np.where(competes, ranks.mean(axis=0), np.nan),  # among the competing encoders
        },
        index=pd.Index(encoders, name="encoder"),
    ).sort_values("default_rank")
    return WeightSensitivity(
        table=table,
        top=encoders[top_index],
        share_top_stays_first=float((ranks[:, top_index] == 1).mean()),
        kendall_taus=taus,
        n_samples=settings.n_weight_samples,
        concentration=concentration,
    )


def _leader(crs: pd.Series, competes: pd.Series | None) -> str:
    """The highest CRS among the competing encoders (among all when none competes: the reference alone)."""
    kept = crs if competes is None or not competes.any() else crs[competes.astype(bool)]
    return str(kept.idxmax())


def _compare(default: pd.Series, other: pd.Series, default_competes: pd.Series | None = None,
             other_competes: pd.Series | None = None) -> dict:
    """Leader, reversed pairs, Kendall tau and the largest rank move of ``other`` against ``default``; each
    leader over its own competing encoders (all when not given)."""
    reversals = rank_reversals(default, other)
    moves = (reversals.table["rank_b"] - reversals.table["rank_a"]).abs()
    leader = _leader(other, other_competes)
    default_leader = _leader(default, default_competes)
    return {
        "leader": str(leader),
        "leader_changes": bool(leader != default_leader),
        "n_reversed": reversals.n_reversed,
        "n_pairs": reversals.n_pairs,
        "kendall_tau": reversals.kendall_tau,
        "max_rank_move": int(moves.max()) if len(moves) else 0,
        "most_moved": str(moves.idxmax()) if len(moves) and moves.max() > 0 else "",
    }


def reference_stability(point: PointEstimate) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ranking under every candidate reference: each encoder, and the cohort median.

    Returns (summary, ranks). ``summary`` (index reference choice): leader, leader_changes,
    n_reversed and kendall_tau against the point estimate's ranking, max_rank_move, most_moved,
    reference_rank (where the reference itself ranks; NaN for the median), is_default.
    ``ranks``: reference choice x encoder CRS ranks. The error floor follows the reference (its
    own standard error), as it would had that reference been chosen.
    """
    default = point.table["crs"]
    names = pd.Index(point.encoders)
    default_competes = pd.Series(_competes(point, point.settings.reference), index=names).reindex(default.index)
    rows, ranks = {}, {}
    for choice in [*point.encoders, MEDIAN_REFERENCE]:
        settings = point.settings.replace(reference=choice)
        table = point_estimate(point.errors, point.standard_errors, settings).table
        competes = pd.Series(_competes(point, choice), index=names).reindex(table.index)
        row = _compare(default, table["crs"], default_competes, competes)
        row["reference_rank"] = float(table.loc[choice, "rank"]) if choice != MEDIAN_REFERENCE else float("nan")
        row["is_default"] = choice == point.settings.reference
        rows[choice] = row
        ranks[choice] = table["rank"]
    summary = pd.DataFrame.from_dict(rows, orient="index").rename_axis("reference")
    return summary, pd.DataFrame(ranks).T.rename_axis("reference")


def leave_one_out(point: PointEstimate) -> pd.DataFrame:
    """How the other encoders move when one encoder is left out of the cohort.

    One row per encoder left out (index ``left_out``): the others' new leader, whether it changed,
    pairs among the others that reverse against their point-estimate order, Kendall tau, the
    largest rank move among them (their point-estimate ranks re-ranked without the one left out)
    and who moved most. The named reference cannot be left out (its row says so); with fewer than
    three encoders there is nothing to compare.
    """
    encoders = point.encoders
    rows = {}
    if len(encoders) < 3:
        return pd.DataFrame(
            columns=["leader", "leader_changes", "n_reversed", "n_pairs", "kendall_tau", "max_rank_move",
                     "most_moved", "note"]  # fmt: skip
        ).rename_axis("left_out")
    for left_out in encoders:
        if not point.settings.median_reference and left_out == point.settings.reference:
            rows[left_out] = {"note": "the reference: not left out"}
            continue
        others = [name for name in encoders if name != left_out]
        errors = point.errors.loc[others]
        standard_errors = None if point.standard_errors is None else point.standard_errors.loc[others]
        table = point_estimate(errors, standard_errors, point.settings).table
        competes = pd.Series(_competes(point, point.settings.reference), index=pd.Index(encoders)).loc[others]
        rows[left_out] = {**_compare(point.table["crs"].loc[others], table["crs"], competes.reindex(table.index),
                                     competes.reindex(table.index)), "note": ""}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("left_out")


@dataclass(frozen=True)
class Stability:
    """The three stability analyses of the ranking (module docstring)."""

    references: pd.DataFrame
    reference_ranks: pd.DataFrame
    leave_one_out: pd.DataFrame
    weights: WeightSensitivity

    def summary(self) -> dict:
        references = self.references
        reals = references[references.index != MEDIAN_REFERENCE]
        loo = self.leave_one_out.dropna(subset=["n_reversed"]) if len(self.leave_one_out) else self.leave_one_out
        return {
            "n_references": int(len(references)),
            "leader_unchanged_under_references": int((~references["leader_changes"].astype(bool)).sum()),
            "max_pairs_reversed_by_reference": int(references["n_reversed"].max()),
            "references_ranking_themselves_first": int((reals["reference_rank"] == 1).sum()),
            "median_reference_leader": str(references.loc[MEDIAN_REFERENCE, "leader"]),
            "leave_one_out_leader_changes": int(loo["leader_changes"].astype(bool).sum()) if len(loo) else 0,
            "leave_one_out_max_pairs_reversed": int(loo["n_reversed"].max()) if len(loo) else 0,
            "leave_one_out_max_rank_move": int(loo["max_rank_move"].max()) if len(loo) else 0,
            "weights": self.weights.summary(),
        }


def stability(point: PointEstimate) -> Stability:
    """Reference choice, leave-one-encoder-out and weight sensitivity of the point estimate's ranking."""
    references, reference_ranks = reference_stability(point)
    return Stability(references, reference_ranks, leave_one_out(point), weight_sensitivity(point))
