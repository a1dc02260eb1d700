"""The shift-target cohorts in their official layouts: exact counts, labels, groups, subgroups, checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from cohort_trees import (
    build_chestxray14,
    build_derm7pt,
    build_eyepacs,
    build_ham10000,
    build_idrid,
    build_messidor2,
    build_pad_ufes_20,
    build_padchest,
    build_vindr_cxr,
)

from crs.data import DATASET_ACCESS, DATASET_LOADERS, DataError, load_dataset
from crs.data.check import check_dataset


def test_ham10000_counts_lesion_groups_and_subgroups(tmp_path):
    build_ham10000(tmp_path)
    data = load_dataset("ham10000", tmp_path)
    assert len(data) == 21 and len(set(data.groups)) == 14
    assert data.task.class_names == ("akiec", "bcc", "bkl", "df", "mel", "nv", "vasc")
    assert np.bincount(data.labels).tolist() == [3] * 7
    assert {p.split("/")[0] for p in data.paths} == {"HAM10000_images_part_1", "HAM10000_images_part_2"}
    assert list(data.subgroups.columns) == ["sex", "age", "site"]
    assert set(data.subgroups["site"]) == {"back", "face"}
    for group in set(data.groups):  # one lesion, one split
        assert len(set(data.splits[data.groups == group])) == 1


def test_pad_ufes_20_counts_patients_and_fitzpatrick(tmp_path):
    build_pad_ufes_20(tmp_path)
    data = load_dataset("pad_ufes_20", tmp_path)
    assert len(data) == 18 and len(set(data.groups)) == 9
    assert data.ids[0] == "PAT_100_200_300"
    assert list(data.subgroups.columns) == ["fitzpatrick", "sex", "age"]
    assert data.subgroups["fitzpatrick"].value_counts().to_dict() == {"1": 6, "2": 6, "3": 5, "unknown": 1}
    assert set(data.subgroups["sex"]) == {"female", "male"}


def test_messidor2_drops_ungradable_and_groups_examinations(tmp_path):
    build_messidor2(tmp_path)
    data = load_dataset("messidor2", tmp_path)
    assert len(data) == 9 and len(set(data.groups)) == 5
    assert data.accounting.dropped == {"ungradable (adjudicated_gradable 0)": 1}
    assert data.task.kind == "ordinal" and data.labels.tolist() == [0, 1, 2, 3, 4, 0, 1, 3, 4]
    assert {p.rsplit(".", 1)[1] for p in data.paths} == {"png", "JPG", "tif"}


def test_messidor2_counts_an_examination_lost_when_both_its_images_are_ungradable(tmp_path):
    from click.testing import CliRunner

    from crs.cli.main import cli

    build_messidor2(tmp_path)
    table = tmp_path / "messidor_data.csv"
    rows = table.read_text().splitlines()
    rows[7] = rows[7].rsplit(",", 3)[0] + ",,0,0"  # image 6: examination 3's other eye, now ungradable too
    table.write_text("\n".join(rows) + "\n")
    result = CliRunner().invoke(cli, ["datasets", "check", "messidor2", str(tmp_path), "-o", "proportions=[0,0,1]"])
    assert result.exit_code == 0, result.output
    assert "10 listed, 8 kept; dropped: 2 ungradable (adjudicated_gradable 0); 1 examinations lost" in result.output
    data = load_dataset("messidor2", tmp_path)
    assert len(set(data.groups)) == 4 and data.accounting.groups_lost == 1


def test_padchest_counts_a_patient_lost_when_only_laterals_were_listed(tmp_path):
    build_padchest(tmp_path)
    table = tmp_path / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv"
    frame = pd.read_csv(table)
    frame.loc[frame["PatientID"] == "pat3", "Projection"] = "L"  # pat3's only film, now a lateral
    frame.to_csv(table, index=False)
    data = load_dataset("padchest", tmp_path)
    assert len(set(data.groups)) == 3 and data.accounting.groups_lost == 1


def test_idrid_reads_both_parts_with_distinct_ids(tmp_path):
    build_idrid(tmp_path)
    data = load_dataset("idrid", tmp_path)
    assert len(data) == 15 and "train/IDRiD_001" in data.ids and "test/IDRiD_001" in data.ids
    assert np.bincount(data.labels).tolist() == [3, 3, 3, 3, 3]
    only_test = load_dataset("idrid", tmp_path / "B. Disease Grading", parts=["test"])
    assert len(only_test) == 5


def test_eyepacs_groups_both_eyes(tmp_path):
    build_eyepacs(tmp_path)
    data = load_dataset("eyepacs", tmp_path)
    assert len(data) == 12 and len(set(data.groups)) == 6
    assert set(data.groups) == {"10", "13", "15", "16", "17", "19"}
    both = load_dataset("eyepacs", tmp_path, parts=["train", "test"])
    assert len(both) == 16 and len(set(both.groups)) == 8


def test_chestxray14_labels_patients_lists_and_subgroups(tmp_path):
    build_chestxray14(tmp_path)
    data = load_dataset("chestxray14", tmp_path)
    assert len(data) == 12 and len(set(data.groups)) == 5
    names = data.task.class_names
    positives = dict(zip(names, data.labels.sum(axis=0).astype(int).tolist(), strict=True))
    assert positives["Effusion"] == 3 and positives["Atelectasis"] == 2 and positives["Hernia"] == 1
    assert data.labels[1].sum() == 0  # No Finding
    assert list(data.subgroups.columns) == ["sex", "age", "view"]
    test = load_dataset("chestxray14", tmp_path, image_lists=["test_list.txt"])
    assert len(test) == 5 and test.accounting.dropped == {"not in test_list.txt": 7}


def test_chestxray14_image_list_of_a_few_patients_still_gets_val_and_test(tmp_path, caplog):
    """Each of the 5 patients falls in a label stratum of its own (another first finding): every stratum
    rounded its 20 % shares to 0, so every image went to train; now the strata are pooled."""
    build_chestxray14(tmp_path)
    everyone = [line.split(",")[0] for line in (tmp_path / "Data_Entry_2017.csv").read_text().splitlines()[1:]]
    (tmp_path / "test_list.txt").write_text("\n".join(everyone) + "\n")
    data = load_dataset("chestxray14", tmp_path, image_lists=["test_list.txt"])
    patients = {split: set(data.groups[data.splits == split]) for split in ("train", "val", "test")}
    assert {split: len(p) for split, p in patients.items()} == {"train": 3, "val": 1, "test": 1}
    assert not (patients["train"] & patients["test"]) and not (patients["val"] & patients["test"])
    build_chestxray14(tmp_path / "official")  # the official-layout test_list.txt: 2 patients cannot fill 3 splits
    with caplog.at_level("WARNING", logger="crs.data"):
        two = load_dataset("chestxray14", tmp_path / "official", image_lists=["test_list.txt"])
    assert set(two.splits) == {"train"}
    assert "only 2 group(s) (patients or lesions) to split: val and test got none" in caplog.text


def test_duplicate_image_ids_are_named_with_their_count(tmp_path):
    build_chestxray14(tmp_path)
    table = tmp_path / "Data_Entry_2017.csv"
    lines = table.read_text().splitlines()
    table.write_text("\n".join([*lines, lines[3], lines[3], lines[5]]) + "\n")
    with pytest.raises(DataError, match="'00000001_002' is listed 3 times \\(2 id\\(s\\) listed more than once, 3 extra"):
        load_dataset("chestxray14", tmp_path)


def test_vindr_cxr_test_consensus_and_train_majority(tmp_path):
    pytest.importorskip("pydicom")
    build_vindr_cxr(tmp_path)
    data = load_dataset("vindr_cxr", tmp_path)
    assert len(data) == 6 and len(data.task.class_names) == 10
    column = dict(zip(data.task.class_names, data.labels.T, strict=True))
    assert column["Atelectasis"].tolist() == [1, 1, 1, 0, 0, 0]
    train = load_dataset("vindr_cxr", tmp_path, parts=["train"])
    column = dict(zip(train.task.class_names, train.labels.T, strict=True))
    assert len(train) == 2 and column["Cardiomegaly"].tolist() == [1, 0] and column["Edema"].tolist() == [0, 0]


def test_vindr_cxr_train_and_test_together_as_the_public_files_spell_them(tmp_path):
    """The public test file says "Other disease", the train file "Other diseases": one label, not a refusal."""
    pytest.importorskip("pydicom")
    build_vindr_cxr(tmp_path)
    assert "Other disease," in (tmp_path / "annotations/image_labels_test.csv").read_text().splitlines()[0] + ","
    both = load_dataset("vindr_cxr", tmp_path, parts=["train", "test"], proportions=[0, 0, 1])
    assert len(both) == 8 and len(both.task.class_names) == 10
    assert "Other diseases" in both.task.class_names and "Other disease" not in both.task.class_names
    column = dict(zip(both.task.class_names, both.labels.T, strict=True))
    assert column["Other diseases"].tolist() == [0, 1, 0, 0, 0, 0, 1, 0]  # train image 1, test image 4
    assert column["Cardiomegaly"].tolist() == [1, 0, 0, 1, 1, 1, 0, 0]
    assert both.metadata["part"].tolist() == ["train"] * 2 + ["test"] * 6


def test_vindr_cxr_columns_match_whatever_their_case_and_strangers_are_refused(tmp_path):
    pytest.importorskip("pydicom")
    build_vindr_cxr(tmp_path)
    train = tmp_path / "annotations/image_labels_train.csv"
    text = train.read_text()
    train.write_text(text.replace("rad_id", "rad_ID", 1).replace("Pleural effusion", "pleural Effusion", 1))
    data = load_dataset("vindr_cxr", tmp_path, parts=["train", "test"], proportions=[0, 0, 1])
    assert len(data.task.class_names) == 10 and "rad_ID" not in data.task.class_names  # no 11th label
    assert "Pleural effusion" in data.task.class_names
    train.write_text(text.replace("image_id,", "Unnamed: 0,image_id,", 1).replace("\ntr", "\n0,tr"))
    with pytest.raises(DataError, match="image_labels_train.csv has column 'Unnamed: 0'.*remove or rename it"):
        load_dataset("vindr_cxr", tmp_path, parts=["train"])


@pytest.mark.parametrize("loader, build, n", [
    ("ham10000", build_ham10000, 21), ("pad_ufes_20", build_pad_ufes_20, 18), ("derm7pt", build_derm7pt, 16), ("messidor2", build_messidor2, 9),
    ("idrid", build_idrid, 15), ("eyepacs", build_eyepacs, 12), ("chestxray14", build_chestxray14, 12),
    ("padchest", build_padchest, 7),
])
def test_datasets_check_reads_every_cohort(tmp_path, loader, build, n):
    build(tmp_path)
    report = check_dataset(loader, tmp_path)
    assert report.n_images == n and report.n_missing == 0 and report.n_unreadable == 0
    assert loader in DATASET_ACCESS and loader in DATASET_LOADERS


def test_missing_image_names_the_file(tmp_path):
    build_pad_ufes_20(tmp_path)
    (tmp_path / "images/imgs_part_2/PAT_104_209_309.png").unlink()
    with pytest.raises(DataError, match="PAT_104_209_309.png"):
        load_dataset("pad_ufes_20", tmp_path)
    report = check_dataset("pad_ufes_20", tmp_path)
    assert report.n_missing == 1 and not report.ok


def test_wrong_class_is_refused_naming_the_image(tmp_path):
    build_ham10000(tmp_path)
    table = (tmp_path / "HAM10000_metadata.csv").read_text().replace(",akiec,", ",scc,", 1)
    (tmp_path / "HAM10000_metadata.csv").write_text(table)
    with pytest.raises(DataError, match="ISIC_0024306.*dx 'scc'"):
        load_dataset("ham10000", tmp_path)


def test_derm7pt_cases_images_and_map_onto_isic(tmp_path):
    build_derm7pt(tmp_path)
    data = load_dataset("derm7pt", tmp_path)
    assert len(data) == 16 and len(set(data.groups)) == 16 and len(data.task.class_names) == 8
    assert all("/Dd" in p for p in data.paths)
    assert all("/Dc" in p for p in load_dataset("derm7pt", tmp_path, image="clinic").paths)
    assert list(data.subgroups.columns) == ["sex", "site"]
    mapped = load_dataset("derm7pt", tmp_path, label_map="isic2019-to-derm7pt")
    assert len(mapped) == 14 and mapped.accounting.dropped == {"class lentigo (no source counterpart)": 2}
    counts = dict(zip(mapped.task.class_names, np.bincount(mapped.labels, minlength=8).tolist(), strict=True))
    assert counts == {"MEL": 2, "NV": 4, "BCC": 2, "AK": 0, "BKL": 2, "DF": 2, "VASC": 2, "SCC": 0}
    assert mapped.label_map["no_counterpart"] == ["AK", "SCC"]


def test_padchest_frontal_rows_findings_and_map(tmp_path):
    build_padchest(tmp_path)
    data = load_dataset("padchest", tmp_path)
    assert len(data) == 7 and len(set(data.groups)) == 4
    assert data.accounting.dropped == {"projection not in PA/AP/AP_horizontal": 2, "Labels unreadable or empty": 1}
    assert data.task.class_names == ("atelectasis", "cardiomegaly", "chronic changes", "consolidation",
                                     "pleural effusion", "pulmonary edema")
    assert list(data.subgroups.columns) == ["sex", "age", "view"]
    assert len(load_dataset("padchest", tmp_path, physician_only=True)) == 3
    mapped = load_dataset("padchest", tmp_path, label_map="chexpert-to-padchest")
    positives = dict(zip(mapped.task.class_names, mapped.labels.sum(axis=0).astype(int).tolist(), strict=True))
    assert positives == {"Atelectasis": 2, "Cardiomegaly": 2, "Consolidation": 1, "Edema": 1, "Pleural Effusion": 2}
    # physician-labelled only: no consolidation in the subset, so that label is absent, not scored
    few = load_dataset("padchest", tmp_path, physician_only=True, label_map="chexpert-to-padchest")
    assert "Consolidation" in few.label_map["absent"] and "Consolidation" not in few.label_map["scored"]


def test_datasets_check_reads_vindr_dicom(tmp_path):
    pytest.importorskip("pydicom")
    build_vindr_cxr(tmp_path)
    report = check_dataset("vindr_cxr", tmp_path, proportions=[0, 0, 1])  # as a shift target: all in test
    assert report.ok and report.n_images == 6 and report.dicom["n_files"] == 6
