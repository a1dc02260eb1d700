"""What every public-cohort loader does once its CSV is read: screen the files, split by group, build the Dataset.

The cohorts users pair with the three tasks as shift targets (HAM10000, PAD-UFES-20, Messidor-2,
IDRiD, EyePACS, ChestX-ray14, VinDr-CXR) each read their own official CSV into ids, relative paths,
groups (patient or lesion where the metadata has one), labels in the cohort's own classes, and
metadata; this module turns those into a :class:`Dataset`. As a shift target a cohort is loaded
with ``proportions = [0, 0, 1]`` (every image in test) and a ``label_map`` onto its source's classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import Dataset, RowAccounting, Task, group_split
from crs.data.images import resolve_paths, screen_images


def build_cohort(
    name: str, root: Path, task: Task, modality: str, ids: Sequence[str], relative_paths: Sequence[str],
    groups: Sequence[str], labels: np.ndarray, metadata: pd.DataFrame, *, image_size: int, skip_bad: bool,
    verify: str | None, seed: int, proportions: Sequence[float], rows_listed: int,
    dropped: dict[str, int] | None = None, group_word: str = "patients", listed_groups: Sequence[str] | None = None,
) -> Dataset:
    """Screen the listed files (``skip_bad`` rule), split by group and return the Dataset.

    ``listed_groups``: the group of every row the CSV listed, before the loader dropped any (ungradable,
    lateral...), so a group whose every row was dropped counts as lost; default ``groups``."""
    paths = resolve_paths(root, list(relative_paths))
    keep, skipped = screen_images(root, paths, skip_bad, verify, name)
    idx = np.flatnonzero(keep)
    groups_kept = np.asarray(groups, dtype=object)[idx].astype(str)
    labels_kept = np.asarray(labels)[idx]
    dropped = dict(dropped or {})
    if skipped:
        dropped["missing or unreadable (skip_bad)"] = len(skipped)
    all_groups = set(np.asarray(groups if listed_groups is None else listed_groups, dtype=object).astype(str).tolist())
    accounting = RowAccounting(rows_listed, dropped, len(all_groups - set(groups_kept.tolist())), group_word)
    return Dataset(
        name=name, root=root, task=task, modality=modality, image_size=int(image_size),
        ids=np.asarray(ids, dtype=object)[idx].astype(str), paths=[paths[i] for i in idx], groups=groups_kept,
        labels=labels_kept, splits=group_split(groups_kept, labels_kept, proportions, seed),
        metadata=metadata.iloc[idx].reset_index(drop=True), skipped=skipped, accounting=accounting,
    )


def first_existing(root: Path, folders: Sequence[str], file_name: str) -> str | None:
    """The first folder (relative to root) holding ``file_name``, or None."""
    for folder in folders:
        if (root / folder / file_name).is_file():
            return folder
    return None
