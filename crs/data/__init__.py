"""Data sets: one loader per public data set plus the built-in synthetic benchmark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crs.data.base import (
    MODALITIES,
    SPLITS,
    TASK_KINDS,
    DataError,
    Dataset,
    Task,
    group_split,
    nested_label_fractions,
    safe_join,
)
from crs.data.fit import check_fit
from crs.data.subgroups import attach_subgroups
from crs.spec import DatasetEntry

__all__ = [
    "MODALITIES", "SPLITS", "TASK_KINDS", "DataError", "Dataset", "Task", "group_split",
    "nested_label_fractions", "safe_join", "load_dataset", "DATASET_LOADERS", "DATASET_DESCRIPTIONS",
]


def _synthetic(root: Path, **options: Any) -> Dataset:
    from crs.data.synthetic import load_synthetic

    return load_synthetic(root, **options)


def _isic2019(root: Path, **options: Any) -> Dataset:
    from crs.data.isic2019 import load_isic2019

    return load_isic2019(root, **options)


def _aptos2019(root: Path, **options: Any) -> Dataset:
    from crs.data.aptos2019 import load_aptos2019

    return load_aptos2019(root, **options)


def _chexpert(root: Path, **options: Any) -> Dataset:
    from crs.data.chexpert import load_chexpert

    return load_chexpert(root, **options)


def _mimic_cxr(root: Path, **options: Any) -> Dataset:
    from crs.data.mimic_cxr import load_mimic_cxr

    return load_mimic_cxr(root, **options)


def _folder(root: Path, **options: Any) -> Dataset:
    from crs.data.folder import load_folder

    return load_folder(root, **options)


# name -> loader(root, **options) -> Dataset. Imports are deferred so listing loaders stays cheap.
DATASET_LOADERS: dict[str, Callable[..., Dataset]] = {
    "synthetic": _synthetic,
    "isic2019": _isic2019,
    "aptos2019": _aptos2019,
    "chexpert": _chexpert,
    "mimic_cxr": _mimic_cxr,
    "folder": _folder,
}

# One line per loader for `crs datasets list` and the docs.
DATASET_DESCRIPTIONS: dict[str, str] = {
    "synthetic": "built-in generated benchmark (three modalities plus a shifted chest site)",
    "isic2019": "ISIC 2019 dermoscopy, 8-class diagnosis, split by lesion_id",
    "aptos2019": "APTOS 2019 fundus, diabetic retinopathy grade 0-4 (ordinal)",
    "chexpert": "CheXpert v1.0 chest X-ray, 5 findings (multilabel), uncertainty policy, split by patient",
    "mimic_cxr": "MIMIC-CXR-JPG chest X-ray, CheXpert's 5 findings, shift target (all test)",
    "folder": "any image folder with a CSV (path, label column(s), optional group and split columns)",
}


def load_dataset(loader: str, root: Path | str, /, **options: Any) -> Dataset:
    """Load a data set by loader name, with a clear error for an unknown name.

    ``fit`` (``crop``, ``pad`` or ``squash``) is taken here for every loader: how the data set's
    non-square images become square (default: the modality's, :data:`crs.data.base.DEFAULT_FIT`).
    ``subgroups`` (metadata columns, or {attribute: column}) and ``age_bands`` (band edges in years)
    are taken here too: the patient groups reported per subgroup (:mod:`crs.data.subgroups`; default:
    the loader's attributes).
    ``loader`` and ``root`` are positional-only so a loader option called ``name`` (the ``folder``
    loader's data set name) reaches the loader instead of colliding with them.
    """
    try:
        load = DATASET_LOADERS[loader]
    except KeyError:
        known = ", ".join(sorted(DATASET_LOADERS))
        raise DataError(f"unknown data set loader {loader!r}; known loaders: {known}") from None
    fit = options.pop("fit", None)
    attributes = options.pop("subgroups", None)
    edges = options.pop("age_bands", None)
    dataset = load(Path(root), **options)
    if fit is not None:
        dataset.fit = check_fit(str(fit))
    return attach_subgroups(dataset, loader, attributes, edges)


def load_entry(entry: DatasetEntry, **extra: object) -> Dataset:
    """Load the data set a spec entry names, under the entry's name."""
    dataset = load_dataset(entry.loader, entry.root, **{**entry.options, **extra})
    dataset.name = entry.name
    return dataset


