"""Simultaneous confidence sets for every encoder's rank, from bootstrap replicates of the scores.

The method of Mogstad, Romano, Shaikh and Wilhelm (2024, Review of Economic Studies, "Inference
for ranks with applications to mobility across neighbourhoods and academic achievement across
countries"; the R package csranks implements it), here fed by our own bootstrap replicates:

1. For every pair j < k the difference d_jk = s_j - s_k, its bootstrap standard error se_jk and
   its studentised bootstrap deviation |(d*_jk - d_jk) / se_jk| in every replicate.
2. The critical value c is the (1 - alpha) quantile over replicates of the largest deviation over
   the pairs still in play; the pairs with |d_jk| / se_jk > c are decided (j better when
   d_jk > 0). Step down (Romano and Wolf): drop the decided pairs, recompute c over the rest,
   decide again, until nothing changes. This controls the chance of deciding any pair the wrong
   way at alpha, all pairs at once.
3. Encoder j's rank set is [1 + #encoders decided better than j, E - #encoders decided worse].
   All E sets hold the true ranks (rank 1 = highest score, tied scores share the better rank)
   together with probability at least 1 - alpha, asymptotically.

The leading tier is every encoder whose set contains rank 1: the encoders no other encoder is
decided better than. It replaces "the leader and those a Holm test cannot separate from it", which
picked the leader after looking at the data (docs/decisions/0009-rank-confidence-sets.md).
P(rank = 1), the share of replicates in which an encoder scores highest (ties split), is reported
beside it; it is a description of the bootstrap, not a confidence statement.

Since decision 0166 ``crs score``'s tier and rank sets are read off the headline's one family
(:mod:`crs.scoring.statements`): these sets, on the CRS replicates, lose an encoder tied for the lead in
some test sets because the dominance term jumps at ties. They stay for the zero-shot leaderboard and as a
library function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.formula import ScoreInputError

_SE_FLOOR = 1e-12
"""Standard errors below this are treated as 0: a difference that never moves in the bootstrap."""


@dataclass(frozen=True)
class RankSets:
    """Simultaneous rank confidence sets of E encoders.

    ``table`` (index encoder, ordered by point rank): score, rank (1 = best, ties share the better
    rank), rank_low, rank_high, in_leading_tier (rank_low == 1), p_rank1. ``better`` (E x E,
    encoder order of ``table``): better[j, k] is True when j is decided better than k.
    ``critical_values``: c at each step-down step.
    """

    table: pd.DataFrame
    better: np.ndarray
    critical_values: tuple[float, ...]
    alpha: float
    n_boot: int
    stepdown: bool

    @property
    def leading_tier(self) -> tuple[str, ...]:
        """Encoders whose rank set contains 1, best point rank first."""
        return tuple(str(e) for e in self.table.index[self.table["in_leading_tier"].to_numpy()])


def rank_best_first(scores: np.ndarray) -> np.ndarray:
    """Ranks (1 = highest score); tied scores share the better rank (1 + number of strictly higher scores)."""
    scores = np.asarray(scores, dtype=np.float64)
    return 1 + (scores[None, :] > scores[:, None]).sum(axis=1)


def p_rank_one(replicates: np.ndarray, tolerance: float | None = None) -> np.ndarray:
    """Share of replicates (rows) in which each column scores highest; a replicate tied for first is split.

    ``tolerance``: scores within it of a row's highest finite score tie for first (the bootstrap's 1e-12,
    so floating-point noise between equal CRS does not pick a winner); None: exact ties only. Rows with a
    score that is not finite (an axis a replicate could not measure) are left out, as :func:`rank_bounds`
    leaves them out; NaN for every column when none is left."""
    replicates = np.asarray(replicates, dtype=np.float64)
    finite = np.isfinite(replicates).all(axis=1)
    if not finite.any():
        return np.full(replicates.shape[1], np.nan)
    replicates = replicates[finite]
    if tolerance is None:
        top = replicates == replicates.max(axis=1, keepdims=True)
    else:
        top = np.isclose(replicates, np.nanmax(replicates, axis=1, keepdims=True), rtol=0.0, atol=tolerance)
    return (top / top.sum(axis=1, keepdims=True)).mean(axis=0)


def rank_bounds(
    point: np.ndarray, replicates: np.ndarray, names: Sequence[str], alpha: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """(rank_low, rank_high) of every encoder from :func:`rank_confidence_sets` over the replicates (rows) in
    which every score is finite; every set is 1..E when fewer than two such replicates remain."""
    replicates = np.asarray(replicates, dtype=np.float64)
    finite = np.isfinite(replicates).all(axis=1)
    if finite.sum() < 2:
        return np.ones(len(names), dtype=np.int64), np.full(len(names), len(names))
    sets = rank_confidence_sets(point, replicates[finite], names, alpha=alpha).table.reindex(list(names))
    return sets["rank_low"].to_numpy(), sets["rank_high"].to_numpy()


def leading_tier(rank_low: np.ndarray, leader: int) -> np.ndarray:
    """(E,) True for the leading tier: every encoder whose rank set contains 1, and the point leader always."""
    in_tier = np.asarray(rank_low) == 1
    in_tier[leader] = True
    return in_tier


def _decide_pairs(
    differences: np.ndarray, deviations: np.ndarray, standard_errors: np.ndarray, alpha: float, stepdown: bool
) -> tuple[np.ndarray, list[float]]:
    """Which pairs are decided (|t| > c) by the max-|t| bootstrap, single step or stepping down."""
    certain = standard_errors <= _SE_FLOOR
    t = np.where(
        certain,
        np.where(differences != 0.0, np.inf, 0.0),
        np.abs(differences) / np.where(certain, 1.0, standard_errors),
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        t_boot = np.where(
            certain[None, :], 0.0, np.abs(deviations) / np.where(certain, 1.0, standard_errors)[None, :]
        )
    return max_t_decisions(t, t_boot, alpha, stepdown)


def max_t_decisions(t_observed: np.ndarray, t_replicates: np.ndarray, alpha: float, stepdown: bool = True
                    ) -> tuple[np.ndarray, list[float]]:
    """Which hypotheses (K,) the max-|t| bootstrap rejects, single step or stepping down (Romano and Wolf):
    c = the (1 - alpha) quantile over the replicates (B, K) of the largest |t| still undecided; returns the
    decisions and c at each step (the first is the single step's)."""
    decided = np.zeros(len(t_observed), dtype=bool)
    critical_values: list[float] = []
    while not decided.all():
        largest = t_replicates[:, ~decided].max(axis=1) if len(t_replicates) else np.zeros(1)
        critical = float(np.quantile(largest, 1.0 - alpha))
        critical_values.append(critical)
        newly = ~decided & (t_observed > critical)
        if not newly.any():
            break
        decided |= newly
        if not stepdown:
            break
    return decided, critical_values


def rank_confidence_sets(
    scores: pd.Series | np.ndarray,
    replicates: pd.DataFrame | np.ndarray,
    encoders: Sequence[str] | None = None,
    alpha: float = 0.05,
    stepdown: bool = True,
) -> RankSets:
    """Simultaneous (1 - alpha) rank sets of every encoder from point scores and (B, E) bootstrap replicates.

    ``scores``: point estimates (higher is better), a Series indexed by encoder or an array with
    ``encoders``; ``replicates``: one row per bootstrap replicate, one column per encoder (a
    DataFrame's columns name them). Deviations are centred at the point estimates.
    """
    if isinstance(scores, pd.Series):
        names = [str(e) for e in scores.index]
        point = scores.to_numpy(dtype=np.float64)
    else:
        point = np.asarray(scores, dtype=np.float64)
        names = (
            [str(e) for e in encoders]
            if encoders is not None
            else [f"encoder_{j}" for j in range(len(point))]
        )
    if isinstance(replicates, pd.DataFrame):
        missing = sorted(set(names) - {str(c) for c in replicates.columns})
        if missing:
            raise ScoreInputError(
                f"bootstrap replicates lack encoders {missing}; pass one column per encoder"
            )
        boot = replicates.set_axis([str(c) for c in replicates.columns], axis=1)[names].to_numpy(
            dtype=np.float64
        )
    else:
        boot = np.asarray(replicates, dtype=np.float64)
    if boot.ndim != 2 or boot.shape[1] != len(point) or len(names) != len(point):
        raise ScoreInputError(
            f"replicates must be (replicates, {len(point)} encoders), got shape {boot.shape}; one column per encoder"
        )
    if len(boot) < 2:
        raise ScoreInputError(f"rank sets need at least 2 bootstrap replicates, got {len(boot)}")
    if not (np.isfinite(point).all() and np.isfinite(boot).all()):
        raise ScoreInputError(
            "scores or replicates contain NaN or infinity; score every encoder in every replicate"
        )
    if not 0.0 < alpha < 1.0:
        raise ScoreInputError(f"alpha must lie in (0, 1), got {alpha}")

    n_encoders = len(point)
    first, second = np.triu_indices(n_encoders, k=1)
    differences = point[first] - point[second]
    boot_differences = boot[:, first] - boot[:, second]
    standard_errors = boot_differences.std(axis=0, ddof=1)
    decided, critical_values = _decide_pairs(
        differences, boot_differences - differences, standard_errors, alpha, stepdown
    )

    better = np.zeros((n_encoders, n_encoders), dtype=bool)
    better[first[decided & (differences > 0)], second[decided & (differences > 0)]] = True
    better[second[decided & (differences < 0)], first[decided & (differences < 0)]] = True
    rank_low = 1 + better.sum(axis=0)
    rank_high = n_encoders - better.sum(axis=1)
    table = pd.DataFrame(
        {
            "score": point,
            "rank": rank_best_first(point),
            "rank_low": rank_low,
            "rank_high": rank_high,
            "in_leading_tier": rank_low == 1,
            "p_rank1": p_rank_one(boot),
        },
        index=pd.Index(names, name="encoder"),
    )
    order = np.lexsort((np.array(names), table["rank"].to_numpy()))
    return RankSets(
        table=table.iloc[order],
        better=better[np.ix_(order, order)],
        critical_values=tuple(critical_values),
        alpha=alpha,
        n_boot=len(boot),
        stepdown=stepdown,
    )
