"""How the CRS ranking moves when its choices move: Dirichlet-sampled component weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.scoring.formula import (
    DEFAULT_EPSILON,
    ScoreInputError,
    clinical_reliability_score,
    crs_components,
    rank_descending,
)
from crs.scoring.rankings import kendall_tau


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


def weight_sensitivity(
    axis_errors_table: pd.DataFrame,
    reference: str,
    n_samples: int = 1000,
    concentration: float = 1.0,
    seed: int = 0,
    epsilon: float = DEFAULT_EPSILON,
    dominance_margin: float = 0.0,
    weights: Mapping[str, float] | Sequence[float] | None = None,
) -> WeightSensitivity:
    """Draw CRS weights from Dirichlet(concentration x 1) and compare each ranking with the default.

    ``weights`` is the default weighting the draws are compared against (equal if None).
    """
    if n_samples < 1 or not concentration > 0:
        raise ScoreInputError(
            f"need n_samples >= 1 and concentration > 0, got {n_samples} and {concentration}"
        )
    default = clinical_reliability_score(axis_errors_table, reference, weights, epsilon, dominance_margin)
    axes = list(default.attrs["axes"])
    encoders = list(default.index)
    errors = (
        axis_errors_table.set_axis(axis_errors_table.index.astype(str))
        .reindex(encoders)[axes]
        .to_numpy(np.float64)
    )
    draws = np.random.default_rng(seed).dirichlet(np.full(3, concentration), size=n_samples)
    crs = crs_components(errors, encoders.index(reference), draws, epsilon, dominance_margin)[
        "crs"
    ]  # (draws, encoders)
    ranks = rank_descending(crs)
    default_crs = default["crs"].to_numpy()
    top_index = int(np.argmax(default_crs))
    taus = np.array([kendall_tau(default_crs, row) for row in crs])
    table = pd.DataFrame(
        {
            "default_rank": default["rank"].to_numpy(),
            "share_rank1": (ranks == 1).mean(axis=0),
            "mean_rank": ranks.mean(axis=0),
        },
        index=pd.Index(encoders, name="encoder"),
    ).sort_values("default_rank")
    return WeightSensitivity(
        table=table,
        top=encoders[top_index],
        share_top_stays_first=float((ranks[:, top_index] == 1).mean()),
        kendall_taus=taus,
        n_samples=n_samples,
        concentration=concentration,
    )


