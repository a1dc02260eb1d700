"""ISIC 2019 training set: 8-class dermoscopy diagnosis, split by lesion.

Expected layout (the official downloads unpacked into one folder)::

    ROOT/ISIC_2019_Training_GroundTruth.csv   image, MEL NV BCC AK BKL DF VASC SCC UNK (one-hot)
    ROOT/ISIC_2019_Training_Metadata.csv      image, age_approx, anatom_site_general, lesion_id, sex
    ROOT/ISIC_2019_Training_Input/ISIC_0000000.jpg ...   (one extra nesting level is accepted too)

UNK is never positive in the training set; a row with UNK = 1 (as in the later test labels) has
no class among the eight and is refused with a message, not silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset, Task, group_split
from crs.data.folder import read_csv, require_columns
from crs.data.images import resolve_paths, screen_images

CLASS_NAMES = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
GROUND_TRUTH_CSV = "ISIC_2019_Training_GroundTruth.csv"
METADATA_CSV = "ISIC_2019_Training_Metadata.csv"
IMAGE_DIRS = ("ISIC_2019_Training_Input/ISIC_2019_Training_Input", "ISIC_2019_Training_Input", "")
TASK = Task("isic2019", "multiclass", CLASS_NAMES)
# lesion_id prefixes name the contributing archive (HAM10000 from Vienna/Queensland, BCN20000 from
# Barcelona, MSK from New York); they stand in for the acquisition site in site-shift analyses.
SITE_BY_PREFIX = {"HAM": "HAM10000", "BCN": "BCN20000", "MSK": "MSK"}


def acquisition_site(image: str, lesion_id: object) -> str:
    """The archive an image came from, read from its lesion_id prefix (or its ``_downsampled`` name)."""
    if isinstance(lesion_id, str) and lesion_id:
        prefix = lesion_id.split("_")[0].upper()
        for known, site in SITE_BY_PREFIX.items():
            if prefix.startswith(known):
                return site
        return prefix
    if image.endswith("_downsampled"):
        return "ISIC_archive_downsampled"
    return "unknown"


def find_image_dir(root: Path, first_images: Sequence[str]) -> str:
    """The folder (relative to root) holding the images: the first candidate containing a sample."""
    for candidate in IMAGE_DIRS:
        folder = root / candidate
        if folder.is_dir() and any((folder / f"{image}.jpg").is_file() for image in first_images):
            return candidate
    existing = [c for c in IMAGE_DIRS if c and (root / c).is_dir()]
    if existing:
        return existing[0]
    raise DataError(
        f"isic2019: no image folder under {root}; unpack ISIC_2019_Training_Input.zip there "
        f"(expected one of {[c for c in IMAGE_DIRS if c]})"
    )


def downsampled_fallback(root: Path, path: str) -> str:
    """``path``, or its ``_downsampled`` twin when only that exists (some mirrors rename them)."""
    if (root / path).is_file():
        return path
    stem = path[: -len(".jpg")]
    twin = stem[: -len("_downsampled")] if stem.endswith("_downsampled") else f"{stem}_downsampled"
    return f"{twin}.jpg" if (root / f"{twin}.jpg").is_file() else path


def load_isic2019(
    root: Path | str,
    image_size: int = 224,
    skip_bad: bool = False,
    verify: str | None = None,
    seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
    image_dir: str | None = None,
) -> Dataset:
    """Load ISIC 2019 as a multiclass task over the eight diagnoses, split by ``lesion_id``."""
    root = Path(root).resolve()
    truth = read_csv(root / GROUND_TRUTH_CSV, "isic2019", "the ISIC 2019 training ground truth")
    require_columns(truth, ("image", *CLASS_NAMES), GROUND_TRUTH_CSV)
    truth["image"] = truth["image"].astype(str).str.strip()
    metadata_path = root / METADATA_CSV
    if metadata_path.is_file():
        meta = read_csv(metadata_path, "isic2019", "the ISIC 2019 training metadata")
        require_columns(meta, ("image",), METADATA_CSV)
        meta["image"] = meta["image"].astype(str).str.strip()
        table = truth.merge(meta, on="image", how="left", suffixes=("", "_meta"))
    else:
        raise DataError(f"isic2019: {metadata_path} not found; download ISIC_2019_Training_Metadata.csv (it holds lesion_id, needed for leak-free splits)")
    if "lesion_id" not in table:
        table["lesion_id"] = np.nan

    one_hot = table[list(CLASS_NAMES)].to_numpy(dtype=float)
    unknown = table["UNK"].to_numpy(dtype=float) if "UNK" in table else np.zeros(len(table))
    positives = (one_hot > 0.5).sum(axis=1)
    bad_rows = np.flatnonzero((positives != 1) | (unknown > 0.5))
    if len(bad_rows):
        image = table["image"].iloc[bad_rows[0]]
        raise DataError(
            f"isic2019: image {image} in {GROUND_TRUTH_CSV} does not have exactly one of "
            f"{'/'.join(CLASS_NAMES)} set (UNK rows are not part of the training task); "
            f"{len(bad_rows)} such rows; remove them or use the official training CSV"
        )
    labels = one_hot.argmax(axis=1).astype(np.int64)

    images = table["image"].tolist()
    folder = image_dir if image_dir is not None else find_image_dir(root, images[:20])
    relative = [f"{folder}/{image}.jpg" if folder else f"{image}.jpg" for image in images]
    paths = [downsampled_fallback(root, path) for path in resolve_paths(root, relative)]
    keep, skipped = screen_images(root, paths, skip_bad, verify, "isic2019")

    lesion = table["lesion_id"]
    groups = np.array(
        [str(lid) if isinstance(lid, str) and lid else f"image:{image}" for lid, image in zip(lesion, images, strict=True)],
        dtype=object,
    )
    sites = [acquisition_site(image, lid) for image, lid in zip(images, lesion, strict=True)]
    metadata = pd.DataFrame(
        {
            "lesion_id": lesion.to_numpy(),
            "acquisition_site": sites,
            "age_approx": table.get("age_approx", pd.Series(np.nan, index=table.index)).to_numpy(),
            "anatom_site_general": table.get("anatom_site_general", pd.Series(None, index=table.index)).to_numpy(),
            "sex": table.get("sex", pd.Series(None, index=table.index)).to_numpy(),
        }
    )
    idx = np.flatnonzero(keep)
    splits = group_split(groups[idx], labels[idx], proportions, seed)
    return Dataset(
        name="isic2019",
        root=root,
        task=TASK,
        modality="dermoscopy",
        image_size=int(image_size),
        ids=np.array(images, dtype=object)[idx].astype(str),
        paths=[paths[i] for i in idx],
        groups=groups[idx].astype(str),
        labels=labels[idx],
        splits=splits,
        metadata=metadata.iloc[idx].reset_index(drop=True),
        skipped=skipped,
    )
