"""CheXpert v1.0 (small or full): five competition findings from chest radiographs, split by patient.

Expected layout (the Stanford AIMI download unpacked)::

    ROOT/CheXpert-v1.0-small/train.csv    Path, Sex, Age, Frontal/Lateral, AP/PA, 14 finding columns
    ROOT/CheXpert-v1.0-small/valid.csv
    ROOT/CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg ...

``ROOT`` may be the folder holding ``CheXpert-v1.0-small/`` (or ``CheXpert-v1.0/``) or that folder
itself: CSV paths start with the folder name and are resolved either way.

Finding columns hold 1 (positive), 0 (negative), -1 (uncertain) or blank (not mentioned, read as
negative, as in the CheXpert paper). Uncertain labels follow a named policy (see
:data:`UNCERTAINTY_POLICIES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, RowAccounting, Task, group_split
from crs.data.folder import read_csv, require_columns
from crs.data.images import resolve_paths, screen_images

CHEXPERT_TASKS = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion")
TASK = Task("chexpert5", "multilabel", CHEXPERT_TASKS)
# "mixed" is a common simplification of the CheXpert paper's per-finding results: U-Ones where it
# did best (Atelectasis, Edema), U-Zeros for the rest.
MIXED_ONES = ("Atelectasis", "Edema")
UNCERTAINTY_POLICIES = ("ones", "zeros", "ignore", "mixed")
FOLDER_NAMES = ("CheXpert-v1.0-small", "CheXpert-v1.0")
VIEW_COLUMN = "Frontal/Lateral"


def uncertain_value(policy: str, finding: str) -> float:
    """What an uncertain (-1) label becomes under ``policy``: 1, 0 or NaN (ignored in training and scoring)."""
    if policy == "ones":
        return 1.0
    if policy == "zeros":
        return 0.0
    if policy == "ignore":
        return float("nan")
    if policy == "mixed":
        return 1.0 if finding in MIXED_ONES else 0.0
    raise DataError(f"uncertainty policy {policy!r} is not one of {UNCERTAINTY_POLICIES}")


def map_findings(table: pd.DataFrame, policy: str, source: str) -> np.ndarray:
    """float32 (N, 5): 1/0 kept, blank -> 0, -1 -> the policy's value. Other values are refused."""
    require_columns(table, CHEXPERT_TASKS, source)
    labels = np.empty((len(table), len(CHEXPERT_TASKS)), dtype=np.float32)
    for j, finding in enumerate(CHEXPERT_TASKS):
        raw = pd.to_numeric(table[finding], errors="coerce").to_numpy(dtype=np.float64)
        text_values = table[finding].notna().to_numpy() & np.isnan(raw)
        odd = text_values | ~(np.isnan(raw) | np.isin(raw, (-1.0, 0.0, 1.0)))
        if odd.any():
            row = int(np.flatnonzero(odd)[0])
            raise DataError(
                f"{source}: column {finding!r} holds '{table[finding].iloc[row]}' in row {row + 2}; "
                "findings must be 1, 0, -1 or blank"
            )
        column = np.where(np.isnan(raw), 0.0, raw)
        column = np.where(column == -1.0, uncertain_value(policy, finding), column)
        labels[:, j] = column
    return labels


def find_dataset_dir(root: Path) -> Path:
    """The folder that holds train.csv: the root itself or its CheXpert-v1.0[-small] child."""
    if (root / "train.csv").is_file() or (root / "valid.csv").is_file():
        return root
    for name in FOLDER_NAMES:
        if (root / name / "train.csv").is_file() or (root / name / "valid.csv").is_file():
            return root / name
    raise DataError(
        f"chexpert: no train.csv or valid.csv in {root} or in {root}/{{{','.join(FOLDER_NAMES)}}}; "
        "point ROOT at the unpacked CheXpert-v1.0-small folder or its parent"
    )


def strip_release_prefix(path: str) -> str:
    """``CheXpert-v1.0-small/train/p/s/v.jpg`` -> ``train/p/s/v.jpg`` (paths become relative to the CSV folder)."""
    head, _, rest = str(path).strip().partition("/")
    return rest if head.startswith("CheXpert-v1.0") and rest else str(path).strip()


def load_chexpert(
    root: Path | str,
    uncertainty: str = "mixed",
    frontal_only: bool = True,
    image_size: int = 224,
    skip_bad: bool = False,
    verify: str | None = None,
    seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
    official_valid_as_test: bool = False,
    csv_files: Sequence[str] = ("train.csv", "valid.csv"),
) -> Dataset:
    """Load CheXpert as a five-label multilabel task.

    By default train.csv and valid.csv are pooled and split by patient (``proportions``). With
    ``official_valid_as_test`` the radiologist-labelled valid.csv is the test split and train.csv
    is split by patient into train and val in the ratio of the first two proportions.
    """
    uncertain_value(uncertainty, CHEXPERT_TASKS[0])  # validates the policy name early
    dataset_dir = find_dataset_dir(Path(root).resolve())
    frames = []
    for csv in csv_files:
        path = dataset_dir / csv
        if not path.is_file():
            if csv == "valid.csv" and not official_valid_as_test:
                continue  # a train-only copy still loads; `datasets check` mentions it
            raise DataError(f"chexpert: {path} not found; it is part of the official download")
        table = read_csv(path, "chexpert", "Path, Frontal/Lateral and the 14 finding columns")
        require_columns(table, ("Path", VIEW_COLUMN, *CHEXPERT_TASKS), str(path))
        frames.append(table.assign(source_csv=csv))
    table = pd.concat(frames, ignore_index=True)
    rows_listed = len(table)
    listed_patients = set(_patients(table["Path"]))
    dropped: dict[str, int] = {}
    if frontal_only:
        frontal = (table[VIEW_COLUMN].astype(str).str.strip().str.lower() == "frontal").to_numpy()
        if (~frontal).any():
            dropped["lateral view"] = int((~frontal).sum())
        table = table[frontal].reset_index(drop=True)
    if table.empty:
        raise DataError(f"chexpert: no {'frontal ' if frontal_only else ''}images listed in {dataset_dir}")

    labels = map_findings(table, uncertainty, f"chexpert {dataset_dir}")
    relative = [strip_release_prefix(p) for p in table["Path"]]
    paths = resolve_paths(dataset_dir, relative)
    parts = [p.split("/") for p in paths]
    patients = np.array([bits[1] if len(bits) >= 4 else bits[0] for bits in parts], dtype=object).astype(str)
    studies = np.array(["/".join(bits[1:3]) if len(bits) >= 4 else bits[0] for bits in parts], dtype=object).astype(str)
    ids = np.array([p.rsplit(".", 1)[0] for p in paths], dtype=object).astype(str)
    keep, skipped = screen_images(dataset_dir, paths, skip_bad, verify, "chexpert")
    idx = np.flatnonzero(keep)
    table = table.iloc[idx].reset_index(drop=True)
    labels, patients = labels[idx], patients[idx]
    if official_valid_as_test:
        splits = np.full(len(idx), "test", dtype=object)
        in_train = (table["source_csv"] == "train.csv").to_numpy()
        train_val = np.asarray(proportions[:2], dtype=float) / float(sum(proportions[:2]))
        # group_split always places some groups in its third split; that share becomes "val".
        drawn = group_split(patients[in_train], labels[in_train], (train_val[0], 0.0, train_val[1]), seed)
        splits[in_train] = np.where(drawn == "test", "val", "train")
        splits = splits.astype(str)
    else:
        splits = group_split(patients, labels, proportions, seed)
    if skipped:
        dropped["missing or unreadable (skip_bad)"] = len(skipped)
    accounting = RowAccounting(
        rows_listed, dropped, len(listed_patients - set(patients.tolist())), "patients",
        _valid_csv_notes(table, splits, official_valid_as_test),
    )
    metadata = pd.DataFrame(
        {
            "patient": patients,
            "study": studies[idx],
            "sex": table.get("Sex", pd.Series(None, index=table.index)).to_numpy(),
            "age": table.get("Age", pd.Series(np.nan, index=table.index)).to_numpy(),
            "view": table[VIEW_COLUMN].to_numpy(),
            "ap_pa": table.get("AP/PA", pd.Series(None, index=table.index)).to_numpy(),
            "source_csv": table["source_csv"].to_numpy(),
        }
    )
    return Dataset(
        name="chexpert",
        root=dataset_dir,
        task=TASK,
        modality="chest_xray",
        image_size=int(image_size),
        ids=ids[idx],
        paths=[paths[i] for i in idx],
        groups=patients,
        labels=labels,
        splits=splits,
        metadata=metadata,
        skipped=skipped,
        accounting=accounting,
        # valid.csv as the test split is CheXpert's own list, not a draw by label (decision 0085)
        split_design="official" if official_valid_as_test else "stratified",
    )


def _patients(paths: pd.Series) -> list[str]:
    """The patient folder of each listed path (``.../train/patient00001/study1/view1.jpg``)."""
    out = []
    for path in paths:
        bits = strip_release_prefix(str(path)).split("/")
        out.append(bits[1] if len(bits) >= 4 else bits[0])
    return out


def _valid_csv_notes(table: pd.DataFrame, splits: np.ndarray, official_valid_as_test: bool) -> tuple[str, ...]:
    """Say where the radiologist-labelled valid.csv images went: pooled into the splits, or the test split."""
    from_valid = (table["source_csv"] == "valid.csv").to_numpy()
    if not from_valid.any():
        return ()
    if official_valid_as_test:
        return (f"valid.csv ({int(from_valid.sum())} radiologist-labelled images) is the test split "
                "(official_valid_as_test = true)",)
    where = ", ".join(f"{int((splits[from_valid] == s).sum())} {s}" for s in ("train", "val", "test"))
    return (f"valid.csv ({int(from_valid.sum())} radiologist-labelled images) was pooled into the splits ({where}); "
            "set option official_valid_as_test = true to test on it alone",)
