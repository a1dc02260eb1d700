"""How two rankings of the same encoders disagree: reversed pairs, Kendall tau, rank displacement."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from crs.scoring.formula import ScoreInputError, rank_descending


@dataclass(frozen=True)
class RankReversals:
    """How ranking b departs from ranking a.

    A pair is reversed when a and b order it strictly and oppositely; tied when either score ties
    (counted apart, neither reversed nor concordant). ``reversed_pairs`` lists (ahead in a, ahead
    in b). Ranks are competition ranks (1 = best, ties share the best rank); displacement is
    |rank_a - rank_b|. Kendall tau is tau-b (scipy), which corrects for ties.
    """

    table: pd.DataFrame
    reversed_pairs: tuple[tuple[str, str], ...]
    n_pairs: int
    n_reversed: int
    n_tied: int
    n_concordant: int
    kendall_tau: float
    mean_abs_displacement: float

    def summary(self) -> dict:
        return {
            "reversed_pairs": [list(pair) for pair in self.reversed_pairs],
            "n_pairs": self.n_pairs,
            "n_reversed": self.n_reversed,
            "n_tied": self.n_tied,
            "n_concordant": self.n_concordant,
            "kendall_tau": self.kendall_tau,
            "mean_abs_displacement": self.mean_abs_displacement,
        }


@lru_cache(maxsize=64)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b of two scorings of the same encoders (NaN when either is constant).

    Counted on the pairwise signs, with scipy.stats.kendalltau's arithmetic (concordant minus
    discordant over the square roots of the pairs untied in each): the same bits, without scipy's
    per-call overhead, which was half of `crs score` on a small spec (thousands of replicates).
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    upper = _upper_pairs(len(a))
    sign_a = np.sign(a[:, None] - a[None, :])[upper]
    sign_b = np.sign(b[:, None] - b[None, :])[upper]
    if np.isnan(sign_a).any() or np.isnan(sign_b).any():
        return float("nan")
    con_minus_dis = int((sign_a * sign_b).sum())
    tau = con_minus_dis / np.sqrt(int(np.count_nonzero(sign_a))) / np.sqrt(int(np.count_nonzero(sign_b)))
    return float(min(1.0, max(-1.0, tau)))


def rank_reversals(a: pd.Series, b: pd.Series, higher_is_better: bool = True) -> RankReversals:
    """Compare two scorings of the same encoders (Series indexed by encoder), e.g. AUROC vs CRS."""
    if set(a.index) != set(b.index):
        raise ScoreInputError(
            f"rankings cover different encoders: {sorted(map(str, a.index))} vs {sorted(map(str, b.index))}"
        )
    if a.isna().any() or b.isna().any():
        raise ScoreInputError("rankings contain NaN scores; score every encoder before comparing rankings")
    names = sorted(str(name) for name in a.index)
    a = a.set_axis(a.index.astype(str)).reindex(names)
    b = b.set_axis(b.index.astype(str)).reindex(names)
    sign = 1.0 if higher_is_better else -1.0
    score_a, score_b = sign * a.to_numpy(dtype=np.float64), sign * b.to_numpy(dtype=np.float64)
    reversed_pairs, tied, concordant = [], 0, 0
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            order_a, order_b = np.sign(score_a[i] - score_a[j]), np.sign(score_b[i] - score_b[j])
            if order_a == 0 or order_b == 0:
                tied += 1
            elif order_a == order_b:
                concordant += 1
            else:
                reversed_pairs.append((names[i], names[j]) if order_a > 0 else (names[j], names[i]))
    rank_a, rank_b = rank_descending(score_a), rank_descending(score_b)
    table = pd.DataFrame(
        {
            "score_a": a.to_numpy(),
            "score_b": b.to_numpy(),
            "rank_a": rank_a,
            "rank_b": rank_b,
            "displacement": rank_b - rank_a,
        },  # fmt: skip
        index=pd.Index(names, name="encoder"),
    ).sort_values(["rank_a", "rank_b"])
    n = len(names)
    return RankReversals(
        table=table,
        reversed_pairs=tuple(
            sorted(reversed_pairs, key=lambda pair: (int(rank_a[names.index(pair[0])]), pair))
        ),
        n_pairs=n * (n - 1) // 2,
        n_reversed=len(reversed_pairs),
        n_tied=tied,
        n_concordant=concordant,
        kendall_tau=kendall_tau(score_a, score_b),
        mean_abs_displacement=float(np.mean(np.abs(rank_a - rank_b))) if n else float("nan"),
    )


