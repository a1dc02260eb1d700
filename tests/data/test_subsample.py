"""The corruption subsample: whole patients, at least the rows asked for and no whole patient more, strata kept."""

from __future__ import annotations

import numpy as np

from crs.data.subsample import group_subsample, subsample_digest


def _table(seed: int = 0, n_groups: int = 400):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, n_groups)
    groups = np.repeat([f"p{g}" for g in range(n_groups)], sizes)
    per_group = rng.random(n_groups) < 0.3  # 30 % of patients positive (all their images)
    labels = np.repeat(per_group.astype(np.int64), sizes)
    return labels, groups


def test_whole_groups_at_least_n_rows_and_no_group_more():
    labels, groups = _table()
    chosen = group_subsample(labels, groups, 200, seed=1)
    assert len(chosen) >= 200 and np.all(np.diff(chosen) > 0)
    picked = set(groups[chosen])
    assert all(np.all(np.isin(np.flatnonzero(groups == g), chosen)) for g in picked)  # no patient split
    # No whole patient more than needed: the draw stops at the first group that reaches 200 rows, so
    # without that last group it had fewer than 200, and without the largest group fewer still.
    sizes = {g: int((groups == g).sum()) for g in picked}
    assert len(chosen) - max(sizes.values()) < 200
    assert subsample_digest(groups[chosen]) == subsample_digest(groups[group_subsample(labels, groups, 200, seed=1)])
    assert not np.array_equal(chosen, group_subsample(labels, groups, 200, seed=2))


def test_strata_proportions_are_kept_and_everything_when_asked_for_more():
    labels, groups = _table(seed=3, n_groups=2000)
    chosen = group_subsample(labels, groups, 1000, seed=0)
    full_share = labels.mean()
    assert abs(labels[chosen].mean() - full_share) < 0.03  # a plain random draw of ~400 groups: sd about 0.025
    assert np.array_equal(group_subsample(labels, groups, len(groups) + 5), np.arange(len(groups)))
    multilabel = np.stack([labels, 1 - labels], axis=1).astype(np.float32)
    assert len(group_subsample(multilabel, groups, 500)) >= 500
