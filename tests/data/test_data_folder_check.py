"""The folder+CSV loader and `crs datasets check` (library function and CLI)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.datasets import datasets
from crs.data import DATASET_LOADERS, DataError, load_dataset
from crs.data.check import REPORT_KEYS, check_dataset

from data_trees import build_chexpert, build_folder, build_isic, build_mimic, write_image

FOLDER_OPTIONS = {"modality": "dermoscopy", "group_column": "patient", "split_column": "split"}


def test_folder_text_labels_groups_and_given_splits(tmp_path):
    tree = build_folder(tmp_path)
    dataset = load_dataset("folder", tmp_path, **FOLDER_OPTIONS)
    assert len(dataset) == tree.n_listed == 18
    assert dataset.task.class_names == ("cat", "dog", "fox")
    assert dataset.labels[:4].tolist() == [0, 1, 2, 0]  # rows cycle cat, dog, fox
    # splits come from the CSV: blocks of three rows train, train, val, test, train, val
    assert dataset.splits.tolist() == ["train"] * 6 + ["val"] * 3 + ["test"] * 3 + ["train"] * 3 + ["val"] * 3
    assert dataset.groups[:4].tolist() == ["p0", "p0", "p0", "p1"]
    assert dataset.ids[0] == "images/img00.jpg" and "age" in dataset.metadata


def test_folder_drawn_splits_keep_groups_whole(tmp_path):
    build_folder(tmp_path)
    dataset = load_dataset("folder", tmp_path, modality="fundus", group_column="patient", seed=1)
    frame = pd.DataFrame({"group": dataset.groups, "split": dataset.splits})
    assert frame.groupby("group")["split"].nunique().max() == 1


def test_folder_multilabel_blank_is_ignored_and_ordinal_integers(tmp_path):
    rows = []
    for i in range(6):
        write_image(tmp_path / f"x{i}.png", seed=i, fmt="PNG")
        rows.append({"file": f"x{i}.png", "a": [1, 0, None][i % 3], "b": 1 - i % 2, "grade": i % 3})
    pd.DataFrame(rows).to_csv(tmp_path / "meta.csv", index=False)
    multi = load_dataset("folder", tmp_path, csv="meta.csv", image_column="file", label_columns=["a", "b"],
                         kind="multilabel", modality="chest_xray", split_column=None)
    np.testing.assert_array_equal(multi.labels[:3], np.array([[1, 1], [0, 0], [np.nan, 1]], dtype=np.float32))
    ordinal = load_dataset("folder", tmp_path, csv="meta.csv", image_column="file", label_columns="grade",
                           kind="ordinal", modality="fundus")
    assert ordinal.task.class_names == ("0", "1", "2") and ordinal.labels.tolist() == [0, 1, 2, 0, 1, 2]


def test_folder_errors_name_the_fix(tmp_path):
    build_folder(tmp_path)
    with pytest.raises(DataError, match="modality=None must be one of"):
        load_dataset("folder", tmp_path)
    with pytest.raises(DataError, match=r"missing column\(s\) \['diagnosis'\]"):
        load_dataset("folder", tmp_path, modality="fundus", label_columns="diagnosis")
    with pytest.raises(DataError, match="ordinal labels .* are text"):
        load_dataset("folder", tmp_path, modality="fundus", kind="ordinal")
    with pytest.raises(DataError, match="labels \\['fox'\\] .* not in class_names"):
        load_dataset("folder", tmp_path, modality="fundus", class_names=["cat", "dog"])


def test_folder_refuses_a_path_outside_the_root(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    build_folder(root, outside=True)
    with pytest.raises(DataError, match="'../outside_secret.jpg' points outside the data root"):
        load_dataset("folder", root, skip_bad=True, **FOLDER_OPTIONS)


def test_check_report_counts_missing_truncated_and_json_keys(tmp_path):
    tree = build_isic(tmp_path, missing=True, truncated=True)
    report = check_dataset("isic2019", tmp_path)
    assert tuple(report.to_dict()) == REPORT_KEYS
    assert report.n_images == 32 and report.n_missing == 1 and report.n_unreadable == 1
    assert report.missing == tree.missing and report.unreadable[0].startswith(tree.truncated[0])
    assert report.classes == {c: 4 for c in ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")}
    assert report.n_groups == 24
    assert sum(entry["images"] for entry in report.splits.values()) == 32
    assert report.problems[0].startswith("1 image(s) missing") and not report.ok


def test_check_clean_tree_is_ok_and_multilabel_counts_positives(tmp_path):
    build_mimic(tmp_path)
    report = check_dataset("mimic_cxr", tmp_path)
    dataset = load_dataset("mimic_cxr", tmp_path)
    assert report.ok, report.problems
    assert report.splits == {"test": {"images": 13, "groups": 6, "classes": report.classes}}
    expected = {name: int((dataset.labels[:, j] == 1).sum()) for j, name in enumerate(dataset.task.class_names)}
    assert report.classes == expected


def test_check_finds_byte_identical_images_across_splits(tmp_path):
    build_folder(tmp_path, duplicate_across_splits=True)
    report = check_dataset("folder", tmp_path, **FOLDER_OPTIONS)
    assert report.duplicates and report.duplicates[0]["ids"] == ["images/img00.jpg", "images/img17.jpg"]
    assert report.duplicates[0]["splits"] == ["train", "val"]
    assert "byte-identical" in report.reason()


def test_check_reports_an_out_of_root_path_as_the_problem(tmp_path):
    build_chexpert(tmp_path / "data", outside=True)
    report = check_dataset("chexpert", tmp_path / "data")
    assert report.n_images == 0 and len(report.problems) == 1
    assert "points outside the data root" in report.problems[0]


def test_cli_check_json_and_exit_codes(tmp_path):
    build_folder(tmp_path)
    runner = CliRunner()
    options = [arg for key, value in FOLDER_OPTIONS.items() for arg in ("-o", f"{key}={value}")]
    ok = runner.invoke(datasets, ["check", "folder", str(tmp_path), "--json", *options])
    assert ok.exit_code == 0, ok.output
    payload = json.loads(ok.output)
    assert tuple(payload) == REPORT_KEYS and payload["n_images"] == 18 and payload["problems"] == []
    wrong = runner.invoke(datasets, ["check", "aptos2019", str(tmp_path)])
    assert wrong.exit_code == 1
    reason = [line for line in wrong.output.splitlines() if line.startswith("datasets check aptos2019:")]
    assert len(reason) == 1 and "train.csv" in reason[0]


def test_cli_list_names_every_loader():
    result = CliRunner().invoke(datasets, ["list"])
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.output.splitlines()] == sorted(DATASET_LOADERS)


def test_check_reports_dicom_problems_by_kind_in_its_json(tmp_path):
    pytest.importorskip("pydicom")
    from dicom_factory import PATIENT_ID, PATIENT_NAME, circle_film, write_film

    rows = []
    for i in range(12):  # usable films, two classes, one per patient
        path = write_film(tmp_path / "films" / f"ok{i:02d}.dcm", circle_film(20, 24, 5, seed=i), compress=i % 2 == 0)
        rows.append({"path": str(path.relative_to(tmp_path)), "label": "ab"[i % 2]})
    broken = {
        "films/cine.dcm": write_film(tmp_path / "films" / "cine.dcm", circle_film(16, 16, 4), frames=2),
        "films/report.dcm": write_film(tmp_path / "films" / "report.dcm", None, with_pixels=False),
        "films/mpeg.dcm": write_film(tmp_path / "films" / "mpeg.dcm", circle_film(16, 16, 4),
                                     transfer_syntax="1.2.840.10008.1.2.4.100"),
    }
    rows += [{"path": path, "label": "a"} for path in broken]
    # The same film exported twice (new UIDs): found by its pixel data in two splits.
    twin = tmp_path / "films" / "ok00-again.dcm"
    write_film(twin, circle_film(20, 24, 5, seed=0), compress=True)
    rows.append({"path": "films/ok00-again.dcm", "label": "a"})
    table = pd.DataFrame(rows)
    table["split"] = ["train", "val", "test"] * 5 + ["test"]
    table.loc[0, "split"] = "train"
    table.to_csv(tmp_path / "labels.csv", index=False)

    result = CliRunner().invoke(datasets, ["check", "folder", str(tmp_path), "--json", "-o", "modality=chest_xray",
                                           "-o", "split_column=split"])
    assert result.exit_code == 1
    payload = json.loads(result.output[: result.output.rindex("}") + 1])
    assert tuple(payload) == REPORT_KEYS
    dicom = payload["dicom"]
    assert dicom["n_files"] == 16 and dicom["n_problems"] == 3
    assert {kind: entry["count"] for kind, entry in dicom["problems"].items()} == {
        "multi-frame": 1, "no pixel data": 1, "unsupported transfer syntax": 1}
    assert dicom["problems"]["unsupported transfer syntax"]["first"] == "films/mpeg.dcm"
    assert payload["n_unreadable"] == 3
    assert any(problem.startswith("1 DICOM file(s): no pixel data") for problem in payload["problems"])
    assert any(entry["ids"] == ["films/ok00.dcm", "films/ok00-again.dcm"] for entry in payload["duplicates"])
    assert PATIENT_NAME not in result.output and PATIENT_ID not in result.output
