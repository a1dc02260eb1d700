"""`crs init`'s inspection and starter spec: guesses from CSV columns, label names and image looks."""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from crs.cli.main import cli
from crs.data import load_dataset
from crs.data.base import DataError
from crs.data.inspect_folder import inspect_folder, inspect_shift_target, load_guess
from crs.data.starter_spec import CHECKPOINT_ENCODERS, STARTER_ENCODERS, StarterChoices, starter_spec_text
from crs.spec import parse_spec


def _grey(path, value: int):
    Image.fromarray(np.full((24, 32), value, np.uint8)).convert("RGB").save(path)


def _fundus(path, value: int):
    yy, xx = np.mgrid[:48, :64]
    disc = (yy - 23.5) ** 2 + (xx - 31.5) ** 2 <= 22**2
    picture = np.zeros((48, 64, 3), np.uint8)
    picture[disc] = (190, 90 + value % 40, 40)
    Image.fromarray(picture).save(path)


def _skin(path, value: int):
    Image.new("RGB", (40, 30), (210, 150 + value % 40, 130)).save(path)


def _folder(root, rows, draw):
    (root / "images").mkdir(parents=True)
    for i, row in enumerate(rows):
        row.setdefault("file", f"images/{i:03d}.png")
        draw(root / row["file"], i * 7)
    pd.DataFrame(rows).to_csv(root / "meta.csv", index=False)
    return root


def test_multilabel_chest_folder(tmp_path):
    rows = [{"Patient ID": f"P{i // 2}", "Sex": "MF"[i % 2], "Atelectasis": float(i % 2),
             "Pleural Effusion": float(i % 3 == 0), "Edema": float(i % 4 == 0) if i % 5 else None} for i in range(30)]
    guess = inspect_folder(_folder(tmp_path, rows, _grey))
    assert guess.csv == "meta.csv" and guess.image_column == "file" and guess.image_types == {"png": 30}
    assert guess.kind == "multilabel" and guess.label_columns == ("Atelectasis", "Pleural Effusion", "Edema")
    assert guess.group_column == "Patient ID" and guess.modality == "chest_xray" and guess.fit == "pad"
    assert guess.class_counts == {"Atelectasis": 15, "Pleural Effusion": 10, "Edema": 6}
    assert "label names" in guess.reasons["modality"]
    dataset = load_guess(guess)
    assert dataset.task.class_names == guess.label_columns and dataset.fit == "pad"


def test_ordinal_fundus_folder_by_its_looks_with_a_split_column(tmp_path):
    rows = [{"id_code": f"e{i:04d}", "grade": i % 5, "split": ["train", "train", "val", "test"][i % 4]} for i in range(40)]
    guess = inspect_folder(_folder(tmp_path, rows, _fundus))
    assert guess.kind == "ordinal" and guess.label_columns == ("grade",)
    assert guess.modality == "fundus" and "dark circular field" in guess.reasons["modality"] and guess.fit == "crop"
    assert guess.split_column == "split" and guess.id_column == "id_code"
    assert guess.class_counts == {str(g): 8 for g in range(5)}
    assert load_guess(guess).task.kind == "ordinal"


def test_dermoscopy_folder_with_lesion_groups(tmp_path):
    rows = [{"image_id": f"ISIC_{i:05d}", "lesion_id": f"L{i // 3}", "dx": ["MEL", "NV", "BCC"][i % 3]} for i in range(30)]
    guess = inspect_folder(_folder(tmp_path, rows, _skin))
    assert guess.kind == "multiclass" and guess.label_columns == ("dx",) and guess.modality == "dermoscopy"
    assert guess.group_column == "lesion_id" and guess.id_column == "image_id" and guess.fit == "crop"
    assert not guess.warnings


def test_warnings_name_the_fix(tmp_path):
    # 3 'rare' rows: a small class, not a typo (more than a tenth of 'common'), so the split warning speaks
    rows = [{"label": "common"} for _ in range(20)] + [{"label": "rare"}] * 3
    root = _folder(tmp_path, [dict(row) for row in rows], _skin)
    (root / "images" / "000.png").unlink()
    guess = inspect_folder(root, modality="dermoscopy")
    text = " ".join(guess.warnings)
    assert "{'rare': 3}" in text and "merge or drop" in text and "typo" not in text
    assert "1 listed file(s) are missing" in text
    assert "no patient or lesion column" in text and "--group-column" in text
    assert guess.image_types == {"png": 22, "missing": 1} and guess.reasons["modality"] == "given"


def test_dicom_modality_code_names_the_modality(tmp_path):
    pytest.importorskip("pydicom")
    from dicom_factory import write_film

    rows = []
    for i in range(12):
        path = f"scans/IM{i:04d}"  # no suffix: found by the DICM marker
        write_film(tmp_path / path, np.full((16, 20, 3), 40 + i, np.uint8), modality="OP")
        rows.append({"path": path, "label": i % 2})
    pd.DataFrame(rows).to_csv(tmp_path / "labels.csv", index=False)
    guess = inspect_folder(tmp_path)
    assert guess.image_types == {"dicom": 12} and guess.modality == "fundus"
    assert "DICOM modality codes" in guess.reasons["modality"]


def test_no_csv_or_no_path_column_is_one_clear_error(tmp_path):
    with pytest.raises(DataError, match="no CSV under .* write labels.csv"):
        inspect_folder(tmp_path)
    pd.DataFrame({"name": ["a.png"], "label": [1]}).to_csv(tmp_path / "labels.csv", index=False)
    with pytest.raises(DataError, match="names image files relative to it"):
        inspect_folder(tmp_path)


def test_starter_spec_parses_and_loads_its_data_set(tmp_path):
    rows = [{"patient": f"p{i // 2}", "label": ["Normal", "Pneumonia"][i % 2]} for i in range(24)]
    guess = inspect_folder(_folder(tmp_path / "site", rows, _grey))
    text = starter_spec_text(guess, StarterChoices(name="site", device="cpu"))
    spec = parse_spec(tomllib.loads(text))
    assert spec.encoder_names == list(STARTER_ENCODERS["chest_xray"]) and spec.score.reference_encoder == "resnet50"
    assert f'# "{CHECKPOINT_ENCODERS["chest_xray"][0]}"' in text and "WARNING" not in text
    assert spec.extract.corruptions == "all" and spec.probe.seeds == (0, 1, 2, 3, 4)
    entry = spec.datasets[0]
    dataset = load_dataset(entry.loader, entry.root, **entry.options)
    assert dataset.task.class_names == ("Normal", "Pneumonia") and dataset.image_size == 224 and dataset.fit == "pad"
    quick = parse_spec(tomllib.loads(starter_spec_text(guess, StarterChoices(name="s", quick=True, device="cpu"))))
    assert quick.probe.label_fractions == (0.25, 1.0) and quick.extract.severities == (1, 3)


def test_shift_target_labels_matched_by_name(tmp_path):
    source_rows = [{"patient": f"p{i}", "Edema": float(i % 2), "Pleural Effusion": float(i % 3 == 0)} for i in range(24)]
    source = inspect_folder(_folder(tmp_path / "a", source_rows, _grey))
    target_rows = [{"pleural_effusion": float(i % 2), "nodule": 1.0, "EDEMA": 0.0} for i in range(10)]
    _folder(tmp_path / "b", target_rows, _grey)
    guess, options = inspect_shift_target(source, load_guess(source).task, tmp_path / "b")
    assert options["label_columns"] == ["EDEMA", "pleural_effusion"] and options["proportions"] == [0.0, 0.0, 1.0]
    target = load_dataset("folder", tmp_path / "b", **options)
    assert target.task.class_names == ("Edema", "Pleural Effusion") and set(target.splits) == {"test"}
    np.testing.assert_array_equal(target.labels[:2], [[0, 0], [0, 1]])
    _folder(tmp_path / "c", [{"Edema": 1.0, "Cardiomegaly": 0.0} for _ in range(6)], _grey)
    with pytest.raises(DataError, match=r"source labels \['Pleural Effusion'\] have no target"):
        inspect_shift_target(source, load_guess(source).task, tmp_path / "c")


def test_cli_init_prints_guesses_and_refuses_to_overwrite(tmp_path):
    rows = [{"patient": f"p{i // 2}", "label": ["Normal", "Pneumonia"][i % 2]} for i in range(24)]
    root = _folder(tmp_path / "site", rows, _grey)
    runner = CliRunner()
    spec = tmp_path / "site.toml"
    result = runner.invoke(cli, ["init", str(root), "--spec", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "modality  chest_xray" in result.output and "change: --modality" in result.output
    assert f"then: crs run {spec}" in result.output and "next: crs datasets check folder" in result.output
    assert spec.is_file()
    again = runner.invoke(cli, ["init", str(root), "--spec", str(spec)])
    assert again.exit_code != 0 and "--force" in again.output
    bad = runner.invoke(cli, ["init", str(root), "--spec", str(tmp_path / "x.toml"), "--encoders", "resnet_9000"])
    assert bad.exit_code != 0 and "resnet_9000" in bad.output


@pytest.mark.parametrize("content", ["", "path,label\n"], ids=["empty file", "header only"])
def test_cli_init_on_a_csv_without_rows_says_it_has_no_rows(tmp_path, content):
    """Issue 46, item 14: not "no column names image files", which sends the user to fix the wrong thing."""
    root = tmp_path / "site"
    (root / "images").mkdir(parents=True)
    _skin(root / "images" / "a.png", 0)
    (root / "labels.csv").write_text(content)
    for extra in ([], ["--csv", "labels.csv"]):
        result = CliRunner().invoke(cli, ["init", str(root), "--spec", str(tmp_path / "x.toml"), *extra])
        assert result.exit_code == 2, result.output
        assert f"crs: error: {root / 'labels.csv'} has no rows: write one row per image" in result.output, result.output
        assert "names image files" not in result.output


def test_cli_init_says_one_thing_of_a_rare_value_that_looks_like_a_typo(tmp_path):
    """Issue 46, item 14: a one-row 'melanoma' was both "left out of class_names" and "a class too small to
    split"; it is left out, so only the typo warning speaks of it, with what keeping it would need."""
    rows = [{"label": "melanoma" if i == 40 else ["benign", "malignant"][i % 2]} for i in range(41)]
    root = _folder(tmp_path / "site", rows, _skin)
    spec = tmp_path / "site.toml"
    result = CliRunner().invoke(cli, ["init", str(root), "--spec", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:") and "melanoma" in line]
    assert len(warnings) == 1, result.output
    assert "left out of class_names" in warnings[0] and "needs at least 5 images" in warnings[0]
    assert "fewer than 5 images (positives)" not in result.output
    assert tomllib.loads(spec.read_text())["datasets"][0]["options"]["class_names"] == ["benign", "malignant"]
