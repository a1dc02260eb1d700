"""Calibration replicates centred on the squared scale (issue 30 item 1, decision 0061)."""

from __future__ import annotations

import numpy as np
import pytest

from crs import axes
from crs.axes.weighted import prepare_weights, weighted_calibration_error
from crs.scoring.intervals import centre_on_squares
from crs.scoring.resample import group_bootstrap


def test_centring_on_squares_by_hand():
    # point 0.3; replicates 0.4 and 0.5: mean square 0.205, shift 0.205 - 0.09 = 0.115
    values = np.array([[0.3], [0.4], [0.5]])
    out = centre_on_squares(values)
    assert out[0, 0] == 0.3
    assert out[1:, 0] == pytest.approx([np.sqrt(0.16 - 0.115), np.sqrt(0.25 - 0.115)], abs=1e-15)
    assert np.mean(out[1:, 0] ** 2) == pytest.approx(0.09, abs=1e-15)
    # a point at 0 with replicates above it: the smaller ones go to 0, none below
    zero = centre_on_squares(np.array([0.0, 0.01, 0.02, 0.05]))
    assert zero[0] == 0.0 and (zero[1:] >= 0).all() and zero[1] == 0.0
    # NaN stays NaN, other positions unaffected
    mixed = centre_on_squares(np.array([[0.1, np.nan], [0.2, np.nan], [0.3, np.nan]]))
    assert np.isnan(mixed[:, 1]).all() and np.isfinite(mixed[:, 0]).all()


def _calibrated_replicates(seed: int, n: int = 300, n_boot: int = 400):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p).astype(np.int64)
    draws = group_bootstrap(np.arange(n), y, "binary", seed=[seed])
    weights = prepare_weights(draws.counts(range(n_boot)))
    raw = weighted_calibration_error(p, y.astype(np.float64), weights)[0]
    return axes.debiased_ece(y, p, "binary"), raw


def test_a_calibrated_probe_gets_no_negative_bound_where_the_additive_shift_gave_one():
    """The demo printed 0.040 [-0.017, 0.090]: the additive shift of decision 0017 moves the roots of
    a noisy zero below 0. On the squared scale no bound is negative and the point stays inside."""
    negative_before = 0
    for seed in range(6):
        point, raw = _calibrated_replicates(seed)
        additive = raw - (raw.mean() - point)
        negative_before += np.percentile(additive, 2.5) < 0
        centred = centre_on_squares(np.concatenate([[point], raw]))[1:]
        low, high = np.percentile(centred, [2.5, 97.5])
        assert low >= 0.0
        assert low <= point <= high
        assert np.mean(centred**2) >= point**2 - 1e-12  # clipping at 0 only raises the mean square
    assert negative_before >= 3  # the old method's defect shows on these data sets


def test_the_gap_interval_is_simultaneous_over_every_pair():
    from crs.scoring.intervals import simultaneous_gap_interval

    rng = np.random.default_rng(3)
    values = 0.8 + 0.03 * rng.normal(size=(1001, 8))
    values[0] = values[1:].mean(axis=0) + 0.01 * np.arange(8)  # the point estimate amid its replicates
    # two groups: one pair, c is the 95 % quantile of |d* - d| / se
    low, high, critical = simultaneous_gap_interval(values[:, :2], 0, 1, 0.05)
    d = values[:, 0] - values[:, 1]
    se = d[1:].std(ddof=1)
    assert critical == pytest.approx(np.quantile(np.abs(d[1:] - d[0]) / se, 0.95), abs=1e-12)
    assert (low, high) == pytest.approx((d[0] - critical * se, d[0] + critical * se), abs=1e-12)
    # more groups, more pairs: a larger critical value (Tukey-like, about 3.0 for 8 independent groups)
    critical_8 = simultaneous_gap_interval(values, 0, 1, 0.05)[2]
    assert critical_8 > critical + 0.5
    # the order of the pair only flips the sign
    flipped = simultaneous_gap_interval(values, 1, 0, 0.05)
    assert flipped[:2] == pytest.approx((-simultaneous_gap_interval(values, 0, 1, 0.05)[1],
                                         -simultaneous_gap_interval(values, 0, 1, 0.05)[0]), abs=1e-12)


def test_null_gaps_are_rarely_findings_whatever_the_number_of_groups():
    """Issue 30: equal signal in four groups gave a gap finding in 16 of 100 data sets (percentile
    interval of the picked pair). Reduced run of the bench's null simulation: 60 data sets."""
    from crs.bench.interval_coverage import simulate_gap_null

    for n_groups in (4, 8):
        rates = simulate_gap_null(n_groups, data_sets=60, n_boot=100, patients_per_group=60)
        simultaneous = rates["simultaneous max-|t|, logit scale (0062)"]
        old = rates["percentile interval of the picked pair"]
        assert simultaneous <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 60)  # within its Monte Carlo error of 5 %
        assert old > simultaneous  # the picked pair's own interval finds gaps that are not there
        assert rates["box corners (printed, 0136)"] <= simultaneous  # the box is the more conservative


def test_on_the_logit_scale_the_auroc_interval_excludes_0_exactly_when_the_logit_one_does():
    from scipy.special import logit

    from crs.scoring.intervals import simultaneous_gap_interval

    rng = np.random.default_rng(5)
    aurocs = np.clip(np.array([0.9, 0.8, 0.7, 0.72]) + 0.04 * rng.normal(size=(401, 4)), 0.01, 0.99)
    aurocs[0] = [0.9, 0.8, 0.7, 0.72]
    low, high, critical = simultaneous_gap_interval(aurocs, 0, 2, 0.05, logit_scale=True)
    logits = logit(aurocs)
    on_logits = simultaneous_gap_interval(logits, 0, 2, 0.05)
    assert critical == pytest.approx(on_logits[2], abs=1e-12)
    ratio = 0.2 / (logits[0, 0] - logits[0, 2])
    assert (low, high) == pytest.approx((on_logits[0] * ratio, on_logits[1] * ratio), abs=1e-9)
    assert (low > 0) == (on_logits[0] > 0) and low < 0.2 < high


def test_the_measured_coverage_is_named_wherever_the_level_is_printed():
    """Issue 30 items 2 and 6: an interval that does not reach 0.93 for its worst encoder is labelled with its
    measured level (summary, crs score's text, the report's label and note, the subgroup section), never a
    bare 95 %; the label names the lowest worst-encoder coverage of the intervals it stands for."""
    from types import SimpleNamespace

    from crs.report.tables import interval_label, interval_note
    from crs.scoring.intervals import (
        LABEL_BELOW,
        LEADERBOARD_INTERVALS,
        MEASURED_COVERAGE,
        SUBGROUP_INTERVALS,
        coverage_sentence,
        measured_coverage,
    )

    assert set(LEADERBOARD_INTERVALS + SUBGROUP_INTERVALS) == set(MEASURED_COVERAGE)  # every printed interval
    case = SimpleNamespace(alpha=0.05, n_boot=200, level="seed+case")
    for intervals in (LEADERBOARD_INTERVALS, SUBGROUP_INTERVALS):
        worst = min(MEASURED_COVERAGE[name]["worst_encoder"] for name in intervals)
        expected = f"95\u00a0% nominal, \u2265\u00a0{100 * worst:.0f}\u00a0% measured" if worst < LABEL_BELOW else "95\u00a0%"
        assert interval_label(case, intervals) == expected
    assert min(c["worst_encoder"] for c in MEASURED_COVERAGE.values()) < LABEL_BELOW  # so some label is needed
    assert interval_label(case) == interval_label(case, LEADERBOARD_INTERVALS)  # equity not scored
    equity = SimpleNamespace(alpha=0.05, n_boot=200, level="seed+case", axis_error_replicates={"equity": None})
    assert interval_label(equity) == interval_label(case, LEADERBOARD_INTERVALS + ("worst_group_auroc",))
    sentence = coverage_sentence(0.05)
    for name, found in MEASURED_COVERAGE.items():  # crs score prints them all
        assert f"{found['worst_encoder']:.3f} for the worst encoder" in sentence, name
    assert coverage_sentence(0.05, LEADERBOARD_INTERVALS) in interval_note(case)
    assert measured_coverage(0.10) is None and interval_label(SimpleNamespace(alpha=0.10, level="seed+case")) == "90\u00a0%"
    assert interval_label(SimpleNamespace(alpha=0.05, level="seed")) == "95\u00a0%"


def test_the_measured_figures_are_those_of_the_docs_table():
    """Issue 30 item 6: MEASURED_COVERAGE stays in step with docs/crs.md 7b: per key, the range of the
    means and the lowest worst-encoder figure over the rows tagged with it (the CRS's two rows)."""
    import re
    from pathlib import Path

    from crs.scoring.intervals import MEASURED_COVERAGE

    text = (Path(__file__).resolve().parents[2] / "docs" / "crs.md").read_text(encoding="utf-8")
    section = text.split("## 7b.", 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[tuple[float, float]]] = {}
    for line in section.splitlines():
        tag = re.match(r"\| [^|`]*\(`(\w+)`\) \|", line)
        if tag:
            cells = re.findall(r"(\d\.\d{3}) / (\d\.\d{3})", line)
            assert len(cells) == 5, line  # one per design
            found.setdefault(tag.group(1), []).extend((float(m), float(w)) for m, w in cells)
    assert set(found) == set(MEASURED_COVERAGE)
    for key, cells in found.items():
        means, worst = [m for m, _ in cells], [w for _, w in cells]
        assert MEASURED_COVERAGE[key] == {"mean_low": min(means), "mean_high": max(means),
                                          "worst_encoder": min(worst)}, key


def test_the_box_figures_are_those_of_the_docs_table():
    """Issue 40: MEASURED_COVERAGE_BOX (what labels the default intervals) is docs/crs.md 7b's table of the
    default intervals: per key the range of the means and the lowest worst-encoder figure over the six designs
    (the CRS over its two- and four-axis rows), and every worst encoder at or above 0.95 - 2 MC SE (0.919)."""
    import re
    from pathlib import Path

    from crs.scoring.intervals import MEASURED_COVERAGE_BOX

    text = (Path(__file__).resolve().parents[2] / "docs" / "crs.md").read_text(encoding="utf-8")
    section = text.split("**The default intervals**", 1)[1].split("**The percentile intervals**", 1)[0]
    found: dict[str, list[tuple[float, float]]] = {}
    for line in section.splitlines():
        tag = re.match(r"\| (\w+) \| \d", line)
        if tag:
            cells = re.findall(r"(\d\.\d{3}) / (\d\.\d{3});", line)
            assert len(cells) == 6, line  # one per design, near-ties included
            key = "crs" if tag.group(1) == "crs_four_axes" else tag.group(1)
            found.setdefault(key, []).extend((float(m), float(w)) for m, w in cells)
    assert set(MEASURED_COVERAGE_BOX) <= set(found)
    for key, figures in MEASURED_COVERAGE_BOX.items():
        means, worst = [m for m, _ in found[key]], [w for _, w in found[key]]
        assert figures == {"mean_low": min(means), "mean_high": max(means), "worst_encoder": min(worst)}, key
    assert min(w for cells in found.values() for _, w in cells) >= 0.95 - 2 * 0.0154
