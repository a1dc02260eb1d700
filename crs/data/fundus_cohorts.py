"""Fundus cohorts graded on the international clinical DR scale (0-4): Messidor-2, IDRiD, EyePACS.

Each keeps its own grade names ``"0"`` ... ``"4"``; ``label_map = "aptos2019-to-<cohort>"`` maps them
onto APTOS 2019's (``none`` ... ``proliferative``) when the cohort is APTOS's shift target.

Messidor-2 (ADCIS / LaTIM; adjudicated grades by Krause et al. 2018, released by Google on Kaggle)::

    ROOT/messidor_data.csv    image_id, adjudicated_dr_grade, adjudicated_dme, adjudicated_gradable
    ROOT/messidor-2.csv       optional: one examination per row, ``left;right`` image names (semicolons)
    ROOT/IMAGES/<image_id>    (or ROOT/images/, or ROOT itself); image_id carries its extension

Images graded ungradable (``adjudicated_gradable`` 0) have no grade and are left out (counted). With
the examination list, both eyes of one examination are one group; without it each image is its own.

IDRiD, part B. Disease Grading (Porwal et al. 2018)::

    ROOT/B. Disease Grading/1. Original Images/a. Training Set/IDRiD_001.jpg, b. Testing Set/IDRiD_001.jpg
    ROOT/B. Disease Grading/2. Groundtruths/a. IDRiD_Disease Grading_Training Labels.csv, b. ..._Testing Labels.csv
                          columns "Image name", "Retinopathy grade", "Risk of macular edema " (sic, a trailing space)

Training and testing names overlap (both start at IDRiD_001), so ids are ``train/IDRiD_001`` and
``test/IDRiD_001``; IDRiD publishes no patient ids (each image is its own group).

EyePACS (Kaggle "Diabetic Retinopathy Detection", 2015)::

    ROOT/trainLabels.csv            image, level        ROOT/train/<image>.jpeg
    ROOT/retinopathy_solution.csv   image, level, Usage ROOT/test/<image>.jpeg   (optional, parts = ["train", "test"])

``10_left`` and ``10_right`` are the two eyes of patient 10: one group.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task
from crs.data.cohort import build_cohort, first_existing
from crs.data.folder import read_csv, require_columns

GRADES = ("0", "1", "2", "3", "4")


def _grades(values: pd.Series, ids: Sequence[str], cohort: str, column: str) -> np.ndarray:
    numbers = pd.to_numeric(values, errors="coerce")
    bad = np.flatnonzero(~numbers.isin(range(5)).to_numpy())
    if len(bad):
        raise DataError(f"{cohort}: image {ids[bad[0]]} has {column} {values.iloc[bad[0]]!r}; grades must be integers 0-4")
    return numbers.to_numpy(dtype=np.int64)


# --- Messidor-2 ----------------------------------------------------------------------------------

MESSIDOR_CSV = "messidor_data.csv"
MESSIDOR_PAIRS = "messidor-2.csv"
MESSIDOR_DIRS = ("IMAGES", "images", "messidor-2/IMAGES", "")


def _examinations(path: Path) -> dict[str, str]:
    """image name -> examination key, from the semicolon-separated pair list (header rows are skipped)."""
    groups: dict[str, str] = {}
    with path.open(newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter=";")):
            names = [cell.strip() for cell in row if cell.strip()]
            if not names or not any("." in name for name in names):
                continue  # a header row
            for name in names:
                groups[name] = f"exam{number:05d}"
    return groups


def load_messidor2(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), labels_csv: str = MESSIDOR_CSV,
) -> Dataset:
    """Load Messidor-2's adjudicated DR grades (0-4), ungradable images left out."""
    root = Path(root).resolve()
    table = read_csv(root / labels_csv, "messidor2", "image_id, adjudicated_dr_grade, adjudicated_dme, adjudicated_gradable")
    require_columns(table, ("image_id", "adjudicated_dr_grade"), labels_csv)
    rows_listed = len(table)
    exams = _examinations(root / MESSIDOR_PAIRS) if (root / MESSIDOR_PAIRS).is_file() else {}
    listed_groups = [exams.get(name, f"image:{name}") for name in table["image_id"].astype(str).str.strip()]
    dropped: dict[str, int] = {}
    if "adjudicated_gradable" in table:
        gradable = pd.to_numeric(table["adjudicated_gradable"], errors="coerce").fillna(0).to_numpy() > 0.5
        if (~gradable).any():
            dropped["ungradable (adjudicated_gradable 0)"] = int((~gradable).sum())
        table = table[gradable].reset_index(drop=True)
    names = table["image_id"].astype(str).str.strip().tolist()
    labels = _grades(table["adjudicated_dr_grade"], names, "messidor2", "adjudicated_dr_grade")
    groups = [exams.get(name, f"image:{name}") for name in names]
    relative = []
    for name in names:
        folder = first_existing(root, MESSIDOR_DIRS, name)
        relative.append(f"{folder}/{name}" if folder else name)
    metadata = pd.DataFrame({"dme": table.get("adjudicated_dme", pd.Series(np.nan, index=table.index)).to_numpy()})
    return build_cohort("messidor2", root, Task("messidor2", "ordinal", GRADES), "fundus", names, relative, groups,
                        labels, metadata, image_size=image_size, skip_bad=skip_bad, verify=verify, seed=seed,
                        proportions=proportions, rows_listed=rows_listed, dropped=dropped,
                        group_word="examinations", listed_groups=listed_groups)


# --- IDRiD ---------------------------------------------------------------------------------------

IDRID_FOLDER = "B. Disease Grading"
IDRID_PARTS = {
    "train": ("1. Original Images/a. Training Set", "2. Groundtruths/a. IDRiD_Disease Grading_Training Labels.csv"),
    "test": ("1. Original Images/b. Testing Set", "2. Groundtruths/b. IDRiD_Disease Grading_Testing Labels.csv"),
}


def load_idrid(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), parts: Sequence[str] = ("train", "test"),
) -> Dataset:
    """Load IDRiD's disease grading (``Retinopathy grade`` 0-4) from its training and/or testing parts."""
    root = Path(root).resolve()
    base = root / IDRID_FOLDER if (root / IDRID_FOLDER).is_dir() else root
    prefix = f"{IDRID_FOLDER}/" if base != root else ""
    frames = []
    for part in parts:
        if part not in IDRID_PARTS:
            raise DataError(f"idrid: part {part!r} is not one of {sorted(IDRID_PARTS)}")
        images, labels_csv = IDRID_PARTS[part]
        table = read_csv(base / labels_csv, "idrid", '"Image name", "Retinopathy grade", "Risk of macular edema "')
        table.columns = [str(c).strip() for c in table.columns]
        table = table.dropna(how="all").dropna(axis=1, how="all")  # the official CSVs carry empty trailing cells
        require_columns(table, ("Image name", "Retinopathy grade"), labels_csv)
        names = table["Image name"].astype(str).str.strip()
        frames.append(pd.DataFrame({
            "id": [f"{part}/{n}" for n in names], "path": [f"{prefix}{images}/{n}.jpg" for n in names],
            "grade": table["Retinopathy grade"].to_numpy(), "dme": table.get("Risk of macular edema", np.nan), "part": part,
        }))
    table = pd.concat(frames, ignore_index=True)
    ids = table["id"].tolist()
    labels = _grades(table["grade"], ids, "idrid", "Retinopathy grade")
    metadata = table[["dme", "part"]].reset_index(drop=True)
    return build_cohort("idrid", root, Task("idrid", "ordinal", GRADES), "fundus", ids, table["path"].tolist(), ids,
                        labels, metadata, image_size=image_size, skip_bad=skip_bad, verify=verify, seed=seed,
                        proportions=proportions, rows_listed=len(table), group_word="images")


# --- EyePACS -------------------------------------------------------------------------------------

EYEPACS_PARTS = {"train": ("trainLabels.csv", "train"), "test": ("retinopathy_solution.csv", "test")}


def load_eyepacs(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), parts: Sequence[str] = ("train",),
) -> Dataset:
    """Load EyePACS (Kaggle 2015) ``level`` 0-4; the two eyes of a patient are one group."""
    root = Path(root).resolve()
    frames = []
    for part in parts:
        if part not in EYEPACS_PARTS:
            raise DataError(f"eyepacs: part {part!r} is not one of {sorted(EYEPACS_PARTS)}")
        labels_csv, folder = EYEPACS_PARTS[part]
        table = read_csv(root / labels_csv, "eyepacs", "image, level")
        require_columns(table, ("image", "level"), labels_csv)
        names = table["image"].astype(str).str.strip()
        frames.append(pd.DataFrame({"image": names, "path": [f"{folder}/{n}.jpeg" for n in names],
                                    "level": table["level"].to_numpy(), "part": part}))
    table = pd.concat(frames, ignore_index=True)
    ids = table["image"].tolist()
    labels = _grades(table["level"], ids, "eyepacs", "level")
    patients = [name.rsplit("_", 1)[0] for name in ids]
    eye = [name.rsplit("_", 1)[-1] if "_" in name else None for name in ids]
    metadata = pd.DataFrame({"patient": patients, "eye": eye, "part": table["part"].to_numpy()})
    return build_cohort("eyepacs", root, Task("eyepacs", "ordinal", GRADES), "fundus", ids, table["path"].tolist(),
                        patients, labels, metadata, image_size=image_size, skip_bad=skip_bad, verify=verify, seed=seed,
                        proportions=proportions, rows_listed=len(table))
