"""What difference this test size could have detected, where the answer is "not separated" (issue 47 item 4).

"The data do not separate A and B" is not "A equals B". From the bootstrap replicates each pair's
difference has a standard error se; a simultaneous test at critical value c finds a true difference d
with about 80 % power when |d| >= (c + z_0.8) se (the normal approximation of the studentised test,
decision 0158). The CRS uses the max-|t| critical value over the contestants' pairs, computed here from
the same replicates as the rank sets (single step); the AUROC uses the axis comparisons' own critical
value. Pure functions on arrays; the sentences are :mod:`crs.scoring.verdict`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

POWER = 0.8
_SE_FLOOR = 1e-12


@dataclass(frozen=True)
class Detectable:
    """The smallest and largest difference detected with ``power`` over the pairs asked about, in the score's units."""

    what: str
    smallest: float
    largest: float
    power: float = POWER

    def words(self) -> str:
        """'a CRS difference of about 0.061' or 'AUROC differences of about 0.012 to 0.030'."""
        if abs(self.largest - self.smallest) < 5e-4:
            return f"a {self.what} difference of about {self.largest:.3f}"
        return f"{self.what} differences of about {self.smallest:.3f} to {self.largest:.3f}"


def _critical(deviations: np.ndarray, se: np.ndarray, alpha: float) -> float:
    moving = se > _SE_FLOOR
    if not moving.any() or len(deviations) < 2:
        return float("nan")
    t = np.abs(deviations[:, moving]) / se[moving]
    return float(np.quantile(t.max(axis=1), 1.0 - alpha))


def detectable_crs(replicates: pd.DataFrame, point: pd.Series, contestants: Sequence[str],
                   pairs: Sequence[tuple[str, str]], alpha: float, power: float = POWER,
                   lower: pd.DataFrame | None = None) -> Detectable | None:
    """The CRS difference each of ``pairs`` would need to be found with ``power`` (max-|t| over every pair
    of ``contestants``, from ``replicates``: one row per replicate, one column per encoder); None when
    no pair has a bootstrap spread.

    ``lower`` (encoders x encoders): the lower bounds of CRS_k - CRS_j that the headline's family decided
    "surely above" with (:attr:`crs.scoring.statements.Statements.difference_low`). With it, a pair needs
    the gap at which its bound would clear 0 in about ``power`` of test sets: its point gap, plus what the
    bound still lacks, plus z_power se (the bound taken to move one for one with the true gap). That is the
    family's own reach, which an unsettled Pareto relation (the dominance term's range) can put far beyond
    (c + z) se; a pair no route of the family can decide (bound -inf) is left out."""
    names = [str(name) for name in contestants]
    if len(names) < 2 or not pairs:
        return None
    boot = replicates.set_axis([str(c) for c in replicates.columns], axis=1)[names].to_numpy(dtype=np.float64)
    boot = boot[np.isfinite(boot).all(axis=1)]
    values = point.set_axis([str(n) for n in point.index]).reindex(names).to_numpy(dtype=np.float64)
    first, second = np.triu_indices(len(names), 1)
    differences = boot[:, first] - boot[:, second]
    se = differences.std(axis=0, ddof=1) if len(boot) > 1 else np.zeros(len(first))
    critical = _critical(differences - (values[first] - values[second]), se, alpha)
    if not np.isfinite(critical):
        return None
    index = {(names[i], names[j]): k for k, (i, j) in enumerate(zip(first, second, strict=True))}
    found = [se[index.get((a, b), index.get((b, a), -1))] for a, b in pairs if (a, b) in index or (b, a) in index]
    found = [value for value in found if value > _SE_FLOOR]
    if not found:
        return None
    if lower is not None:
        return _family_reach(lower, point, [(a, b) for a, b in pairs if (a, b) in index or (b, a) in index],
                             {pair: se[k] for pair, k in index.items()}, power)
    scale = critical + float(norm.ppf(power))
    return Detectable("CRS", scale * min(found), scale * max(found), power)


def _family_reach(lower: pd.DataFrame, point: pd.Series, pairs: Sequence[tuple[str, str]],
                  se: dict[tuple[str, str], float], power: float) -> Detectable | None:
    """:func:`detectable_crs` read off the family's lower bounds (see there)."""
    values = point.set_axis([str(n) for n in point.index])
    bound = lower.set_axis([str(n) for n in lower.index]).set_axis([str(c) for c in lower.columns], axis=1)
    z = float(norm.ppf(power))
    reach = []
    for a, b in pairs:
        high, low = (a, b) if values[a] >= values[b] else (b, a)
        spread = se.get((a, b), se.get((b, a), 0.0))
        clears = float(bound.loc[high, low]) if high in bound.index and low in bound.columns else -np.inf
        if spread > _SE_FLOOR and np.isfinite(clears):
            reach.append(float(values[high] - values[low]) - min(clears, 0.0) + z * spread)
    return Detectable("CRS", min(reach), max(reach), power) if reach else None


def detectable_axis(comparisons, axis: str, pairs: Sequence[tuple[str, str]], what: str,
                    power: float = POWER) -> Detectable | None:
    """The difference of ``axis`` error (an AUROC difference for the AUROC axes) each of ``pairs`` would
    need to be found with ``power`` by the simultaneous axis comparisons; None when they cannot say."""
    if comparisons is None or axis not in comparisons.axes or not np.isfinite(comparisons.critical):
        return None
    a = comparisons.axes.index(axis)
    found = []
    for first, second in pairs:
        if first in comparisons.encoders and second in comparisons.encoders:
            se = float(comparisons.standard_error[a, comparisons.encoders.index(first), comparisons.encoders.index(second)])
            if se > _SE_FLOOR:
                found.append(se)
    if not found:
        return None
    scale = float(comparisons.critical) + float(norm.ppf(power))
    return Detectable(what, scale * min(found), scale * max(found), power)
