"""PAD-UFES-20 (Pacheco et al. 2020): 2,298 smartphone photographs of skin lesions, Brazil, 6 diagnoses.

Expected layout (the Mendeley Data download unpacked)::

    ROOT/metadata.csv    patient_id, lesion_id, ..., age, ..., gender, ..., fitspatrick, region, ...,
                         diagnostic (ACK BCC MEL NEV SCC SEK), ..., img_id, biopsed
    ROOT/images/imgs_part_1/PAT_1516_1765_530.png ...   (imgs_part_2, imgs_part_3; or images/ flat)

Split by patient (a patient may have several lesions). ``fitspatrick`` (sic, the official spelling)
is the Fitzpatrick skin type 1-6, kept as the subgroup ``fitzpatrick``. Map it onto ISIC 2019 with
``label_map = "isic2019-to-pad_ufes_20"`` (DF and VASC have no counterpart).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task
from crs.data.cohort import build_cohort, first_existing
from crs.data.folder import read_csv, require_columns

CLASS_NAMES = ("ACK", "BCC", "MEL", "NEV", "SCC", "SEK")
TASK = Task("pad_ufes_20", "multiclass", CLASS_NAMES)
IMAGE_DIRS = ("images/imgs_part_1", "images/imgs_part_2", "images/imgs_part_3", "images", "imgs_part_1",
              "imgs_part_2", "imgs_part_3", "")


def _fitzpatrick(values: pd.Series) -> np.ndarray:
    """1.0 -> "1" ... ; missing stays missing (the subgroup machinery calls it unknown)."""
    numbers = pd.to_numeric(values, errors="coerce")
    return np.array([None if np.isnan(v) else str(int(v)) for v in numbers], dtype=object)


def load_pad_ufes_20(
    root: Path | str, image_size: int = 224, skip_bad: bool = False, verify: str | None = None, seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
) -> Dataset:
    """Load PAD-UFES-20 as a 6-class multiclass task in its own classes (``diagnostic``), split by patient."""
    root = Path(root).resolve()
    table = read_csv(root / "metadata.csv", "pad_ufes_20", "patient_id, lesion_id, diagnostic, img_id and the clinical columns")
    require_columns(table, ("patient_id", "lesion_id", "diagnostic", "img_id"), "metadata.csv")
    diagnostic = table["diagnostic"].astype(str).str.strip().str.upper()
    bad = np.flatnonzero(~diagnostic.isin(CLASS_NAMES).to_numpy())
    if len(bad):
        raise DataError(f"pad_ufes_20: img_id {table['img_id'].iloc[bad[0]]} has diagnostic {table['diagnostic'].iloc[bad[0]]!r}; "
                        f"it must be one of {CLASS_NAMES}")
    names = table["img_id"].astype(str).str.strip().tolist()
    relative = []
    for name in names:
        folder = first_existing(root, IMAGE_DIRS, name)
        relative.append(f"{folder}/{name}" if folder else name)
    metadata = pd.DataFrame({
        "patient_id": table["patient_id"].astype(str).to_numpy(), "lesion_id": table["lesion_id"].to_numpy(),
        "age": table.get("age", pd.Series(np.nan, index=table.index)).to_numpy(),
        "sex": table.get("gender", pd.Series(None, index=table.index)).to_numpy(),
        "fitzpatrick": _fitzpatrick(table.get("fitspatrick", pd.Series(np.nan, index=table.index))),
        "region": table.get("region", pd.Series(None, index=table.index)).to_numpy(),
        "biopsed": table.get("biopsed", pd.Series(None, index=table.index)).to_numpy(),
    })
    ids = [name.rsplit(".", 1)[0] for name in names]
    labels = np.array([CLASS_NAMES.index(d) for d in diagnostic], dtype=np.int64)
    return build_cohort("pad_ufes_20", root, TASK, "dermoscopy", ids, relative, table["patient_id"].astype(str).tolist(),
                        labels, metadata, image_size=image_size, skip_bad=skip_bad, verify=verify, seed=seed,
                        proportions=proportions, rows_listed=len(table))
