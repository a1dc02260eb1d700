"""Patient subgroups from metadata (crs.data.subgroups): bands, categories, the loaders' attributes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from crs.cache.store import FeatureStore, store_path
from crs.data import DataError, load_dataset
from crs.data.subgroups import UNKNOWN, age_band_labels, age_bands, categories
from crs.data.synthetic import CXR_FINDINGS, plant_subgroup_failure


def test_age_bands_by_hand():
    assert age_band_labels((40, 60, 80)) == ["<40", "40-59", "60-79", "80+"]
    # 39 < 40 <= 40 < 60 <= 79.5 < 80 <= 80, 95; blank and text are unknown
    got = age_bands([39, 40, 59, 60, 79.5, 80, 95, None, "n/a"])
    assert got.tolist() == ["<40", "40-59", "40-59", "60-79", "60-79", "80+", "80+", UNKNOWN, UNKNOWN]
    assert age_bands([17, 18, 65], (18, 65)).tolist() == ["<18", "18-64", "65+"]
    with pytest.raises(DataError, match="increasing"):
        age_band_labels((60, 40))


def test_identifiers_and_free_text_are_refused():
    assert categories(["Male", "F", " Female ", None, ""], "sex", "t").tolist() == [
        "male", "female", "female", UNKNOWN, UNKNOWN]
    with pytest.raises(DataError, match="identifier or free text"):
        categories([f"patient{i:05d}" for i in range(30)], "site", "t")
    with pytest.raises(DataError, match="free text"):
        categories(["a long free-text note that a clinician typed into the field"] * 3, "note", "t")


FINDINGS = ["No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
            "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
            "Fracture", "Support Devices"]


def _chexpert_csv(base, n_patients=150):
    """An official-format train.csv: Path, Sex, Age, Frontal/Lateral, AP/PA, the 14 findings; 2 films each."""
    rng = np.random.default_rng(3)
    folder = base / "CheXpert-v1.0-small"
    rows = []
    for p in range(1, n_patients + 1):
        sex = ["Male", "Female", "Unknown"][0 if p % 7 == 0 else (1 if p % 2 else 0)] if p % 50 else "Unknown"
        age = int(rng.integers(18, 91))
        for study, view, ap_pa in (("study1", "Frontal", "AP" if p % 3 else "PA"), ("study1", "Lateral", "")):
            relative = f"train/patient{p:05d}/{study}/view{1 if view == 'Frontal' else 2}_{view.lower()}.jpg"
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((8, 8), p % 255, np.uint8)).save(folder / relative)
            row = {"Path": f"CheXpert-v1.0-small/{relative}", "Sex": sex, "Age": age, "Frontal/Lateral": view,
                   "AP/PA": ap_pa}
            row.update({f: rng.choice([1.0, 0.0, -1.0, np.nan]) for f in FINDINGS})
            rows.append(row)
    table = pd.DataFrame(rows)
    table.to_csv(folder / "train.csv", index=False)
    return table


def test_chexpert_subgroups_are_read_from_the_official_columns(tmp_path):
    table = _chexpert_csv(tmp_path)  # 300 rows, 150 frontal
    dataset = load_dataset("chexpert", tmp_path)
    frontal = table[table["Frontal/Lateral"] == "Frontal"].reset_index(drop=True)
    assert list(dataset.subgroups.columns) == ["sex", "age", "ap_pa"] and len(dataset.subgroups) == len(frontal) == 150
    expected_sex = frontal["Sex"].map({"Male": "male", "Female": "female", "Unknown": UNKNOWN})
    # rows keep the CSV's order (the loader keeps it and screens nothing here)
    assert dataset.subgroups["sex"].tolist() == expected_sex.tolist()
    assert dataset.subgroups["ap_pa"].tolist() == frontal["AP/PA"].tolist()
    ages = frontal["Age"].to_numpy()
    expected_age = np.where(ages < 40, "<40", np.where(ages < 60, "40-59", np.where(ages < 80, "60-79", "80+")))
    assert dataset.subgroups["age"].tolist() == expected_age.tolist()
    # configurable bands, chosen attributes
    chosen = load_dataset("chexpert", tmp_path, subgroups={"sex": "sex"}, age_bands=[65])
    assert list(chosen.subgroups.columns) == ["sex"]
    banded = load_dataset("chexpert", tmp_path, age_bands=[65])
    assert set(banded.subgroups["age"]) == {"<65", "65+"}


def test_folder_subgroups_name_csv_columns(tmp_path):
    from data_trees import build_folder

    build_folder(tmp_path)
    csv = pd.read_csv(tmp_path / "labels.csv")
    csv["Sex"] = np.where(np.arange(len(csv)) % 2, "F", "M")
    csv["Age"] = 30 + 3 * np.arange(len(csv))
    csv["Note"] = [f"film {i} was read by the night-shift radiologist, see report" for i in range(len(csv))]
    csv.to_csv(tmp_path / "labels.csv", index=False)
    options = dict(modality="dermoscopy", split_column="split", group_column="patient")
    plain = load_dataset("folder", tmp_path, **options)
    assert plain.subgroups.empty  # a folder has no subgroups unless the spec names them
    named = load_dataset("folder", tmp_path, subgroups=["Sex", "Age"], **options)
    assert named.subgroups["sex"].tolist()[:2] == ["male", "female"]
    assert named.subgroups["age"].iloc[0] == "<40"
    with pytest.raises(DataError, match="free text"):
        load_dataset("folder", tmp_path, subgroups=["Note"], **options)
    with pytest.raises(DataError, match="metadata column 'Ethnicity'"):
        load_dataset("folder", tmp_path, subgroups=["Ethnicity"], **options)


def test_synthetic_demographics_leave_images_and_labels_as_they_were(tmp_path):
    """Sex and age come from a stream of their own: the labels and pixels are those of the label and
    image streams alone (re-drawn here from the generator's private functions)."""
    from crs.data import synthetic

    dataset = load_dataset("synthetic", tmp_path, modality="chest_xray", n_images=40, image_size=32, seed=5)
    rng = np.random.default_rng([5, 0, list(synthetic.MODALITY_TASK).index("chest_xray")])
    labels, _ = synthetic._labels_and_groups("chest_xray", 40, rng)
    np.testing.assert_array_equal(dataset.labels, labels)
    image_rng = np.random.default_rng([5, 1, list(synthetic.MODALITY_TASK).index("chest_xray"), 7])
    pixels = (np.clip(synthetic._chest(image_rng, labels[7], 32, "a"), 0, 1) * 255).round().astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(Image.open(dataset.root / dataset.paths[7])), pixels)
    # one sex and one age per patient, both attributes present
    table = pd.DataFrame({"group": dataset.groups, "sex": dataset.subgroups["sex"], "age": dataset.metadata["age"]})
    assert (table.groupby("group").nunique()[["sex", "age"]] == 1).all().all()
    assert set(dataset.subgroups["sex"]) == {"female", "male"} and list(CXR_FINDINGS)


def test_plant_shuffles_only_the_group_rows():
    features = np.arange(20, dtype=np.float32).reshape(10, 2)
    in_group = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 0], bool)
    planted = plant_subgroup_failure(features, in_group, seed=0)
    np.testing.assert_array_equal(planted[~in_group], features[~in_group])
    assert sorted(map(tuple, planted[in_group])) == sorted(map(tuple, features[in_group]))
    assert not np.array_equal(planted[in_group], features[in_group])


def test_the_cache_stores_categories_and_the_digest_follows_them(tmp_path):
    dataset = load_dataset("synthetic", tmp_path, modality="fundus", n_images=30, image_size=32)
    store = FeatureStore(store_path(tmp_path / "cache", "fundus"), mode="a")
    store.write_table(dataset)
    table = FeatureStore(store.path).read_table()
    assert sorted(table.subgroups) == ["age", "sex"]
    np.testing.assert_array_equal(table.subgroups["sex"], dataset.subgroups["sex"].to_numpy())
    digest = store.root.attrs["table_digest"]
    other = load_dataset("synthetic", tmp_path, modality="fundus", n_images=30, image_size=32, age_bands=[50])
    store.write_table(other)
    assert store.root.attrs["table_digest"] != digest
    assert set(FeatureStore(store.path).read_table().subgroups["age"]) <= {"<50", "50+"}
    none = load_dataset("synthetic", tmp_path, modality="fundus", n_images=30, image_size=32, subgroups=[])
    assert none.subgroups.empty


def test_the_equity_setting_needs_the_case_level():
    from crs.scoring.settings import ScoreInputError, ScoreSettings
    from crs.spec import ScoreConfig, SpecError

    with pytest.raises(SpecError, match="equity = true needs case_bootstrap"):
        ScoreConfig(equity=True, case_bootstrap=False)
    with pytest.raises(ScoreInputError, match="equity = True needs case_level"):
        ScoreSettings(equity=True)
    assert ScoreSettings.from_config(ScoreConfig(equity=True)).equity
    assert ScoreSettings.from_config(ScoreConfig(subgroup_min_images=20)).subgroup_min_images == 20
    with pytest.raises(SpecError, match="subgroup_min_images"):
        ScoreConfig(subgroup_min_images=0)


def test_isic_and_mimic_name_their_attributes(tmp_path):
    from data_trees import build_isic, build_mimic

    build_isic(tmp_path / "isic")
    isic = load_dataset("isic2019", tmp_path / "isic")
    assert list(isic.subgroups.columns) == ["sex", "age", "site"]
    # ages 30 + image number: bands by hand; every lesion is on the torso of a woman in the fixture
    ages = isic.metadata["age_approx"].to_numpy()
    assert isic.subgroups["age"].tolist() == ["<40" if a < 40 else "40-59" if a < 60 else "60-79" for a in ages]
    assert set(isic.subgroups["site"]) == {"torso"} and set(isic.subgroups["sex"]) == {"female"}
    build_mimic(tmp_path / "mimic")
    mimic = load_dataset("mimic_cxr", tmp_path / "mimic")
    assert list(mimic.subgroups.columns) == ["view"]
    assert mimic.subgroups["view"].tolist() == mimic.metadata["view"].astype(str).tolist()
    assert set(mimic.subgroups["view"]) <= {"PA", "AP"}


def test_crs_init_proposes_the_likely_subgroup_columns(tmp_path):
    from crs.data.inspect_folder import inspect_folder, load_guess
    from crs.data.subgroups import attribute_name, propose_columns

    assert [attribute_name(c) for c in ("AP/PA", "PatientAge", "Sex", "age_approx")] == [
        "ap_pa", "patient_age", "sex", "age_approx"]
    table = pd.DataFrame({
        "path": [f"{i}.png" for i in range(30)], "PatientAge": np.arange(30) * 3 + 1, "Gender": ["F", "M"] * 15,
        "ViewPosition": ["AP", "PA", "LL"] * 10, "patient": [f"p{i}" for i in range(30)],
        "site_notes": [f"note {i} about the site" for i in range(30)], "label": [0, 1] * 15,
    })
    # ages are numbers; Gender and ViewPosition are few short categories; a 30-value site column is not
    assert propose_columns(table, {"path", "label"}) == ["PatientAge", "Gender", "ViewPosition"]
    (tmp_path / "images").mkdir()
    for i in range(30):
        Image.fromarray(np.full((8, 8), i, np.uint8)).save(tmp_path / "images" / f"{i}.png")
    table.assign(path=[f"images/{i}.png" for i in range(30)]).to_csv(tmp_path / "labels.csv", index=False)
    guess = inspect_folder(tmp_path, label_columns=["label"], modality="chest_xray")
    assert guess.loader_options()["subgroups"] == ["PatientAge", "Gender", "ViewPosition"]
    dataset = load_guess(guess)
    assert list(dataset.subgroups.columns) == ["patient_age", "gender", "view_position"]
    assert dataset.subgroups["patient_age"].iloc[-1] == "80+"  # 88 years: banded as an age
    assert set(dataset.subgroups["gender"]) == {"female", "male"}
