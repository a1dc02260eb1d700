"""Hand-derived values for the axis functions and seed_axes, with the derivation beside each."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from crs import axes


def test_auroc_with_a_tie_counts_half():
    # positives score 0.8 and 0.4, negatives 0.4 and 0.1: pairs (0.8>0.4) 1, (0.8>0.1) 1,
    # (0.4=0.4) 1/2, (0.4>0.1) 1 -> 3.5 / 4
    assert axes.auroc([1, 1, 0, 0], [0.8, 0.4, 0.4, 0.1], "binary") == 0.875


def test_absent_class_is_nan_and_left_out_of_the_macro_mean():
    y = np.array([0, 0, 1, 1])  # class 2 never occurs
    probs = np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.8, 0.1]])
    per_class = axes.per_class_auroc(y, probs, "multiclass")
    assert per_class[0] == 1.0 and per_class[1] == 1.0 and math.isnan(per_class[2])
    assert axes.auroc(y, probs, "multiclass") == 1.0  # not (1 + 1 + 0) / 3


def test_nothing_scorable_gives_nan_not_zero():
    assert math.isnan(axes.auroc([1, 1, 1], [0.2, 0.5, 0.9], "binary"))
    y = np.array([[1.0, np.nan], [1.0, np.nan]])
    assert math.isnan(axes.auroc(y, np.full((2, 2), 0.5), "multilabel"))
    assert math.isnan(axes.ece(np.full((2, 1), np.nan), np.full((2, 1), 0.5), "multilabel"))


def test_ece_two_bins_by_hand():
    # binary, 2 bins [0, .5) and [.5, 1]: bin 0 holds p = .2, .4 with labels 0, 1 -> |0.5 - 0.3| = 0.2;
    # bin 1 holds p = .6, .8 with labels 1, 1 -> |1 - 0.7| = 0.3; ECE = .5 * .2 + .5 * .3 = 0.25, MCE = 0.3
    y, p = [0, 1, 1, 1], [0.2, 0.4, 0.6, 0.8]
    assert axes.ece(y, p, "binary", n_bins=2) == pytest.approx(0.25)
    assert axes.mce(y, p, "binary", n_bins=2) == pytest.approx(0.3)


def test_ece_bin_edges_follow_torchmetrics():
    # with 2 bins a confidence of exactly 0.5 goes to the upper bin and 1.0 to the last bin:
    # upper bin = {0.5 (label 1), 1.0 (label 1)} -> |1 - .75| = .25, share 1 -> ECE .25
    assert axes.ece([1, 1], [0.5, 1.0], "binary", n_bins=2) == pytest.approx(0.25)


def test_top_label_ece_multiclass_by_hand():
    # confidences .9 (correct) and .6 (wrong) fall in different bins of 15:
    # ECE = .5 * |1 - .9| + .5 * |0 - .6| = .05 + .3 = .35
    probs = np.array([[0.9, 0.1], [0.6, 0.4]])
    assert axes.ece(np.array([0, 1]), probs, "multiclass") == pytest.approx(0.35)


def test_equal_mass_bins_by_hand():
    # 4 cases, 2 equal-mass bins: {.1 (0), .2 (1)} -> |.5 - .15| = .35; {.7 (1), .9 (1)} -> |1 - .8| = .2
    # ECE = .5 * .35 + .5 * .2 = .275
    assert axes.ece([0, 1, 1, 1], [0.1, 0.2, 0.7, 0.9], "binary", n_bins=2, binning="mass") == pytest.approx(
        0.275
    )


def test_smooth_ece_near_zero_when_calibrated_and_near_gap_when_offset():
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.2, 0.8, 20000)
    outcome = (rng.uniform(size=confidence.size) < confidence).astype(float)
    assert axes.smooth_ece(outcome, confidence, "binary") < 0.02
    shifted = (rng.uniform(size=confidence.size) < confidence - 0.15).astype(float)  # over-confident by .15
    assert axes.smooth_ece(shifted, confidence, "binary") == pytest.approx(0.15, abs=0.03)


def test_label_efficiency_by_hand():
    # the scored axis is absolute: fractions .01, .1, 1 with AUROC .7, .8, .9 -> mean below 1: (.7 + .8) / 2
    assert axes.label_efficiency([0.01, 0.1, 1.0], [0.7, 0.8, 0.9]) == pytest.approx(0.75)
    assert axes.label_efficiency([1.0, 0.01, 0.1], [0.9, 0.7, 0.8]) == pytest.approx(0.75)  # order-free
    # the full-label AUROC does not enter: raising it leaves label efficiency unchanged
    assert axes.label_efficiency([0.01, 0.1, 1.0], [0.7, 0.8, 0.99]) == pytest.approx(0.75)
    assert math.isnan(axes.label_efficiency([1.0], [0.9]))  # nothing below the full fraction
    assert math.isnan(axes.label_efficiency([0.1, 1.0], [np.nan, 0.9]))
    with pytest.raises(axes.AxisInputError, match="distinct"):
        axes.label_efficiency([0.1, 0.1], [0.8, 0.8])


def test_relative_label_retention_by_hand():
    # reported, not scored: above-chance share kept. .7 -> .2 / .4 = .5; .8 -> .3 / .4 = .75; mean .625
    assert axes.relative_label_retention([0.01, 0.1, 1.0], [0.7, 0.8, 0.9]) == pytest.approx(0.625)
    # raising the full-label AUROC lowers the ratio: why it is not scored
    assert axes.relative_label_retention([0.01, 0.1, 1.0], [0.7, 0.8, 0.95]) < 0.625
    assert math.isnan(axes.relative_label_retention([0.01, 0.1], [0.7, 0.8]))  # no full fraction


def test_retention_floor_and_clip():
    assert axes.retention(0.7, 0.9) == pytest.approx(0.5)  # .2 / .4
    assert axes.retention(0.95, 0.9) == 1.0  # better than clean: full retention
    assert axes.retention(0.4, 0.9) == 0.0  # worse than chance: clipped to none
    assert axes.retention(0.52, 0.515) == 1.0  # AUROC rose: full retention, whatever the floor
    assert axes.retention(0.53, 0.52) == 1.0  # the audit's case: was 0.6 (.03 / .05)
    assert axes.retention(0.51, 0.52) == pytest.approx(0.2)  # fell: .01 / floor .05
    assert math.isnan(axes.retention(np.nan, 0.9))


def test_effective_robustness_by_hand():
    # three encoders on the logit line robust = clean - 1 (logit scale) have effective robustness 0;
    # a fourth 0.05 above what its clean AUROC predicts keeps about +0.05 (the fit moves a little)
    def expit(x):
        return 1.0 / (1.0 + np.exp(-x))

    clean_logits = np.array([0.5, 1.0, 2.0])
    on_line = axes.effective_robustness(expit(clean_logits), expit(clean_logits - 1.0))
    assert on_line == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    assert np.isnan(axes.effective_robustness([0.8, 0.9], [0.7, 0.8])).all()  # fewer than three


def test_mean_corruption_error_by_hand():
    # corruption 1: errors .1 + .2 vs reference .2 + .2 -> .75; corruption 2: .3 + .3 vs .2 + .1 -> 2
    # mCE = (.75 + 2) / 2 = 1.375
    ours = [[0.9, 0.8], [0.7, 0.7]]
    reference = [[0.8, 0.8], [0.8, 0.9]]
    assert axes.mean_corruption_error(ours, reference) == pytest.approx(1.375)
    assert axes.mean_corruption_error(reference, reference) == pytest.approx(1.0)


def test_bad_inputs_name_the_fix():
    with pytest.raises(axes.AxisInputError, match="kind"):
        axes.auroc([0, 1], [0.1, 0.9], "regression")
    with pytest.raises(axes.AxisInputError, match="0..1"):
        axes.auroc([0, 2], np.full((2, 2), 0.5), "multiclass")


def _record(encoder, fraction, condition, value, corruption="", severity=0, target="", seed=0):
    return {"encoder": encoder, "task": "t", "task_kind": "multiclass", "label_fraction": fraction, "seed": seed,
            "condition": condition, "corruption": corruption, "severity": severity, "target": target,
            "auroc": value, "ece": 0.1 if condition == "clean" else 0.3, "ece_debiased": 0.02,
            "brier": 0.2, "nll": 0.5}  # fmt: skip


def test_seed_axes_by_hand():
    records = pd.DataFrame(
        [
            _record("e", 0.01, "clean", 0.7),
            _record("e", 0.1, "clean", 0.8),
            _record("e", 1.0, "clean", 0.9),
            _record("e", 1.0, "corrupt", 0.8, "blur", 1),  # retention .3 / .4 = .75
            _record("e", 1.0, "corrupt", 0.6, "blur", 2),  # .1 / .4 = .25
            _record("e", 1.0, "shift", 0.7, target="site2"),  # .2 / .4 = .5
            _record("e", 0.1, "corrupt", 0.5, "blur", 1),  # not at the full fraction: ignored
        ]
    )
    row = axes.seed_axes(records).iloc[0]
    assert row["auroc"] == 0.9 and row["ece"] == 0.1 and row["ece_debiased"] == 0.02
    assert row["label_efficiency"] == pytest.approx(0.75)  # as in test_label_efficiency_by_hand
    assert row["label_retention"] == pytest.approx(0.625)
    assert row["corruption_auroc"] == pytest.approx(0.7)  # (.8 + .6) / 2: scored part of robustness
    assert row["shift_auroc"] == pytest.approx(0.7)
    assert row["corruption_retention"] == pytest.approx(0.5)  # (.75 + .25) / 2, reported
    assert row["shift_retention"] == pytest.approx(0.5)
    assert row["retention"] == pytest.approx(0.5)  # (.5 + .5) / 2
    assert row["corrupt_ece"] == pytest.approx(0.3)

    no_shift = axes.seed_axes(records[records["condition"] != "shift"]).iloc[0]
    assert no_shift["retention"] == pytest.approx(0.5) and math.isnan(no_shift["shift_retention"])
    assert math.isnan(no_shift["shift_auroc"])


def test_calibrated_ece_moments_by_hand():
    # two bins with V = .2 x .8 = .16 each (one case each): E|S| = sqrt(2 V / pi) = .31915 per bin, mean
    # ECE = (2 x .31915) / 2 = .31915; SD = sqrt((1 - 2 / pi) x .32) / 2 = .17051
    mean, sd = axes.calibrated_ece_moments(np.array([0.16, 0.16]), 2.0)
    assert mean == pytest.approx(np.sqrt(2 * 0.16 / np.pi))
    assert sd == pytest.approx(np.sqrt((1 - 2 / np.pi) * 0.32) / 2)


def test_debiased_calibration_error_and_its_standard_error_by_hand():
    # binary, 2 bins. Bin 0: p = .2 four times, labels 0 1 1 1: residuals -.2 .8 .8 .8, mean gap d = .55,
    # sample variance s^2 = (1.96 - 4 x .55^2) / 3 = .25, noise s^2 / 4 = .0625, g^2 = .3025 - .0625 = .24.
    # Bin 1: p = .8 four times, labels all 1: residuals .2, d = .2, s^2 = 0, g^2 = .04.
    # T = .5 x .24 + .5 x .04 = .14, error sqrt(.14) = .37417 (the plain ECE is .5 x .55 + .5 x .2 = .375).
    y = np.array([0, 1, 1, 1, 1, 1, 1, 1])
    p = np.array([0.2] * 4 + [0.8] * 4)
    assert axes.ece(y, p, "binary", n_bins=2) == pytest.approx(0.375)
    assert axes.debiased_ece(y, p, "binary", n_bins=2) == pytest.approx(np.sqrt(0.14))
    # Var T = sum share^2 (4 g^2 noise + 2 noise^2) = .25 (4 x .24 x .0625 + 2 x .0625^2) = .016953 (the
    # shares' term (sum share g^4 - T^2) / n is negative after its noise correction, so 0); the SE is
    # the SD of sqrt(max(X, 0)), X ~ N(.14, .016953), here by scipy's adaptive quadrature
    from scipy import integrate, stats

    sd_t = np.sqrt(0.25 * (4 * 0.24 * 0.0625 + 2 * 0.0625**2))

    def moment(k):
        return integrate.quad(lambda z: max(0.14 + sd_t * z, 0.0) ** (k / 2) * stats.norm.pdf(z), -12, 12, points=[-0.14 / sd_t])[0]

    assert axes.ece_standard_error(y, p, "binary", n_bins=2) == pytest.approx(np.sqrt(moment(2) - moment(1) ** 2), rel=2e-3)
    # within noise of calibrated: T < 0 gives 0, never a negative error. Bin 0 labels 0 0 0 1 around p = .2
    y_calibrated = np.array([0, 0, 0, 1, 1, 1, 1, 0])
    assert axes.debiased_ece(y_calibrated, p, "binary", n_bins=2) == 0.0
    # top label sees (max p, arg-max right): the same numbers as the binary problem on that pair
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8], [0.55, 0.45], [0.35, 0.65]])
    labels = np.array([0, 1, 1, 0, 0, 1])
    confidence = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == labels).astype(float)
    assert axes.debiased_ece(labels, probs, "multiclass", n_bins=3) == pytest.approx(
        axes.debiased_ece(correct, confidence, "binary", n_bins=3)
    )


def test_auroc_standard_error_by_hand():
    # y = 1 1 0 0, scores .8 .4 .4 .1, A = .875. Placements: positives V10 = 1, .75 (the tie counts
    # 1/2); negatives V01 = .75, 1. Influences (V - A) / 2 = +-.0625 for all four cases:
    # Var = 4 x .0625^2 = .015625, SE = .125
    assert axes.auroc_standard_error([1, 1, 0, 0], [0.8, 0.4, 0.4, 0.1], "binary") == pytest.approx(0.125)
    assert math.isnan(axes.auroc_standard_error([1, 1, 1], [0.2, 0.5, 0.9], "binary"))


def test_seed_axes_rejects_missing_columns():
    with pytest.raises(axes.AxisInputError, match="condition"):
        axes.seed_axes(pd.DataFrame({"encoder": ["e"], "task": ["t"]}))
