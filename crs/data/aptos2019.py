"""APTOS 2019 Blindness Detection (Kaggle): diabetic retinopathy grade 0-4 from fundus photographs.

Expected layout (the Kaggle competition download unpacked)::

    ROOT/train.csv                     id_code, diagnosis (0 none, 1 mild, 2 moderate, 3 severe, 4 proliferative)
    ROOT/train_images/<id_code>.png

Only the labelled training set is used (the competition's test labels were never released). The
task is ordinal: probed as multiclass, scored also by quadratic weighted kappa and ordinal AUROC.
APTOS publishes no patient ids, so every image is its own group; ``crs datasets check`` reports
byte-identical images that land in different splits.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task, group_split
from crs.data.folder import read_csv, require_columns
from crs.data.images import resolve_paths, screen_images

CLASS_NAMES = ("none", "mild", "moderate", "severe", "proliferative")
TASK = Task("aptos2019", "ordinal", CLASS_NAMES)


def load_aptos2019(
    root: Path | str,
    image_size: int = 224,
    skip_bad: bool = False,
    verify: str | None = None,
    seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
    image_dir: str = "train_images",
) -> Dataset:
    """Load APTOS 2019 as an ordinal task over the five grades."""
    root = Path(root).resolve()
    table = read_csv(root / "train.csv", "aptos2019", "id_code and diagnosis for every training image")
    require_columns(table, ("id_code", "diagnosis"), "train.csv")
    grades = pd.to_numeric(table["diagnosis"], errors="coerce")
    bad = np.flatnonzero(~grades.isin(range(len(CLASS_NAMES))).to_numpy())
    if len(bad):
        row = bad[0]
        raise DataError(
            f"aptos2019: id_code {table['id_code'].iloc[row]} has diagnosis {table['diagnosis'].iloc[row]}; "
            "grades must be integers 0-4 (is this the official train.csv?)"
        )
    if not (root / image_dir).is_dir():
        raise DataError(f"aptos2019: folder {root / image_dir} not found; unpack train_images.zip into {root}")
    ids = table["id_code"].astype(str).str.strip().to_numpy()
    labels = grades.to_numpy(dtype=np.int64)
    paths = resolve_paths(root, [f"{image_dir}/{image}.png" for image in ids])
    keep, skipped = screen_images(root, paths, skip_bad, verify, "aptos2019")
    idx = np.flatnonzero(keep)
    groups = ids[idx].astype(str)
    return Dataset(
        name="aptos2019",
        root=root,
        task=TASK,
        modality="fundus",
        image_size=int(image_size),
        ids=ids[idx].astype(str),
        paths=[paths[i] for i in idx],
        groups=groups,
        labels=labels[idx],
        splits=group_split(groups, labels[idx], proportions, seed),
        metadata=pd.DataFrame({"diagnosis": labels[idx]}),
        skipped=skipped,
    )
