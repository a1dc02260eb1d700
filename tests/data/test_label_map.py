"""Label maps as data: every shipped map is valid, applies to its cohort, scores the mapped classes only,
and a map leaving fewer than two scorable classes is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cohort_trees import build_chestxray14, build_ham10000, build_idrid, build_pad_ufes_20

from crs.data import DATASET_LOADERS, DataError, load_dataset
from crs.data.aptos2019 import CLASS_NAMES as APTOS_CLASSES
from crs.data.chexpert import CHEXPERT_TASKS
from crs.data.isic2019 import CLASS_NAMES as ISIC_CLASSES
from crs.data.label_map import read_label_map, shipped_maps

SOURCES = {"isic2019": ISIC_CLASSES, "aptos2019": APTOS_CLASSES, "chexpert": CHEXPERT_TASKS}


@pytest.mark.parametrize("name", shipped_maps())
def test_every_shipped_map_names_its_source_task_and_a_real_loader(name):
    label_map = read_label_map(name)
    source = name.split("-to-")[0]
    assert label_map.source == SOURCES[source]  # the source task's classes, in the task's order
    assert label_map.target_loader in DATASET_LOADERS
    # every source class is mapped or named as having no counterpart
    assert set(label_map.classes.values()) | set(label_map.no_counterpart) == set(label_map.source)


def test_shipped_maps_cover_the_issue_pairs():
    assert {"isic2019-to-pad_ufes_20", "isic2019-to-ham10000", "aptos2019-to-messidor2", "aptos2019-to-idrid",
            "aptos2019-to-eyepacs", "chexpert-to-chestxray14", "chexpert-to-vindr_cxr"} <= set(shipped_maps())
    assert read_label_map("isic2019-to-pad_ufes_20").no_counterpart == ("DF", "VASC")


def test_pad_ufes_20_onto_isic_scores_the_six_mapped_classes(tmp_path):
    build_pad_ufes_20(tmp_path)
    data = load_dataset("pad_ufes_20", tmp_path, label_map="isic2019-to-pad_ufes_20", proportions=[0, 0, 1])
    assert data.task.class_names == ISIC_CLASSES and data.task.kind == "multiclass"
    assert set(data.splits) == {"test"}
    # SEK -> BKL, NEV -> NV, ACK -> AK; three images each
    counts = dict(zip(ISIC_CLASSES, np.bincount(data.labels, minlength=8).tolist(), strict=True))
    assert counts == {"MEL": 3, "NV": 3, "BCC": 3, "AK": 3, "BKL": 3, "DF": 0, "VASC": 0, "SCC": 3}
    assert data.label_map["scored"] == ["MEL", "NV", "BCC", "AK", "BKL", "SCC"]
    assert data.label_map["no_counterpart"] == ["DF", "VASC"]
    assert any("scored MEL, NV, BCC, AK, BKL, SCC; no counterpart DF, VASC" in n for n in data.accounting.notes)


def test_multilabel_map_renames_and_leaves_unmapped_findings_out(tmp_path):
    build_chestxray14(tmp_path)
    data = load_dataset("chestxray14", tmp_path, label_map="chexpert-to-chestxray14")
    assert data.task.class_names == CHEXPERT_TASKS
    effusion = data.labels[:, CHEXPERT_TASKS.index("Pleural Effusion")]
    assert effusion.sum() == 3  # ChestX-ray14 "Effusion"
    assert data.label_map["scored"] == list(CHEXPERT_TASKS)


def test_map_leaving_one_class_is_refused_in_one_line(tmp_path):
    build_ham10000(tmp_path)
    table = tmp_path / "HAM10000_metadata.csv"
    lines = table.read_text().splitlines()
    # only the three mel rows: one class with positives after mapping
    table.write_text("\n".join([lines[0]] + [line for line in lines[1:] if ",mel," in line]) + "\n")
    with pytest.raises(DataError) as error:
        load_dataset("ham10000", tmp_path, label_map="isic2019-to-ham10000")
    message = str(error.value)
    assert "\n" not in message and "only 1 mapped class(es) ['MEL']" in message


def test_dropped_target_classes_are_counted_and_unmapped_ones_refused(tmp_path):
    build_pad_ufes_20(tmp_path)
    custom = tmp_path / "custom.toml"
    custom.write_text(
        'source = ["MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC"]\nkind = "multiclass"\n'
        'no_counterpart = ["DF", "VASC", "BKL", "AK"]\ndropped = ["SEK", "ACK"]\n'
        '[classes]\nBCC = "BCC"\nMEL = "MEL"\nNEV = "NV"\nSCC = "SCC"\n'
    )
    data = load_dataset("pad_ufes_20", tmp_path, label_map=str(custom))
    assert len(data) == 12 and data.accounting.dropped == {"class SEK (no source counterpart)": 3,
                                                           "class ACK (no source counterpart)": 3}
    custom.write_text(custom.read_text().replace('dropped = ["SEK", "ACK"]', 'dropped = ["SEK"]'))
    with pytest.raises(DataError, match=r"target classes \['ACK'\] are neither mapped nor dropped"):
        load_dataset("pad_ufes_20", tmp_path, label_map=str(custom))


def test_a_map_must_name_every_source_class(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('source = ["a", "b", "c"]\nkind = "multiclass"\n[classes]\nx = "a"\ny = "b"\n')
    with pytest.raises(DataError, match=r"source classes \['c'\] are neither mapped nor listed in no_counterpart"):
        read_label_map(bad)
    with pytest.raises(DataError, match="unknown label map 'nope'"):
        read_label_map("nope")


def test_dr_grades_map_onto_aptos_names(tmp_path):
    build_idrid(tmp_path)
    data = load_dataset("idrid", tmp_path, label_map="aptos2019-to-idrid")
    assert data.task.class_names == APTOS_CLASSES and data.task.kind == "ordinal"
    assert np.bincount(data.labels).tolist() == [3, 3, 3, 3, 3]


def test_paper_shift_spec_gives_every_task_targets_with_a_fitting_map():
    from pathlib import Path

    from crs.spec import load_spec

    spec = load_spec(Path(__file__).parents[2] / "examples" / "paper_shift.toml")
    assert all(entry.shift_targets for entry in spec.datasets)
    for entry in spec.datasets:
        for target in entry.shift_targets:
            if "label_map" in target.options:
                label_map = read_label_map(target.options["label_map"])
                assert label_map.target_loader == target.loader and label_map.name.startswith(f"{entry.loader}-to-")


def test_the_demo_scores_shift_on_all_three_tasks():
    from importlib import resources

    from crs.spec import load_spec

    spec = load_spec(Path(str(resources.files("crs") / "specs" / "quickstart.toml")))
    assert [len(entry.shift_targets) for entry in spec.datasets] == [1, 1, 1]
