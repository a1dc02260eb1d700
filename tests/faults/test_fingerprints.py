"""Stale caches: each input of an embedding gives a new fingerprint, a fresh extraction, and keeps the old group."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import crs.corruptions
import crs.extract.runner
from crs.cache.store import FeatureStore, store_path
from crs.data import load_dataset
from crs.encoders import create
from crs.encoders.encoder import Encoder
from crs.extract.runner import extract_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    data = tmp_path_factory.mktemp("fingerprint-data")
    loaded = load_dataset("synthetic", data, modality="chest_xray", n_images=40, image_size=16)
    loaded.name = "cxr"
    return loaded


def run(dataset, encoder, cache):
    return extract_dataset(dataset, [encoder], cache, variants=[("jpeg", 1)], batch_size=16, chunk_rows=16,
                           progress=False)


def fingerprints(cache, name="pixel_stats", dataset_name="cxr"):
    store = FeatureStore(store_path(cache, dataset_name))
    return store.fingerprints(name), store.current_fingerprint(name)


def _weights(encoder, monkeypatch, dataset):
    encoder.weights_digest = "sha256:" + "ab" * 32  # another weights file
    return encoder, dataset


def _preprocessing(encoder, monkeypatch, dataset):
    return create("pixel_stats", weights="random", input_size=8), dataset


def _pooling(encoder, monkeypatch, dataset):
    return create(dataclasses.replace(encoder.spec, pooling="max"), weights="random"), dataset


def _dtype(encoder, monkeypatch, dataset):
    monkeypatch.setattr(Encoder, "dtype", property(lambda self: "bfloat16-autocast"))
    return encoder, dataset


def _suite_version(encoder, monkeypatch, dataset):
    # where stage 1 reads it: a new suite version is what a changed corruption suite publishes
    monkeypatch.setattr(crs.extract.runner, "SUITE_VERSION", crs.corruptions.SUITE_VERSION + "-next")
    return encoder, dataset


def _image_list(encoder, monkeypatch, dataset):
    return encoder, dataset.subset(np.arange(1, len(dataset)))  # one image fewer


def _test_split(encoder, monkeypatch, dataset):
    splits = dataset.splits.copy()
    train, test = dataset.indices("train")[0], dataset.indices("test")[0]
    splits[train], splits[test] = "test", "train"  # same images, another test split
    return encoder, dataclasses.replace(dataset, splits=splits)


CHANGES = {
    "weights": _weights, "preprocessing": _preprocessing, "pooling": _pooling, "dtype": _dtype,
    "corruption_suite_version": _suite_version, "image_list": _image_list, "test_split": _test_split,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_change_gives_a_fresh_extraction_and_keeps_the_old_group(dataset, tmp_path, monkeypatch, change):
    cache = tmp_path / "cache"
    encoder = create("pixel_stats", weights="random")
    first = run(dataset, encoder, cache)
    assert first.forward_images["pixel_stats"] > 0
    (old,), current = fingerprints(cache)
    assert current == old
    assert run(dataset, encoder, cache).total_forward == 0  # unchanged: nothing recomputed

    changed_encoder, changed_dataset = CHANGES[change](encoder, monkeypatch, dataset)
    again = run(changed_dataset, changed_encoder, cache)
    # A fresh extraction of every row of the changed setting ...
    n_test = len(changed_dataset.indices("test"))
    assert again.forward_images["pixel_stats"] == len(changed_dataset) + n_test
    groups, current = fingerprints(cache)
    # ... into a new group that stage 2 now reads, with the old one kept until `crs cache gc`.
    assert current != old and sorted(groups) == sorted([old, current])
    store = FeatureStore(store_path(cache, "cxr"))
    assert store.read_features("pixel_stats").shape[0] == len(changed_dataset)
    assert store.root[f"encoders/pixel_stats/{old}"].attrs["complete"] is True


def test_going_back_reuses_the_kept_group(dataset, tmp_path):
    cache = tmp_path / "cache"
    encoder = create("pixel_stats", weights="random")
    run(dataset, encoder, cache)
    (old,), _ = fingerprints(cache)
    run(dataset.subset(np.arange(1, len(dataset))), encoder, cache)
    back = run(dataset, encoder, cache)
    assert back.total_forward == 0 and fingerprints(cache)[1] == old


def test_encoder_left_out_of_a_new_image_list_is_not_current(dataset, tmp_path):
    """Another encoder's features for the old image list must never be read against the new table."""
    cache = tmp_path / "cache"
    run(dataset, create("pixel_stats", weights="random"), cache)
    fewer = dataset.subset(np.arange(1, len(dataset)))
    extract_dataset(fewer, [], cache, progress=False)  # the table changes; pixel_stats is not re-run
    store = FeatureStore(store_path(cache, "cxr"))
    with pytest.raises(RuntimeError, match="no finished extraction"):
        store.current_fingerprint("pixel_stats")
    assert len(store.fingerprints("pixel_stats")) == 1  # kept for gc or for going back
