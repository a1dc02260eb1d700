"""Paired-seed bootstrap, Holm tiers, rank reversals and weight sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.scoring.bootstrap import holm_adjust, paired_seed_bootstrap
from crs.scoring.formula import AXES, axis_errors, clinical_reliability_score
from crs.scoring.rankings import rank_reversals
from crs.scoring.stability import weight_sensitivity


def test_five_encoder_ranking_pair_with_two_reversals():
    # a orders A > B > C > D > E; b orders A > C > B > E > D: exactly (B, C) and (D, E) swap.
    # 10 pairs, 8 concordant, 2 reversed -> Kendall tau (8 - 2) / 10 = 0.6
    # ranks a: A1 B2 C3 D4 E5; b: A1 C2 B3 E4 D5 -> displacements 0 1 1 1 1 -> mean 0.8
    a = pd.Series({"A": 0.95, "B": 0.90, "C": 0.85, "D": 0.80, "E": 0.75})
    b = pd.Series({"A": 0.70, "C": 0.65, "B": 0.60, "E": 0.55, "D": 0.50})
    result = rank_reversals(a, b)
    assert result.reversed_pairs == (("B", "C"), ("D", "E"))
    assert (result.n_pairs, result.n_reversed, result.n_tied, result.n_concordant) == (10, 2, 0, 8)
    assert result.kendall_tau == pytest.approx(0.6)
    assert result.mean_abs_displacement == pytest.approx(0.8)


def test_ties_are_counted_apart():
    # B and C tie in b: that pair is tied, not reversed; competition ranks in b: A1 B2 C2
    a = pd.Series({"A": 3.0, "B": 2.0, "C": 1.0})
    b = pd.Series({"A": 3.0, "B": 1.0, "C": 1.0})
    result = rank_reversals(a, b)
    assert (result.n_reversed, result.n_tied, result.n_concordant) == (0, 1, 2)
    assert result.table.loc["C", "rank_b"] == 2
    assert result.mean_abs_displacement == pytest.approx(1 / 3)  # C: |3 - 2|


def test_holm_matches_statsmodels():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(size=int(rng.integers(1, 8))) ** 2
        assert holm_adjust(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-12)


def _seed_axes(
    profiles: dict[str, tuple[float, float, float, float]], n_seeds=5, noise=0.01, tasks=("t1", "t2"), seed=0
):
    """A seed-axes table: (auroc, ece, label_efficiency, retention) per encoder plus seed noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for encoder, (auroc, ece, efficiency, retention) in profiles.items():
        for task in tasks:
            for s in range(n_seeds):
                jitter = rng.normal(0, noise, 4)
                rows.append({"encoder": encoder, "task": task, "task_kind": "multiclass", "seed": s,
                             "auroc": auroc + jitter[0], "ece": max(ece + jitter[1], 0.0),
                             "label_efficiency": efficiency + jitter[2], "retention": min(retention + jitter[3], 1.0)})  # fmt: skip
    return pd.DataFrame(rows)


def test_bootstrap_point_estimate_tier_and_rank_probability():
    table = _seed_axes(
        {"ref": (0.80, 0.10, 0.50, 0.70), "strong": (0.92, 0.03, 0.75, 0.92), "weak": (0.75, 0.15, 0.4, 0.6)}
    )
    result = paired_seed_bootstrap(table, "ref", n_boot=300, seed=1)
    point = clinical_reliability_score(axis_errors(table), "ref")
    assert result.table["crs"].to_dict() == pytest.approx(point["crs"].to_dict())
    assert result.leader == "strong" and result.leading_tier == ("strong",)
    assert result.table.loc["strong", "p_rank1"] == 1.0
    assert result.table["p_rank1"].sum() == pytest.approx(1.0)
    assert (result.table["crs_low"] <= result.table["crs"] + 1e-12).all()
    assert (result.table["crs"] <= result.table["crs_high"] + 1e-12).all()


def test_indistinguishable_encoders_share_the_leading_tier():
    # twins differ only by seed noise much larger than their gap
    table = _seed_axes({"ref": (0.80, 0.10, 0.50, 0.70), "twin1": (0.900, 0.05, 0.7, 0.9), "twin2": (0.899, 0.05, 0.7, 0.9)},
                       noise=0.03)  # fmt: skip
    result = paired_seed_bootstrap(table, "ref", n_boot=300, seed=2)
    assert set(result.leading_tier) == {"twin1", "twin2"}
    assert 0.0 < result.table.loc["twin2", "p_rank1"] < 1.0


def test_each_replicate_recomputes_everything_from_one_shared_seed_draw():
    table = _seed_axes(
        {"ref": (0.80, 0.10, 0.50, 0.70), "a": (0.85, 0.08, 0.6, 0.8), "b": (0.83, 0.05, 0.55, 0.85)},
        noise=0.05,
    )
    result = paired_seed_bootstrap(table, "ref", n_boot=20, seed=3)
    for replicate in (0, 7, 19):
        counts = result.seed_draws.iloc[replicate]
        drawn = [int(seed) for seed, count in counts.items() for _ in range(int(count))]
        resampled = pd.concat(
            [table[table["seed"] == s] for s in drawn]
        )  # same seeds for every encoder and task
        expected = clinical_reliability_score(axis_errors(resampled), "ref")["crs"]
        assert result.replicates.iloc[replicate].to_dict() == pytest.approx(expected.to_dict(), abs=1e-12)


def test_bootstrap_needs_every_seed_everywhere():
    table = _seed_axes({"ref": (0.80, 0.10, 0.50, 0.70), "a": (0.85, 0.08, 0.6, 0.8)})
    with pytest.raises(ValueError, match="every seed"):
        paired_seed_bootstrap(table.iloc[1:], "ref", n_boot=10)


def test_weight_sensitivity_for_an_encoder_that_dominates_everyone():
    errors = pd.DataFrame([[0.2, 0.1, 0.4, 0.3], [0.1, 0.05, 0.2, 0.15], [0.3, 0.2, 0.5, 0.4]],
                          index=["ref", "best", "worst"], columns=list(AXES))  # fmt: skip
    result = weight_sensitivity(errors, "ref", n_samples=200, seed=0)
    # best has the highest u on every axis, so it leads under any weights; the full order is fixed too
    assert result.top == "best" and result.share_top_stays_first == 1.0
    assert result.summary()["mean_kendall_tau"] == pytest.approx(1.0)
    assert result.table.loc["worst", "mean_rank"] == 3.0
