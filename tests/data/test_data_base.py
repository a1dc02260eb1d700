"""Group-aware splits, nested label fractions and the data-root guard (crs/data/base.py)."""

from __future__ import annotations

import numpy as np
import pytest

from crs.data.base import DataError, Dataset, Task, group_split, nested_label_fractions, safe_join


def _groups_and_labels(n=600, n_groups=200, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, n_groups, n).astype(str)
    labels = rng.integers(0, n_classes, n)
    return groups, labels


def test_group_split_keeps_every_group_in_one_split():
    groups, labels = _groups_and_labels()
    splits = group_split(groups, labels, (0.6, 0.2, 0.2), seed=3)
    for group in np.unique(groups):
        assert len(set(splits[groups == group])) == 1


def test_group_split_is_deterministic_and_seed_dependent():
    groups, labels = _groups_and_labels()
    first = group_split(groups, labels, seed=1)
    assert (first == group_split(groups, labels, seed=1)).all()
    assert (first != group_split(groups, labels, seed=2)).any()


def test_group_split_proportions_are_close_to_requested():
    groups, labels = _groups_and_labels(n=3000, n_groups=1500)
    splits = group_split(groups, labels, (0.6, 0.2, 0.2), seed=0)
    shares = {s: np.mean(splits == s) for s in ("train", "val", "test")}
    assert abs(shares["train"] - 0.6) < 0.05 and abs(shares["test"] - 0.2) < 0.05


def test_group_split_zero_proportion_gives_empty_split():
    groups, labels = _groups_and_labels()
    splits = group_split(groups, labels, (0.8, 0.0, 0.2), seed=0)
    assert "val" not in set(splits)


def test_group_split_rejects_bad_proportions():
    groups, labels = _groups_and_labels()
    with pytest.raises(DataError, match="summing to 1"):
        group_split(groups, labels, (0.5, 0.2, 0.2))


def test_label_fractions_are_nested_and_floored():
    rng = np.random.default_rng(0)
    labels = rng.choice(5, size=1000, p=[0.7, 0.2, 0.05, 0.03, 0.02])
    subsets = nested_label_fractions(labels, [0.01, 0.05, 0.25, 1.0], seed=4, min_per_class=3)
    fractions = sorted(subsets)
    for small, large in zip(fractions, fractions[1:], strict=False):
        assert set(subsets[small]) <= set(subsets[large])
    # 1 % of 1000 is 10 rows, but the floor of 3 per class over 5 classes needs 15.
    assert len(subsets[0.01]) == 15
    for fraction in fractions:
        counts = np.bincount(labels[subsets[fraction]], minlength=5)
        assert counts.min() >= 3
    assert len(subsets[1.0]) == 1000


def test_label_fractions_are_stratified():
    rng = np.random.default_rng(1)
    labels = rng.choice(2, size=2000, p=[0.8, 0.2])
    subset = nested_label_fractions(labels, [0.1, 1.0], seed=0)[0.1]
    assert abs(labels[subset].mean() - labels.mean()) < 0.03


def test_label_fractions_same_seed_same_rows():
    labels = np.random.default_rng(2).integers(0, 3, 300)
    a = nested_label_fractions(labels, [0.1, 1.0], seed=7)
    b = nested_label_fractions(labels, [0.1, 1.0], seed=7)
    c = nested_label_fractions(labels, [0.1, 1.0], seed=8)
    assert (a[0.1] == b[0.1]).all()
    assert set(a[0.1]) != set(c[0.1])


def test_label_fractions_multilabel_floor_per_positive_label():
    rng = np.random.default_rng(3)
    labels = (rng.random((500, 4)) < [0.3, 0.1, 0.02, 0.2]).astype(np.float32)
    labels[rng.random((500, 4)) < 0.1] = np.nan
    subset = nested_label_fractions(labels, [0.01, 1.0], seed=0, min_per_class=2)[0.01]
    positives = (np.nan_to_num(labels[subset]) > 0.5).sum(axis=0)
    assert (positives >= 2).all()


def test_safe_join_refuses_escape(tmp_path):
    (tmp_path / "root").mkdir()
    assert safe_join(tmp_path / "root", "a/b.png") == (tmp_path / "root" / "a" / "b.png").resolve()
    with pytest.raises(DataError, match="outside the data root"):
        safe_join(tmp_path / "root", "../secret.png")
    with pytest.raises(DataError, match="outside the data root"):
        safe_join(tmp_path / "root", "/etc/passwd")


def test_dataset_checks_lengths_and_unique_ids(tmp_path):
    task = Task("t", "multiclass", ("a", "b"))
    ids = np.array(["x", "y"])
    with pytest.raises(DataError, match="not unique"):
        Dataset("d", tmp_path, task, "dermoscopy", 32, np.array(["x", "x"]), ["1", "2"], ids, np.zeros(2), np.array(["train"] * 2))
    with pytest.raises(DataError, match="labels has 1 rows"):
        Dataset("d", tmp_path, task, "dermoscopy", 32, ids, ["1", "2"], ids, np.zeros(1), np.array(["train"] * 2))
    with pytest.raises(DataError, match="unknown split"):
        Dataset("d", tmp_path, task, "dermoscopy", 32, ids, ["1", "2"], ids, np.zeros(2), np.array(["train", "holdout"]))
