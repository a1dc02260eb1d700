"""`crs import-features`: id-matched imports into the cache layout, refusals, and the h5 round trip."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cache.h5 import export_h5
from crs.cache.imports import FeatureImportError, import_features
from crs.cache.inspect import collect_garbage
from crs.cache.store import FeatureStore, store_path
from crs.cli.main import cli
from crs.evaluate.units import ProbeSettings, ProbeUnit, run_unit
from crs.spec import load_spec

SPEC = """
name = "imports"
cache = "{cache}"
output = "{out}"
encoders = ["pixel_stats"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
corruptions = ["gaussian_noise"]
severities = [2]

[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{data}"
options = {{ modality = "fundus", n_images = 60, image_size = 32 }}
"""

SETTINGS = ProbeSettings(label_fractions=(0.5, 1.0), seeds=(0, 1), Cs=(0.1, 1.0))


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("imports")
    spec_path = folder / "spec.toml"
    spec_path.write_text(SPEC.format(cache=folder / "cache", out=folder / "out", data=folder / "data"))
    Benchmark(load_spec(spec_path)).extract(progress=False)
    return folder


@pytest.fixture
def cache(extracted, tmp_path) -> Path:
    shutil.copytree(extracted / "cache", tmp_path / "cache")
    return tmp_path / "cache"


def stored(cache: Path):
    store = FeatureStore(store_path(cache, "fundus"))
    return store, store.read_table()


def test_h5_round_trip_gives_identical_run_records(cache, tmp_path):
    """Extracted in place, exported, imported under another name: the same records, row for row."""
    export_h5(cache, "fundus", "pixel_stats", tmp_path / "ps.h5")
    result = CliRunner().invoke(cli, [
        "import-features", str(tmp_path / "ps.h5"), "--cache", str(cache), "--dataset", "fundus",
        "--encoder", "pixel_copy", "--condition", "all",
    ])
    assert result.exit_code == 0, result.output
    assert "clean 60x120" in result.output and "corrupt/gaussian_noise/2" in result.output
    original = run_unit(ProbeUnit("pixel_stats", "fundus"), cache, SETTINGS).records
    imported = run_unit(ProbeUnit("pixel_copy", "fundus"), cache, SETTINGS).records
    assert len(original) == 2 * 2 * 2  # 2 fractions x 2 seeds x (clean + 1 corruption)
    pd.testing.assert_frame_equal(original.drop(columns="encoder"), imported.drop(columns="encoder"))
    store, _ = stored(cache)
    fields = store.encoder_group("pixel_copy", store.current_fingerprint("pixel_copy")).attrs["fields"]
    assert fields["source"] == "import:ps.h5" and fields["imported"] is True
    assert fields["origin"]["source"] == "baseline:pixel_stats"  # where the export came from


def test_npy_rows_are_reordered_by_id(cache, tmp_path):
    store, table = stored(cache)
    clean = store.read_features("pixel_stats")
    order = np.random.default_rng(0).permutation(len(table.ids))
    np.save(tmp_path / "f.npy", clean[order])
    (tmp_path / "ids.txt").write_text("\n".join(table.ids[order]) + "\n")
    result = import_features(cache, "fundus", "shuffled", tmp_path / "f.npy", ids_path=tmp_path / "ids.txt")
    assert result.rows == {"clean": 60} and result.dim == 120
    np.testing.assert_array_equal(stored(cache)[0].read_features("shuffled"), clean)


def test_npz_and_csv_ids_for_a_corruption(cache, tmp_path):
    store, table = stored(cache)
    noisy = store.read_features("pixel_stats", "corrupt/gaussian_noise/2")
    test_ids = table.ids[table.splits == "test"]
    np.savez(tmp_path / "noisy.npz", features=noisy[::-1], ids=test_ids[::-1])
    import_features(cache, "fundus", "npz_enc", tmp_path / "noisy.npz", condition="corrupt/gaussian_noise/2")
    np.testing.assert_array_equal(stored(cache)[0].read_features("npz_enc", "corrupt/gaussian_noise/2"), noisy)
    pd.DataFrame({"path": ["x"] * len(test_ids), "image_id": test_ids}).to_csv(tmp_path / "ids.csv", index=False)
    np.save(tmp_path / "noisy.npy", noisy)
    import_features(cache, "fundus", "csv_enc", tmp_path / "noisy.npy", "corrupt/gaussian_noise/2", tmp_path / "ids.csv")
    np.testing.assert_array_equal(stored(cache)[0].read_features("csv_enc", "corrupt/gaussian_noise/2"), noisy)


def test_conditions_accumulate_and_the_previous_group_turns_stale(cache, tmp_path):
    store, table = stored(cache)
    export_h5(cache, "fundus", "pixel_stats", tmp_path / "ps.h5")
    first = import_features(cache, "fundus", "acc", tmp_path / "ps.h5", "clean")
    second = import_features(cache, "fundus", "acc", tmp_path / "ps.h5", "corrupt/gaussian_noise/2")
    assert second.carried == ("clean",) and second.previous == first.fingerprint
    assert second.fingerprint != first.fingerprint
    store, _ = stored(cache)
    assert store.feature_array_names("acc") == ["clean", "corrupt/gaussian_noise/2"]
    np.testing.assert_array_equal(store.read_features("acc"), store.read_features("pixel_stats"))
    again = import_features(cache, "fundus", "acc", tmp_path / "ps.h5", "corrupt/gaussian_noise/2")
    assert again.unchanged and again.fingerprint == second.fingerprint
    removed = collect_garbage(cache).removed
    assert [(r.encoder, r.fingerprint) for r in removed] == [("acc", first.fingerprint)]


def test_a_store_can_be_created_from_the_spec_alone(extracted, tmp_path):
    """--spec writes the sample table (no encoder runs), then the import lands in it."""
    source_store, table = stored(extracted / "cache")
    np.savez(tmp_path / "f.npz", features=source_store.read_features("pixel_stats"), ids=table.ids)
    cache = tmp_path / "fresh-cache"
    result = CliRunner().invoke(cli, [
        "import-features", str(tmp_path / "f.npz"), "--spec", str(extracted / "spec.toml"),
        "--cache", str(cache), "--dataset", "fundus", "--encoder", "hosted",
    ])
    assert result.exit_code == 0, result.output
    store, new_table = stored(cache)
    assert new_table.ids.tolist() == table.ids.tolist()
    np.testing.assert_array_equal(new_table.labels, table.labels)
    assert store.encoder_names() == ["hosted"]
    assert not (cache / "fundus.zarr" / "encoders" / "pixel_stats").exists()


def write_npy(tmp_path: Path, features: np.ndarray, ids) -> tuple[Path, Path]:
    np.save(tmp_path / "bad.npy", features)
    (tmp_path / "bad_ids.txt").write_text("\n".join(map(str, ids)) + "\n")
    return tmp_path / "bad.npy", tmp_path / "bad_ids.txt"


def refusal(cache: Path, tmp_path: Path, features: np.ndarray, ids, condition: str = "clean") -> str:
    path, ids_path = write_npy(tmp_path, features, ids)
    with pytest.raises(FeatureImportError) as caught:
        import_features(cache, "fundus", "bad", path, condition, ids_path)
    message = str(caught.value)
    assert "\n" not in message
    assert "bad" not in FeatureStore(store_path(cache, "fundus")).encoder_names()  # nothing half-written
    return message


def test_refuses_missing_extra_and_repeated_ids(cache, tmp_path):
    _, table = stored(cache)
    features = np.zeros((60, 4), np.float32)
    assert "lacks 1 of the 60 ids of data set 'fundus'" in refusal(
        cache, tmp_path, features[:59], table.ids[:59])
    extra = np.concatenate([table.ids, ["stranger"]])
    assert "has 1 id(s) that are not in data set 'fundus' ('stranger')" in refusal(
        cache, tmp_path, np.zeros((61, 4), np.float32), extra)
    repeated = np.concatenate([table.ids[:59], table.ids[:1]])
    assert "1 id(s) appear more than once" in refusal(cache, tmp_path, features, repeated)


def test_refuses_wrong_row_counts_and_shapes(cache, tmp_path):
    _, table = stored(cache)
    assert "60 feature rows but 59 ids" in refusal(cache, tmp_path, np.zeros((60, 4), np.float32), table.ids[:59])
    assert "must be a 2-D array" in refusal(cache, tmp_path, np.zeros(60, np.float32), table.ids)
    # A corruption holds the test split only: all 60 ids are too many for it.
    message = refusal(cache, tmp_path, np.zeros((60, 4), np.float32), table.ids, "corrupt/gaussian_noise/2")
    assert "not in the test split of data set 'fundus'" in message


def test_refuses_nan_inf_and_float16_overflow(cache, tmp_path):
    _, table = stored(cache)
    features = np.ones((60, 4), np.float32)
    features[3, 1] = np.nan
    features[7, 0] = np.inf
    message = refusal(cache, tmp_path, features, table.ids)
    assert "2 row(s) hold NaN or infinite features" in message and repr(str(table.ids[3])) in message
    big = np.ones((60, 4), np.float32)
    big[0, 0] = 1e6
    assert "exceed the float16 cache range" in refusal(cache, tmp_path, big, table.ids)


def test_cli_refusals_are_one_line_with_exit_code_2(cache, tmp_path):
    runner = CliRunner()
    np.save(tmp_path / "f.npy", np.zeros((60, 4), np.float32))
    base = ["import-features", "--cache", str(cache), "--dataset", "fundus", "--encoder", "x"]
    cases = {
        "is a bare .npy: give its row ids with --ids FILE": [str(tmp_path / "f.npy")],
        "condition 'noisy' must be 'clean'": [str(tmp_path / "f.npy"), "--condition", "noisy"],
        "no cache store for data set 'elsewhere'": [str(tmp_path / "f.npy"), "--dataset", "elsewhere"],
        "features file": [str(tmp_path / "absent.npy")],
        "unknown features format '.txt'": [str(tmp_path / "f.txt")],
        "--condition all needs a crs export": [str(tmp_path / "f.npy"), "--condition", "all"],
        "--ids cannot be used with --condition all": [str(tmp_path / "f.npy"), "--condition", "all", "--ids", "x"],
    }
    (tmp_path / "f.txt").write_text("1 2 3")
    for expected, extra in cases.items():
        result = runner.invoke(cli, [*base, *extra])
        assert result.exit_code == 2, (expected, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("crs: error: ") and expected in lines[0], lines


def test_plain_h5_with_features_and_ids(cache, tmp_path):
    store, table = stored(cache)
    clean = store.read_features("pixel_stats")
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f["features"] = clean[::-1]
        f["ids"] = table.ids[::-1].astype(object).astype("S")
    import_features(cache, "fundus", "plain", tmp_path / "plain.h5")
    np.testing.assert_array_equal(stored(cache)[0].read_features("plain"), clean)
    with h5py.File(tmp_path / "no_ids.h5", "w") as f:
        f["features"] = clean
    with pytest.raises(FeatureImportError, match="has a 'features' dataset but no 'ids'"):
        import_features(cache, "fundus", "plain2", tmp_path / "no_ids.h5")
    (tmp_path / "ids.txt").write_text("\n".join(table.ids))
    import_features(cache, "fundus", "plain2", tmp_path / "no_ids.h5", ids_path=tmp_path / "ids.txt")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["embeddings"] = clean
    with pytest.raises(FeatureImportError, match=r"file with a 'features' dataset \(it holds \['embeddings'\]\)"):
        import_features(cache, "fundus", "plain3", tmp_path / "other.h5")


def test_import_waits_for_no_one_while_a_writer_holds_the_encoder(cache, tmp_path):
    from crs.cache.lock import LockHeldError, WriterLock, writer_lock_path

    export_h5(cache, "fundus", "pixel_stats", tmp_path / "ps.h5")
    with WriterLock(writer_lock_path(store_path(cache, "fundus"), "held"), purpose="another import"):
        with pytest.raises(LockHeldError, match="another import"):
            import_features(cache, "fundus", "held", tmp_path / "ps.h5")
    assert "held" not in FeatureStore(store_path(cache, "fundus")).encoder_names()
