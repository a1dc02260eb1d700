"""Build tiny data-set trees in each official layout (a few dozen 16x16 images) for loader tests.

Each builder writes real files (JPEG or PNG, CSV or CSV.gz) with the official names and columns,
including the awkward cases the loaders must handle, and returns what a test needs to know about
the tree (which file is missing, which is truncated, the known label row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

ISIC_CLASSES = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
CHEXPERT_FINDINGS = (
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
    "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
    "Fracture", "Support Devices",
)
# The known row: Atelectasis -1, Cardiomegaly -1, Consolidation blank, Edema -1, Pleural Effusion 1.
# In the loader's order (Atelectasis, Cardiomegaly, Consolidation, Edema, Pleural Effusion):
#   ones   -> 1 1 0 1 1   (-1 -> 1, blank -> 0)
#   zeros  -> 0 0 0 0 1   (-1 -> 0)
#   ignore -> nan nan 0 nan 1
#   mixed  -> 1 0 0 1 1   (U-Ones for Atelectasis and Edema only)
KNOWN_FINDINGS = {"Atelectasis": -1.0, "Cardiomegaly": -1.0, "Consolidation": np.nan, "Edema": -1.0, "Pleural Effusion": 1.0}
KNOWN_EXPECTED = {
    "ones": [1, 1, 0, 1, 1],
    "zeros": [0, 0, 0, 0, 1],
    "ignore": [np.nan, np.nan, 0, np.nan, 1],
    "mixed": [1, 0, 0, 1, 1],
}


@dataclass
class Tree:
    root: Path
    n_listed: int
    missing: list[str] = field(default_factory=list)  # relative paths deleted after writing
    truncated: list[str] = field(default_factory=list)  # relative paths cut short
    known_id: str = ""


def write_image(path: Path, seed: int, size: int = 16, fmt: str = "JPEG", gray: bool = False) -> None:
    """A small noise image, different for every seed, so byte hashes differ unless meant to."""
    rng = np.random.default_rng(seed)
    shape = (size, size) if gray else (size, size, 3)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(path, format=fmt)


def truncate(path: Path) -> None:
    """Cut a file to its first 40 %: the header parses, the decode fails."""
    data = path.read_bytes()
    path.write_bytes(data[: max(len(data) * 2 // 5, 200)])


def build_isic(root: Path, missing: bool = False, truncated: bool = False) -> Tree:
    """8 classes x 4 images = 32. Per class: two images of one HAM lesion, a third image of a BCN
    lesion (even classes) or without lesion_id (odd classes), a fourth without lesion_id; so three
    groups per class. The third image of classes 0-3 has a ``_downsampled`` name."""
    image_dir = root / "ISIC_2019_Training_Input"
    truth, meta = [], []
    for c, cls in enumerate(ISIC_CLASSES):
        for i in range(4):
            number = c * 4 + i
            name = f"ISIC_{number:07d}" + ("_downsampled" if i == 2 and c < 4 else "")
            write_image(image_dir / f"{name}.jpg", seed=number, size=24)
            truth.append({"image": name, **{k: float(k == cls) for k in ISIC_CLASSES}, "UNK": 0.0})
            lesion = f"HAM_{c:07d}" if i < 2 else (f"BCN_{number:07d}" if c % 2 == 0 and i == 2 else None)
            meta.append({"image": name, "age_approx": 30 + number, "anatom_site_general": "torso", "lesion_id": lesion, "sex": "female"})
    pd.DataFrame(truth).to_csv(root / "ISIC_2019_Training_GroundTruth.csv", index=False)
    pd.DataFrame(meta).to_csv(root / "ISIC_2019_Training_Metadata.csv", index=False)
    tree = Tree(root, n_listed=32)
    if missing:
        path = "ISIC_2019_Training_Input/ISIC_0000004.jpg"
        (root / path).unlink()
        tree.missing.append(path)
    if truncated:
        path = "ISIC_2019_Training_Input/ISIC_0000007.jpg"
        truncate(root / path)
        tree.truncated.append(path)
    return tree


def build_aptos(root: Path, missing: bool = False, truncated: bool = False) -> Tree:
    """5 grades x 5 PNG images in train_images/."""
    rows = []
    for grade in range(5):
        for i in range(5):
            code = f"{grade}{i:02d}a9c1e0f{i}"
            write_image(root / "train_images" / f"{code}.png", seed=100 + grade * 5 + i, fmt="PNG")
            rows.append({"id_code": code, "diagnosis": grade})
    pd.DataFrame(rows).to_csv(root / "train.csv", index=False)
    tree = Tree(root, n_listed=25)
    if missing:
        tree.missing.append(f"train_images/{rows[3]['id_code']}.png")
        (root / tree.missing[-1]).unlink()
    if truncated:
        tree.truncated.append(f"train_images/{rows[8]['id_code']}.png")
        truncate(root / tree.truncated[-1])
    return tree


def _chexpert_row(path: str, view: str, rng: np.random.Generator, known: bool = False, certain: bool = False) -> dict:
    row: dict = {"Path": path, "Sex": "Female", "Age": 60, "Frontal/Lateral": view, "AP/PA": "AP" if view == "Frontal" else ""}
    choices = [1.0, 0.0] if certain else [1.0, 0.0, -1.0, np.nan]
    for finding in CHEXPERT_FINDINGS:
        row[finding] = KNOWN_FINDINGS[finding] if known and finding in KNOWN_FINDINGS else rng.choice(choices)
    return row


def build_chexpert(base: Path, folder: str = "CheXpert-v1.0-small", missing: bool = False, truncated: bool = False,
                   outside: bool = False, lateral_only_patients: int = 0) -> Tree:
    """base/folder/{train.csv, valid.csv, train/..., valid/...}.

    train: 12 patients x 2 studies; study1 of each patient has view1_frontal and view2_lateral,
    study2 has view1_frontal; patient00001/study1 also has view3_frontal (a study with several
    frontal images) and holds the known label row. valid: 3 patients, one frontal image each,
    labels 0/1 only. Frontal images listed: 12 * 2 + 1 + 3 = 28; laterals: 12.
    ``lateral_only_patients`` adds that many train patients (patient00101...) with one lateral
    image and nothing else: a frontal-only load loses them entirely.
    """
    rng = np.random.default_rng(0)
    data = base / folder
    train, valid = [], []
    for p in range(1, 13):
        patient = f"patient{p:05d}"
        views = [("study1", "view1_frontal", "Frontal"), ("study1", "view2_lateral", "Lateral"), ("study2", "view1_frontal", "Frontal")]
        if p == 1:
            views.append(("study1", "view3_frontal", "Frontal"))
        for study, view, kind in views:
            relative = f"train/{patient}/{study}/{view}.jpg"
            write_image(data / relative, seed=p * 10 + len(train), gray=True, size=32)
            known = p == 1 and study == "study1" and view == "view1_frontal"
            train.append(_chexpert_row(f"{folder}/{relative}", kind, rng, known=known))
    for p in range(101, 101 + lateral_only_patients):
        relative = f"train/patient{p:05d}/study1/view1_lateral.jpg"
        write_image(data / relative, seed=p, gray=True, size=32)
        train.append(_chexpert_row(f"{folder}/{relative}", "Lateral", rng))
    for p in range(64541, 64544):
        relative = f"valid/patient{p}/study1/view1_frontal.jpg"
        write_image(data / relative, seed=p, gray=True, size=32)
        valid.append(_chexpert_row(f"{folder}/{relative}", "Frontal", rng, certain=True))
    if outside:
        outside_file = base.parent / "outside_secret.jpg"
        write_image(outside_file, seed=1, gray=True)
        train.append(_chexpert_row(f"{folder}/../../outside_secret.jpg", "Frontal", rng))
    pd.DataFrame(train).to_csv(data / "train.csv", index=False)
    pd.DataFrame(valid).to_csv(data / "valid.csv", index=False)
    tree = Tree(data, n_listed=28, known_id="train/patient00001/study1/view1_frontal")
    if missing:
        tree.missing.append("train/patient00004/study2/view1_frontal.jpg")
        (data / tree.missing[-1]).unlink()
    if truncated:
        tree.truncated.append("train/patient00005/study1/view1_frontal.jpg")
        truncate(data / tree.truncated[-1])
    return tree


def build_mimic(release: Path, gz: bool = True, missing: bool = False, truncated: bool = False) -> Tree:
    """6 subjects x 2 studies; each study has a PA and a LATERAL image, the second study of subjects 1, 3, 5
    also an AP image. Subject 5's second study has no label row. Frontal images: 12 PA + 3 AP = 15;
    the unlabelled study holds a PA and an AP, so 15 - 2 = 13 labelled frontal images.
    """
    rng = np.random.default_rng(1)
    meta, labels, split = [], [], []
    for s in range(6):
        subject = 10000032 + s * 1_000_003
        for k in range(2):
            study = 50000000 + s * 10 + k
            views = ["PA", "LATERAL"] + (["AP"] if k == 1 and s % 2 == 1 else [])
            for v, view in enumerate(views):
                dicom = f"{s:02d}{k}{v}aa804e-bde0afdd-112c0b34-7bc16630-4e384014"
                relative = f"files/p{str(subject)[:2]}/p{subject}/s{study}/{dicom}.jpg"
                write_image(release / relative, seed=1000 + s * 10 + k * 3 + v, gray=True, size=32)
                meta.append({"dicom_id": dicom, "subject_id": subject, "study_id": study, "PerformedProcedureStepDescription": "CHEST (PA AND LAT)", "ViewPosition": view, "Rows": 32, "Columns": 32})
                split.append({"dicom_id": dicom, "study_id": study, "subject_id": subject, "split": "test" if s < 2 else "train"})
            if not (s == 5 and k == 1):
                row = {"subject_id": subject, "study_id": study}
                for finding in CHEXPERT_FINDINGS:
                    row[finding] = KNOWN_FINDINGS.get(finding, np.nan) if s == 0 and k == 0 else rng.choice([1.0, 0.0, -1.0, np.nan])
                labels.append(row)
    suffix = ".csv.gz" if gz else ".csv"
    pd.DataFrame(meta).to_csv(release / f"mimic-cxr-2.0.0-metadata{suffix}", index=False)
    pd.DataFrame(labels).to_csv(release / f"mimic-cxr-2.0.0-chexpert{suffix}", index=False)
    pd.DataFrame(split).to_csv(release / f"mimic-cxr-2.0.0-split{suffix}", index=False)
    tree = Tree(release, n_listed=13, known_id="0000aa804e-bde0afdd-112c0b34-7bc16630-4e384014")
    first_pa = [m for m in meta if m["ViewPosition"] == "PA"]
    if missing:
        m = first_pa[2]
        tree.missing.append(f"files/p{str(m['subject_id'])[:2]}/p{m['subject_id']}/s{m['study_id']}/{m['dicom_id']}.jpg")
        (release / tree.missing[-1]).unlink()
    if truncated:
        m = first_pa[3]
        tree.truncated.append(f"files/p{str(m['subject_id'])[:2]}/p{m['subject_id']}/s{m['study_id']}/{m['dicom_id']}.jpg")
        truncate(release / tree.truncated[-1])
    return tree


def build_folder(root: Path, outside: bool = False, duplicate_across_splits: bool = False) -> Tree:
    """images/ with 18 JPEGs, labels.csv with path, label (cat/dog/fox), patient and split columns."""
    rows = []
    for i in range(18):
        relative = f"images/img{i:02d}.jpg"
        write_image(root / relative, seed=500 + i)
        rows.append({"path": relative, "label": ("cat", "dog", "fox")[i % 3], "patient": f"p{i // 3}",
                     "split": ("train", "train", "val", "test", "train", "val")[i // 3], "age": i})
    if duplicate_across_splits:
        # img00 (train) and img17 (val) get identical bytes: a leak `datasets check` must report.
        (root / "images/img17.jpg").write_bytes((root / "images/img00.jpg").read_bytes())
    if outside:
        write_image(root.parent / "outside_secret.jpg", seed=9)
        rows.append({"path": "../outside_secret.jpg", "label": "cat", "patient": "p99", "split": "train", "age": 99})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    return Tree(root, n_listed=len(rows))
