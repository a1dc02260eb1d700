"""``score_records``: run records -> seed axes -> axis errors -> CRS, bootstrap, reversals, sensitivity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.axes import RETENTION_FLOOR, seed_axes
from crs.scoring.bootstrap import paired_seed_bootstrap
from crs.scoring.case_bootstrap import load_cases, paired_seed_case_bootstrap
from crs.scoring.formula import (
    DEFAULT_EPSILON,
    ScoreInputError,
    axis_errors,
    clinical_reliability_score,
    component_weights,
    rank_descending,
)
from crs.scoring.rankings import rank_reversals
from crs.scoring.stability import weight_sensitivity


@dataclass(frozen=True)
class ScoreResult:
    """Everything ``crs score`` prints and stores, as DataFrames plus a JSON-ready summary."""

    reference: str
    seed_axes: pd.DataFrame
    axis_errors: pd.DataFrame
    crs: pd.DataFrame
    bootstrap: Any  # crs.scoring.bootstrap.BootstrapResult
    reversals: Any  # crs.scoring.rankings.RankReversals
    sensitivity: Any  # crs.scoring.stability.WeightSensitivity
    settings: dict = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Named flat tables, ready for ``to_parquet`` / ``to_csv`` / ``to_markdown``."""
        return {
            "seed_axes": self.seed_axes,
            "axis_errors": self.axis_errors.reset_index(),
            "crs": self.crs.reset_index(),
            "bootstrap": self.bootstrap.table.reset_index(),
            "bootstrap_replicates": self.bootstrap.replicates,
            "rank_pairs": self.reversals.table.reset_index(),
            "weight_sensitivity": self.sensitivity.table.reset_index(),
        }

    def summary(self) -> dict:
        """JSON-serialisable headline: leader, tier, reversals, tau, displacement, sensitivity."""
        return {
            "reference": self.reference,
            "settings": dict(self.settings),
            "leader": self.bootstrap.leader,
            "leading_tier": list(self.bootstrap.leading_tier),
            "ranking": [
                {key: _plain(value) for key, value in row.items()}
                for row in self.crs.reset_index()[
                    [
                        "encoder",
                        "crs",
                        "crs_low",
                        "crs_high",
                        "rank",
                        "auroc",
                        "auroc_rank",
                        "p_rank1",
                        "in_leading_tier",
                    ]
                ].to_dict(orient="records")
            ],
            "rank_reversals": self.reversals.summary(),
            "weight_sensitivity": self.sensitivity.summary(),
        }

    def format(self) -> str:
        """Plain-text report for the terminal."""
        columns = ["crs", "crs_low", "crs_high", "rank", "auroc", "auroc_rank", "p_rank1", "in_leading_tier",
                   "dominance", "balance", "worst_axis", "worst_axis_name"]  # fmt: skip
        table = self.crs.sort_values(["rank", "auroc_rank"])[columns]
        reversals = self.reversals.summary()
        sensitivity = self.sensitivity.summary()
        lines = [
            f"Clinical Reliability Score (reference: {self.reference}; {self.bootstrap.n_boot} {_bootstrap_name(self.bootstrap)} replicates)",
            table.to_string(float_format=lambda v: f"{v:.3f}"),
            "",
            f"leading tier ({1 - self.bootstrap.alpha:.0%}, Holm): {', '.join(self.bootstrap.leading_tier)}",
            f"AUROC vs CRS ranking: {reversals['n_reversed']} of {reversals['n_pairs']} pairs reversed "
            f"({reversals['n_tied']} tied), Kendall tau {reversals['kendall_tau']:.3f}, "
            f"mean |rank displacement| {reversals['mean_abs_displacement']:.2f}",
            f"reversed pairs (AUROC order -> CRS order): {reversals['reversed_pairs']}",
            f"weight sensitivity ({sensitivity['n_samples']} Dirichlet draws): {sensitivity['top']} stays first in "
            f"{sensitivity['share_top_stays_first']:.1%}, mean Kendall tau to default {sensitivity['mean_kendall_tau']:.3f}",
        ]
        return "\n".join(lines)


def _bootstrap_name(bootstrap) -> str:
    if getattr(bootstrap, "level", "seed") == "seed+case":
        return "paired seed x test-case bootstrap"
    return "paired-seed bootstrap"


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def score_records(
    records: pd.DataFrame,
    reference: str,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    epsilon: float = DEFAULT_EPSILON,
    dominance_margin: float = 0.0,
    full_fraction: float = 1.0,
    retention_floor: float | None = None,
    n_weight_samples: int = 1000,
    predictions_dir: str | Path | None = None,
    case_level: bool = False,
) -> ScoreResult:
    """Run records -> seed axes -> axis errors -> CRS with bootstrap tiers, reversals, sensitivity.

    ``case_level=True`` adds the second bootstrap level (test cases resampled within class,
    :mod:`crs.scoring.case_bootstrap`); it reads the per-case predictions stage 2 wrote to
    ``predictions_dir`` (``<output>/predictions``). The point estimates do not change.
    """
    floor = RETENTION_FLOOR if retention_floor is None else retention_floor
    per_seed = seed_axes(records, full_fraction=full_fraction, retention_floor=floor)
    errors = axis_errors(per_seed)
    table = clinical_reliability_score(errors, reference, weights, epsilon, dominance_margin)
    if case_level:
        if predictions_dir is None:
            raise ScoreInputError(
                "case_level needs predictions_dir (the <output>/predictions folder stage 2 writes)"
            )
        boot = paired_seed_case_bootstrap(
            per_seed,
            load_cases(Path(predictions_dir), records, full_fraction),
            reference,
            weights,
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
            epsilon=epsilon,
            dominance_margin=dominance_margin,
            retention_floor=floor,
        )
    else:
        boot = paired_seed_bootstrap(
            per_seed,
            reference,
            weights,
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
            epsilon=epsilon,
            dominance_margin=dominance_margin,
        )
    mean_auroc = 1.0 - errors["discrimination"]
    table["auroc"] = mean_auroc.reindex(table.index)
    table["auroc_rank"] = rank_descending(table["auroc"].to_numpy())
    for column in ("crs_low", "crs_high", "p_rank1", "in_leading_tier"):
        table[column] = boot.table[column].reindex(table.index)
    reversals = rank_reversals(table["auroc"], table["crs"])
    sensitivity = weight_sensitivity(
        errors,
        reference,
        n_samples=n_weight_samples,
        seed=seed,
        epsilon=epsilon,
        dominance_margin=dominance_margin,
        weights=weights,
    )
    settings = {
        "reference": reference, "weights": component_weights(weights).tolist(), "n_boot": n_boot, "seed": seed,
        "alpha": alpha, "epsilon": epsilon, "dominance_margin": dominance_margin, "full_fraction": full_fraction,
        "retention_floor": floor, "n_weight_samples": n_weight_samples, "case_level": bool(case_level),
    }  # fmt: skip
    return ScoreResult(reference, per_seed, errors, table, boot, reversals, sensitivity, settings)


