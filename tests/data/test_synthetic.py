"""The embedded synthetic benchmark: deterministic, group-consistent, learnable, with a real site shift."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from crs.data import load_dataset
from crs.data.base import DataError
from crs.data.images import load_image


def _pixels(dataset):
    return np.stack([load_image(dataset.root / p, dataset.image_size).float().numpy().ravel() / 255 for p in dataset.paths])


def test_generation_is_deterministic(tmp_path):
    a = load_dataset("synthetic", tmp_path / "a", modality="dermoscopy", n_images=30, image_size=32, seed=5)
    b = load_dataset("synthetic", tmp_path / "b", modality="dermoscopy", n_images=30, image_size=32, seed=5)
    assert (a.labels == b.labels).all() and (a.splits == b.splits).all()
    for path_a, path_b in zip(a.paths, b.paths, strict=True):
        assert (a.root / path_a).read_bytes() == (b.root / path_b).read_bytes()


@pytest.mark.parametrize("modality,kind,n_classes", [
    ("dermoscopy", "multiclass", 8), ("fundus", "ordinal", 5), ("chest_xray", "multilabel", 5),
])
def test_tasks_have_the_real_label_spaces(tmp_path, modality, kind, n_classes):
    dataset = load_dataset("synthetic", tmp_path, modality=modality, n_images=120, image_size=32)
    assert dataset.task.kind == kind and dataset.task.n_outputs == n_classes
    assert set(dataset.splits) == {"train", "val", "test"}
    for group in np.unique(dataset.groups):  # no patient or lesion crosses splits
        assert len(set(dataset.splits[dataset.groups == group])) == 1
    if kind != "multilabel":
        assert len(np.unique(dataset.labels)) == n_classes


def test_dermoscopy_signal_is_learnable_from_pixels(tmp_path):
    dataset = load_dataset("synthetic", tmp_path, modality="dermoscopy", n_images=300, image_size=32)
    X = _pixels(dataset)
    binary = (dataset.labels == 1).astype(int)  # NV against the rest
    train, test = dataset.splits != "test", dataset.splits == "test"
    model = LogisticRegression(C=0.1, max_iter=2000).fit(X[train], binary[train])
    assert roc_auc_score(binary[test], model.predict_proba(X[test])[:, 1]) > 0.75


def test_site_b_is_shifted_in_intensity_and_noise(tmp_path):
    site_a = load_dataset("synthetic", tmp_path, modality="chest_xray", n_images=60, image_size=32)
    site_b = load_dataset("synthetic", tmp_path, modality="chest_xray", n_images=60, image_size=32, site="b",
                          shift_target=True)
    assert set(site_b.splits) == {"test"}
    assert not set(site_a.ids) & set(site_b.ids)
    a, b = _pixels(site_a), _pixels(site_b)
    assert abs(a.std(axis=1).mean() - b.std(axis=1).mean()) > 0.01 or abs(a.mean() - b.mean()) > 0.02


def test_site_c_is_a_third_hospital_brighter_than_both(tmp_path):
    site_a, site_b, site_c = (
        load_dataset("synthetic", tmp_path, modality="chest_xray", n_images=60, image_size=32, site=site,
                     shift_target=site != "a")
        for site in ("a", "b", "c")
    )
    assert set(site_c.splits) == {"test"} and site_c.name == "synthetic-chest_xray-site-c"
    assert not set(site_c.ids) & (set(site_a.ids) | set(site_b.ids))
    a, b, c = _pixels(site_a), _pixels(site_b), _pixels(site_c)
    assert c.mean() > max(a.mean(), b.mean()) + 0.05  # over-exposed: 0.25 + 0.7 x^0.7
    assert c.std(axis=1).mean() < a.std(axis=1).mean()  # flatter contrast


def test_rejects_unknown_modality_and_site(tmp_path):
    with pytest.raises(DataError, match="modality"):
        load_dataset("synthetic", tmp_path, modality="mri")
    with pytest.raises(DataError, match="has sites \\('a', 'b'\\), not 'c'"):
        load_dataset("synthetic", tmp_path, modality="fundus", site="c")
    with pytest.raises(DataError, match=r"site must be one of \('a', 'b', 'c'\)"):
        load_dataset("synthetic", tmp_path, modality="chest_xray", site="d")


@pytest.mark.parametrize("modality", ["dermoscopy", "fundus"])
def test_second_site_is_another_camera_with_no_copies_of_site_a(tmp_path, modality):
    from crs.data.overlap import find_overlaps, fingerprint

    a = load_dataset("synthetic", tmp_path, modality=modality, n_images=80, image_size=32)
    b = load_dataset("synthetic", tmp_path, modality=modality, n_images=40, image_size=32, site="b", shift_target=True)
    assert b.name == f"synthetic-{modality}-site-b" and set(b.splits) == {"test"}
    assert b.task == a.task and set(b.ids).isdisjoint(a.ids)
    assert find_overlaps(fingerprint(a), fingerprint(b)) == []  # the demo's overlap check drops nothing
