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
    "nested_label_fractions", "safe_join", "load_dataset", "DATASET_LOADERS", "DATASET_DESCRIPTIONS", "DATASET_ACCESS",
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


def _cohort(module: str, function: str) -> Callable[..., Dataset]:
    """A loader that imports its module on first call (listing loaders stays cheap)."""

    def load(root: Path, **options: Any) -> Dataset:
        import importlib

        return getattr(importlib.import_module(f"crs.data.{module}"), function)(root, **options)

    load.__name__ = function
    return load


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
    "ham10000": _cohort("ham10000", "load_ham10000"),
    "pad_ufes_20": _cohort("pad_ufes_20", "load_pad_ufes_20"),
    "derm7pt": _cohort("derm7pt", "load_derm7pt"),
    "messidor2": _cohort("fundus_cohorts", "load_messidor2"),
    "idrid": _cohort("fundus_cohorts", "load_idrid"),
    "eyepacs": _cohort("fundus_cohorts", "load_eyepacs"),
    "chestxray14": _cohort("chest_cohorts", "load_chestxray14"),
    "vindr_cxr": _cohort("chest_cohorts", "load_vindr_cxr"),
    "padchest": _cohort("chest_cohorts", "load_padchest"),
}

# One line per loader for `crs datasets list` and the docs.
DATASET_DESCRIPTIONS: dict[str, str] = {
    "synthetic": "built-in generated benchmark (three modalities, each with a shifted second site)",
    "isic2019": "ISIC 2019 dermoscopy, 8-class diagnosis, split by lesion_id",
    "aptos2019": "APTOS 2019 fundus, diabetic retinopathy grade 0-4 (ordinal)",
    "chexpert": "CheXpert v1.0 chest X-ray, 5 findings (multilabel), uncertainty policy, split by patient",
    "mimic_cxr": "MIMIC-CXR-JPG chest X-ray, CheXpert's 5 findings, shift target (all test)",
    "folder": "any image folder with a CSV (path, label column(s), optional group and split columns)",
    "ham10000": "HAM10000 dermatoscopy, 7 diagnoses (dx), split by lesion_id; inside ISIC 2019",
    "pad_ufes_20": "PAD-UFES-20 smartphone skin photographs (Brazil), 6 diagnoses, split by patient, Fitzpatrick type",
    "derm7pt": "Derm7pt dermoscopic (or clinical) images, 20 diagnoses, one group per case",
    "messidor2": "Messidor-2 fundus, adjudicated DR grade 0-4 (ordinal), ungradable left out",
    "idrid": "IDRiD disease grading fundus, DR grade 0-4 (ordinal)",
    "eyepacs": "EyePACS (Kaggle 2015) fundus, DR level 0-4 (ordinal), both eyes of a patient grouped",
    "chestxray14": "NIH ChestX-ray14 chest X-ray, 14 findings (multilabel), split by patient",
    "padchest": "PadChest (BIMCV) chest X-ray, its report findings (multilabel), frontal views, split by patient",
    "vindr_cxr": "VinDr-CXR chest X-ray (DICOM), 28 image-level labels (multilabel), test consensus by default",
}

# Licence and access, for `crs datasets show` (what a user must do to obtain the data).
DATASET_ACCESS: dict[str, str] = {
    "isic2019": "CC BY-NC 4.0; free download, https://challenge.isic-archive.com/data/#2019",
    "aptos2019": "Kaggle competition rules (non-commercial research); Kaggle account, accept the rules",
    "chexpert": "Stanford University School of Medicine CheXpert Dataset Research Use Agreement; free Stanford AIMI account",
    "mimic_cxr": "PhysioNet Credentialed Health Data License 1.5.0; credentialed access, CITI training, data use agreement",
    "ham10000": "CC BY-NC 4.0; Harvard Dataverse doi:10.7910/DVN/DBW86T (accept the terms), also in the ISIC archive",
    "pad_ufes_20": "CC BY 4.0; Mendeley Data doi:10.17632/zr7vgbcyr2.1, free download",
    "derm7pt": "research use under the Derm7pt terms (Kawahara et al. 2019); registration at derm.cs.sfu.ca",
    "messidor2": "Messidor-2 licence (research and teaching, no redistribution); request form at adcis.net; "
                 "adjudicated grades: Kaggle google-brain/messidor2-dr-grades",
    "idrid": "CC BY 4.0; IEEE DataPort doi:10.21227/H25W98 (free IEEE account)",
    "eyepacs": "Kaggle 'Diabetic Retinopathy Detection' competition rules (non-commercial research); Kaggle account",
    "chestxray14": "public, no restriction on use (NIH Clinical Center; cite Wang et al. 2017); NIH Box, Kaggle or AWS open data",
    "padchest": "PadChest Dataset Research Use Agreement (BIMCV, University of Alicante); free registration",
    "vindr_cxr": "PhysioNet Credentialed Health Data License 1.5.0; credentialed access and data use agreement",
    "synthetic": "generated by crs; no licence needed",
    "folder": "your own data",
}


def load_dataset(loader: str, root: Path | str, /, **options: Any) -> Dataset:
    """Load a data set by loader name, with a clear error for an unknown name.

    ``fit`` (``crop``, ``pad`` or ``squash``) is taken here for every loader: how the data set's
    non-square images become square (default: the modality's, :data:`crs.data.base.DEFAULT_FIT`).
    ``subgroups`` (metadata columns, or {attribute: column}) and ``age_bands`` (band edges in years)
    are taken here too: the patient groups reported per subgroup (:mod:`crs.data.subgroups`; default:
    the loader's attributes). ``label_map`` (a shipped map name or a TOML path) relabels a target
    cohort into a source task's classes (:mod:`crs.data.label_map`).
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
    label_map = options.pop("label_map", None)
    dataset = load(Path(root), **options)
    if fit is not None:
        dataset.fit = check_fit(str(fit))
    dataset = attach_subgroups(dataset, loader, attributes, edges)
    if label_map:
        from crs.data.label_map import apply_label_map, read_label_map

        dataset = apply_label_map(dataset, read_label_map(label_map))
    return dataset


def load_entry(entry: DatasetEntry, **extra: object) -> Dataset:
    """Load the data set a spec entry names, under the entry's name."""
    dataset = load_dataset(entry.loader, entry.root, **{**entry.options, **extra})
    dataset.name = entry.name
    return dataset


