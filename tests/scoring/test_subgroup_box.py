"""The worst group, the per-group AUROCs and the AUROC gap from one simultaneous box (issue 40, decisions 0135-0137).

The worst-group AUROC (the equity axis) is a minimum over groups: where groups are equal, the minimum of
their noisy AUROCs sits below the truth and the percentile interval of the replicate minimum missed it
(0.43-0.82 coverage on real CheXpert rows). crs now takes every interval from one studentised max-|t| box
over every scored group of every encoder, task and attribute (logit scale), and the worst group's
interval is the minimum at the box's corners.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit

from crs import Benchmark


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from crs.scoring.result import score_records

    from tiny import write_tiny_spec

    folder = tmp_path_factory.mktemp("box")
    bench = Benchmark(write_tiny_spec(folder, encoders=("pixel_stats", "resnet18"), n_images=240))
    bench.extract(progress=False)
    bench.probe(progress=False)
    return bench, score_records(bench.records(), "pixel_stats", run_folder=bench.folder, case_level=True, n_boot=200,
                                subgroup_min_images=10, subgroup_min_positives=1)


def _checked_rows(result):
    groups = result.subgroups[result.subgroups["scored"].astype(bool)]
    gaps = result.subgroup_gaps[result.subgroup_gaps["n_groups"] > 0]
    assert len(gaps) >= 8  # two encoders, three tasks, clean and shifted, two attributes
    return groups, gaps


@pytest.mark.slow
def test_the_worst_group_interval_is_the_minimum_at_the_box_corners(scored):
    """Issue 40: the worst group's interval runs from the lowest group lower bound to the lowest group upper
    bound (the minimum at the box's corners), so it covers the true worst group whenever every group's
    interval covers its own. The percentile interval of the replicate minimum (before) sat below both."""
    groups, gaps = _checked_rows(scored[1])
    for _, gap in gaps.iterrows():
        mine = groups[(groups["encoder"] == gap["encoder"]) & (groups["task"] == gap["task"])
                      & (groups["condition"] == gap["condition"]) & (groups["attribute"] == gap["attribute"])]
        assert gap["worst_auroc_low"] == pytest.approx(mine["auroc_low"].min(), abs=1e-12)
        assert gap["worst_auroc_high"] == pytest.approx(mine["auroc_high"].min(), abs=1e-12)
        assert gap["worst_auroc_low"] <= gap["worst_auroc"] <= gap["worst_auroc_high"]
        if gap["n_groups"] > 1:  # the picked pair's gap at the corners
            by_group = mine.set_index("group")
            best, worst = by_group.loc[gap["best_group"]], by_group.loc[gap["worst_group"]]
            assert gap["auroc_gap_low"] == pytest.approx(best["auroc_low"] - worst["auroc_high"], abs=1e-12)
            assert gap["auroc_gap_high"] == pytest.approx(best["auroc_high"] - worst["auroc_low"], abs=1e-12)


@pytest.mark.slow
def test_one_box_a_condition_holds_every_group_of_every_encoder_task_and_attribute(scored):
    """Every group interval is the box's: its point +- c s on the logit scale (c one critical value for the
    condition, s the group's bootstrap SD), so it is symmetric about the point on the logit scale and inside
    [0, 1]; a percentile interval of the replicates is not symmetric there."""
    groups, _ = _checked_rows(scored[1])
    clean = groups[groups["condition"] == "clean"]
    point = logit(np.clip(clean["auroc"].to_numpy(), 1e-4, 1 - 1e-4))
    low = logit(np.clip(clean["auroc_low"].to_numpy(), 1e-4, 1 - 1e-4))
    high = logit(np.clip(clean["auroc_high"].to_numpy(), 1e-4, 1 - 1e-4))
    moving = (high > low) & (clean["auroc_high"].to_numpy() < 0.999) & (clean["auroc_low"].to_numpy() > 0.001)
    assert moving.sum() >= 8  # (AUROCs are clipped to [1e-4, 1 - 1e-4] before the logit)
    # symmetric on the logit scale about the point: the box is point +- c s
    np.testing.assert_allclose((high - point)[moving], (point - low)[moving], atol=1e-9)
    # and back on the AUROC scale the interval is expit of those ends, inside [0, 1]
    np.testing.assert_allclose(clean["auroc_high"].to_numpy()[moving], expit(high[moving]), atol=1e-12)
    assert (clean["auroc_low"] >= 0).all() and (clean["auroc_high"] <= 1).all()


def test_the_box_critical_value_is_the_quantile_of_the_largest_studentised_deviation():
    """simultaneous_group_box by hand: logit scale, c the 95 % quantile over replicates of max_k |L*_k - L_k| / s_k;
    the worst group's interval is the minimum at the corners."""
    from crs.scoring.intervals import box_gap, box_minimum, simultaneous_group_box

    rng = np.random.default_rng(40)
    values = expit(1.2 + 0.25 * rng.normal(size=(401, 6)))
    values[0] = expit(1.2 + 0.01 * np.arange(6))
    box = simultaneous_group_box(values, 0.05)
    logits = logit(values)
    se = logits[1:].std(axis=0, ddof=1)
    critical = np.quantile((np.abs(logits[1:] - logits[0]) / se).max(axis=1), 0.95)
    assert box.critical == pytest.approx(critical, abs=1e-12)
    assert 2.2 < box.critical < 3.2  # six groups: wider than one group's 1.96
    np.testing.assert_allclose(box.low, expit(logits[0] - critical * se), atol=1e-12)
    np.testing.assert_allclose(box.high, expit(logits[0] + critical * se), atol=1e-12)
    assert box_minimum(box.low, box.high) == (box.low.min(), box.high.min())
    assert box_gap(box.low, box.high, 5, 0) == pytest.approx((box.low[5] - box.high[0], box.high[5] - box.low[0]))
    # a group never measured (no positives drawn anywhere) is NaN and leaves the others alone
    values[:, 2] = np.nan
    found = simultaneous_group_box(values, 0.05)
    assert np.isnan(found.low[2]) and np.isfinite(found.low[[0, 1, 3, 4, 5]]).all()
    assert np.isnan(box_minimum(found.low, found.high)[0])


def test_equal_groups_the_box_covers_the_worst_group_where_the_percentile_interval_misses():
    """Issue 40 at reduced size (crs.bench.subgroup_coverage): four unequal groups with equal signal, clustered
    patients, 60 test sets x 100 replicates. The percentile interval of the replicate minimum misses with the
    truth above it; the box's corners cover for every encoder; no gap finding under equal signal."""
    from crs.bench.subgroup_coverage import SHARES, idealised, simulate

    rows = simulate(idealised(SHARES[4]), 4, 1000, data_sets=60, n_boot=100)
    assert rows["worst group, box corners: worst cell"] >= 0.95 - 2 * np.sqrt(0.05 * 0.95 / 60)
    assert rows["worst group, percentile of the replicate minimum: worst cell"] < rows["worst group, box corners: worst cell"]
    assert rows["worst group, percentile: truth above: mean"] > 0.05
    assert rows["per-group AUROC, box: worst cell"] >= 0.95 - 2 * np.sqrt(0.05 * 0.95 / 60)
    assert rows["gap finding under equal signal, box corners: mean"] <= 0.05
    assert rows["gap, box corners: worst cell"] >= 0.95 - 2 * np.sqrt(0.05 * 0.95 / 60)


@pytest.mark.slow
def test_the_equity_axis_interval_is_the_box_projection(scored):
    """With the equity axis on, the summary's worst-group AUROC per encoder (mean over tasks and attributes of the
    clean worst group) carries the box's interval: the mean of the worst groups' lower and upper corners."""
    from crs.scoring.result import score_records

    bench, result = scored
    on = score_records(bench.records(), result.settings.replace(equity=True), run_folder=bench.folder)
    both = on.equity_stability
    gaps = on.subgroup_gaps[(on.subgroup_gaps["condition"] == "clean") & (on.subgroup_gaps["n_groups"] > 0)]
    by_encoder = gaps.groupby("encoder")
    np.testing.assert_allclose(both["worst_group_auroc_low"], by_encoder["worst_auroc_low"].mean().reindex(both.index))
    np.testing.assert_allclose(both["worst_group_auroc_high"], by_encoder["worst_auroc_high"].mean().reindex(both.index))
    assert (both["worst_group_auroc_low"] <= both["worst_group_auroc"]).all()
    assert (both["worst_group_auroc"] <= both["worst_group_auroc_high"]).all()
