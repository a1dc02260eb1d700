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
    assert len(original) == 2 * 2 + 2  # clean: 2 fractions x 2 seeds; 1 corruption: the full fraction x 2 seeds
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


def chunk_inodes(cache: Path, encoder: str, fingerprint: str, name: str = "clean") -> set[int]:
    folder = cache / "fundus.zarr" / "encoders" / encoder / fingerprint / name / "c"
    return {p.stat().st_ino for p in folder.rglob("*") if p.is_file()}


def test_adding_a_condition_appends_to_the_group_and_keeps_its_fingerprint(cache, tmp_path):
    """Ten conditions imported one call each once grew the cache tenfold: now each call adds one array."""
    from crs.evaluate.incremental import unit_key

    export_h5(cache, "fundus", "pixel_stats", tmp_path / "ps.h5")
    first = import_features(cache, "fundus", "acc", tmp_path / "ps.h5", "clean")
    assert first.new_group and first.added == ("clean",)
    inodes = chunk_inodes(cache, "acc", first.fingerprint)
    key_before = unit_key(ProbeUnit("acc", "fundus"), cache, SETTINGS)
    second = import_features(cache, "fundus", "acc", tmp_path / "ps.h5", "corrupt/gaussian_noise/2")
    assert second.fingerprint == first.fingerprint and not second.new_group and second.previous is None
    assert second.added == ("corrupt/gaussian_noise/2",) and second.linked == ()
    assert "added to fingerprint" in second.format()
    store, _ = stored(cache)
    assert store.fingerprints("acc") == [first.fingerprint]  # no second group, nothing for gc
    assert chunk_inodes(cache, "acc", first.fingerprint) == inodes  # clean was not rewritten
    assert store.feature_array_names("acc") == ["clean", "corrupt/gaussian_noise/2"]
    np.testing.assert_array_equal(store.read_features("acc"), store.read_features("pixel_stats"))
    np.testing.assert_array_equal(store.read_features("acc", "corrupt/gaussian_noise/2"),
                                  store.read_features("pixel_stats", "corrupt/gaussian_noise/2"))
    group = store.encoder_group("acc", first.fingerprint)
    assert list(group.attrs["appended"]) == ["corrupt/gaussian_noise/2"]
    # Stage 2's incremental key sees the new array, so the unit is refitted.
    assert unit_key(ProbeUnit("acc", "fundus"), cache, SETTINGS) != key_before
    again = import_features(cache, "fundus", "acc", tmp_path / "ps.h5", "corrupt/gaussian_noise/2")
    assert again.unchanged and again.fingerprint == first.fingerprint and again.kept == ("corrupt/gaussian_noise/2",)
    assert collect_garbage(cache).removed == ()
    assert not (cache / ".crs-staging").exists()  # the staging folder goes when the import ends


def test_other_features_for_a_held_condition_make_a_new_fingerprint_and_link_the_rest(cache, tmp_path):
    store, table = stored(cache)
    export_h5(cache, "fundus", "pixel_stats", tmp_path / "ps.h5")
    first = import_features(cache, "fundus", "rep", tmp_path / "ps.h5", "clean")
    import_features(cache, "fundus", "rep", tmp_path / "ps.h5", "corrupt/gaussian_noise/2")
    test_ids = table.ids[table.splits == "test"]
    noisy = store.read_features("pixel_stats", "corrupt/gaussian_noise/2")
    np.savez(tmp_path / "other.npz", features=noisy + 1, ids=test_ids)
    replaced = import_features(cache, "fundus", "rep", tmp_path / "other.npz", "corrupt/gaussian_noise/2")
    assert replaced.new_group and replaced.fingerprint != first.fingerprint and replaced.previous == first.fingerprint
    assert replaced.replaced == ("corrupt/gaussian_noise/2",) and replaced.linked == ("clean",)
    store, _ = stored(cache)
    # The unchanged clean array is hard-linked, not copied: the same files on disk.
    assert chunk_inodes(cache, "rep", replaced.fingerprint) == chunk_inodes(cache, "rep", first.fingerprint)
    fields = store.encoder_group("rep", replaced.fingerprint).attrs["fields"]
    assert sorted(fields["conditions"]) == ["clean", "corrupt/gaussian_noise/2"]
    assert fields["conditions"]["corrupt/gaussian_noise/2"]["file"] == "other.npz"
    removed = collect_garbage(cache).removed
    assert [(r.encoder, r.fingerprint) for r in removed] == [("rep", first.fingerprint)]
    store, _ = stored(cache)  # the linked data outlives the stale group
    np.testing.assert_array_equal(store.read_features("rep"), store.read_features("pixel_stats"))
    np.testing.assert_allclose(store.read_features("rep", "corrupt/gaussian_noise/2"), noisy + 1, atol=1e-2)
    # Putting the first features back is another change: a third fingerprint, not the first one.
    back = import_features(cache, "fundus", "rep", tmp_path / "ps.h5", "corrupt/gaussian_noise/2")
    assert back.fingerprint not in (first.fingerprint, replaced.fingerprint)


def test_the_same_features_from_another_file_change_nothing(cache, tmp_path):
    store, table = stored(cache)
    clean = store.read_features("pixel_stats")
    np.savez(tmp_path / "a.npz", features=clean, ids=table.ids)
    first = import_features(cache, "fundus", "same", tmp_path / "a.npz")
    order = np.random.default_rng(1).permutation(len(clean))
    np.savez_compressed(tmp_path / "b.npz", features=clean[order], ids=table.ids[order])
    second = import_features(cache, "fundus", "same", tmp_path / "b.npz")
    assert second.unchanged and second.kept == ("clean",) and second.fingerprint == first.fingerprint
    assert stored(cache)[0].fingerprints("same") == [first.fingerprint]


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


# -- streaming: the file is read in row blocks, whatever its format and row order -------------------

@pytest.mark.parametrize("fmt", ["npy", "npz", "npz_compressed", "h5"])
@pytest.mark.parametrize("shuffled", [False, True])
def test_files_are_read_in_small_blocks_in_any_row_order(cache, tmp_path, monkeypatch, fmt, shuffled):
    """Blocks of at most 8 rows and 5-row chunks: the stored features equal the file's, bit for bit."""
    import crs.cache.feature_files as feature_files

    store, table = stored(cache)
    clean = store.read_features("pixel_stats")  # float16 values: the float16 store keeps them exactly
    order = np.random.default_rng(2).permutation(len(clean)) if shuffled else np.arange(len(clean))
    features, ids = clean[order], table.ids[order]
    path = tmp_path / f"f.{'h5' if fmt == 'h5' else fmt.split('_')[0]}"
    ids_path = None
    if fmt == "npy":
        np.save(path, features)
        (tmp_path / "ids.txt").write_text("\n".join(ids))
        ids_path = tmp_path / "ids.txt"
    elif fmt == "npz":
        np.savez(path, features=features, ids=ids)
    elif fmt == "npz_compressed":
        np.savez_compressed(path, features=features, ids=ids)
    else:
        with h5py.File(path, "w") as f:
            f["features"] = features
            f["ids"] = ids.astype("S")
    row_bytes = features.shape[1] * features.dtype.itemsize
    monkeypatch.setattr(feature_files, "BLOCK_BYTES", 8 * row_bytes)
    sizes: list[int] = []
    original = feature_files.FeatureFile.read

    def recording_read(self, start, stop):
        sizes.append(stop - start)
        return original(self, start, stop)

    monkeypatch.setattr(feature_files.FeatureFile, "read", recording_read)
    import_features(cache, "fundus", "streamed", path, ids_path=ids_path, chunk_rows=5)
    assert sizes and max(sizes) <= 8 and sum(sizes) == len(clean)  # every row read once, in small blocks
    np.testing.assert_array_equal(stored(cache)[0].read_features("streamed"), clean)


def test_bad_rows_are_counted_over_every_block_and_nothing_is_kept(cache, tmp_path, monkeypatch):
    import crs.cache.feature_files as feature_files

    _, table = stored(cache)
    features = np.ones((60, 4), np.float32)
    features[2, 0], features[41, 3], features[59, 1] = np.nan, np.inf, -np.inf
    monkeypatch.setattr(feature_files, "BLOCK_BYTES", 16 * 4 * 4)
    message = refusal(cache, tmp_path, features[::-1], table.ids[::-1])  # reordered path
    assert "3 row(s) hold NaN or infinite features" in message
    assert not (cache / ".crs-staging").exists()


def test_refuses_fortran_order_truncated_and_object_files_with_the_fix(cache, tmp_path):
    _, table = stored(cache)
    (tmp_path / "ids.txt").write_text("\n".join(table.ids))
    np.save(tmp_path / "f.npy", np.asfortranarray(np.ones((60, 4), np.float32)))
    with pytest.raises(FeatureImportError, match=r"Fortran order\); save it row by row with numpy.save"):
        import_features(cache, "fundus", "x", tmp_path / "f.npy", ids_path=tmp_path / "ids.txt")
    np.save(tmp_path / "t.npy", np.ones((60, 4), np.float32))
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[: len(data) - 100])
    with pytest.raises(FeatureImportError, match="truncated"):
        import_features(cache, "fundus", "x", tmp_path / "t.npy", ids_path=tmp_path / "ids.txt")
    np.save(tmp_path / "o.npy", np.array([[object()]] * 60), allow_pickle=True)
    with pytest.raises(FeatureImportError, match="holds Python objects"):
        import_features(cache, "fundus", "x", tmp_path / "o.npy", ids_path=tmp_path / "ids.txt")
    assert "x" not in FeatureStore(store_path(cache, "fundus")).encoder_names()


# -- the sample table from a spec needs the CSV, not the images --------------------------------------

FOLDER_SPEC = """
name = "byo"
cache = "{cache}"
output = "{out}"
encoders = ["hosted"]
[[datasets]]
name = "pets"
loader = "folder"
root = "{data}"
options = {{ modality = "dermoscopy", split_column = "split", group_column = "patient", name = "pet photos" }}
"""


def test_a_spec_table_needs_no_image_on_disk(tmp_path):
    """Features computed elsewhere: the CSV is here, the images are not (and the folder option `name` works)."""
    from data_trees import build_folder

    data = tmp_path / "data"
    build_folder(data)
    shutil.rmtree(data / "images")
    spec = tmp_path / "spec.toml"
    spec.write_text(FOLDER_SPEC.format(cache=tmp_path / "cache", out=tmp_path / "out", data=data))
    csv = pd.read_csv(data / "labels.csv")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "f.npz", features=rng.standard_normal((len(csv), 6)).astype(np.float32),
             ids=csv["path"].to_numpy(str))
    result = CliRunner().invoke(cli, [
        "import-features", str(tmp_path / "f.npz"), "--spec", str(spec), "--dataset", "pets", "--encoder", "hosted",
    ])
    assert result.exit_code == 0, result.output
    table = FeatureStore(store_path(tmp_path / "cache", "pets")).read_table()
    assert len(table.ids) == 18 and table.task.name == "pet photos"
    assert sorted(set(table.splits)) == ["test", "train", "val"]
    # the CSV's own split column: the table the import wrote records it, so the bootstrap resamples plain
    assert (table.split_design, table.split_design_recorded) == ("imported", True)
