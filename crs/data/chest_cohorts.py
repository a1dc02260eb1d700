"""Chest X-ray cohorts for CheXpert's shift: NIH ChestX-ray14 and VinDr-CXR, each in its own labels.

NIH ChestX-ray14 (Wang et al. 2017; NIH Clinical Center)::

    ROOT/Data_Entry_2017.csv (or Data_Entry_2017_v2020.csv)   Image Index, Finding Labels, Follow-up #,
        Patient ID, Patient Age, Patient Gender, View Position, OriginalImage[Width, Height], ...
    ROOT/images_001/images/00000001_000.png ... images_012/images/   (or ROOT/images/ flat)
    ROOT/test_list.txt, train_val_list.txt                         (optional: ``image_lists``)

``Finding Labels`` holds labels joined by ``|`` or ``No Finding``; all 14 are read, split by
``Patient ID``. Map onto CheXpert's five with ``label_map = "chexpert-to-chestxray14"``.

VinDr-CXR (Nguyen et al. 2022; PhysioNet, credentialed)::

    ROOT/annotations/image_labels_test.csv     image_id, 28 label columns (consensus of five radiologists)
    ROOT/annotations/image_labels_train.csv    image_id, rad_id, 28 label columns (three radiologists per image)
    ROOT/test/<image_id>.dicom, ROOT/train/<image_id>.dicom

``parts`` picks test (default) and/or train; train's three reads are combined by majority (a label
is positive when more than half of an image's radiologists marked it). Columns are matched whatever
their case and by the public files' own spellings (the test file's "Other disease" is the train file's
"Other diseases"); a column that is neither an id nor one of the 28 labels is refused, never a new
label. VinDr-CXR publishes no patient ids: each image is its own group. Map with ``label_map = "chexpert-to-vindr_cxr"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task
from crs.data.cohort import build_cohort
from crs.data.folder import read_csv, require_columns

NIH_FINDINGS = (
    "Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia", "Pneumothorax",
    "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia",
)
NIH_CSVS = ("Data_Entry_2017.csv", "Data_Entry_2017_v2020.csv")
NO_FINDING = "No Finding"


def _nih_image_folders(root: Path) -> dict[str, str]:
    """image file name -> path relative to root, over images_XXX/images/ and images/."""
    found: dict[str, str] = {}
    folders = sorted(p for p in root.glob("images_*/images") if p.is_dir())
    folders += [p for p in (root / "images",) if p.is_dir()]
    for folder in folders:
        relative = folder.relative_to(root).as_posix()
        for entry in folder.iterdir():
            found.setdefault(entry.name, f"{relative}/{entry.name}")
    return found


def load_chestxray14(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), image_lists: Sequence[str] = (),
) -> Dataset:
    """Load NIH ChestX-ray14 as a 14-label multilabel task, split by patient (``image_lists`` restricts rows)."""
    root = Path(root).resolve()
    csv_name = next((name for name in NIH_CSVS if (root / name).is_file()), NIH_CSVS[0])
    table = read_csv(root / csv_name, "chestxray14", "Image Index, Finding Labels, Patient ID, Patient Age, Patient Gender, View Position")
    require_columns(table, ("Image Index", "Finding Labels", "Patient ID"), csv_name)
    rows_listed = len(table)
    dropped: dict[str, int] = {}
    if image_lists:
        wanted: set[str] = set()
        for list_name in image_lists:
            path = root / list_name
            if not path.is_file():
                raise DataError(f"chestxray14: image list {path} not found; it is part of the official download")
            wanted |= {line.strip() for line in path.read_text().splitlines() if line.strip()}
        inside = table["Image Index"].astype(str).isin(wanted).to_numpy()
        if (~inside).any():
            dropped[f"not in {', '.join(image_lists)}"] = int((~inside).sum())
        table = table[inside].reset_index(drop=True)
    labels = np.zeros((len(table), len(NIH_FINDINGS)), dtype=np.float32)
    for row, text in enumerate(table["Finding Labels"].astype(str)):
        for finding in (part.strip() for part in text.split("|")):
            if finding == NO_FINDING:
                continue
            if finding not in NIH_FINDINGS:
                raise DataError(f"chestxray14: image {table['Image Index'].iloc[row]} has finding {finding!r}; "
                                f"known findings are {NIH_FINDINGS} and {NO_FINDING!r}")
            labels[row, NIH_FINDINGS.index(finding)] = 1.0
    names = table["Image Index"].astype(str).str.strip().tolist()
    located = _nih_image_folders(root)
    relative = [located.get(name, f"images/{name}") for name in names]
    metadata = pd.DataFrame({
        "patient": table["Patient ID"].astype(str).to_numpy(),
        "age": table.get("Patient Age", pd.Series(np.nan, index=table.index)).to_numpy(),
        "sex": table.get("Patient Gender", pd.Series(None, index=table.index)).to_numpy(),
        "view": table.get("View Position", pd.Series(None, index=table.index)).to_numpy(),
        "follow_up": table.get("Follow-up #", pd.Series(np.nan, index=table.index)).to_numpy(),
    })
    ids = [name.rsplit(".", 1)[0] for name in names]
    return build_cohort("chestxray14", root, Task("chestxray14", "multilabel", NIH_FINDINGS), "chest_xray", ids, relative,
                        table["Patient ID"].astype(str).tolist(), labels, metadata, image_size=image_size,
                        skip_bad=skip_bad, verify=verify, seed=seed, proportions=proportions, rows_listed=rows_listed,
                        dropped=dropped)


VINDR_PARTS = {"test": "annotations/image_labels_test.csv", "train": "annotations/image_labels_train.csv"}
VINDR_NOT_LABELS = ("image_id", "rad_id")
"""Columns that are not labels, matched whatever their case (``rad_ID`` is still the reader's id)."""
VINDR_LABELS = (
    "Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly", "Clavicle fracture", "Consolidation", "Edema",
    "Emphysema", "Enlarged PA", "ILD", "Infiltration", "Lung Opacity", "Lung cavity", "Lung cyst", "Mediastinal shift",
    "Nodule/Mass", "Pleural effusion", "Pleural thickening", "Pneumothorax", "Pulmonary fibrosis", "Rib fracture",
    "Other lesion", "COPD", "Lung tumor", "Pneumonia", "Tuberculosis", "Other diseases", "No finding",
)
"""VinDr-CXR 1.0.0's 28 image-level labels, as image_labels_train.csv spells them."""
VINDR_SPELLINGS = {"other disease": "Other diseases"}
"""Other spellings of one label in the public files (image_labels_test.csv says "Other disease")."""


def _vindr_columns(columns: Sequence[str], where: str) -> dict[str, str]:
    """{column as the file spells it: its canonical name} of one label file: ``image_id`` and ``rad_id``
    whatever their case, each label as :data:`VINDR_LABELS` spells it (case and the known variant spellings
    aside). A column that is none of those is refused, so it can never become a label of its own."""
    canonical = {name.casefold(): name for name in (*VINDR_NOT_LABELS, *VINDR_LABELS)} | VINDR_SPELLINGS
    named: dict[str, str] = {}
    for column in columns:
        name = canonical.get(str(column).strip().casefold())
        if name is None:
            raise DataError(f"vindr_cxr: {where} has column {str(column)!r}, which is not image_id, rad_id or one of "
                            f"VinDr-CXR's 28 labels ({', '.join(VINDR_LABELS)}); remove or rename it")
        if name in named.values():
            twin = next(c for c, n in named.items() if n == name)
            raise DataError(f"vindr_cxr: {where} has columns {twin!r} and {str(column)!r}, both {name!r}; keep one")
        named[str(column)] = name
    return named


def load_vindr_cxr(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), parts: Sequence[str] = ("test",),
) -> Dataset:
    """Load VinDr-CXR's image-level labels (all 28) as a multilabel task; DICOM images.

    Columns are matched case-insensitively and by their known spellings (the test file's "Other disease"
    is the train file's "Other diseases"); labels keep the first part's column order."""
    root = Path(root).resolve()
    frames, label_names = [], None
    rows_listed = 0
    for part in parts:
        if part not in VINDR_PARTS:
            raise DataError(f"vindr_cxr: part {part!r} is not one of {sorted(VINDR_PARTS)}")
        table = read_csv(root / VINDR_PARTS[part], "vindr_cxr", "image_id[, rad_id] and the 28 label columns")
        table = table.rename(columns=_vindr_columns(list(table.columns), VINDR_PARTS[part]))
        require_columns(table, ("image_id",), VINDR_PARTS[part])
        rows_listed += len(table)
        names = tuple(c for c in table.columns if c not in VINDR_NOT_LABELS)
        if label_names is not None and set(names) != set(label_names):
            only_here, only_there = sorted(set(names) - set(label_names)), sorted(set(label_names) - set(names))
            raise DataError(f"vindr_cxr: {VINDR_PARTS[part]} and {VINDR_PARTS[parts[0]]} have different labels "
                            f"(only in the first: {only_here}; only in the second: {only_there}); "
                            "read one part or give both files the same label columns")
        label_names = label_names or names
        values = table[list(label_names)].apply(pd.to_numeric, errors="coerce").fillna(0.0)
        # One row per radiologist (train) or one consensus row (test): a label is positive on a majority.
        votes = values.groupby(table["image_id"].astype(str), sort=False).mean()
        frames.append(pd.DataFrame({"image_id": votes.index, "part": part, "path": [f"{part}/{i}.dicom" for i in votes.index]})
                      .join(pd.DataFrame((votes.to_numpy() > 0.5).astype(np.float32), columns=list(label_names))))
    if label_names is None:
        raise DataError(f"vindr_cxr: parts is empty; give one or both of {sorted(VINDR_PARTS)}")
    table = pd.concat(frames, ignore_index=True)
    if table["image_id"].duplicated().any():
        twins = table["image_id"][table["image_id"].duplicated()]
        raise DataError(f"vindr_cxr: image {twins.iloc[0]} is listed in more than one part ({len(twins)} such); "
                        "read one part")
    ids = table["image_id"].tolist()
    labels = table[list(label_names)].to_numpy(np.float32)
    metadata = table[["part"]].reset_index(drop=True)
    return build_cohort("vindr_cxr", root, Task("vindr_cxr", "multilabel", label_names), "chest_xray", ids,
                        table["path"].tolist(), ids, labels, metadata, image_size=image_size, skip_bad=skip_bad,
                        verify=verify, seed=seed, proportions=proportions, rows_listed=rows_listed, group_word="images")


PADCHEST_CSVS = ("PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz")
PADCHEST_FRONTAL = ("PA", "AP", "AP_horizontal")


def _padchest_labels(text: object) -> list[str] | None:
    """``"['pleural effusion', ' cardiomegaly']"`` -> the stripped, lower-case findings; None if unreadable."""
    import ast

    if not isinstance(text, str) or not text.strip():
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, list | tuple):
        return None
    return [str(item).strip().lower() for item in value if str(item).strip()]


def load_padchest(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), projections: Sequence[str] = PADCHEST_FRONTAL,
    physician_only: bool = False,
) -> Dataset:
    """Load PadChest (BIMCV) as a multilabel task over the findings its ``Labels`` column uses, split by patient.

    ``projections`` keeps those views (frontal by default); ``physician_only`` keeps the reports labelled
    by physicians (``MethodLabel`` Physician), leaving out those labelled by the authors' RNN.
    Images are ``ROOT/<ImageDir>/<ImageID>`` (16-bit grey PNG in the release).
    """
    root = Path(root).resolve()
    csv_name = next((name for name in PADCHEST_CSVS if (root / name).is_file()), PADCHEST_CSVS[0])
    table = read_csv(root / csv_name, "padchest", "ImageID, ImageDir, PatientID, Projection, MethodLabel, Labels",
                     low_memory=False)
    require_columns(table, ("ImageID", "ImageDir", "PatientID", "Labels"), csv_name)
    rows_listed = len(table)
    listed_patients = table["PatientID"].astype(str).tolist()  # a patient with only laterals is lost, as in chexpert
    dropped: dict[str, int] = {}
    keep = np.ones(len(table), dtype=bool)
    if "Projection" in table and projections:
        view_ok = table["Projection"].astype(str).str.strip().isin(list(projections)).to_numpy()
        dropped["projection not in " + "/".join(projections)] = int((~view_ok).sum())
        keep &= view_ok
    if physician_only:
        require_columns(table, ("MethodLabel",), csv_name)
        by_physician = (table["MethodLabel"].astype(str).str.strip() == "Physician").to_numpy()
        dropped["labelled by the RNN (physician_only)"] = int((keep & ~by_physician).sum())
        keep &= by_physician
    parsed = [_padchest_labels(text) for text in table["Labels"]]
    readable = np.array([p is not None for p in parsed])
    dropped["Labels unreadable or empty"] = int((keep & ~readable).sum())
    keep &= readable
    dropped = {reason: n for reason, n in dropped.items() if n}
    table = table[keep].reset_index(drop=True)
    kept_labels = [p for p, k in zip(parsed, keep, strict=True) if k and p is not None]
    if table.empty:
        raise DataError(f"padchest: no rows left in {csv_name} after the projection and label filters")
    findings = tuple(sorted({f for labels in kept_labels for f in labels if f} - {"normal"}))
    labels = np.zeros((len(table), len(findings)), dtype=np.float32)
    column = {name: j for j, name in enumerate(findings)}
    for row, found in enumerate(kept_labels):
        for finding in found:
            if finding in column:
                labels[row, column[finding]] = 1.0
    relative = [f"{str(d).strip()}/{str(i).strip()}" for d, i in zip(table["ImageDir"], table["ImageID"], strict=True)]
    ids = [str(i).strip().rsplit(".", 1)[0] for i in table["ImageID"]]
    study_year = pd.to_numeric(table.get("StudyDate_DICOM", pd.Series(np.nan, index=table.index)).astype(str).str[:4], errors="coerce")
    birth_year = pd.to_numeric(table.get("PatientBirth", pd.Series(np.nan, index=table.index)), errors="coerce")
    metadata = pd.DataFrame({
        "patient": table["PatientID"].astype(str).to_numpy(),
        "sex": table.get("PatientSex_DICOM", pd.Series(None, index=table.index)).to_numpy(),
        "age": (study_year - birth_year).to_numpy(),
        "view": table.get("Projection", pd.Series(None, index=table.index)).to_numpy(),
        "method": table.get("MethodLabel", pd.Series(None, index=table.index)).to_numpy(),
    })
    return build_cohort("padchest", root, Task("padchest", "multilabel", findings), "chest_xray", ids, relative,
                        table["PatientID"].astype(str).tolist(), labels, metadata, image_size=image_size,
                        skip_bad=skip_bad, verify=verify, seed=seed, proportions=proportions, rows_listed=rows_listed,
                        dropped=dropped, listed_groups=listed_patients)
