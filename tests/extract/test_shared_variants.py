"""Each corrupted variant of an image is made once per run and shared by every encoder (issue 31 item 3).

The reference in the test is the old loop, one corruption call per encoder; the stores must be
bit for bit the same and the shared run must make 1/encoders of the corrupted images.
"""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import crs.extract.runner as runner
from crs.data import load_dataset
from crs.encoders import create
from crs.extract.runner import extract_dataset

VARIANTS = [("gaussian_noise", 1), ("gaussian_noise", 3), ("jpeg", 2)]
ENCODERS = ("pixel_stats", "resnet18")


def _per_encoder_window(jobs, rows, images, dataset, stats):
    """The old behaviour: every encoder corrupts the images it needs itself."""
    for job in jobs:
        job.process_clean(rows, images, stats)
        for name, mask_bytes, severities in job.variant_calls(rows):
            mask = np.frombuffer(mask_bytes, dtype=bool).copy()
            ids = [str(i) for i in dataset.ids[rows[mask]]]
            variants = runner.apply_severities(images[mask], dataset.modality, name, list(severities), ids)
            stats.variants_made += len(severities) * len(ids)
            job.embed_variants(rows, mask, name, severities, variants, stats)


def _arrays(cache, dataset_name):
    root = zarr.open_group(str(cache / f"{dataset_name}.zarr"), mode="r")
    out = {}
    for encoder in ENCODERS:
        group = root[f"encoders/{encoder}/{root[f'encoders/{encoder}'].attrs['current']}"]
        for name in ["clean", *(f"corrupt/{c}/{s}" for c, s in VARIANTS)]:
            out[(encoder, name)] = np.asarray(group[name][:])
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return load_dataset("synthetic", tmp_path_factory.mktemp("shared") / "data", modality="chest_xray",
                        n_images=60, image_size=32)


def _extract(dataset, cache, monkeypatch, per_encoder: bool):
    calls = []
    real = runner.apply_severities

    def counted(*args, **kwargs):
        calls.append(len(args[4]))
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(runner, "apply_severities", counted)
        if per_encoder:
            patch.setattr(runner, "process_window", _per_encoder_window)
        encoders = [create(name, weights="random", input_size=32) for name in ENCODERS]
        stats = extract_dataset(dataset, encoders, cache, VARIANTS, batch_size=8, progress=False, threads=1)
    return stats, calls


def test_variants_are_made_once_for_all_encoders_and_the_store_is_unchanged(data, tmp_path, monkeypatch):
    shared, shared_calls = _extract(data, tmp_path / "shared", monkeypatch, per_encoder=False)
    alone, alone_calls = _extract(data, tmp_path / "alone", monkeypatch, per_encoder=True)
    corrupted_passes = len(data.indices("test")) * len(VARIANTS)
    assert shared.variants_made == corrupted_passes  # each image's variant once ...
    assert alone.variants_made == corrupted_passes * len(ENCODERS)  # ... not once per encoder
    assert len(alone_calls) == len(ENCODERS) * len(shared_calls)
    assert shared.forward_images == alone.forward_images
    left, right = _arrays(tmp_path / "shared", data.name), _arrays(tmp_path / "alone", data.name)
    assert left.keys() == right.keys()
    for key in left:
        assert left[key].tobytes() == right[key].tobytes(), key
