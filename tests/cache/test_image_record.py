"""A store records which image files its features came from; a changed folder is refused, never reused (decision 0046)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from crs.benchmark import Benchmark
from crs.cache.images import DIGEST_ARRAY, RECORD_ATTRIBUTE, file_digest, sample_rows
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.cli.main import cli
from crs.spec import load_spec

SPEC = """
name = "image-record"
cache = "{cache}"
output = "{out}"
encoders = ["pixel_stats"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
corruptions = []
chunk_rows = 16

[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{data}"
options = {{ modality = "fundus", n_images = 60, image_size = 32 }}
"""


def write_spec(folder: Path, data: Path, name: str = "spec.toml") -> Path:
    path = folder / name
    path.write_text(SPEC.format(cache=folder / "cache", out=folder / "out", data=data))
    return path


def extract(spec: Path):
    return Benchmark(load_spec(spec)).extract(progress=False)


def store_of(folder: Path) -> FeatureStore:
    return FeatureStore(store_path(folder / "cache", "fundus"))


def test_root_changed_to_other_pixels_is_refused_not_reused(tmp_path):
    first = extract(write_spec(tmp_path, tmp_path / "data"))
    assert first.total_forward == 60
    # the same ids under another folder, one image's pixels different
    shutil.copytree(tmp_path / "data", tmp_path / "other")
    (image_folder,) = (tmp_path / "other").glob("fundus-*/images")
    victim = sorted(image_folder.glob("*.png"))[7]
    pixels = np.asarray(Image.open(victim)).copy()
    pixels[:4] = 255 - pixels[:4]
    Image.fromarray(pixels).save(victim)
    with pytest.raises(CacheError, match=rf"1 of 60 checked image file\(s\) under .*other.* differ.*first: "
                                         rf"{victim.stem} .*content differs.*delete .*fundus.zarr"):
        extract(write_spec(tmp_path, tmp_path / "other", "other.toml"))
    # the full check names it too, and the CLI exits 1
    result = CliRunner().invoke(cli, ["cache", "verify", "--spec", str(tmp_path / "other.toml"), "--images"])
    assert result.exit_code == 1, result.output
    assert f"CHANGED fundus: {victim.stem}" in result.output
    assert "1 image file(s) changed" in result.output
    good = CliRunner().invoke(cli, ["cache", "verify", "--spec", str(tmp_path / "spec.toml"), "--images"])
    assert good.exit_code == 0 and "images fundus: every file as recorded" in good.output


def test_identical_copy_and_regeneration_reuse_the_cache(tmp_path):
    extract(write_spec(tmp_path, tmp_path / "data"))
    store = store_of(tmp_path)
    recorded = dict(store.root.attrs[RECORD_ATTRIBUTE])
    assert store.root[DIGEST_ARRAY].shape == (60,) and "data" in recorded["root"]
    # the synthetic generator rewrites the same bytes: nothing is invalidated
    shutil.rmtree(tmp_path / "data")
    assert extract(write_spec(tmp_path, tmp_path / "data")).total_forward == 0
    # the same files in another folder (touched: another mtime) reuse the cache and record the new root
    shutil.copytree(tmp_path / "data", tmp_path / "moved")
    for path in (tmp_path / "moved").rglob("*.png"):
        path.touch()
    assert extract(write_spec(tmp_path, tmp_path / "moved", "moved.toml")).total_forward == 0
    assert "moved" in store_of(tmp_path).root.attrs[RECORD_ATTRIBUTE]["root"]


def test_old_store_of_16bit_images_is_refused(tmp_path):
    """A store extracted before decision 0045 from 16-bit films holds features of white images."""
    data = tmp_path / "films"
    data.mkdir()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(30):
        Image.fromarray(rng.integers(0, 60_000, size=(16, 16)).astype(np.uint16)).save(data / f"f{i}.png")
        rows.append({"path": f"f{i}.png", "label": "ab"[i % 2], "split": ["train", "val", "test"][i % 3]})
    pd.DataFrame(rows).to_csv(data / "labels.csv", index=False)
    spec = tmp_path / "films.toml"
    spec.write_text(f"""
name = "films"
cache = "{tmp_path / 'cache'}"
output = "{tmp_path / 'out'}"
encoders = ["pixel_stats"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
corruptions = []
[[datasets]]
name = "films"
loader = "folder"
root = "{data}"
options = {{ modality = "chest_xray", split_column = "split", image_size = 32 }}
""")
    extract(spec)
    store = FeatureStore(store_path(tmp_path / "cache", "films"), mode="a")
    del store.root.attrs[RECORD_ATTRIBUTE]  # as a store written before the record existed
    with pytest.raises(CacheError, match=r"extracted before crs decoded I;16 images faithfully .*decision 0045"):
        extract(spec)


def test_sample_is_spread_and_digest_is_of_bytes(tmp_path):
    rows = sample_rows(10_000)
    assert len(rows) == 64 and rows[0] == 0 and rows[-1] == 9_999
    assert sample_rows(5).tolist() == [0, 1, 2, 3, 4]
    (tmp_path / "a").write_bytes(b"x")
    assert file_digest(tmp_path / "a") != file_digest(tmp_path / "b") == "missing"
