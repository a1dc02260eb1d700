"""ISIC 2019 and APTOS 2019 loaders on tiny trees in the official layouts (tests/data_trees.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.data import DataError, load_dataset
from crs.data.images import load_image

from data_trees import build_aptos, build_isic


def splits_by_group(dataset) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for group, split in zip(dataset.groups, dataset.splits, strict=True):
        seen.setdefault(group, set()).add(split)
    return seen


def test_isic_counts_labels_and_downsampled_names(tmp_path):
    tree = build_isic(tmp_path)
    dataset = load_dataset("isic2019", tmp_path)
    assert len(dataset) == tree.n_listed == 32
    assert dataset.task.kind == "multiclass" and dataset.task.n_outputs == 8
    assert dataset.modality == "dermoscopy" and dataset.image_size == 224
    # Four images per class, written in class order MEL, NV, ... SCC.
    assert np.bincount(dataset.labels, minlength=8).tolist() == [4] * 8
    assert dataset.labels[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    downsampled = [i for i in dataset.ids if i.endswith("_downsampled")]
    assert downsampled == ["ISIC_0000002_downsampled", "ISIC_0000006_downsampled", "ISIC_0000010_downsampled", "ISIC_0000014_downsampled"]
    assert all((dataset.root / p).is_file() for p in dataset.paths)


def test_isic_groups_by_lesion_and_never_splits_a_lesion(tmp_path):
    build_isic(tmp_path)
    dataset = load_dataset("isic2019", tmp_path, seed=3)
    # 8 HAM lesions of two images, 4 BCN lesions, 20 images without a lesion_id: 32 groups... minus
    # the paired images: 8 + 4 + (32 - 16 - 4) = 24 groups.
    assert len(set(dataset.groups)) == 24
    assert all(len(splits) == 1 for splits in splits_by_group(dataset).values())
    assert set(dataset.splits) == {"train", "val", "test"}
    first = dataset.ids.tolist().index("ISIC_0000000")
    second = dataset.ids.tolist().index("ISIC_0000001")
    assert dataset.groups[first] == dataset.groups[second] == "HAM_0000000"
    again = load_dataset("isic2019", tmp_path, seed=3)
    assert (again.splits == dataset.splits).all()


def test_isic_acquisition_site_from_metadata(tmp_path):
    build_isic(tmp_path)
    dataset = load_dataset("isic2019", tmp_path)
    site = dict(zip(dataset.ids, dataset.metadata["acquisition_site"], strict=True))
    assert site["ISIC_0000000"] == "HAM10000"
    assert site["ISIC_0000002_downsampled"] == "BCN20000"  # class 0 (even): BCN lesion
    assert site["ISIC_0000006_downsampled"] == "ISIC_archive_downsampled"  # class 1: no lesion_id
    assert site["ISIC_0000003"] == "unknown"


def test_isic_downsampled_twin_is_found_when_csv_and_file_names_differ(tmp_path):
    build_isic(tmp_path)
    folder = tmp_path / "ISIC_2019_Training_Input"
    (folder / "ISIC_0000002_downsampled.jpg").rename(folder / "ISIC_0000002.jpg")
    dataset = load_dataset("isic2019", tmp_path)
    row = dataset.ids.tolist().index("ISIC_0000002_downsampled")
    assert dataset.paths[row] == "ISIC_2019_Training_Input/ISIC_0000002.jpg"


def test_isic_missing_image_is_an_error_naming_it_or_skipped_and_listed(tmp_path):
    tree = build_isic(tmp_path, missing=True, truncated=True)
    with pytest.raises(DataError, match=r"image missing: .*ISIC_0000004\.jpg.*skip_bad"):
        load_dataset("isic2019", tmp_path)
    dataset = load_dataset("isic2019", tmp_path, skip_bad=True)
    assert len(dataset) == 30
    assert dataset.skipped[0] == f"{tree.missing[0]}: missing"
    assert dataset.skipped[1].startswith(f"{tree.truncated[0]}: unreadable")
    assert "ISIC_0000004" not in dataset.ids and "ISIC_0000007" not in dataset.ids


def test_isic_truncated_image_fails_at_decode_naming_the_file(tmp_path):
    tree = build_isic(tmp_path, truncated=True)
    dataset = load_dataset("isic2019", tmp_path)  # default verify="exists": a stat per file only
    assert len(dataset) == 32
    with pytest.raises(DataError, match=r"unreadable or truncated: .*ISIC_0000007\.jpg"):
        load_image(tmp_path / tree.truncated[0], 32)


def test_isic_refuses_an_image_name_that_escapes_the_root(tmp_path):
    build_isic(tmp_path)
    csv = tmp_path / "ISIC_2019_Training_GroundTruth.csv"
    table = pd.read_csv(csv)
    table.loc[0, "image"] = "../../../etc/passwd"
    table.to_csv(csv, index=False)
    with pytest.raises(DataError, match="outside the data root"):
        load_dataset("isic2019", tmp_path)


def test_isic_unk_row_and_missing_csv_are_clear_errors(tmp_path):
    build_isic(tmp_path)
    csv = tmp_path / "ISIC_2019_Training_GroundTruth.csv"
    table = pd.read_csv(csv)
    table.loc[5, ["NV", "UNK"]] = [0.0, 1.0]
    table.to_csv(csv, index=False)
    with pytest.raises(DataError, match="ISIC_0000005.*exactly one"):
        load_dataset("isic2019", tmp_path)
    csv.unlink()
    with pytest.raises(DataError, match="ISIC_2019_Training_GroundTruth.csv not found"):
        load_dataset("isic2019", tmp_path)


def test_aptos_counts_grades_and_ordinal_task(tmp_path):
    tree = build_aptos(tmp_path)
    dataset = load_dataset("aptos2019", tmp_path, image_size=256)
    assert len(dataset) == tree.n_listed == 25
    assert dataset.task.kind == "ordinal" and dataset.task.n_outputs == 5
    assert dataset.modality == "fundus" and dataset.image_size == 256
    assert np.bincount(dataset.labels).tolist() == [5, 5, 5, 5, 5]
    assert all(p.startswith("train_images/") and p.endswith(".png") for p in dataset.paths)
    assert (dataset.groups == dataset.ids).all()  # APTOS has no patient ids
    assert sorted(set(dataset.splits)) == ["test", "train", "val"]
    image = load_image(dataset.root / dataset.paths[0], dataset.image_size)
    assert image.shape == (3, 256, 256) and str(image.dtype) == "torch.uint8"


def test_aptos_bad_grade_missing_folder_and_skip_bad(tmp_path):
    tree = build_aptos(tmp_path, missing=True, truncated=True)
    dataset = load_dataset("aptos2019", tmp_path, skip_bad=True)
    assert len(dataset) == 23
    assert [s.split(":")[0] for s in dataset.skipped] == [tree.missing[0], tree.truncated[0]]
    table = pd.read_csv(tmp_path / "train.csv")
    table.loc[2, "diagnosis"] = 7
    table.to_csv(tmp_path / "train.csv", index=False)
    with pytest.raises(DataError, match="diagnosis 7.*0-4"):
        load_dataset("aptos2019", tmp_path)
    with pytest.raises(DataError, match="train.csv not found"):
        load_dataset("aptos2019", tmp_path / "nowhere")
