"""Paired-seed bootstrap, Holm tiers, rank reversals and weight sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.scoring.bootstrap import holm_adjust, paired_seed_bootstrap
from crs.scoring.formula import AXES, point_estimate
from crs.scoring.measurements import measure
from crs.scoring.rankings import kendall_tau, rank_reversals
from crs.scoring.settings import ScoreSettings
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


def test_kendall_tau_equals_scipy_bit_for_bit_with_ties():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 16))
        a = rng.integers(0, 5, n) / 4 if rng.random() < 0.5 else rng.normal(size=n)  # ties in half the draws
        b = rng.integers(0, 4, n) / 3 if rng.random() < 0.5 else rng.normal(size=n)
        expected = float(kendalltau(a, b).statistic)
        got = kendall_tau(a, b)
        assert (np.isnan(got) and np.isnan(expected)) or got == expected, (a, b, got, expected)


def test_holm_matches_statsmodels():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(size=int(rng.integers(1, 8))) ** 2
        assert holm_adjust(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-12)


def _records(profiles: dict[str, tuple[float, float, float, float]], n_seeds=5, noise=0.01, tasks=("t1", "t2"), seed=0):
    """Run records: per encoder (clean AUROC, calibration error, AUROC at 10 % labels, corrupted AUROC),
    each record with its own seed noise; one label fraction below the full one, one corruption."""
    rng = np.random.default_rng(seed)
    rows = []
    for encoder, (auroc, ece, low_label, corrupted) in profiles.items():
        for task in tasks:
            for s in range(n_seeds):
                jitter = rng.normal(0, noise, 4)
                base = {"encoder": encoder, "task": task, "task_kind": "multiclass", "seed": s, "corruption": "",
                        "severity": 0, "target": "", "auroc_se": 0.01, "ece": 0.05, "ece_se": 0.005}  # fmt: skip
                rows += [
                    {**base, "label_fraction": 1.0, "condition": "clean", "auroc": auroc + jitter[0],
                     "ece_debiased": ece + jitter[1]},
                    {**base, "label_fraction": 0.1, "condition": "clean", "auroc": low_label + jitter[2],
                     "ece_debiased": 0.1},
                    {**base, "label_fraction": 1.0, "condition": "corrupt", "corruption": "blur", "severity": 3,
                     "auroc": corrupted + jitter[3], "ece_debiased": 0.1},
                ]  # fmt: skip
    return pd.DataFrame(rows)


def _bootstrap(records, reference="ref", n_boot=300, seed=0):
    settings = ScoreSettings(reference=reference, n_boot=n_boot, seed=seed)
    measurements = measure(records, settings)
    point = point_estimate(measurements.axis_errors(), measurements.axis_standard_errors(), settings)
    return measurements, point, paired_seed_bootstrap(measurements, point)


def test_bootstrap_point_estimate_tier_and_rank_probability():
    records = _records({"ref": (0.80, 0.10, 0.65, 0.70), "strong": (0.92, 0.03, 0.85, 0.90),
                        "weak": (0.75, 0.15, 0.6, 0.6)})  # fmt: skip
    _, point, result = _bootstrap(records, seed=1)
    assert result.table["crs"].to_dict() == pytest.approx(point.table["crs"].to_dict())
    assert result.leader == "strong" and result.leading_tier == ("strong",)
    assert result.table.loc["strong", "p_rank1"] == 1.0
    assert result.table["p_rank1"].sum() == pytest.approx(1.0)
    assert (result.table["crs_low"] <= result.table["crs"] + 1e-12).all()
    assert (result.table["crs"] <= result.table["crs_high"] + 1e-12).all()
    # the seed level keeps its axis replicates too (the report's axis intervals come from them)
    assert list(result.axis_error_replicates) == list(AXES)
    assert result.axis_error_replicates["discrimination"].shape == (300, 3)


def test_indistinguishable_encoders_share_the_leading_tier():
    # twins differ only by seed noise much larger than their gap
    records = _records({"ref": (0.80, 0.10, 0.65, 0.70), "twin1": (0.900, 0.05, 0.8, 0.85),
                        "twin2": (0.899, 0.05, 0.8, 0.85)}, noise=0.03)  # fmt: skip
    _, _, result = _bootstrap(records, seed=2)
    assert set(result.leading_tier) == {"twin1", "twin2"}
    assert 0.0 < result.table.loc["twin2", "p_rank1"] < 1.0


@pytest.mark.parametrize("reference", ["ref", "median"])
def test_each_replicate_recomputes_everything_from_one_shared_seed_draw(reference):
    records = _records(
        {"ref": (0.80, 0.10, 0.65, 0.70), "a": (0.85, 0.08, 0.7, 0.8), "b": (0.83, 0.05, 0.72, 0.75)}, noise=0.05
    )
    _, point, result = _bootstrap(records, reference=reference, n_boot=20, seed=3)
    for replicate in (0, 7, 19):
        counts = result.seed_draws.iloc[replicate]
        drawn = [int(seed) for seed, count in counts.items() for _ in range(int(count))]
        # the same seeds for every encoder and task, each drawn copy its own seed
        resampled = pd.concat([records[records["seed"] == s].assign(seed=copy) for copy, s in enumerate(drawn)])
        errors = measure(resampled, point.settings).axis_errors()
        expected = point.score(errors.to_numpy())["crs"]  # the point estimate's floor and reference rule
        assert result.replicates.iloc[replicate].to_numpy() == pytest.approx(expected, abs=1e-12)


def test_bootstrap_needs_every_seed_everywhere():
    records = _records({"ref": (0.80, 0.10, 0.65, 0.70), "a": (0.85, 0.08, 0.7, 0.8)})
    with pytest.raises(ValueError, match=r"encoder 'ref'.*'seed': 0"):
        _bootstrap(records.iloc[1:])


def test_weight_sensitivity_for_an_encoder_that_dominates_everyone():
    errors = pd.DataFrame([[0.2, 0.1, 0.4, 0.3], [0.1, 0.05, 0.2, 0.15], [0.3, 0.2, 0.5, 0.4]],
                          index=["ref", "best", "worst"], columns=list(AXES))  # fmt: skip
    point = point_estimate(errors, None, ScoreSettings(reference="ref", error_floor=1e-3, n_weight_samples=200))
    result = weight_sensitivity(point)
    # best has the highest u on every axis, so it leads under any weights; the full order is fixed too
    assert result.top == "best" and result.share_top_stays_first == 1.0
    assert result.summary()["mean_kendall_tau"] == pytest.approx(1.0)
    # ranks among the competing encoders: the named reference is the yardstick (issue 40), not ranked
    assert result.table.loc["worst", "mean_rank"] == 2.0 and np.isnan(result.table.loc["ref", "mean_rank"])
    competing = weight_sensitivity(point_estimate(errors, None, point.settings.replace(reference_competes=True)))
    assert competing.table.loc["worst", "mean_rank"] == 3.0


def test_an_axis_never_measured_is_left_out_of_the_kept_replicates():
    """Issue 30: a clean-only spec stored an all-NaN bootstrap_axis_robustness table."""
    from crs.scoring.bootstrap import axis_error_frames

    errors = np.random.default_rng(0).uniform(size=(5, 2, len(AXES)))
    errors[:, :, AXES.index("robustness")] = np.nan
    errors[0, 1, AXES.index("calibration")] = np.nan  # one missing value is not a missing axis
    kept = axis_error_frames(errors, ["a", "b"])
    assert list(kept) == [axis for axis in AXES if axis != "robustness"]
    assert kept["calibration"].shape == (5, 2)
