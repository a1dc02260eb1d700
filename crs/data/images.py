"""Decode an image file once into a uint8 tensor, and screen image files before a run.

``load_image`` is what stage 1 calls per image: PIL formats and DICOM (:mod:`crs.data.dicom`),
decoded at their own aspect ratio and made square by the data set's fit mode (:mod:`crs.data.fit`).
``resolve_paths`` and ``screen_images`` are what every loader calls on the paths its CSV names:
the first refuses any path that leaves the data root (before anything is opened), the second
finds missing and unreadable files so a loader can either stop with an error naming the file or
skip them and list them (``skip_bad``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, UnidentifiedImageError

from crs.data.base import DataError, Dataset, safe_join
from crs.data.dicom import looks_like_dicom, read_dicom, scan_dicom
from crs.data.fit import check_fit, fit_square
from crs.data.pixels import to_eight_bit

if TYPE_CHECKING:
    import torch

VERIFY_MODES = ("none", "exists", "decode")


def decode_image(path: Path | str, draft_size: int | None = None, grey_ok: bool = False) -> Image.Image:
    """Read ``path`` (any image PIL reads, or DICOM) as an RGB picture at its own aspect ratio.

    ``draft_size`` lets PIL decode a large JPEG at reduced scale (a power of two, never below
    ``draft_size`` on either side, so every fit mode still resizes down). DICOM files are decoded
    by :func:`crs.data.dicom.read_dicom` (rescale, VOI LUT or window, MONOCHROME1 inverted, to 8
    bit). Other formats are mapped to 8 bit by :func:`crs.data.pixels.to_eight_bit` (16-bit grey
    scaled by its bit depth's maximum, never clipped; a mode with no faithful mapping is refused,
    naming the file). ``grey_ok`` returns grey pictures as one band (mode ``L``), so a caller can resize one
    band instead of three before converting (bit-identical: PIL resamples each band alike). A
    missing, truncated or unreadable file raises :class:`DataError` naming it.
    """
    path = Path(path)
    try:
        if looks_like_dicom(path):
            picture = Image.fromarray(read_dicom(path))
        else:
            with Image.open(path) as opened:
                if draft_size:
                    opened.draft("RGB", (draft_size, draft_size))
                opened.load()
                picture = opened if opened.mode == "L" and grey_ok else to_eight_bit(opened, path, grey_ok)
                picture.load()
        return picture if picture.mode == "RGB" or (grey_ok and picture.mode == "L") else picture.convert("RGB")
    except FileNotFoundError as error:
        raise DataError(f"image not found: {path}") from error
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise DataError(f"image unreadable or truncated: {path} ({error})") from error


def load_image(path: Path | str, size: int, fit: str = "pad") -> torch.Tensor:
    """Decode ``path`` once and make it ``size`` x ``size`` by ``fit``: uint8 (3, size, size).

    ``fit`` is ``crop``, ``pad`` or ``squash`` (:mod:`crs.data.fit`); stage 1 passes the data
    set's mode (:func:`dataset_image`). The default, ``pad``, neither crops nor distorts. Square
    images take one bilinear resize in every mode, exactly as before fit modes existed.
    """
    check_fit(fit)
    square = fit_square(decode_image(path, draft_size=size, grey_ok=True), size, fit).convert("RGB")
    array = np.asarray(square, dtype=np.uint8)
    import torch  # about 2 CPU s: loaded by what decodes images, not by what only lists or screens them

    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()


def dataset_image(dataset: Dataset, row: int) -> torch.Tensor:
    """Row ``row`` of ``dataset`` as its canonical image (its ``image_size`` and ``fit``)."""
    return load_image(Path(dataset.root) / dataset.paths[row], dataset.image_size, dataset.fit)


@dataclass(frozen=True)
class ImageProblem:
    """One image that cannot be used: its path relative to the root and why (missing | unreadable)."""

    path: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


def resolve_paths(root: Path, relative_paths: Sequence[str]) -> list[str]:
    """Normalise CSV paths to clean paths relative to ``root``; refuse any that escape it.

    Nothing is opened. A lexical check refuses ``../`` and absolute paths before the file system
    is touched; then each directory on the way is checked once (cached) for a symlink leading out,
    and any path that is or passes through a symlink gets the full ``safe_join`` verdict. The
    result matches ``safe_join`` for every path at one ``lstat`` per directory and per file,
    instead of a full ``realpath`` per file (200,000 CheXpert rows: measured in the report).
    """
    resolved_root = Path(root).resolve()
    root_text = str(resolved_root)
    prefix = root_text.rstrip(os.sep) + os.sep
    directory_inside: dict[str, bool] = {root_text: True}

    def inside(directory: str) -> bool:
        known = directory_inside.get(directory)
        if known is None:
            parent = os.path.dirname(directory)
            known = inside(parent) if parent != directory and parent.startswith(prefix) or parent == root_text else False
            if known and os.path.islink(directory):
                real = os.path.realpath(directory)
                known = real == root_text or real.startswith(prefix)
            directory_inside[directory] = known
        return known

    cleaned = []
    for relative in relative_paths:
        if not isinstance(relative, str) or not relative.strip():
            raise DataError(f"empty image path in the CSV under {resolved_root}; fill in or remove that row")
        joined = os.path.normpath(os.path.join(root_text, relative))
        if not joined.startswith(prefix):
            safe_join(resolved_root, relative)  # raises, naming the entry
            raise DataError(f"path {relative!r} points at the data root itself, not an image file")
        if not inside(os.path.dirname(joined)) or os.path.islink(joined):
            joined = str(safe_join(resolved_root, relative))  # the authority where symlinks are involved
        cleaned.append(joined[len(prefix):].replace(os.sep, "/"))
    return cleaned


def check_image_file(path: Path, decode: bool) -> tuple[str, str] | None:
    """``None`` if the file is usable, else (reason, detail). ``decode`` fully decodes it (draft-sized)."""
    if not path.is_file():
        return ("missing", "")
    if not decode:
        return None
    if looks_like_dicom(path):
        problem, _ = scan_dicom(path, decode=True)
        return None if problem is None else ("unreadable", f"DICOM {problem.kind}: {problem.detail}")
    try:
        with Image.open(path) as image:
            image.draft("RGB", (64, 64))
            image.load()
            to_eight_bit(image, path)
    except DataError as error:  # decodes, but has no faithful 8-bit picture (crs.data.pixels)
        return ("unreadable", str(error))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return ("unreadable", str(error))
    return None


def find_bad_images(
    root: Path, relative_paths: Sequence[str], verify: str = "exists", workers: int = 4
) -> list[ImageProblem]:
    """Missing (and with ``verify="decode"`` unreadable) images among ``relative_paths``, in input order."""
    if verify not in VERIFY_MODES:
        raise DataError(f"verify={verify!r} is not one of {VERIFY_MODES}")
    if verify == "none":
        return []
    root = Path(root).resolve()
    decode = verify == "decode"

    def check(relative: str) -> ImageProblem | None:
        outcome = check_image_file(root / relative, decode)
        return None if outcome is None else ImageProblem(relative, *outcome)

    if decode and workers > 1 and len(relative_paths) > 64:
        # PIL releases the GIL while decoding, so threads overlap the work.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(check, relative_paths, chunksize=64))
    else:
        outcomes = [check(relative) for relative in relative_paths]
    return [outcome for outcome in outcomes if outcome is not None]


def screen_images(
    root: Path,
    relative_paths: Sequence[str],
    skip_bad: bool,
    verify: str | None = None,
    dataset: str = "data set",
) -> tuple[np.ndarray, list[str]]:
    """Apply the ``skip_bad`` rule: returns (keep mask, skipped descriptions).

    ``verify`` defaults to ``"exists"`` (a stat per file) when bad images are errors, and to
    ``"decode"`` when they are to be skipped, because a skipped image must be known before the ids
    are fixed in the cache. Without ``skip_bad`` any problem raises :class:`DataError` naming the
    first bad file and how many there are.
    """
    verify = verify or ("decode" if skip_bad else "exists")
    problems = find_bad_images(root, relative_paths, verify)
    keep = np.ones(len(relative_paths), dtype=bool)
    if not problems:
        return keep, []
    if not skip_bad:
        first = problems[0]
        more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
        raise DataError(
            f"{dataset}: image {first.reason}: {Path(root).resolve() / first.path}{more}; "
            "restore the files or load with skip_bad=True to skip and list them"
        )
    bad = {problem.path for problem in problems}
    keep = np.array([relative not in bad for relative in relative_paths], dtype=bool)
    return keep, [str(problem) for problem in problems]
