"""`crs cache ls | gc | export-h5` on a real extracted cache (pixel_stats on a tiny synthetic set)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cache.h5 import export_h5
from crs.cache.inspect import collect_garbage, disk_bytes, list_cache
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.cli.main import cli
from crs.spec import load_spec

SPEC = """
name = "cache-tools"
cache = "{cache}"
output = "{out}"
encoders = ["pixel_stats"]

[encoder_defaults]
weights = "random"
input_size = {input_size}

[extract]
corruptions = ["gaussian_noise"]
severities = [2]
chunk_rows = 16

[probe]
label_fractions = [0.5, 1.0]
seeds = [0]
Cs = [1.0]

[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{data}"
options = {{ modality = "fundus", n_images = 60, image_size = 32 }}
"""


def write_spec(folder: Path, data: Path, input_size: int = 32) -> Path:
    path = folder / f"spec{input_size}.toml"
    path.write_text(SPEC.format(cache=folder / "cache", out=folder / "out", data=data, input_size=input_size))
    return path


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> Path:
    """A folder holding one extracted cache; tests copy it before changing anything."""
    folder = tmp_path_factory.mktemp("cache_tools")
    Benchmark(load_spec(write_spec(folder, folder / "data"))).extract(progress=False)
    return folder


@pytest.fixture
def work(extracted, tmp_path) -> Path:
    shutil.copytree(extracted / "cache", tmp_path / "cache")
    return tmp_path


def test_ls_describes_the_extracted_group(work):
    from crs.corruptions import SUITE_VERSION

    (store,) = list_cache(work / "cache")
    assert (store.dataset, store.task_kind, store.n_images) == ("fundus", "ordinal", 60)
    (group,) = store.groups
    assert group.encoder == "pixel_stats" and group.current and group.complete
    n_test = int((FeatureStore(store.path).read_table().splits == "test").sum())
    assert [(a.name, a.shape, a.dtype) for a in group.arrays] == [
        ("clean", (60, 120), "float16"), ("corrupt/gaussian_noise/2", (n_test, 120), "float16")
    ]
    # 60 rows / 16 per chunk = 4 chunks, all flagged done.
    assert (group.arrays[0].chunks_done, group.arrays[0].n_chunks) == (4, 4)
    summary = group.summary_fields()
    assert summary["source"] == "baseline:pixel_stats"
    assert summary["input_size"] == 32
    assert summary["corruption_suite_version"] == SUITE_VERSION
    assert group.bytes == disk_bytes(Path(store.path) / "encoders" / "pixel_stats" / group.fingerprint) > 60 * 120 * 2
    assert store.bytes > group.bytes


def test_ls_cli_text_and_json(work):
    runner = CliRunner()
    text = runner.invoke(cli, ["cache", "ls", "--cache", str(work / "cache")])
    assert text.exit_code == 0, text.output
    assert "pixel_stats" in text.output and "current complete" in text.output and "clean 60x120 float16" in text.output
    raw = runner.invoke(cli, ["cache", "ls", "--json", "--cache", str(work / "cache")])
    assert raw.exit_code == 0, raw.output
    (store,) = json.loads(raw.output)
    (group,) = store["groups"]
    assert group["state"] == "current" and group["complete"] is True
    assert group["fields"]["source"] == "baseline:pixel_stats"
    assert group["arrays"][0] == {"name": "clean", "shape": [60, 120], "dtype": "float16",
                                  "chunks_done": 4, "n_chunks": 4, "complete": True}


def test_ls_on_a_missing_folder_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(cli, ["cache", "ls", "--cache", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"crs: error: cache folder {tmp_path / 'nowhere'} does not exist; pass the right cache folder (option --cache)"
    ]


def test_changed_preprocessing_leaves_a_stale_group_that_gc_removes(work, extracted):
    spec64 = load_spec(write_spec(work, extracted / "data", input_size=64))
    Benchmark(spec64).extract(progress=False)
    (store,) = list_cache(work / "cache")
    states = sorted((g.state, g.summary_fields()["input_size"]) for g in store.groups)
    assert states == [("current", 64), ("stale", 32)]
    stale = next(g for g in store.groups if not g.current)
    current = next(g for g in store.groups if g.current)
    stale_folder = Path(store.path) / "encoders" / "pixel_stats" / stale.fingerprint
    before = FeatureStore(store.path).read_features("pixel_stats")

    dry = collect_garbage(work / "cache", dry_run=True)
    assert [(r.fingerprint, r.reason) for r in dry.removed] == [(stale.fingerprint, "stale fingerprint")]
    assert dry.bytes_freed == stale.bytes and stale_folder.exists()
    assert "would remove" in dry.format()

    result = CliRunner().invoke(cli, ["cache", "gc", "--cache", str(work / "cache")])
    assert result.exit_code == 0, result.output
    assert f"removed fundus.zarr/pixel_stats/{stale.fingerprint}" in result.output
    assert not stale_folder.exists()
    (store,) = list_cache(work / "cache")
    assert [g.fingerprint for g in store.groups] == [current.fingerprint]
    np.testing.assert_array_equal(FeatureStore(store.path).read_features("pixel_stats"), before)
    assert collect_garbage(work / "cache").removed == ()


def _abandon_group(cache: Path, chunk_rows: int = 16):
    """A group as a killed extraction leaves it: created, one chunk of three written, never current."""
    from crs.cache.writer import ChunkedFeatureArray

    store = FeatureStore(store_path(cache, "fundus"), mode="a")
    group = store.encoder_group("resnet18", "0123456789abcdef", {"source": "timm:resnet18"})
    array = ChunkedFeatureArray(group, "clean", 40, 8, chunk_rows)
    array.write_chunk(0, np.ones((16, 8), np.float32))
    return store


def test_incomplete_abandoned_group_is_listed_and_collected(work):
    _abandon_group(work / "cache")
    (store,) = list_cache(work / "cache")
    abandoned = next(g for g in store.groups if g.encoder == "resnet18")
    assert not abandoned.current and not abandoned.complete
    assert (abandoned.arrays[0].chunks_done, abandoned.arrays[0].n_chunks) == (1, 3)
    assert "INCOMPLETE" in CliRunner().invoke(cli, ["cache", "ls", "--cache", str(work / "cache")]).output
    report = collect_garbage(work / "cache")
    assert [(r.encoder, r.reason) for r in report.removed] == [("resnet18", "incomplete, not current")]
    # The encoder node went with its last group; pixel_stats is untouched.
    assert FeatureStore(store.path).encoder_names() == ["pixel_stats"]


def test_gc_keeps_a_group_whose_writer_is_alive(work):
    from crs.cache.lock import WriterLock, writer_lock_path

    store = _abandon_group(work / "cache")
    with WriterLock(writer_lock_path(store.path, "resnet18"), purpose="test writer"):
        report = collect_garbage(work / "cache")
    assert report.removed == ()
    assert len(report.kept_locked) == 1 and "resnet18" in report.kept_locked[0]
    assert "resnet18" in FeatureStore(store.path).encoder_names()


def test_export_h5_holds_the_table_features_and_fields(work):
    store = FeatureStore(store_path(work / "cache", "fundus"))
    table = store.read_table()
    current = store.current_fingerprint("pixel_stats")
    group = store.encoder_group("pixel_stats", current)
    out = work / "pixel_stats.h5"
    result = CliRunner().invoke(
        cli, ["cache", "export-h5", "pixel_stats", str(out), "--dataset", "fundus", "--cache", str(work / "cache")]
    )
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        assert f["ids"].asstr()[...].tolist() == table.ids.tolist()
        assert f["splits"].asstr()[...].tolist() == table.splits.tolist()
        assert f["groups"].asstr()[...].tolist() == table.groups.tolist()
        assert f["test_ids"].asstr()[...].tolist() == table.ids[table.splits == "test"].tolist()
        np.testing.assert_array_equal(f["labels"][...], table.labels)
        assert f["features/clean"].dtype == np.float16
        # Bit-exact: the raw float16 bytes of the cache, not a float32 round trip.
        assert f["features/clean"][...].tobytes() == np.asarray(group["clean"][...]).tobytes()
        noisy = f["features/corrupt/gaussian_noise/2"][...]
        assert noisy.tobytes() == np.asarray(group["corrupt/gaussian_noise/2"][...]).tobytes()
        assert sorted(f["features"].keys()) == ["clean", "corrupt"]
        assert f.attrs["task_kind"] == "ordinal" and f.attrs["fingerprint"] == current
        assert json.loads(f.attrs["class_names"]) == list(table.task.class_names)
        assert json.loads(f.attrs["fields"]) == dict(group.attrs["fields"])
    assert not out.with_name(out.name + ".tmp").exists()


def test_export_h5_finds_the_only_store_and_refuses_unknown_encoders(work):
    runner = CliRunner()
    ok = runner.invoke(cli, ["cache", "export-h5", "pixel_stats", str(work / "a.h5"), "--cache", str(work / "cache")])
    assert ok.exit_code == 0 and (work / "a.h5").exists()
    missing = runner.invoke(cli, ["cache", "export-h5", "resnet18", str(work / "b.h5"), "--cache", str(work / "cache")])
    assert missing.exit_code == 2 and "choose one with --dataset" in missing.output


def test_export_h5_refuses_an_unfinished_group(work):
    _abandon_group(work / "cache")
    with pytest.raises(CacheError, match="not complete"):
        export_h5(work / "cache", "fundus", "resnet18", work / "x.h5", fingerprint="0123456789abcdef")
    assert not (work / "x.h5").exists()
