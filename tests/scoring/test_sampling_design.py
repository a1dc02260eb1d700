"""The case bootstrap follows how each test set was drawn (issue 30 item 1, decision 0085): the design
travels from the loader through the cache and the predictions to the resample, the summary and the report."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from crs.cache.store import FeatureStore, store_path
from crs.data import load_dataset
from crs.data.base import Dataset, Task, group_split, split_strata
from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder
from crs.report.run_provenance import design_rows
from crs.scoring.layouts import sampling_design
from crs.scoring.resample import group_bootstrap, group_strata


def _stratum_totals(counts: np.ndarray, group_stratum: np.ndarray) -> np.ndarray:
    """(replicates, strata) how many groups each replicate drew from each stratum."""
    return np.stack([counts[:, group_stratum == s].sum(axis=1) for s in np.unique(group_stratum)], axis=1)


# --- end to end on the tiny spec: crs's own splits and an official shift target ----------------------------


def test_the_design_travels_from_the_loader_to_the_score_and_the_report(tiny_run):
    spec, _, _, score = tiny_run
    tables = {name: FeatureStore(store_path(spec.cache, name)).read_table() for name in ("derm", "fundus", "cxr", "cxr-b")}
    assert {name: (t.split_design, t.split_design_recorded) for name, t in tables.items()} == {
        "derm": ("stratified", True), "fundus": ("stratified", True), "cxr": ("stratified", True),
        "cxr-b": ("official", True),  # the synthetic second site: every image is test, nothing was drawn
    }
    arrays = RunFolder(spec.output).read_predictions_on_demand("resnet18", "cxr")
    assert arrays[artifacts.design_key()].tolist() == ["stratified", "recorded"]
    assert arrays[artifacts.design_key("cxr-b")].tolist() == ["official", "recorded"]

    designs = score.interval_summary()["sampling_design"]
    assert {(row["data_set"], row["rows"], row["design"], row["known"]) for row in designs} == {
        ("derm", "test split", "stratified", "recorded"), ("fundus", "test split", "stratified", "recorded"),
        ("cxr", "test split", "stratified", "recorded"), ("cxr-b", "shift target of cxr", "official", "recorded"),
    }
    stored = json.loads((spec.output / "score" / "summary.json").read_text())
    assert stored["interval"]["sampling_design"] == designs
    box = dict(design_rows(score))  # the report's provenance box: one line per data set
    assert set(box) == {"test set derm", "test set fundus", "test set cxr", "test set cxr-b"}
    assert box["test set cxr"].startswith("stratified") and "within the split's label strata" in box["test set cxr"]
    assert box["test set cxr-b"].startswith("official") and box["test set cxr-b"].endswith("no strata")
    assert "test sets resampled as they were drawn:" in score.format()


def test_the_tiny_run_resamples_its_own_split_within_strata_and_the_official_one_plain(tiny_run):
    spec, _, _, score = tiny_run
    n_boot = 50
    test_draws = score.bootstrap.case_draws["cxr"]
    table = FeatureStore(store_path(spec.cache, "cxr")).read_table()
    test = table.indices("test")
    # the bootstrap's strata are the ones the split drew the test patients in
    first_row = np.unique(test_draws.row_group, return_index=True)[1]
    split = split_strata(table.groups[test], table.labels[test])[first_row]
    # the bootstrap's strata are the split's, a stratum of one patient pooled into another (decision 0008)
    pairs = np.unique(np.stack([split, test_draws.group_stratum]), axis=1).T
    assert len(np.unique(pairs[:, 0])) == len(pairs)  # each split stratum lies in one bootstrap stratum
    shared = [s for s in np.unique(split) if np.sum(split == s) >= 2]
    assert len(np.unique(test_draws.group_stratum)) >= len(shared) > 1
    totals = _stratum_totals(test_draws.group_counts(range(n_boot)), test_draws.group_stratum)
    assert (totals == totals[0]).all()  # every replicate draws each stratum's patient count

    shift_draws = score.bootstrap.shift_case_draws["cxr"]["cxr-b"]
    assert len(np.unique(shift_draws.group_stratum)) == 1  # plain patient-level
    target = FeatureStore(store_path(spec.cache, "cxr-b")).read_table()
    labelled = split_strata(target.groups, target.labels)[np.unique(shift_draws.row_group, return_index=True)[1]]
    by_label = _stratum_totals(shift_draws.group_counts(range(n_boot)), labelled)
    assert (by_label.sum(axis=1) == shift_draws.n_groups).all() and np.ptp(by_label, axis=0).max() > 0


# --- the resample itself --------------------------------------------------------------------------------


def _multilabel_split(seed: int = 3):
    """A multilabel data set of 240 patients x 1-3 images, split by crs; its test rows."""
    rng = np.random.default_rng(seed)
    images = rng.integers(1, 4, 240)
    groups = np.repeat(np.arange(240), images).astype(str)
    labels = (rng.random((len(groups), 3)) < [0.3, 0.2, 0.1]).astype(np.float32)
    splits = group_split(groups, labels, (0.5, 0.1, 0.4), seed=seed)
    test = splits == "test"
    return groups[test], labels[test]


def test_a_stratified_split_is_resampled_with_each_strata_patient_count_fixed():
    groups, labels = _multilabel_split()
    draws = group_bootstrap(groups, labels, "multilabel", seed=7, design="stratified")
    counts = draws.group_counts(range(200))
    first_row = np.unique(draws.row_group, return_index=True)[1]
    split = split_strata(groups, labels)[first_row]
    sizes = np.array([np.sum(split == s) for s in np.unique(split)])
    assert sizes.min() >= 2  # no lone stratum to pool here: the split's strata are the bootstrap's
    totals = _stratum_totals(counts, split)
    assert (totals == sizes).all()
    # the split's rule (majority first positive label), not decision 0008's (label with most positives)
    old_rule = group_strata(groups, labels, "multilabel")[first_row]
    assert not (_stratum_totals(counts, old_rule) == _stratum_totals(counts, old_rule)[0]).all()


@pytest.mark.parametrize("design", ["official", "imported"])
def test_an_official_or_imported_split_is_resampled_plain(design):
    groups, labels = _multilabel_split()
    draws = group_bootstrap(groups, labels, "multilabel", seed=7, design=design)
    assert len(np.unique(draws.group_stratum)) == 1
    counts = draws.group_counts(range(200))
    totals = _stratum_totals(counts, split_strata(groups, labels)[np.unique(draws.row_group, return_index=True)[1]])
    assert (totals.sum(axis=1) == draws.n_groups).all() and (np.ptp(totals, axis=0) > 0).all()


def test_an_unknown_design_is_refused():
    with pytest.raises(ValueError, match=r"sampling design 'random' is not one of"):
        group_bootstrap(np.arange(6), np.array([0, 1] * 3), "binary", design="random")


def test_predictions_without_a_design_read_as_the_design_their_rows_had(caplog):
    with caplog.at_level(logging.WARNING):
        assert sampling_design({}, artifacts.design_key(), "old.npz", shift=False) == ("stratified", "inferred")
        assert sampling_design({}, artifacts.design_key("b"), "old.npz", shift=True) == ("official", "inferred")
    assert "old.npz has no clean_design" in caplog.text and "rerun `crs probe`" in caplog.text
    stored = {artifacts.design_key(): np.array(["imported", "recorded"])}
    assert sampling_design(stored, artifacts.design_key(), "new.npz", shift=False) == ("imported", "recorded")


# --- loaders and the cache ---------------------------------------------------------------------------


def test_each_loader_says_how_its_test_split_was_drawn(tmp_path):
    from data_trees import build_chexpert, build_folder

    build_chexpert(tmp_path / "chexpert")
    assert load_dataset("chexpert", tmp_path / "chexpert").split_design == "stratified"
    assert load_dataset("chexpert", tmp_path / "chexpert", official_valid_as_test=True).split_design == "official"
    build_folder(tmp_path / "folder")
    options = {"modality": "dermoscopy", "group_column": "patient", "image_size": 16}
    assert load_dataset("folder", tmp_path / "folder", **options).split_design == "stratified"
    assert load_dataset("folder", tmp_path / "folder", split_column="split", **options).split_design == "imported"
    site_b = load_dataset("synthetic", tmp_path / "synthetic", modality="chest_xray", site="b", n_images=40,
                          image_size=16, shift_target=True)
    assert site_b.split_design == "official"
    assert site_b.subset(np.arange(10)).split_design == "official"


def _dataset(splits: np.ndarray, design: str = "") -> Dataset:
    n = len(splits)
    return Dataset("d", Path("/nonexistent"), Task("d", "multiclass", ("a", "b")), "dermoscopy", 32,
                   np.array([f"i{i}" for i in range(n)]), [f"i{i}.png" for i in range(n)], np.arange(n).astype(str),
                   np.arange(n) % 2, splits, split_design=design)


def test_an_older_store_reads_as_the_design_it_had_until_extract_records_it(tmp_path):
    drawn = _dataset(np.array(["train", "val", "test"] * 4), "imported")
    whole = _dataset(np.array(["test"] * 12))
    assert whole.split_design == "official" and _dataset(drawn.splits).split_design == "stratified"
    for name, dataset, inferred in (("drawn", drawn, "stratified"), ("whole", whole, "official")):
        store = FeatureStore(tmp_path / f"{name}.zarr", mode="a")
        store.write_table(dataset)
        digest = store.root.attrs["table_digest"]
        del store.root.attrs["split_design"]  # as crs wrote stores before the design was kept
        old = FeatureStore(tmp_path / f"{name}.zarr").read_table()
        assert (old.split_design, old.split_design_recorded) == (inferred, False)
        store.write_table(dataset)  # what `crs extract` does: the table is unchanged, the design is recorded
        new = FeatureStore(tmp_path / f"{name}.zarr").read_table()
        assert (new.split_design, new.split_design_recorded) == (dataset.split_design, True)
        assert store.root.attrs["table_digest"] == digest


def test_a_design_recorded_later_refits_the_units_that_read_it(tiny_run, tmp_path):
    import shutil

    from crs.evaluate.incremental import unit_key
    from crs.evaluate.units import ProbeUnit, probe_settings

    spec, _, _, _ = tiny_run
    cache = tmp_path / "cache"
    shutil.copytree(store_path(spec.cache, "derm"), store_path(cache, "derm"))
    unit, settings = ProbeUnit("pixel_stats", "derm"), probe_settings(spec)
    recorded = unit_key(unit, cache, settings)
    store = FeatureStore(store_path(cache, "derm"), mode="a")
    del store.root.attrs["split_design"]
    older = unit_key(unit, cache, settings)  # a store written before the design: the key it always had
    store.root.attrs.update({"split_design": "stratified"})  # what `crs extract` records
    assert older != recorded == unit_key(unit, cache, settings)


def test_the_coverage_bench_resamples_each_simulated_test_set_as_it_was_drawn():
    from crs.bench.interval_coverage import CONFIGURATIONS, simulate

    random, stratified = list(CONFIGURATIONS)[0], list(CONFIGURATIONS)[2]
    small = {"data_sets": 3, "n_boot": 15, "truth_patients": 2_000}
    as_drawn = simulate(random, **small).rows
    assert as_drawn == simulate(random, resample="plain", **small).rows != simulate(random, resample="stratified", **small).rows
    assert simulate(stratified, **small).rows == simulate(stratified, resample="stratified", **small).rows
