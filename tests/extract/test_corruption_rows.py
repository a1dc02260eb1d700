"""``[extract] corruption_rows``: corrupted variants on a fixed, patient-level subsample of the test split.

End to end on the tiny synthetic spec: the plan's counts are the forward passes run, the cache holds
exactly the subsample's rows (recorded and fingerprinted), stage 2 evaluates them with their own
labels, the case bootstrap weights them by the clean rows' patient draws, and a changed N rewrites
the corrupted arrays (and only them).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cache.corrupt_rows import ARRAY_ATTR, GROUP_ATTR
from crs.cache.imports import FeatureImportError, import_features
from crs.cache.store import FeatureStore, store_path
from crs.cache.verify import verify_store
from crs.cli.main import cli
from crs.data.subsample import check_corruption_rows, corruption_rows, group_subsample, subsample_digest
from crs.evaluate.artifacts import CORRUPT_ROWS, RunFolder, labels_key, probs_key
from crs.scoring.case_bootstrap import replicate_weights
from crs.scoring.resample import group_bootstrap
from crs.spec import SpecError, load_spec

from tiny import write_tiny_spec

N_IMAGES = 200
VARIANTS = 4  # the tiny spec: 2 corruptions x 2 severities


def _spec(folder, rows: int | None, encoders=("pixel_stats",)):
    path = write_tiny_spec(folder, encoders=encoders, n_images=N_IMAGES, chunk_rows=16)
    if rows is not None:
        path.write_text(path.read_text().replace("[extract]\n", f"[extract]\ncorruption_rows = {rows}\n"))
    return path


def _plan(spec_path) -> dict:
    result = CliRunner().invoke(cli, ["plan", str(spec_path), "--json"], obj={})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _group(cache, dataset: str, encoder: str = "pixel_stats"):
    root = zarr.open_group(str(cache / f"{dataset}.zarr"), mode="r")
    return root[f"encoders/{encoder}/{root[f'encoders/{encoder}'].attrs['current']}"]


def _expected_positions(cache, dataset: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
    table = FeatureStore(store_path(cache, dataset)).read_table()
    test = table.indices("test")
    return group_subsample(table.labels[test], table.groups[test], rows), table.groups[test]


def test_subsample_extraction_stage2_and_bootstrap(tmp_path):
    rows = 20
    spec_path = _spec(tmp_path, rows, encoders=("pixel_stats", "resnet18"))
    cache = tmp_path / "cache"
    plan = _plan(spec_path)
    lines: list[str] = []
    stats = Benchmark(spec_path).extract(progress=False, announce=lines.append)
    assert stats.forward_images["pixel_stats"] == sum(r["passes"] for r in plan["rows"] if r["encoder"] == "pixel_stats")
    assert "patient-level subsample of" in "\n".join(lines)

    for dataset in ("derm", "fundus", "cxr"):
        positions, groups = _expected_positions(cache, dataset, rows)
        row = next(r for r in plan["rows"] if r["dataset"] == dataset and r["encoder"] == "pixel_stats")
        # The plan counts the subsample's passes, and states what it saves against the whole split.
        assert row["corruption_images"] == len(positions) < row["test_images"]
        assert row["corrupted_passes"] == len(positions) * VARIANTS
        assert row["passes_saved"] == (row["test_images"] - len(positions)) * VARIANTS
        assert row["corruption_se_factor"] == pytest.approx(np.sqrt(row["test_images"] / len(positions)))
        # Whole patients only: every image of a chosen patient is in, no image of another.
        chosen = np.zeros(len(groups), bool)
        chosen[positions] = True
        assert all(chosen[groups == g].all() for g in np.unique(groups[positions]))
        group = _group(cache, dataset)
        record = group.attrs[GROUP_ATTR]
        assert record["positions"] == positions.tolist() and record["requested"] == rows
        table = FeatureStore(store_path(cache, dataset)).read_table()
        assert record["ids_sha256"] == subsample_digest(table.ids[table.indices("test")][positions])
        for name in ("gaussian_noise/1", "jpeg/3"):
            assert group[f"corrupt/{name}"].shape[0] == len(positions)  # exactly the subsample's rows
            assert group[f"corrupt/{name}"].attrs[ARRAY_ATTR] == record["ids_sha256"]
        assert verify_store(cache / f"{dataset}.zarr") == []  # verify knows the subsample's row count
    assert "corruption subsample" in Benchmark(spec_path).plan().format()

    bench = Benchmark(spec_path)
    bench.probe(progress=False)
    score = bench.score()
    folder = RunFolder(load_spec(spec_path).output)
    arrays = folder.read_predictions("resnet18", "cxr")
    positions, groups = _expected_positions(cache, "cxr", rows)
    assert np.array_equal(arrays[CORRUPT_ROWS], positions)
    clean_labels = arrays[labels_key("clean")]
    corrupt_labels = arrays[labels_key("corrupt__jpeg__3")]
    assert np.array_equal(corrupt_labels, clean_labels[positions])  # the subsample's own labels
    assert arrays[probs_key("corrupt__jpeg__3")].shape[1] == len(positions)
    # Row 0 of the case bootstrap (every case once) recomputes the records' CRS from the predictions,
    # corrupted AUROCs included: the subsample's rows were read with the right labels and weights.
    table = score.bootstrap.table
    assert np.allclose(table["crs_from_predictions"], table["crs"], atol=1e-6)

    # The report states the robustness axis's standard error and what the subsample saved.
    report = (bench.report().parent / "report.md").read_text()
    test_images = len(clean_labels)
    assert f"cxr: corrupted conditions evaluated on a patient-level subsample of {len(positions):,} of " \
           f"{test_images:,} test images" in report
    assert f"{(test_images - len(positions)) * VARIANTS:,} forward passes per encoder saved" in report
    replicates = score.bootstrap.axis_error_replicates["robustness"]["resnet18"].to_numpy()
    assert f"resnet18 {np.std(replicates, ddof=1):.4f}" in report


def test_case_bootstrap_weights_on_subsample_rows_are_the_patient_draws():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 5, 150)
    groups = np.repeat([f"p{g}" for g in range(150)], sizes)
    labels = np.repeat((rng.random(150) < 0.3).astype(np.int64), sizes)
    positions = group_subsample(labels, groups, 120)
    draws = group_bootstrap(groups, labels, "binary", seed=[0, 1, 0])
    full = replicate_weights(draws, 40).as_float()
    subsample = replicate_weights(draws, 40, positions).as_float()
    assert np.array_equal(subsample, full[:, positions])
    assert np.array_equal(subsample[1:], draws.counts(range(40))[:, positions])
    # Patient level: every image of one patient carries the patient's count in every replicate.
    for g in np.unique(groups[positions])[:20]:
        mine = subsample[:, groups[positions] == g]
        assert np.all(mine == mine[:, :1])
    assert subsample[1:].sum(axis=1).std() > 0  # the draws vary: the subsample's total is not fixed


def test_changing_n_rewrites_only_the_corrupted_arrays(tmp_path):
    cache = tmp_path / "cache"
    first = _spec(tmp_path, 20)
    Benchmark(first).extract(progress=False)
    Benchmark(first).probe(progress=False)
    test_images = {d: len(FeatureStore(store_path(cache, d)).read_table().indices("test")) for d in ("derm", "cxr")}

    second = _spec(tmp_path, 30)
    plan = _plan(second)
    derm = next(r for r in plan["rows"] if r["dataset"] == "derm")
    assert derm["cached_passes"] == derm["clean_passes"]  # clean rows kept, corrupted ones not
    stats = Benchmark(second).extract(progress=False)
    new_positions, _ = _expected_positions(cache, "derm", 30)
    expected = sum(len(_expected_positions(cache, d, 30)[0]) * VARIANTS for d in ("derm", "fundus", "cxr"))
    assert stats.forward_images["pixel_stats"] == expected  # only the new subsample's corrupted rows
    group = _group(cache, "derm")
    assert group["corrupt/jpeg/1"].shape[0] == len(new_positions)
    assert group.attrs[GROUP_ATTR]["positions"] == new_positions.tolist()
    # Stage 2 sees the change (same fingerprint, same array names) and refits the unit.
    Benchmark(second).probe(progress=False)
    arrays = RunFolder(load_spec(second).output).read_predictions("pixel_stats", "derm")
    assert np.array_equal(arrays[CORRUPT_ROWS], new_positions)

    # Back to the whole split: the arrays hold every test row again and the record is gone.
    whole = _spec(tmp_path, None)
    Benchmark(whole).extract(progress=False)
    group = _group(cache, "derm")
    assert group["corrupt/jpeg/1"].shape[0] == test_images["derm"] and GROUP_ATTR not in group.attrs
    Benchmark(whole).probe(progress=False)
    assert CORRUPT_ROWS not in RunFolder(load_spec(whole).output).read_predictions("pixel_stats", "derm")


def test_bad_values_and_n_above_the_test_split(tmp_path):
    with pytest.raises(ValueError, match="positive"):
        check_corruption_rows(0)
    with pytest.raises(ValueError, match="positive"):
        check_corruption_rows(-3)
    spec_path = _spec(tmp_path, 0)
    with pytest.raises(SpecError, match="corruption_rows must be a positive"):
        load_spec(spec_path)
    whole = corruption_rows(np.array(["a", "b", "c"]), np.zeros(3), np.array(["p", "p", "q"]), 10)
    assert whole.is_full and "not below the 3 test images" in whole.note()

    spec_path = _spec(tmp_path, 10_000)
    lines: list[str] = []
    Benchmark(spec_path).extract(progress=False, announce=lines.append)
    assert "whole test split" in "\n".join(lines)
    group = _group(tmp_path / "cache", "derm")
    n_test = len(FeatureStore(store_path(tmp_path / "cache", "derm")).read_table().indices("test"))
    assert group["corrupt/jpeg/1"].shape[0] == n_test and GROUP_ATTR not in group.attrs


def test_import_features_with_a_corruption_subsample(tmp_path):
    spec_path = _spec(tmp_path, None)
    cache = tmp_path / "cache"
    Benchmark(spec_path).extract(progress=False)
    store = FeatureStore(store_path(cache, "derm"))
    table = store.read_table()
    test_ids = table.ids[table.indices("test")]
    positions, _ = _expected_positions(cache, "derm", 20)
    full = store.read_features("pixel_stats", "corrupt/jpeg/3")
    whole_file, sub_file = tmp_path / "whole.npz", tmp_path / "sub.npz"
    np.savez(whole_file, features=full, ids=test_ids)
    np.savez(sub_file, features=full[positions], ids=test_ids[positions])
    clean_file = tmp_path / "clean.npz"
    np.savez(clean_file, features=store.read_features("pixel_stats"), ids=table.ids)

    import_features(cache, "derm", "planted", clean_file)
    with pytest.raises(FeatureImportError, match="corruption subsample"):
        import_features(cache, "derm", "planted", whole_file, "corrupt/jpeg/3", corruption_rows_wanted=20)
    import_features(cache, "derm", "planted", sub_file, "corrupt/jpeg/3", corruption_rows_wanted=20)
    group = _group(cache, "derm", "planted")
    assert group.attrs[GROUP_ATTR]["positions"] == positions.tolist()
    assert np.array_equal(np.asarray(group["corrupt/jpeg/3"][:], np.float32), full[positions])
    # A whole-split condition beside the subsample's would mix rows in one group: refused.
    with pytest.raises(FeatureImportError, match="other test rows"):
        import_features(cache, "derm", "planted", whole_file, "corrupt/jpeg/1")
    result = CliRunner().invoke(cli, ["import-features", str(sub_file), "--dataset", "derm", "--encoder", "planted",
                                      "--condition", "corrupt/jpeg/1", "--corruption-rows", "20",
                                      "--cache", str(cache)], obj={})
    assert result.exit_code == 0, result.output
    assert verify_store(cache / "derm.zarr") == []
