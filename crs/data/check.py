"""`crs datasets check`: read a whole data set and report what a benchmark run would trip over.

The table is loaded without file checks, then every listed image is read once: it is missing,
unreadable (decode fails), or fine, and its bytes are hashed so identical images that sit in two
splits (a leak) are found. Layout errors (missing CSV, wrong columns, a path outside the root)
become the single problem of the report instead of a traceback.
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from crs.data import load_dataset
from crs.data.base import SPLITS, DataError, Dataset
from crs.data.dicom import looks_like_dicom, scan_dicom
from crs.data.pixels import describe, to_eight_bit

REPORT_KEYS = (
    "dataset", "root", "rows", "n_images", "n_missing", "n_unreadable", "classes", "splits", "n_groups", "duplicates",
    "dicom", "pixel_formats", "problems",
)
# Loaders that read files from disk accept verify="none", which loads the table only.
FILE_LOADERS = ("isic2019", "aptos2019", "chexpert", "mimic_cxr", "folder", "ham10000", "pad_ufes_20", "derm7pt", "messidor2",
                "idrid", "eyepacs", "chestxray14", "vindr_cxr", "padchest")


@dataclass(frozen=True)
class CheckReport:
    """What `datasets check` found. ``classes``: images per class (positives per label for
    multilabel); ``splits``: per split, images, groups and the same class counts;
    ``duplicates``: byte-identical images found in more than one split (for DICOM, identical
    pixel data: two exports of one image differ in their headers); ``dicom``: how many listed
    files are DICOM and, per kind of problem (unsupported transfer syntax, no pixel data,
    multi-frame, unsupported pixels, unreadable), how many, the first file and what to do;
    ``pixel_formats``: images per PIL mode and bit depth (``L 8-bit``, ``I;16 16-bit``, ``DICOM``),
    as :mod:`crs.data.pixels` maps them to 8 bit; images it cannot map are ``n_unreadable``;
    ``rows``: rows the CSVs list, rows kept, rows dropped by reason, groups (patients) lost with
    them, and notes on the splits (for example a radiologist-labelled file pooled into them)."""

    dataset: str
    root: str
    rows: dict[str, Any] = field(default_factory=dict)
    n_images: int = 0
    n_missing: int = 0
    n_unreadable: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)
    n_groups: int = 0
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    dicom: dict[str, Any] = field(default_factory=dict)
    pixel_formats: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list, repr=False)
    unreadable: list[str] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with exactly the keys of :data:`REPORT_KEYS`."""
        full = asdict(self)
        return {key: full[key] for key in REPORT_KEYS}

    def reason(self) -> str:
        """One line for the exit message."""
        if self.ok:
            return "ok"
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        return self.problems[0] + more


@dataclass(frozen=True)
class ImageScan:
    """One file read once: ``status`` ok | missing | unreadable | unmappable, a content digest, a
    detail, for DICOM files ``dicom`` = "ok" or the kind of problem ("" for other formats), and
    ``pixels``: its mode and bit depth (:func:`crs.data.pixels.describe`)."""

    status: str
    digest: str | None = None
    detail: str = ""
    dicom: str = ""
    pixels: str = ""


def scan_image(path: Path) -> ImageScan:
    """Read ``path`` once: hash it (DICOM: its pixel data), decode it and map it to 8 bit."""
    if path.is_file() and looks_like_dicom(path):
        problem, digest = scan_dicom(path, decode=True)
        if problem is None:
            return ImageScan("ok", digest, "", "ok", "DICOM")
        return ImageScan("unreadable", digest, problem.detail, problem.kind, "DICOM")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ImageScan("missing")
    except OSError as error:
        return ImageScan("missing" if not path.exists() else "unreadable", None, str(error))
    digest = hashlib.sha256(data).hexdigest()
    try:
        with Image.open(io.BytesIO(data)) as image:
            pixels = describe(image)
            image.draft("RGB", (64, 64))
            image.load()
            to_eight_bit(image, path)
    except DataError as error:
        return ImageScan("unmappable", digest, str(error), "", pixels)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return ImageScan("unreadable", digest, str(error))
    return ImageScan("ok", digest, pixels=pixels)


def dicom_summary(paths: list[str], scans: list[ImageScan]) -> dict[str, Any]:
    """DICOM files among ``paths`` and their problems by kind (count, first file, detail)."""
    kinds: dict[str, dict[str, Any]] = {}
    n_files = 0
    for path, scan in zip(paths, scans, strict=True):
        if not scan.dicom:
            continue
        n_files += 1
        if scan.dicom != "ok":
            entry = kinds.setdefault(scan.dicom, {"count": 0, "first": path, "detail": scan.detail})
            entry["count"] += 1
    return {"n_files": n_files, "n_problems": sum(e["count"] for e in kinds.values()), "problems": kinds}


def class_counts(dataset: Dataset, rows: np.ndarray) -> dict[str, int]:
    """Images per class, or positive images per label for multilabel, among ``rows``."""
    names = dataset.task.class_names
    labels = dataset.labels[rows]
    if dataset.task.kind == "multilabel":
        positives = (np.nan_to_num(labels, nan=0.0) > 0.5).sum(axis=0)
        return {name: int(positives[j]) for j, name in enumerate(names)}
    counts = np.bincount(labels.astype(np.int64), minlength=len(names))
    return {name: int(counts[j]) for j, name in enumerate(names)}


def check_dataset(name: str, root: Path | str, workers: int = 4, **options: Any) -> CheckReport:
    """Load data set ``name`` from ``root`` and check every image; never raises for data problems."""
    root = Path(root)
    if name in FILE_LOADERS:
        options = {**options, "verify": "none", "skip_bad": False}
    try:
        dataset = load_dataset(name, root, **options)
    except (DataError, TypeError) as error:
        # TypeError: an option the loader does not take; the message names it.
        return CheckReport(dataset=name, root=str(root), problems=[str(error).splitlines()[0]])

    base = Path(dataset.root)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        scans = list(pool.map(lambda p: scan_image(base / p), dataset.paths))
    missing = [p for p, scan in zip(dataset.paths, scans, strict=True) if scan.status == "missing"]
    unreadable = [f"{p}: {scan.detail}" for p, scan in zip(dataset.paths, scans, strict=True)
                  if scan.status in ("unreadable", "unmappable")]
    pixel_formats = dict(sorted(Counter(scan.pixels for scan in scans if scan.pixels).items()))
    dicom = dicom_summary(dataset.paths, scans)

    split_report: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        rows = dataset.indices(split)
        if len(rows):
            split_report[split] = {
                "images": int(len(rows)),
                "groups": int(len(set(dataset.groups[rows].tolist()))),
                "classes": class_counts(dataset, rows),
            }

    by_hash: dict[str, list[int]] = defaultdict(list)
    for i, scan in enumerate(scans):
        if scan.digest is not None:
            by_hash[scan.digest].append(i)
    duplicates = []
    for digest, rows_with_hash in by_hash.items():
        splits_hit = sorted({str(dataset.splits[i]) for i in rows_with_hash})
        if len(rows_with_hash) > 1 and len(splits_hit) > 1:
            duplicates.append({"sha256": digest, "ids": [str(dataset.ids[i]) for i in rows_with_hash], "splits": splits_hit})

    problems = []
    if missing:
        problems.append(f"{len(missing)} image(s) missing, first: {base / missing[0]}")
    other_unreadable = [
        f"{p}: {scan.detail}" for p, scan in zip(dataset.paths, scans, strict=True)
        if scan.status == "unreadable" and not scan.dicom
    ]
    if other_unreadable:
        problems.append(f"{len(other_unreadable)} image(s) unreadable, first: {base / other_unreadable[0]}")
    unmappable = [scan.detail for scan in scans if scan.status == "unmappable"]
    if unmappable:
        more = f" (+{len(unmappable) - 1} more)" if len(unmappable) > 1 else ""
        problems.append(f"{len(unmappable)} image(s) with pixels crs cannot map to 8 bit faithfully{more}: {unmappable[0]}")
    for kind, entry in dicom["problems"].items():
        problems.append(f"{entry['count']} DICOM file(s): {kind} ({entry['detail']}), first: {base / entry['first']}")
    for split, entry in split_report.items():
        empty = [cls for cls, n in entry["classes"].items() if n == 0]
        if empty and set(split_report) != {"test"}:
            problems.append(f"split {split!r} has no images of {empty}; add data or merge those classes")
    leaked = _groups_in_several_splits(dataset)
    if leaked:
        problems.append(f"{len(leaked)} group(s) appear in more than one split, first: {leaked[0]}")
    if duplicates:
        problems.append(f"{len(duplicates)} byte-identical image(s) in more than one split (a leak), first ids: {duplicates[0]['ids']}")

    return CheckReport(
        dataset=dataset.name,
        root=str(base),
        rows=row_accounting(dataset),
        n_images=len(dataset),
        n_missing=len(missing),
        n_unreadable=len(unreadable),
        classes=class_counts(dataset, np.arange(len(dataset))),
        splits=split_report,
        n_groups=int(len(set(dataset.groups.tolist()))),
        duplicates=duplicates,
        dicom=dicom,
        pixel_formats=pixel_formats,
        problems=problems,
        missing=missing,
        unreadable=unreadable,
    )


def row_accounting(dataset: Dataset) -> dict[str, Any]:
    """Rows listed, kept, dropped by reason and groups lost; loaders that drop nothing report listed = kept."""
    accounting = dataset.accounting
    if accounting is None:
        return {"listed": len(dataset), "kept": len(dataset), "dropped": {}, "groups_lost": 0,
                "group_word": "groups", "notes": []}
    return {"listed": accounting.rows_listed, "kept": len(dataset), "dropped": dict(accounting.dropped),
            "groups_lost": accounting.groups_lost, "group_word": accounting.group_word,
            "notes": list(accounting.notes)}


def _groups_in_several_splits(dataset: Dataset) -> list[str]:
    seen: dict[str, set[str]] = defaultdict(set)
    for group, split in zip(dataset.groups.tolist(), dataset.splits.tolist(), strict=True):
        seen[group].add(split)
    return sorted(group for group, splits in seen.items() if len(splits) > 1)
