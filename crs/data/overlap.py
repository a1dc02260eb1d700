"""Images shared between data sets: exact copies (same bytes) and near copies (re-encoded, resized, 8 vs 16 bit).

A shift target that shares images with its source's training data flatters robustness (HAM10000 and
BCN20000 are inside ISIC 2019). Each image is read once: its bytes are hashed (sha256) and it is
decoded small, to grey, into a 32 x 32 area-averaged thumbnail, from which come a 64-bit DCT
perceptual hash (pHash: the signs of the 8 x 8 lowest frequencies against their median) and a
16 x 16 normalised thumbnail. Two images are a near copy when their hashes differ in at most
:data:`MAX_HAMMING` bits **and** their thumbnails correlate at :data:`MIN_CORRELATION` or more: the
hash finds candidates fast, the correlation confirms them, so two distinct images of one anatomy
(every chest film has two lungs and a heart) are not called copies for a similar coarse layout.

Decoding is as cheap as the format allows: a JPEG is decoded by PIL's draft mode at 1/8 scale in
grey (its DCT coefficients, no full inverse transform); a 16-bit grey PNG (PIL mode ``I;16``) is
scaled by 65535, an 8-bit one by 255, so the two encodings of one film give one thumbnail. Crops and
flips are not caught (documented in docs/datasets.md).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from scipy.fft import dctn
from scipy.ndimage import gaussian_filter

from crs.data.base import DataError, Dataset
from crs.data.dicom import looks_like_dicom

THUMB = 32
"""Side of the area-averaged grey thumbnail the hash is computed from."""
MAX_HAMMING = 12
"""Largest pHash distance (of 64 bits) at which two images are candidate near copies."""
MIN_CORRELATION = 0.9
"""Smallest correlation of two thumbnails' detail (:func:`detail`) that confirms a candidate near copy."""
DETAIL_SIGMA = 2.0


@dataclass(frozen=True)
class Prints:
    """One row per image of a data set: ids, sha256 of the file, 64-bit pHash, 16 x 16 unit thumbnail."""

    ids: np.ndarray
    sha256: np.ndarray
    phash: np.ndarray
    thumbs: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Overlap:
    """Image ``a_id`` of data set ``a`` and ``b_id`` of ``b`` are copies: ``exact`` (same bytes or pixels)
    or ``near`` (pHash distance ``distance`` bits, thumbnail correlation ``correlation``)."""

    a: str
    a_id: str
    b: str
    b_id: str
    kind: str
    distance: int
    correlation: float

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "a_id": self.a_id, "b": self.b, "b_id": self.b_id, "kind": self.kind,
                "distance": self.distance, "correlation": round(self.correlation, 4)}


def grey_pixels(data: bytes, path: Path) -> np.ndarray:
    """The image in ``data`` as float32 grey in [0, 1], decoded as small as its format allows."""
    if looks_like_dicom(path):
        from crs.data.images import decode_image

        return np.asarray(decode_image(path, grey_ok=True).convert("L"), dtype=np.float32) / 255.0
    with Image.open(io.BytesIO(data)) as image:
        if image.format == "JPEG":
            image.draft("L", (THUMB * 2, THUMB * 2))
        image.load()
        if image.mode.startswith("I;16") or image.mode == "I":
            return np.asarray(image, dtype=np.float32) / 65535.0
        if image.mode == "F":
            return np.asarray(image, dtype=np.float32)
        return np.asarray(image.convert("L"), dtype=np.float32) / 255.0


def thumbnail(pixels: np.ndarray) -> np.ndarray:
    """Area-averaged THUMB x THUMB grey thumbnail (float32)."""
    image = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.float32), mode="F")
    return np.asarray(image.resize((THUMB, THUMB), Image.Resampling.BOX), dtype=np.float32)


def phash(thumb: np.ndarray) -> np.uint64:
    """64-bit DCT hash: bit k is set where the k-th of the 8 x 8 lowest frequencies exceeds their median
    (the DC term left out of the median: it is the brightness, not the structure)."""
    low = dctn(thumb.astype(np.float64), norm="ortho")[:8, :8].ravel()
    bits = low > np.median(low[1:])
    return np.uint64(int("".join("1" if b else "0" for b in bits), 2))


def detail(thumb: np.ndarray) -> np.ndarray:
    """The thumbnail's detail (itself minus a Gaussian blur of it, sigma 2 pixels), zero-mean and unit-norm:
    dot products of two are correlations. The coarse layout is left out on purpose: distinct films of one
    anatomy share it; copies share the detail too."""
    fine = thumb.astype(np.float64) - gaussian_filter(thumb.astype(np.float64), sigma=DETAIL_SIGMA, mode="nearest")
    fine = fine.ravel() - fine.mean()
    norm = np.linalg.norm(fine)
    return (fine / norm if norm > 0 else fine).astype(np.float32)


def fingerprint_file(path: Path) -> tuple[str, np.uint64, np.ndarray]:
    """Read ``path`` once: its sha256, pHash and unit thumbnail. Raises DataError naming an unreadable file."""
    try:
        data = path.read_bytes()
        thumb = thumbnail(grey_pixels(data, path))
    except (OSError, SyntaxError, ValueError) as error:
        raise DataError(f"overlap check: cannot read image {path} ({error}); fix or remove it") from error
    return hashlib.sha256(data).hexdigest(), phash(thumb), detail(thumb)


def fingerprint(dataset: Dataset, workers: int = 4) -> Prints:
    """The prints of every image of ``dataset`` (threads: PIL releases the GIL while decoding)."""
    root = Path(dataset.root)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(lambda p: fingerprint_file(root / p), dataset.paths))
    if not rows:
        return Prints(np.asarray(dataset.ids, dtype=str), np.array([], dtype=str), np.array([], dtype=np.uint64),
                      np.zeros((0, THUMB * THUMB), np.float32))
    return Prints(
        ids=np.asarray(dataset.ids).astype(str),
        sha256=np.array([r[0] for r in rows], dtype=str),
        phash=np.array([r[1] for r in rows], dtype=np.uint64),
        thumbs=np.stack([r[2] for r in rows]).astype(np.float16),  # half the memory; correlations to ~1e-3
    )


def files_key(dataset: Dataset) -> str:
    """A digest of the data set's files as they are on disk (path, size, modification time, in order):
    prints saved under it are reused only while no file changed."""
    digest = hashlib.sha256(str(Path(dataset.root).resolve()).encode())
    root = Path(dataset.root)
    for image_id, relative in zip(np.asarray(dataset.ids).astype(str), dataset.paths, strict=True):
        stat = (root / relative).stat()
        digest.update(f"\n{image_id}\t{relative}\t{stat.st_size}\t{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


def fingerprint_cached(dataset: Dataset, folder: Path | None, workers: int = 4) -> Prints:
    """:func:`fingerprint`, saved in ``folder`` (``<name>-<files key>.npz``) and reused while the files
    are unchanged, so a resumed or widened ``crs extract`` costs one stat per image, not one decode."""
    if folder is None:
        return fingerprint(dataset, workers)
    path = Path(folder) / f"{dataset.name}-{files_key(dataset)}.npz"
    if path.is_file():
        with np.load(path) as saved:
            return Prints(saved["ids"], saved["sha256"], saved["phash"], saved["thumbs"])
    prints = fingerprint(dataset, workers)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    np.savez(partial, ids=prints.ids, sha256=prints.sha256, phash=prints.phash, thumbs=prints.thumbs)
    partial.replace(path)
    return prints


def _popcount(values: np.ndarray) -> np.ndarray:
    """Set bits per uint64 (uint8 counts: a block of pairs stays small)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values)
    bytes_view = values.view(np.uint8).reshape(*values.shape, 8)
    return np.unpackbits(bytes_view, axis=-1).sum(axis=-1, dtype=np.uint8)


PAIRS_PER_BLOCK = 2**23
"""Hash pairs compared at once (64 MiB of uint64 XORs), whatever the data sets' sizes."""


def find_overlaps(a: Prints, b: Prints, a_name: str = "a", b_name: str = "b", block: int | None = None,
                  max_hamming: int = MAX_HAMMING, min_correlation: float = MIN_CORRELATION) -> list[Overlap]:
    """Every pair (image of ``a``, image of ``b``) that is an exact or a near copy, sorted by ``b``'s id.

    ``block`` rows of ``b`` are compared with all of ``a`` at once (default: :data:`PAIRS_PER_BLOCK` pairs)."""
    block = block or max(1, PAIRS_PER_BLOCK // max(1, len(a)))
    found: list[Overlap] = []
    by_hash: dict[str, int] = {}
    for i, digest in enumerate(a.sha256.tolist()):
        by_hash.setdefault(digest, i)
    exact_b = set()
    for j, digest in enumerate(b.sha256.tolist()):
        if digest in by_hash:
            exact_b.add(j)
            found.append(Overlap(a_name, str(a.ids[by_hash[digest]]), b_name, str(b.ids[j]), "exact", 0, 1.0))
    if len(a) and len(b):
        for start in range(0, len(b), block):
            stop = min(start + block, len(b))
            distance = _popcount(np.bitwise_xor(b.phash[start:stop, None], a.phash[None, :]))
            rows, cols = np.nonzero(distance <= max_hamming)
            if not len(rows):
                continue
            correlation = np.einsum("ij,ij->i", b.thumbs[start + rows].astype(np.float32),
                                    a.thumbs[cols].astype(np.float32))
            for r, c, corr in zip(rows.tolist(), cols.tolist(), correlation.tolist(), strict=True):
                j = start + r
                if j in exact_b or corr < min_correlation:
                    continue
                found.append(Overlap(a_name, str(a.ids[c]), b_name, str(b.ids[j]), "near", int(distance[r, c]),
                                     float(corr)))
    found.sort(key=lambda o: (o.b_id, o.kind != "exact", o.distance, o.a_id))
    return found


def overlapping_ids(overlaps: Sequence[Overlap]) -> list[str]:
    """The ``b`` ids that overlap ``a``, each once, in order."""
    return list(dict.fromkeys(o.b_id for o in overlaps))


def screen_target(source: Dataset, target: Dataset, allow_overlap: bool = False, source_prints: Prints | None = None,
                  workers: int = 4, prints_folder: Path | None = None) -> tuple[Dataset, dict[str, Any]]:
    """``target`` without the images it shares with ``source`` (kept when ``allow_overlap``), and the report
    that goes with the target into the cache and the run's audit: the pairs found and whether they were dropped."""
    prints = source_prints if source_prints is not None else fingerprint_cached(source, prints_folder, workers)
    overlaps = find_overlaps(prints, fingerprint_cached(target, prints_folder, workers), source.name, target.name)
    shared = overlapping_ids(overlaps)
    report: dict[str, Any] = {"source": source.name, "n_overlapping": len(shared), "allowed": bool(allow_overlap),
                              "dropped": [] if allow_overlap else shared, "pairs": [o.to_dict() for o in overlaps]}
    if not shared or allow_overlap:
        return target, report
    keep = ~np.isin(np.asarray(target.ids).astype(str), shared)
    if not keep.any():
        raise DataError(f"shift target {target.name!r}: every image is also in {source.name!r}; it measures no shift")
    return target.subset(keep), report
