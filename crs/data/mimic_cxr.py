"""MIMIC-CXR-JPG 2.0.0 as a shift target for CheXpert: the same five findings, another hospital.

Expected layout (the PhysioNet download, credentialed access)::

    ROOT/mimic-cxr-2.0.0-chexpert.csv[.gz]   subject_id, study_id, 14 finding columns (1, 0, -1, blank)
    ROOT/mimic-cxr-2.0.0-metadata.csv[.gz]   dicom_id, subject_id, study_id, ViewPosition, ...
    ROOT/mimic-cxr-2.0.0-split.csv[.gz]      dicom_id, study_id, subject_id, split (optional)
    ROOT/files/p10/p10000032/s50414267/<dicom_id>.jpg

``ROOT`` may also be the folder above a version folder (``2.0.0/``, ``2.1.0/``). Labels are per
study and are given to every frontal (PA or AP) image of the study, mapped with the same
uncertainty policy as the source. Every image is in the ``test`` split: probes never see it.
Images are resized to the source data set's canonical size (``image_size``), so the shift
measured is the hospital's, not the file size's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset
from crs.data.chexpert import TASK, map_findings, uncertain_value
from crs.data.folder import find_csv, read_csv, require_columns
from crs.data.images import resolve_paths, screen_images

LABELS_CSV = "mimic-cxr-2.0.0-chexpert.csv"
METADATA_CSV = "mimic-cxr-2.0.0-metadata.csv"
SPLIT_CSV = "mimic-cxr-2.0.0-split.csv"
FRONTAL_VIEWS = ("PA", "AP")
OFFICIAL_SPLITS = ("train", "validate", "test")


def find_release_dir(root: Path) -> Path:
    """The folder holding the metadata CSV: the root or one of its immediate sub-folders."""
    if find_csv(root, METADATA_CSV):
        return root
    candidates = sorted(child for child in root.iterdir() if child.is_dir() and find_csv(child, METADATA_CSV)) if root.is_dir() else []
    if candidates:
        return candidates[-1]  # the highest version folder
    raise DataError(
        f"mimic_cxr: {METADATA_CSV}[.gz] not found in {root} or its sub-folders; "
        "point ROOT at the mimic-cxr-jpg/<version> folder of the PhysioNet download"
    )


def image_path(subject_id: int, study_id: int, dicom_id: str) -> str:
    """files/p10/p10000032/s50414267/<dicom_id>.jpg: the folder pXX is the first two digits of the subject."""
    subject = str(int(subject_id))
    return f"files/p{subject[:2]}/p{subject}/s{int(study_id)}/{dicom_id}.jpg"


def load_mimic_cxr(
    root: Path | str,
    uncertainty: str = "mixed",
    image_size: int = 224,
    skip_bad: bool = False,
    verify: str | None = None,
    official_splits: Sequence[str] = OFFICIAL_SPLITS,
    views: Sequence[str] = FRONTAL_VIEWS,
) -> Dataset:
    """Load MIMIC-CXR-JPG frontal images labelled with the five CheXpert findings, all in ``test``.

    ``official_splits`` restricts to images of the given official splits (needs the split CSV);
    ``image_size`` should be the source data set's (CheXpert's) canonical size.
    """
    uncertain_value(uncertainty, TASK.class_names[0])
    bad_splits = sorted(set(official_splits) - set(OFFICIAL_SPLITS))
    if bad_splits:
        raise DataError(f"mimic_cxr: official_splits {bad_splits} are not among {OFFICIAL_SPLITS}")
    release = find_release_dir(Path(root).resolve())
    metadata_path = find_csv(release, METADATA_CSV)
    labels_path = find_csv(release, LABELS_CSV)
    if labels_path is None:
        raise DataError(f"mimic_cxr: {LABELS_CSV}[.gz] not found in {release}; it holds the study labels")
    assert metadata_path is not None
    meta = read_csv(metadata_path, "mimic_cxr", "dicom_id, subject_id, study_id, ViewPosition",
                    usecols=lambda c: c in {"dicom_id", "subject_id", "study_id", "ViewPosition"})
    require_columns(meta, ("dicom_id", "subject_id", "study_id", "ViewPosition"), metadata_path.name)
    findings = read_csv(labels_path, "mimic_cxr", "subject_id, study_id and the 14 finding columns")
    require_columns(findings, ("subject_id", "study_id", *TASK.class_names), labels_path.name)

    wanted_views = {v.upper() for v in views}
    meta = meta[meta["ViewPosition"].astype(str).str.strip().str.upper().isin(wanted_views)]
    if set(official_splits) != set(OFFICIAL_SPLITS):
        split_path = find_csv(release, SPLIT_CSV)
        if split_path is None:
            raise DataError(f"mimic_cxr: official_splits={list(official_splits)} needs {SPLIT_CSV}[.gz] in {release}")
        split = read_csv(split_path, "mimic_cxr", "dicom_id and split")
        require_columns(split, ("dicom_id", "split"), split_path.name)
        keep_ids = set(split.loc[split["split"].astype(str).isin(official_splits), "dicom_id"].astype(str))
        meta = meta[meta["dicom_id"].astype(str).isin(keep_ids)]
    # Studies without a label row have no labels to score against; they are left out by design.
    table = meta.merge(findings, on=["subject_id", "study_id"], how="inner", validate="many_to_one")
    table = table.sort_values(["subject_id", "study_id", "dicom_id"]).reset_index(drop=True)
    if table.empty:
        raise DataError(f"mimic_cxr: no labelled {'/'.join(views)} images in {release}")

    labels = map_findings(table, uncertainty, f"mimic_cxr {labels_path.name}")
    dicom_ids = table["dicom_id"].astype(str).to_numpy()
    relative = [
        image_path(subject, study, dicom)
        for subject, study, dicom in zip(table["subject_id"], table["study_id"], dicom_ids, strict=True)
    ]
    paths = resolve_paths(release, relative)
    keep, skipped = screen_images(release, paths, skip_bad, verify, "mimic_cxr")
    idx = np.flatnonzero(keep)
    subjects = table["subject_id"].astype(str).to_numpy()
    metadata = pd.DataFrame(
        {
            "subject_id": table["subject_id"].to_numpy(),
            "study_id": table["study_id"].to_numpy(),
            "view": table["ViewPosition"].to_numpy(),
        }
    ).iloc[idx].reset_index(drop=True)
    return Dataset(
        name="mimic_cxr",
        root=release,
        task=TASK,
        modality="chest_xray",
        image_size=int(image_size),
        ids=dicom_ids[idx],
        paths=[paths[i] for i in idx],
        groups=subjects[idx],
        labels=labels[idx],
        splits=np.full(len(idx), "test", dtype=object).astype(str),
        metadata=metadata,
        skipped=skipped,
        split_design="official",  # every labelled frontal image (of the official splits asked for): no draw
    )
