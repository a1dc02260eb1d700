"""CheXpert and MIMIC-CXR-JPG loaders on tiny trees in the official layouts (tests/data_trees.py)."""

from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd
import PIL.Image
import pytest

from crs.data import DataError, load_dataset
from crs.data.chexpert import CHEXPERT_TASKS, TASK

from data_trees import KNOWN_EXPECTED, build_chexpert, build_mimic

POLICIES = ("ones", "zeros", "ignore", "mixed")


def oracle_labels(raw: pd.DataFrame, policy: str) -> np.ndarray:
    """The policy written out cell by cell, independent of the loader's vectorised code."""
    out = np.zeros((len(raw), 5), dtype=np.float32)
    for i, (_, row) in enumerate(raw.iterrows()):
        for j, finding in enumerate(CHEXPERT_TASKS):
            value = row[finding]
            if pd.isna(value):
                out[i, j] = 0.0
            elif value == -1:
                out[i, j] = {"ones": 1.0, "zeros": 0.0, "ignore": np.nan}.get(
                    policy, 1.0 if finding in ("Atelectasis", "Edema") else 0.0)
            else:
                out[i, j] = value
    return out


@pytest.mark.parametrize("policy", POLICIES)
def test_chexpert_uncertainty_policies_on_every_row(tmp_path, policy):
    tree = build_chexpert(tmp_path)
    dataset = load_dataset("chexpert", tmp_path, uncertainty=policy)
    known = dataset.labels[dataset.ids.tolist().index(tree.known_id)]
    np.testing.assert_array_equal(known, np.array(KNOWN_EXPECTED[policy], dtype=np.float32))
    raw = pd.concat([pd.read_csv(tree.root / "train.csv"), pd.read_csv(tree.root / "valid.csv")])
    raw = raw[raw["Frontal/Lateral"] == "Frontal"].reset_index(drop=True)
    # The loader keeps CSV order (train then valid), so rows line up with the oracle.
    np.testing.assert_array_equal(dataset.labels, oracle_labels(raw, policy))
    assert dataset.labels.dtype == np.float32
    assert np.isnan(dataset.labels).any() == (policy == "ignore")


def test_chexpert_root_with_or_without_the_release_folder(tmp_path):
    tree = build_chexpert(tmp_path)
    from_parent = load_dataset("chexpert", tmp_path)
    from_folder = load_dataset("chexpert", tmp_path / "CheXpert-v1.0-small")
    assert from_parent.root == from_folder.root == tree.root.resolve()
    assert from_parent.paths == from_folder.paths
    assert from_parent.paths[0] == "train/patient00001/study1/view1_frontal.jpg"
    full = tmp_path / "full"
    build_chexpert(full, folder="CheXpert-v1.0")
    assert len(load_dataset("chexpert", full)) == 28


def test_chexpert_frontal_only_patients_and_studies(tmp_path):
    build_chexpert(tmp_path)
    frontal = load_dataset("chexpert", tmp_path)
    assert len(frontal) == 28 and set(frontal.metadata["view"]) == {"Frontal"}
    every_view = load_dataset("chexpert", tmp_path, frontal_only=False)
    assert len(every_view) == 40  # 28 frontal + 12 lateral
    assert frontal.modality == "chest_xray" and frontal.task == TASK
    # A study with several frontal images: both kept, same patient and study.
    study = frontal.metadata["study"] == "patient00001/study1"
    assert study.sum() == 2
    assert set(frontal.groups[study.to_numpy()]) == {"patient00001"}
    assert len(set(frontal.groups)) == 15  # 12 train + 3 valid patients


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chexpert_no_patient_in_two_splits(tmp_path, seed):
    build_chexpert(tmp_path)
    dataset = load_dataset("chexpert", tmp_path, seed=seed, frontal_only=False)
    frame = pd.DataFrame({"group": dataset.groups, "split": dataset.splits})
    assert frame.groupby("group")["split"].nunique().max() == 1
    assert set(dataset.splits) == {"train", "val", "test"}


def test_chexpert_official_valid_as_test(tmp_path):
    build_chexpert(tmp_path)
    dataset = load_dataset("chexpert", tmp_path, official_valid_as_test=True)
    from_valid = (dataset.metadata["source_csv"] == "valid.csv").to_numpy()
    assert (dataset.splits[from_valid] == "test").all() and from_valid.sum() == 3
    assert set(dataset.splits[~from_valid]) == {"train", "val"}


def test_chexpert_missing_truncated_and_bad_values(tmp_path):
    tree = build_chexpert(tmp_path, missing=True, truncated=True)
    with pytest.raises(DataError, match=r"image missing: .*patient00004/study2/view1_frontal\.jpg"):
        load_dataset("chexpert", tmp_path)
    dataset = load_dataset("chexpert", tmp_path, skip_bad=True)
    assert len(dataset) == 26
    assert dataset.skipped == [f"{tree.missing[0]}: missing", dataset.skipped[1]]
    assert dataset.skipped[1].startswith(f"{tree.truncated[0]}: unreadable")
    with pytest.raises(DataError, match="uncertainty policy 'sometimes'"):
        load_dataset("chexpert", tmp_path, uncertainty="sometimes")
    csv = tree.root / "train.csv"
    table = pd.read_csv(csv)
    table.loc[0, "Edema"] = 2
    table.to_csv(csv, index=False)
    with pytest.raises(DataError, match="'Edema' holds '2.0' in row 2"):
        load_dataset("chexpert", tmp_path, skip_bad=True)


def test_chexpert_wrong_layout_messages(tmp_path):
    with pytest.raises(DataError, match="no train.csv or valid.csv"):
        load_dataset("chexpert", tmp_path)
    tree = build_chexpert(tmp_path)
    pd.read_csv(tree.root / "train.csv").drop(columns=["Edema"]).to_csv(tree.root / "train.csv", index=False)
    with pytest.raises(DataError, match=r"missing column\(s\) \['Edema'\]"):
        load_dataset("chexpert", tmp_path)


def test_chexpert_path_outside_root_is_refused_and_never_opened(tmp_path, monkeypatch):
    build_chexpert(tmp_path / "data", outside=True)
    touched: list[str] = []
    original_open, original_is_file = PIL.Image.open, pathlib.Path.is_file

    def spy_open(path, *args, **kwargs):
        touched.append(str(path))
        return original_open(path, *args, **kwargs)

    def spy_is_file(self):
        touched.append(str(self))
        return original_is_file(self)

    monkeypatch.setattr(PIL.Image, "open", spy_open)
    monkeypatch.setattr(pathlib.Path, "is_file", spy_is_file)
    with pytest.raises(DataError, match=r"'\.\./\.\./outside_secret\.jpg' points outside the data root"):
        load_dataset("chexpert", tmp_path / "data", skip_bad=True)
    assert touched, "the spies saw no file access at all"
    assert not any("outside_secret" in path for path in touched)


@pytest.mark.parametrize("policy", POLICIES)
def test_mimic_labels_views_and_shift_target_shape(tmp_path, policy):
    tree = build_mimic(tmp_path)
    dataset = load_dataset("mimic_cxr", tmp_path, uncertainty=policy, image_size=320)
    assert len(dataset) == tree.n_listed == 13
    assert set(dataset.splits) == {"test"}
    assert set(dataset.metadata["view"]) == {"PA", "AP"}
    assert dataset.task == TASK and dataset.modality == "chest_xray" and dataset.image_size == 320
    known = dataset.labels[dataset.ids.tolist().index(tree.known_id)]
    np.testing.assert_array_equal(known, np.array(KNOWN_EXPECTED[policy], dtype=np.float32))
    assert dataset.paths[0].startswith("files/p10/p10000032/s50000000/")
    # Labels are per study: both frontal images of one study carry the same row.
    study = dataset.metadata["study_id"].to_numpy()
    for value in np.unique(study):
        rows = dataset.labels[study == value]
        np.testing.assert_array_equal(rows, np.repeat(rows[:1], len(rows), axis=0))
    assert (dataset.groups == dataset.metadata["subject_id"].astype(str).to_numpy()).all()


def test_mimic_plain_csv_version_folder_and_official_split(tmp_path):
    release = tmp_path / "mimic-cxr-jpg" / "2.0.0"
    release.mkdir(parents=True)
    build_mimic(release, gz=False)
    from_parent = load_dataset("mimic_cxr", tmp_path / "mimic-cxr-jpg")
    assert from_parent.root == release.resolve() and len(from_parent) == 13
    # Official test split: subjects 0 and 1; subject 0 has 2 PA, subject 1 has 2 PA and 1 AP.
    test_only = load_dataset("mimic_cxr", release, official_splits=["test"])
    assert len(test_only) == 5
    with pytest.raises(DataError, match="official_splits \\['holdout'\\]"):
        load_dataset("mimic_cxr", release, official_splits=["holdout"])


def test_mimic_missing_files_and_layout(tmp_path):
    tree = build_mimic(tmp_path, missing=True, truncated=True)
    with pytest.raises(DataError, match="image missing: .*" + tree.missing[0].split("/")[-1]):
        load_dataset("mimic_cxr", tmp_path)
    dataset = load_dataset("mimic_cxr", tmp_path, skip_bad=True)
    assert len(dataset) == 11 and len(dataset.skipped) == 2
    with pytest.raises(DataError, match="mimic-cxr-2.0.0-metadata.csv\\[.gz\\] not found"):
        load_dataset("mimic_cxr", tmp_path / "files")


def test_datasets_check_accounts_for_dropped_laterals_lost_patients_and_pooled_valid(tmp_path):
    """12 laterals of frontal patients + 2 lateral-only patients are dropped: 42 rows listed, 28 kept."""
    import json

    from click.testing import CliRunner

    from crs.cli.main import cli
    from crs.data.check import check_dataset

    build_chexpert(tmp_path, lateral_only_patients=2)
    report = check_dataset("chexpert", tmp_path, workers=1)
    rows = report.rows
    assert rows["listed"] == 12 * 3 + 1 + 2 + 3 == 42
    assert rows["kept"] == report.n_images == 28
    assert rows["dropped"] == {"lateral view": 14}
    assert rows["groups_lost"] == 2 and rows["group_word"] == "patients"  # the lateral-only patients
    dataset = load_dataset("chexpert", tmp_path)
    valid = (dataset.metadata["source_csv"] == "valid.csv").to_numpy()
    counts = {s: int((dataset.splits[valid] == s).sum()) for s in ("train", "val", "test")}
    assert sum(counts.values()) == 3
    assert rows["notes"] == [f"valid.csv (3 radiologist-labelled images) was pooled into the splits "
                             f"({counts['train']} train, {counts['val']} val, {counts['test']} test); "
                             "set option official_valid_as_test = true to test on it alone"]

    text = CliRunner().invoke(cli, ["datasets", "check", "chexpert", str(tmp_path)], obj={})
    assert "rows       42 listed, 28 kept; dropped: 14 lateral view; 2 patients lost" in text.output
    assert "was pooled into the splits" in text.output
    payload = json.loads(CliRunner().invoke(cli, ["datasets", "check", "chexpert", str(tmp_path), "--json"],
                                            obj={}).stdout)
    assert payload["rows"]["dropped"] == {"lateral view": 14} and payload["rows"]["groups_lost"] == 2

    official = check_dataset("chexpert", tmp_path, workers=1, official_valid_as_test=True)
    assert official.rows["notes"] == ["valid.csv (3 radiologist-labelled images) is the test split "
                                      "(official_valid_as_test = true)"]
    every_view = check_dataset("chexpert", tmp_path, workers=1, frontal_only=False)
    assert every_view.rows["dropped"] == {} and every_view.rows["groups_lost"] == 0
