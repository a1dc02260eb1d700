"""Where each encoder and each task came from: provenance for the cards, pretraining-exposure flags.

An encoder whose pretraining data include a benchmark's own data set (or a shift target's) has
seen that distribution, so its discrimination or its shift axis is not measured out of
distribution. The registry's ``pretraining_data`` strings are free text; the flags match them
against the data set names and modality words below, case-insensitively, and say what matched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crs.cache import FeatureStore, store_path
from crs.encoders import get_spec

# Loader name -> words naming that data set in pretraining descriptions.
DATASET_WORDS = {
    "isic2019": ("ISIC",),
    "aptos2019": ("APTOS",),
    "chexpert": ("CheXpert",),
    "mimic_cxr": ("MIMIC-CXR", "MIMIC CXR"),
    "ham10000": ("HAM10000", "ISIC"),
    "pad_ufes_20": ("PAD-UFES",),
    "derm7pt": ("Derm7pt", "7-point"),
    "messidor2": ("Messidor",),
    "idrid": ("IDRiD",),
    "eyepacs": ("EyePACS",),
    "chestxray14": ("ChestX-ray14", "ChestX-ray8", "NIH chest"),
    "vindr_cxr": ("VinDr",),
    "padchest": ("PadChest",),
}
# Modality -> words saying the pretraining data were of that kind of image.
MODALITY_WORDS = {
    "chest_xray": ("chest X-ray", "chest x-ray", "CXR", "MIMIC-CXR", "CheXpert", "ChestX-ray14", "PadChest", "BRAX"),
    "dermoscopy": ("dermatolog", "dermoscop", "skin lesion", "ISIC"),
    "fundus": ("fundus", "retina", "retinal", "APTOS", "EyePACS"),
}
LOADER_MODALITY = {"isic2019": "dermoscopy", "aptos2019": "fundus", "chexpert": "chest_xray", "mimic_cxr": "chest_xray",
                   "ham10000": "dermoscopy", "pad_ufes_20": "dermoscopy", "derm7pt": "dermoscopy", "messidor2": "fundus", "idrid": "fundus",
                   "eyepacs": "fundus", "chestxray14": "chest_xray", "vindr_cxr": "chest_xray",
                   "padchest": "chest_xray"}


@dataclass(frozen=True)
class ShiftInfo:
    """One shift target of a task: its name (the records' ``target``) and its loader."""

    name: str
    loader: str = ""


@dataclass(frozen=True)
class TaskInfo:
    """What the report knows about one task: its modality and which data sets it and its shift targets are."""

    name: str
    modality: str = ""
    loader: str = ""
    shift_targets: tuple[ShiftInfo, ...] = ()

    @property
    def shift_target_names(self) -> tuple[str, ...]:
        return tuple(target.name for target in self.shift_targets)


@dataclass(frozen=True)
class Provenance:
    """One encoder's origin, as shown on its reliability card."""

    encoder: str
    family: str = ""
    source: str = ""
    weights: str = ""
    weights_digest: str = ""
    preprocessing: str = ""
    pooling: str = ""
    dim: int | None = None
    license: str = ""
    pretraining_data: tuple[str, ...] = ()
    notes: str = ""
    missing: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class ExposureFlag:
    encoder: str
    task: str
    kind: str  # "test data set", "shift target", "same modality"
    matched: str
    target: str = ""  # the shift target's name, for kind "shift target"

    def text(self) -> str:
        if self.kind == "shift target":
            to = f" to {self.target}" if self.target else ""
            return f"pretraining includes {self.matched}: the shift{to} on {self.task} is not out-of-distribution"
        if self.kind == "test data set":
            return f"pretraining includes {self.matched}: {self.task} test images may have been seen"
        return f"pretrained on {self.matched} images ({self.task} modality)"

    def short(self) -> str:
        marks = {"shift target": "saw shift target", "test data set": "saw test set", "same modality": "in-domain"}
        where = f"{self.task} \u2192 {self.target}" if self.target else self.task
        return f"{marks[self.kind]} ({where}: {self.matched})"


def task_infos(tasks: list[str], spec=None, cache_root: Path | str | None = None) -> dict[str, TaskInfo]:
    """Modality and data-set identity of each task, from the spec's entries and the cache's attributes."""
    entries = {entry.name: entry for entry in getattr(spec, "datasets", ())}
    root = cache_root if cache_root is not None else getattr(spec, "cache", None)
    infos = {}
    for task in tasks:
        entry = entries.get(task)
        loader = entry.loader if entry is not None else ""
        targets = entry.shift_targets if entry is not None else ()
        modality = _cached_modality(root, task) or (entry.options.get("modality", "") if entry else "")
        modality = modality or LOADER_MODALITY.get(loader, "")
        infos[task] = TaskInfo(
            task, str(modality), loader, tuple(ShiftInfo(target.name, target.loader) for target in targets)
        )
    return infos


def _cached_modality(cache_root, task: str) -> str:
    if cache_root is None:
        return ""
    try:
        path = store_path(cache_root, task)
        return str(FeatureStore(path).root.attrs.get("modality", "")) if path.exists() else ""
    except Exception:  # a damaged store must not stop the report; the card shows what is missing
        return ""


def _mentions(texts: tuple[str, ...], words: tuple[str, ...]) -> str:
    for text in texts:
        for word in words:
            if re.search(re.escape(word), text, flags=re.IGNORECASE):
                return text
    return ""


def exposure_flags(provenance: Provenance, tasks: dict[str, TaskInfo]) -> list[ExposureFlag]:
    """Flags for one encoder: data sets of the benchmark, or their modality, named in its pretraining data."""
    flags = []
    seen = provenance.pretraining_data
    for info in tasks.values():
        for target in info.shift_targets:
            if target.loader and (matched := _mentions(seen, DATASET_WORDS.get(target.loader, ()))):
                flags.append(ExposureFlag(provenance.encoder, info.name, "shift target", matched, target.name))
        if info.loader and (matched := _mentions(seen, DATASET_WORDS.get(info.loader, ()))):
            flags.append(ExposureFlag(provenance.encoder, info.name, "test data set", matched))
        elif info.modality and (matched := _mentions(seen, MODALITY_WORDS.get(info.modality, ()))):
            flags.append(ExposureFlag(provenance.encoder, info.name, "same modality", matched))
    return flags


def encoder_provenance(encoder: str, tasks: Sequence[str] = (), cache_root: Path | str | None = None) -> Provenance:
    """Registry entry plus the fingerprint fields the cache stored at extraction (what was really run)."""
    missing = []
    spec = None
    try:
        spec = get_spec(encoder)
    except Exception:  # an encoder registered by a plugin that is not installed here
        missing.append("registry entry")
    fields = _cached_fields(encoder, tasks, cache_root)
    if fields is None:
        missing.append("cache fingerprint fields")
        fields = {}
    weights = str(fields.get("weights", ""))
    preprocessing = fields.get("preprocessing") or (spec.preprocessing_fields() if spec is not None else {})
    return Provenance(
        encoder=encoder,
        family=getattr(spec, "family", ""),
        source=str(fields.get("source") or getattr(spec, "source", "")),
        weights=describe_weights(weights),
        weights_digest=weights,
        preprocessing=describe_preprocessing(preprocessing) + _canonical_decode(encoder, tasks, cache_root),
        pooling=str(fields.get("pooling") or getattr(spec, "pooling", "")),
        dim=fields.get("dim") or getattr(spec, "dim", None),
        license=getattr(spec, "license", ""),
        pretraining_data=tuple(getattr(spec, "pretraining_data", ())),
        notes=getattr(spec, "notes", ""),
        missing=tuple(missing),
    )


def _cached_fields(encoder: str, tasks, cache_root) -> dict | None:
    if cache_root is None:
        return None
    for task in tasks:
        path = store_path(cache_root, task)
        if not path.exists():
            continue
        try:
            store = FeatureStore(path)
            fields = store.encoder_group(encoder, store.current_fingerprint(encoder)).attrs["fields"]
            if isinstance(fields, dict):
                return dict(fields)
        except Exception:  # missing or damaged group: try the next task's store
            continue
    return None


FIT_WORDS = {
    "crop": "centre-cropped to a square",
    "pad": "padded to a square",
    "squash": "squashed to a square (aspect ratio not kept)",
}
"""How a non-square image was made square (the data set's ``fit``), in words for the card."""


def _canonical_decode(encoder: str, tasks, cache_root) -> str:
    """'; images decoded per task: derm 224 px, centre-cropped to a square; cxr 224 px, padded to a square'
    from each task's fingerprint fields."""
    parts = []
    for task in tasks:
        fields = _cached_fields(encoder, [task], cache_root) or {}
        if fields.get("image_fit"):
            fit = str(fields["image_fit"])
            parts.append(f"{task} {fields.get('image_size', '?')} px, {FIT_WORDS.get(fit, fit)}")
    return f"; images decoded per task: {'; '.join(parts)}" if parts else ""


def describe_weights(weights: str) -> str:
    """Readable weights: 'random (seed 0), no pretrained weights' or 'sha256 1a2b3c4d5e6f...'."""
    if not weights:
        return "unknown"
    if weights.startswith("random"):
        seed = weights.split(":", 1)[1] if ":" in weights else "?"
        return f"random initialisation (seed {seed}); no pretrained weights"
    if weights.startswith("baseline:"):
        return "none (hand-crafted features)"
    digest = weights.split(":")[-1]
    if re.fullmatch(r"[0-9a-f]{64}", digest):
        return f"sha256 {digest[:12]}…"
    return weights


def describe_preprocessing(fields: dict) -> str:
    """'224 px, shortest side, crop 0.95, bicubic, mean (0.485, ...), std (...)'."""
    if not fields:
        return "unknown"
    parts = [f"{fields.get('input_size', '?')} px"]
    if fields.get("resize_mode"):
        parts.append("resize shortest side + centre crop" if fields["resize_mode"] == "shortest" else "squash resize")
    if fields.get("crop_pct") not in (None, 1.0):
        parts.append(f"crop {fields['crop_pct']}")
    if fields.get("interpolation"):
        parts.append(str(fields["interpolation"]))
    if fields.get("grayscale"):
        parts.append("greyscale")
    if fields.get("pre_resize"):
        parts.append(f"pre-resize {fields['pre_resize']} px")
    for key in ("mean", "std"):
        if fields.get(key) is not None:
            parts.append(f"{key} ({', '.join(f'{v:.3f}' for v in fields[key])})")
    return ", ".join(parts)
