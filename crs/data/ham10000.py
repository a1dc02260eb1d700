"""HAM10000 (Tschandl et al. 2018): 10,015 dermatoscopic images, 7 diagnoses, grouped by lesion.

Expected layout (the Harvard Dataverse or Kaggle download unpacked)::

    ROOT/HAM10000_metadata.csv     lesion_id, image_id, dx, dx_type, age, sex, localization[, dataset]
    ROOT/HAM10000_images_part_1/ISIC_0024306.jpg ...   and HAM10000_images_part_2/ (or one HAM10000_images/)

Every HAM10000 image is also in ISIC 2019's training set (under the same ISIC id, as a lesion_id
``HAM_...``): as a shift target of ISIC 2019 it overlaps its source, and the overlap check drops
the shared images (docs/datasets.md). Map it onto ISIC's classes with ``label_map =
"isic2019-to-ham10000"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task
from crs.data.cohort import build_cohort, first_existing
from crs.data.folder import read_csv, require_columns

CLASS_NAMES = ("akiec", "bcc", "bkl", "df", "mel", "nv", "vasc")
TASK = Task("ham10000", "multiclass", CLASS_NAMES)
METADATA_CSV = "HAM10000_metadata.csv"
IMAGE_DIRS = ("HAM10000_images_part_1", "HAM10000_images_part_2", "HAM10000_images", "images", "")


def load_ham10000(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
) -> Dataset:
    """Load HAM10000 as a 7-class multiclass task in its own classes (``dx``), split by ``lesion_id``."""
    root = Path(root).resolve()
    table = read_csv(root / METADATA_CSV, "ham10000", "lesion_id, image_id, dx, dx_type, age, sex, localization")
    require_columns(table, ("lesion_id", "image_id", "dx"), METADATA_CSV)
    dx = table["dx"].astype(str).str.strip().str.lower()
    bad = np.flatnonzero(~dx.isin(CLASS_NAMES).to_numpy())
    if len(bad):
        raise DataError(f"ham10000: image {table['image_id'].iloc[bad[0]]} has dx {table['dx'].iloc[bad[0]]!r}; "
                        f"dx must be one of {CLASS_NAMES} (is this the official {METADATA_CSV}?)")
    ids = table["image_id"].astype(str).str.strip().tolist()
    relative = []
    for image in ids:
        folder = first_existing(root, IMAGE_DIRS, f"{image}.jpg")
        relative.append(f"{folder}/{image}.jpg" if folder else f"{image}.jpg")
    metadata = pd.DataFrame({
        "lesion_id": table["lesion_id"].to_numpy(), "dx_type": table.get("dx_type", pd.Series(None, index=table.index)).to_numpy(),
        "age": table.get("age", pd.Series(np.nan, index=table.index)).to_numpy(),
        "sex": table.get("sex", pd.Series(None, index=table.index)).to_numpy(),
        "localization": table.get("localization", pd.Series(None, index=table.index)).to_numpy(),
    })
    labels = np.array([CLASS_NAMES.index(d) for d in dx], dtype=np.int64)
    return build_cohort("ham10000", root, TASK, "dermoscopy", ids, relative, table["lesion_id"].astype(str).tolist(),
                        labels, metadata, image_size=image_size, skip_bad=skip_bad, verify=verify, seed=seed,
                        proportions=proportions, rows_listed=len(table), group_word="lesions")
