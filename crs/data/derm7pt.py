"""Derm7pt (Kawahara et al. 2019): 1,011 cases, each a dermoscopic and a clinical image, 20 diagnoses.

Expected layout (the release_v0 download unpacked)::

    ROOT/meta/meta.csv      case_num, diagnosis, seven_point_score, ..., clinic, derm, elevation,
                            location, sex, management   (clinic, derm: image paths under images/)
    ROOT/images/NEL/Nel026.jpg ...

``image`` picks the dermoscopic (``derm``, default) or the clinical photograph (``clinic``). Each case
is its own group. The diagnosis strings are kept as the classes (sorted); ``label_map =
"isic2019-to-derm7pt"`` folds them onto ISIC 2019's (every melanoma stage to MEL, the nevi to NV;
lentigo, melanosis and miscellaneous have no ISIC class and are dropped, counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task
from crs.data.cohort import build_cohort
from crs.data.folder import read_csv, require_columns

IMAGE_COLUMNS = ("derm", "clinic")


def load_derm7pt(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2), image: str = "derm",
) -> Dataset:
    """Load Derm7pt's diagnoses (its own class names) from the dermoscopic or the clinical images."""
    if image not in IMAGE_COLUMNS:
        raise DataError(f"derm7pt: image={image!r} is not one of {IMAGE_COLUMNS}")
    root = Path(root).resolve()
    table = read_csv(root / "meta" / "meta.csv", "derm7pt", "case_num, diagnosis, clinic, derm, location, sex")
    require_columns(table, ("case_num", "diagnosis", image), "meta/meta.csv")
    diagnosis = table["diagnosis"].astype(str).str.strip()
    classes = tuple(sorted(set(diagnosis)))
    if len(classes) < 2:
        raise DataError(f"derm7pt: meta/meta.csv has one diagnosis only ({classes}); is it the official file?")
    relative = [f"images/{path}" for path in table[image].astype(str).str.strip()]
    ids = [f"case{int(case):04d}" for case in table["case_num"]]
    metadata = pd.DataFrame({
        "sex": table.get("sex", pd.Series(None, index=table.index)).to_numpy(),
        "location": table.get("location", pd.Series(None, index=table.index)).to_numpy(),
        "diagnosis": diagnosis.to_numpy(),
    })
    labels = np.array([classes.index(d) for d in diagnosis], dtype=np.int64)
    return build_cohort("derm7pt", root, Task("derm7pt", "multiclass", classes), "dermoscopy", ids, relative, ids,
                        labels, metadata, image_size=image_size, skip_bad=skip_bad, verify=verify, seed=seed,
                        proportions=proportions, rows_listed=len(table), group_word="cases")
