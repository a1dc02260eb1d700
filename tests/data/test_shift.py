"""Any data set as a shift target: labels matched to the source task by name, mismatches listed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crs.data import load_dataset
from crs.data.base import DataError, Dataset, Task
from crs.data.shift import align_to_source, label_key, match_labels, shift_target_dataset


def _target(task: Task, labels) -> Dataset:
    n = len(labels)
    ids = np.array([f"t{i}" for i in range(n)])
    return Dataset("site-b", Path("."), task, "chest_xray", 32, ids, [f"{i}.png" for i in range(n)], ids,
                   np.asarray(labels), np.array(["test"] * n))


def test_label_key_ignores_case_spaces_underscores_and_hyphens():
    assert label_key("Pleural Effusion") == label_key("pleural_effusion") == label_key(" PLEURAL-effusion ")
    assert label_key("Edema") != label_key("Oedema")


def test_multiclass_target_is_reordered_into_the_source_label_space():
    source = Task("cxr", "multiclass", ("Normal", "Pneumonia", "Tuberculosis"))
    target = _target(Task("b", "multiclass", ("normal", "tuberculosis")), [0, 1, 1, 0])
    aligned = align_to_source(target, source)
    assert aligned.task == source
    np.testing.assert_array_equal(aligned.labels, [0, 2, 2, 0])
    assert aligned.name == "site-b" and list(aligned.ids) == list(target.ids)


def test_unmatched_class_names_are_listed_in_one_line():
    source = Task("cxr", "multiclass", ("Normal", "Pneumonia"))
    target = _target(Task("b", "multiclass", ("COVID-19", "Normal", "pneumonia", "Effusion")), [0, 1, 2, 3])
    with pytest.raises(DataError) as caught:
        align_to_source(target, source)
    message = str(caught.value)
    assert "['COVID-19', 'Effusion']" in message and "['Normal', 'Pneumonia']" in message and "\n" not in message


def test_a_declared_but_unused_target_class_need_not_match():
    source = Task("cxr", "multiclass", ("Normal", "Pneumonia"))
    target = _target(Task("b", "multiclass", ("Normal", "Other", "Pneumonia")), [0, 2, 2])
    np.testing.assert_array_equal(align_to_source(target, source).labels, [0, 1, 1])


def test_multilabel_columns_are_matched_reordered_and_extras_left_out():
    source = Task("cxr", "multilabel", ("Edema", "Pleural Effusion"))
    labels = np.array([[1, 0, 1], [0, 1, np.nan]], dtype=np.float32)  # columns: effusion, nodule, edema
    target = _target(Task("b", "multilabel", ("pleural_effusion", "Nodule", "EDEMA")), labels)
    aligned = align_to_source(target, source)
    np.testing.assert_array_equal(aligned.labels, np.array([[1, 1], [np.nan, 0]], dtype=np.float32))
    mapping = match_labels(source.class_names, target.task.class_names, "multilabel")
    assert mapping.unused == ("Nodule",) and mapping.source_index == (1, -1, 0)


def test_multilabel_source_label_without_a_target_column_is_an_error():
    source = Task("cxr", "multilabel", ("Edema", "Pleural Effusion", "Cardiomegaly"))
    target = _target(Task("b", "multilabel", ("edema", "effusion")), np.zeros((2, 2), np.float32))
    with pytest.raises(DataError, match=r"source labels \['Pleural Effusion', 'Cardiomegaly'\] have no target"):
        align_to_source(target, source)


def test_single_label_and_multilabel_do_not_mix_and_ordinal_meets_multiclass():
    multilabel = Task("cxr", "multilabel", ("a", "b"))
    with pytest.raises(DataError, match="both must be multilabel or neither"):
        align_to_source(_target(Task("b", "multiclass", ("a", "b")), [0, 1]), multilabel)
    grades = Task("dr", "ordinal", ("0", "1", "2"))
    aligned = align_to_source(_target(Task("b", "multiclass", ("0", "2")), [0, 1]), grades)
    np.testing.assert_array_equal(aligned.labels, [0, 2])


def test_two_names_that_match_alike_are_refused():
    with pytest.raises(DataError, match="are the same name"):
        match_labels(("Edema", "edema"), ("edema",), "multiclass")


def test_folder_class_names_match_other_spellings_of_the_same_label(tmp_path):
    (tmp_path / "img").mkdir()
    from PIL import Image

    rows = []
    for i, label in enumerate(["NORMAL", "pneumonia", "Normal", "PNEUMONIA"] * 3):
        Image.new("RGB", (8, 8)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"path": f"img/{i}.png", "finding": label})
    pd.DataFrame(rows).to_csv(tmp_path / "labels.csv", index=False)
    dataset = load_dataset("folder", tmp_path, modality="chest_xray", label_columns="finding",
                           class_names=["Normal", "Pneumonia"])
    np.testing.assert_array_equal(dataset.labels[:4], [0, 1, 0, 1])
    with pytest.raises(DataError, match="not in class_names"):
        load_dataset("folder", tmp_path, modality="chest_xray", label_columns="finding", class_names=["Normal", "COVID"])


def test_stage_one_stores_a_target_in_its_source_label_space_and_geometry():
    source = _target(Task("cxr", "multilabel", ("Edema", "Pleural Effusion")), np.zeros((2, 2), np.float32))
    source.image_size, source.fit = 224, "pad"
    labels = np.array([[1, 0], [0, 1]], dtype=np.float32)  # columns: effusion, edema
    renamed = shift_target_dataset(_target(Task("b", "multilabel", ("pleural_effusion", "EDEMA")), labels), source)
    assert renamed.task == source.task and (renamed.image_size, renamed.fit) == (224, "pad")
    np.testing.assert_array_equal(renamed.labels, [[0, 1], [1, 0]])
    # names already the source's: stored exactly as loaded (same labels object, same task name)
    same = _target(Task("b", "multilabel", ("Edema", "Pleural Effusion")), labels)
    kept = shift_target_dataset(same, source)
    assert kept.labels is labels and kept.task.name == "b"
    with pytest.raises(DataError, match="target classes \\['Other'\\] match no source class"):
        shift_target_dataset(_target(Task("c", "multiclass", ("Normal", "Other")), [0, 1]),
                             _target(Task("s", "multiclass", ("Normal", "Pneumonia")), [0, 1]))
