"""Images shared between data sets: exact copies (same bytes) and near copies (re-encoded, resized, 8 vs 16 bit,
flipped, cropped).

A shift target that shares images with its source's training data flatters robustness (HAM10000 and
BCN20000 are inside ISIC 2019). An image's exact print is the sha256 of its file (the digest the store's
image record already holds: :mod:`crs.cache.images`, so no file is hashed twice); its perceptual print
comes from stage 1's own canonical decode (the data set's ``image_size`` and ``fit``): made grey, it is
area-averaged into a 32 x 32 thumbnail, from which come a 64-bit DCT perceptual hash (pHash: the signs
of the 8 x 8 lowest frequencies against their median) and the thumbnail's unit detail. Two images are
a near copy when their hashes differ in at most :data:`MAX_HAMMING` bits **and** their details
correlate at :data:`MIN_CORRELATION` or more: the hash finds candidates fast, the correlation confirms
them, so two distinct images of one anatomy (every chest film has two lungs and a heart) are not
called copies for a similar coarse layout.

Crops and flips are found too (decisions 0122, 0147). Each image keeps its grey thumbnail (uint16), so at
comparison time a pair can be looked at through *views*: the left-right mirror of ``b`` (a flip),
centred zooms (:data:`ZOOMS`, Lanczos-interpolated) of one image of the pair, a crop of c per side being a
zoom of 1 / (1 - 2c) (5 %: 1.11), and both. Each view has its own pHash (candidates within
:data:`MAX_HAMMING` bits) and detail, at :data:`MIN_CORRELATION` (plain, a flip) or :data:`MIN_CROP_CANDIDATE`
(a zoom: a candidate the second stage decides).

A pair the thumbnails confirm is confirmed again from its files (decisions 0142, 0147, :func:`fine_scores`):
both images decoded again (:attr:`Prints.decode`) and compared whole at :data:`FINE` px through their
best zoom near the view's, registered to 0.1 %, at :data:`MIN_FINE_CORRELATION`; the 32 px thumbnail alone
joined distinct chest films of one template.

Sharing stage 1's decode (decision 0097), the check adds only the thumbnail and one DCT per image; the
details (one blur each) are made when compared, for candidate rows only. Stage 1 maps 16-bit grey to 8 bit by its bit depth (decision 0045), so the 8- and 16-bit PNGs of
one film print alike. What is found and what is not, measured: docs/datasets.md
(``python -m crs.bench.overlap_edits``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.fft import dctn
from scipy.ndimage import gaussian_filter

from crs.data.base import DataError, Dataset

THUMB = 32
"""Side of the area-averaged grey thumbnail the hash is computed from."""
MAX_HAMMING = 12
"""Largest pHash distance (of 64 bits) at which two images are candidate near copies."""
MIN_CORRELATION = 0.9
"""Smallest correlation of two thumbnails' detail (:func:`detail`) that confirms a candidate near copy."""
DETAIL_SIGMA = 2.0
MIN_CROP_CORRELATION = 0.95
"""The thumbnail detail correlation that confirms a pair seen through a zoom (``cropped``) when the pair cannot be
read again (prints without :attr:`Prints.decode`): stricter, because a zoom also brings a look-alike of another
size into register (distinct synthetic lesions reached 0.948)."""
MIN_CROP_CANDIDATE = 0.7
"""The thumbnail detail correlation at which a pair seen through a zoom goes on to the second stage, which
decides (decision 0147): a 32 px thumbnail's detail survives a zoom poorly (stationary textures' true crops
reach 0.7-0.95), and the second stage alone joins no two distinct images of the measured families."""
ZOOMS = (1.04, 1.08, 1.12)
"""Centred zooms tried on either image of a candidate pair: crops of up to about 5.4 % per side."""
THUMB_SCALE = 65535
"""Thumbnails are kept as uint16: grey level x THUMB_SCALE (steps of 1.5e-5, far below an 8-bit step)."""
FINE = 64
"""Side of the grey picture the second stage compares (decision 0142): both images of a pair the thumbnails
confirm are decoded again and compared whole at this side (or the canonical side, when smaller)."""
FINE_SIGMA = 1.0
"""Blur (pixels of the FINE picture) after the second stage's zoom: JPEG and resampling noise out, the same blur
on both pictures of a pair (decision 0147: blurring before the zoom left the borders unlike)."""
FINE_BORDER = 3
"""Pixels (of a 64 px FINE picture; scaled with a smaller side) left out at each edge by the second stage's
correlation: a crop's canonical decode and the blur differ there (decision 0147)."""
MIN_FINE_CORRELATION = 0.994
"""Smallest correlation of the two whole FINE pictures (blurred, through the pair's best view) that confirms a
pair: distinct generated images reach 0.9938 (two chest drawings of one finding pattern), their copies 0.996
or more but for a few of the finest textures (0.991): decisions 0142, 0147."""
FINE_STEP = 0.01
FINE_SPAN = 0.03
"""The second stage tries zooms within FINE_SPAN of the zoom the first stage found the pair through, in steps
of FINE_STEP (a pair found plain or flipped: :data:`PLAIN_CENTRE`), on the side it zoomed..."""
FINE_REFINE = (-0.004, -0.002, 0.002, 0.004)
"""...then these offsets around each pair's best zoom: a crop's zoom registered to 0.1 % (decision 0147: copies of
stationary textures, registered to 0.5 %, stayed under the threshold)."""
PLAIN_CENTRE = 1.02
"""A pair found plain or flipped is looked at through zooms 1.00-1.05 of either image (a crop of up to 2.4 %
per side stays close enough to the plain view to be found through it)."""
FINE_MAX_ZOOM = 1.14
"""Largest zoom the second stage tries (a crop of 6 % per side)."""


@dataclass(frozen=True)
class Prints:
    """One row per image of a data set: ids, sha256 of the file, 64-bit pHash, 32 x 32 grey thumbnail
    (uint16, :data:`THUMB_SCALE` = white; its detail and its views are computed when compared)."""

    ids: np.ndarray
    sha256: np.ndarray
    phash: np.ndarray
    thumbs: np.ndarray
    decode: Callable[[np.ndarray], np.ndarray] | None = field(default=None, compare=False, repr=False)
    """Rows -> their canonical images (uint8 (N, C, H, W) or (N, H, W)), decoded again from the files: the
    second stage (:func:`confirm_pairs`) reads the few images of candidate pairs. None: no second stage."""

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Overlap:
    """Image ``a_id`` of data set ``a`` and ``b_id`` of ``b`` are copies: ``exact`` (same bytes or pixels),
    ``near`` (pHash distance ``distance`` bits, thumbnail correlation ``correlation``), or the same through a
    view: ``flipped`` (``b``'s mirror image) or ``cropped`` (one image a centred crop of the other)."""

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


GREY_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)
"""ITU-R 601 luma weights (PIL's ``convert("L")``): an RGB and a grey copy of one picture print alike."""


def image_prints(images: Any) -> tuple[np.ndarray, np.ndarray]:
    """pHashes (uint64) and grey thumbnails (uint16, THUMB * THUMB each) of a batch of decoded images.

    ``images``: uint8 (N, 3, H, W) or (N, H, W), a torch tensor or an array: stage 1's canonical
    images, so the check shares stage 1's decode and adds only the thumbnail (an area average, then
    grey: both linear, so the order does not matter and the average works on the fewest pixels) and one
    32 x 32 DCT per image. numpy only, one thread: it runs in stage 1's decode workers,
    beside the forward pass."""
    pixels = np.asarray(images.numpy() if hasattr(images, "numpy") else images)
    if pixels.ndim == 3:
        pixels = pixels[:, None]
    if len(pixels) == 0:
        return np.zeros(0, np.uint64), np.zeros((0, THUMB * THUMB), np.uint16)
    thumbs = thumbnails(pixels)
    return phashes(thumbs), np.round(thumbs.reshape(len(thumbs), -1) * THUMB_SCALE).astype(np.uint16)


def _block_sum(x: np.ndarray, axis: int, factor: int, dtype: type) -> np.ndarray:
    """Sums of ``factor`` neighbours along ``axis`` (whose length ``factor`` divides), exact in integers:
    strided adds, several times faster than a reshaped reduction over a short axis."""
    index = [slice(None)] * x.ndim
    index[axis] = slice(0, None, factor)
    total: np.ndarray = x[tuple(index)].astype(dtype)
    for k in range(1, factor):
        index[axis] = slice(k, None, factor)
        np.add(total, x[tuple(index)], out=total, casting="unsafe")  # in place: no temporary per neighbour
    return total


def _area_mean(x: np.ndarray, axis: int, side: int = THUMB) -> np.ndarray:
    """``x`` (float) averaged into ``side`` equal spans along ``axis``: exact area means (a span that ends
    inside a pixel takes that pixel in part)."""
    size = x.shape[axis]
    total = np.concatenate([np.zeros_like(np.take(x, [0], axis=axis)), np.cumsum(x, axis=axis)], axis=axis)
    edges = np.linspace(0.0, size, side + 1)
    whole = np.minimum(np.floor(edges).astype(np.int64), size - 1)
    part = (edges - whole).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    at_edges = np.take(total, whole, axis=axis) + part * np.take(x, whole, axis=axis)
    return np.diff(at_edges, axis=axis) / (size / side)


def thumbnails(pixels: np.ndarray, side: int = THUMB) -> np.ndarray:
    """Area-averaged ``side`` x ``side`` grey thumbnails in [0, 1] (float32, (N, side, side)) of uint8 (N, C, H, W).

    Sizes ``side`` divides (224, 256, 384, 448, 512 for 32) take integer block sums; others exact area means."""
    height, width = pixels.shape[-2:]
    if height % side == 0 and width % side == 0:
        across = _block_sum(pixels, 3, width // side, np.uint16)  # 255 x 257 fits: any size up to 8,224 for 32
        small = _block_sum(across, 2, height // side, np.uint32).astype(np.float64) / (
            (width // side) * (height // side))
    else:
        small = _area_mean(_area_mean(pixels.astype(np.float64), 3, side), 2, side)
    grey = small[:, 0] if small.shape[1] == 1 else np.tensordot(GREY_WEIGHTS.astype(np.float64), small,
                                                                axes=([0], [1]))
    return (grey / 255.0).astype(np.float32)


_BIT_VALUES = np.uint64(1) << np.arange(63, -1, -1, dtype=np.uint64)


def phashes(thumbs: np.ndarray) -> np.ndarray:
    """64-bit DCT hash per thumbnail: bit k is set where the k-th of the 8 x 8 lowest frequencies exceeds their
    median (the DC term left out of the median: it is the brightness, not the structure)."""
    low = dctn(thumbs.astype(np.float64), axes=(1, 2), norm="ortho")[:, :8, :8].reshape(len(thumbs), 64)
    bits = low > np.median(low[:, 1:], axis=1, keepdims=True)
    return np.bitwise_or.reduce(np.where(bits, _BIT_VALUES, np.uint64(0)), axis=1).astype(np.uint64)


def phash(thumb: np.ndarray) -> np.uint64:
    """:func:`phashes` of one thumbnail."""
    return np.uint64(phashes(thumb[None])[0])


def details(thumbs: np.ndarray) -> np.ndarray:
    """Each thumbnail's detail (itself minus a Gaussian blur of it, sigma 2 pixels), zero-mean and unit-norm:
    dot products of two are correlations. The coarse layout is left out on purpose: distinct films of one
    anatomy share it; copies share the detail too."""
    thumbs = thumbs.astype(np.float64)
    fine = thumbs - gaussian_filter(thumbs, sigma=(0, DETAIL_SIGMA, DETAIL_SIGMA), mode="nearest")
    fine = fine.reshape(len(thumbs), -1)
    fine -= fine.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(fine, axis=1, keepdims=True)
    return (fine / np.where(norm > 0, norm, 1.0)).astype(np.float32)


def detail(thumb: np.ndarray) -> np.ndarray:
    """:func:`details` of one thumbnail."""
    return details(thumb[None])[0]


def fingerprint_file(path: Path, size: int = 224, fit: str = "crop") -> tuple[str, np.uint64, np.ndarray]:
    """One file's sha256, pHash and unit detail, decoded as stage 1 decodes it (``size``, ``fit``).
    Raises DataError naming an unreadable file."""
    from crs.data.images import load_image

    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DataError(f"overlap check: cannot read image {path} ({error}); fix or remove it") from error
    hashes, thumbs = image_prints(load_image(path, size, fit)[None])
    return hashlib.sha256(data).hexdigest(), np.uint64(hashes[0]), details(_grey(thumbs))[0]


def prints_of(dataset: Dataset, rows: Sequence[int] | np.ndarray, workers: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """pHashes and thumbnails of ``rows`` of ``dataset``, each decoded as stage 1 decodes it (its canonical image:
    :func:`crs.data.images.dataset_image`), for data sets no extraction printed (threads: PIL releases the GIL)."""
    from crs.data.images import dataset_image

    rows = [int(r) for r in rows]
    batches = [rows[i:i + 64] for i in range(0, len(rows), 64)]

    def batch(part: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return image_prints(np.stack([dataset_image(dataset, r).numpy() for r in part]))

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = list(pool.map(batch, batches))
    if not done:
        return np.zeros(0, np.uint64), np.zeros((0, THUMB * THUMB), np.uint16)
    return np.concatenate([d[0] for d in done]), np.concatenate([d[1] for d in done])


def fingerprint(dataset: Dataset, workers: int = 4, sha256: Sequence[str] | None = None) -> Prints:
    """The prints of every image of ``dataset``, decoded here (stand-alone: no cache). ``sha256``: the files'
    digests when known (a store's image record), else each file is hashed here."""
    if sha256 is None:
        root = Path(dataset.root)

        def digest(relative: str) -> str:
            try:
                with open(root / relative, "rb") as handle:
                    return hashlib.file_digest(handle, "sha256").hexdigest()
            except OSError as error:
                raise DataError(f"overlap check: cannot read image {root / relative} ({error}); fix or remove it") \
                    from error

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            sha256 = list(pool.map(digest, [str(p) for p in dataset.paths]))
    hashes, thumbs = prints_of(dataset, range(len(dataset)), workers)
    return Prints(ids=np.asarray(dataset.ids).astype(str), sha256=np.asarray(list(sha256), dtype=str),
                  phash=hashes, thumbs=thumbs, decode=dataset_decoder(dataset, workers))


def _popcount(values: np.ndarray) -> np.ndarray:
    """Set bits per uint64 (uint8 counts: a block of pairs stays small)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values)
    bytes_view = values.view(np.uint8).reshape(*values.shape, 8)
    return np.unpackbits(bytes_view, axis=-1).sum(axis=-1, dtype=np.uint8)


PAIRS_PER_BLOCK = 2**23
"""Hash pairs compared at once (64 MiB of uint64 XORs), whatever the data sets' sizes."""


VIEWS = (
    (1.0, 1.0, False, "near"), (1.0, 1.0, True, "flipped"),
    *((zoom, 1.0, False, "cropped") for zoom in ZOOMS), *((1.0, zoom, False, "cropped") for zoom in ZOOMS),
    *((zoom, 1.0, True, "flipped+cropped") for zoom in ZOOMS), *((1.0, zoom, True, "flipped+cropped") for zoom in ZOOMS),
)
"""(zoom of ``a``, zoom of ``b``, ``b`` mirrored, kind) of every view a pair is compared through, plain first:
plain, ``b`` flipped, either image zoomed (a centred crop of the other), and the same zooms with ``b`` flipped
(a copy both flipped and cropped, decision 0147)."""
ROWS_PER_VIEW_CHUNK = 4096


def _grey(thumbs: np.ndarray) -> np.ndarray:
    """uint16 thumbnails (N, THUMB * THUMB) -> float32 grey levels (N, THUMB, THUMB) in [0, 1]."""
    return (np.asarray(thumbs, dtype=np.float32) / THUMB_SCALE).reshape(len(thumbs), THUMB, THUMB)


LANCZOS = 3
"""Lobes of the Lanczos kernel a zoom interpolates with (decision 0147: linear interpolation smoothed a zoomed
view unlike its copy, and the detail of zoomed thumbnails of true crops fell under 0.95)."""


def _zoom_matrix(zoom: float, side: int = THUMB) -> np.ndarray:
    """(side, side) Lanczos interpolation (:data:`LANCZOS` lobes, edges repeated, rows summing to 1) of the
    centred 1 / ``zoom`` of a side onto ``side`` samples."""
    centres = (np.arange(side) + 0.5 - side / 2) / zoom + side / 2 - 0.5
    base = np.floor(centres).astype(np.int64)
    matrix = np.zeros((side, side))
    for offset in range(1 - LANCZOS, LANCZOS + 1):
        at = base + offset
        distance = centres - at
        np.add.at(matrix, (np.arange(side), np.clip(at, 0, side - 1)),
                  np.sinc(distance) * np.sinc(distance / LANCZOS))
    return matrix / matrix.sum(axis=1, keepdims=True)


def _view(thumbs: np.ndarray, zoom: float, mirror: bool) -> np.ndarray:
    """Grey thumbnails (N, THUMB, THUMB) of the images seen through a view: mirrored, then zoomed."""
    grey = _grey(thumbs)
    if mirror:
        grey = grey[:, :, ::-1]
    if zoom != 1.0:
        matrix = _zoom_matrix(zoom).astype(np.float32)
        grey = matrix @ grey @ matrix.T
    return grey


_DCT_LOW = np.sqrt(2.0 / THUMB) * np.cos(np.pi * np.outer(np.arange(8), 2 * np.arange(THUMB) + 1) / (2 * THUMB))
_DCT_LOW[0] /= np.sqrt(2.0)
"""The 8 lowest rows of the orthonormal DCT-II of THUMB samples: ``dctn(x)[:8, :8] == L x L.T``."""


def _view_hashes(prints: Prints, zoom: float, mirror: bool) -> np.ndarray:
    """pHashes of the images seen through a view, from their low frequencies only: the view is linear
    (``Z x J Z.T``), so its 8 x 8 lowest DCT frequencies are ``(L Z) x (L Z J).T``, no full zoom or DCT."""
    if zoom == 1.0 and not mirror:
        return prints.phash
    left = _DCT_LOW @ _zoom_matrix(zoom)
    right = left[:, ::-1] if mirror else left
    out = []
    for i in range(0, len(prints), ROWS_PER_VIEW_CHUNK):
        grey = _grey(prints.thumbs[i:i + ROWS_PER_VIEW_CHUNK]).astype(np.float64)
        low = (left @ grey @ right.T).reshape(len(grey), 64)
        bits = low > np.median(low[:, 1:], axis=1, keepdims=True)
        out.append(np.bitwise_or.reduce(np.where(bits, _BIT_VALUES, np.uint64(0)), axis=1).astype(np.uint64))
    return np.concatenate(out) if out else np.zeros(0, np.uint64)


def fine_pictures(images: np.ndarray) -> np.ndarray:
    """The second stage's pictures of canonical images (uint8 (N, C, H, W) or (N, H, W)): grey, area-averaged
    to :data:`FINE` (or the canonical side, when smaller), float64 (N, s, s). The blur comes after the zoom
    (:func:`fine_correlations`)."""
    pixels = np.asarray(images)
    if pixels.ndim == 3:
        pixels = pixels[:, None]
    side = min(FINE, pixels.shape[-1], pixels.shape[-2])
    return thumbnails(pixels, side).astype(np.float64)


@lru_cache(maxsize=512)
def _fine_matrix(zoom: float, side: int) -> np.ndarray:
    """(side, side): ``matrix @ x @ matrix.T`` is x zoomed by ``zoom`` (:func:`_zoom_matrix`), then blurred by
    :data:`FINE_SIGMA` as ``gaussian_filter`` blurs, edges repeated. Cached: the second stage's zooms are few."""
    blur = np.asarray(gaussian_filter(np.eye(side), (FINE_SIGMA, 0), mode="nearest"))
    return blur if zoom == 1.0 else blur @ _zoom_matrix(zoom, side)


def _whole_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = x.reshape(len(x), -1) - x.reshape(len(x), -1).mean(axis=1, keepdims=True)
    y = y.reshape(len(y), -1) - y.reshape(len(y), -1).mean(axis=1, keepdims=True)
    norm = np.sqrt(np.einsum("ij,ij->i", x, x) * np.einsum("ij,ij->i", y, y))
    return np.einsum("ij,ij->i", x, y) / np.where(norm > 0, norm, 1.0)


def _zooms_near(zoom: float) -> list[float]:
    """The second stage's zooms for a pair found through ``zoom`` (:data:`FINE_SPAN`, :data:`FINE_STEP`)."""
    steps = round(FINE_SPAN / FINE_STEP)
    return sorted({round(z, 4) for z in (zoom + FINE_STEP * k for k in range(-steps, steps + 1))
                   if 1.0 <= z <= FINE_MAX_ZOOM})


def fine_correlations(a_fine: np.ndarray, b_fine: np.ndarray, mirror: np.ndarray,
                      a_zoom: float = 1.0, b_zoom: float = 1.0) -> np.ndarray:
    """Per pair (row k of ``a_fine`` and of ``b_fine``, ``b`` mirrored where ``mirror``), found by the first stage
    through ``a_zoom`` of ``a`` or ``b_zoom`` of ``b``: the best correlation of the two whole pictures, each
    blurred after the zoom and without a :data:`FINE_BORDER` edge, over zooms near the view's on its side
    (both sides for a plain view: :func:`_zooms_near`), then refined around each pair's best
    (:data:`FINE_REFINE`): a crop's zoom registered to 0.1 %."""
    side = a_fine.shape[-1]
    b_fine = np.where(mirror[:, None, None], b_fine[:, :, ::-1], b_fine)
    edge = max(1, round(FINE_BORDER * side / FINE))
    inner = (slice(None), slice(edge, side - edge), slice(edge, side - edge))

    def seen(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
        return np.asarray((matrix @ x @ np.swapaxes(matrix, -1, -2))[inner])

    a_plain, b_plain = seen(a_fine, _fine_matrix(1.0, side)), seen(b_fine, _fine_matrix(1.0, side))
    best, best_zoom = _whole_correlation(a_plain, b_plain), np.ones(len(a_fine))
    zoom_b = np.zeros(len(a_fine), dtype=bool)  # which image the best zoom is of
    plain = a_zoom == b_zoom == 1.0
    for on_b, centre in ((False, a_zoom), (True, b_zoom)):
        if not plain and centre == 1.0:  # the view zoomed the other image
            continue
        for zoom in _zooms_near(PLAIN_CENTRE if plain else centre):
            if zoom == 1.0:
                continue
            matrix = _fine_matrix(zoom, side)
            correlation = (_whole_correlation(a_plain, seen(b_fine, matrix)) if on_b
                           else _whole_correlation(seen(a_fine, matrix), b_plain))
            better = correlation > best
            best, best_zoom = np.where(better, correlation, best), np.where(better, zoom, best_zoom)
            zoom_b = np.where(better, on_b, zoom_b)
    for offset in FINE_REFINE:
        zooms = np.round(np.clip(best_zoom + offset, 1.0, FINE_MAX_ZOOM + max(FINE_REFINE)), 4)
        matrices = np.stack([_fine_matrix(float(z), side) for z in zooms])
        of_a, of_b = np.flatnonzero(~zoom_b), np.flatnonzero(zoom_b)  # pairs whose best zoom is of a, of b
        if len(of_a):
            best[of_a] = np.maximum(best[of_a], _whole_correlation(seen(a_fine[of_a], matrices[of_a]), b_plain[of_a]))
        if len(of_b):
            best[of_b] = np.maximum(best[of_b], _whole_correlation(a_plain[of_b], seen(b_fine[of_b], matrices[of_b])))
    return best


def confirm_pairs(a: Prints, b: Prints, pairs: Sequence[tuple[int, int, bool, float, float]]) -> np.ndarray:
    """:func:`fine_scores` at :data:`MIN_FINE_CORRELATION`: which candidate pairs are copies."""
    return fine_scores(a, b, pairs) >= MIN_FINE_CORRELATION


def fine_scores(a: Prints, b: Prints, pairs: Sequence[tuple[int, int, bool, float, float]]) -> np.ndarray:
    """The second stage (decisions 0142, 0147): per candidate pair (row of ``a``, row of ``b``, ``b`` mirrored, the
    zooms of ``a`` and ``b`` the first stage found it through), the correlation of its two images, decoded again
    (:attr:`Prints.decode`, only the rows of these pairs) and compared whole at :data:`FINE` px through their
    best zoom near the view's (:func:`fine_correlations`); a copy at :data:`MIN_FINE_CORRELATION`. The thumbnails'
    detail leaves out the coarse layout (distinct films of one anatomy share it) and cannot tell apart films of
    one template whose differences the 32 px thumbnail smooths away; the whole picture, finer, does. All 1.0
    (the first stage decides) when either side cannot decode."""
    if not pairs or a.decode is None or b.decode is None:
        return np.ones(len(pairs))
    a_rows, a_at = np.unique([p[0] for p in pairs], return_inverse=True)
    b_rows, b_at = np.unique([p[1] for p in pairs], return_inverse=True)
    a_fine, b_fine = _fine_of(a, a_rows), _fine_of(b, b_rows)
    if a_fine.shape[-1] != b_fine.shape[-1]:  # another geometry: compare at the smaller side
        side = min(a_fine.shape[-1], b_fine.shape[-1])
        a_fine, b_fine = (_area_mean(_area_mean(x, 2, side), 1, side) for x in (a_fine, b_fine))
    mirror = np.array([p[2] for p in pairs], dtype=bool)
    a_at, b_at = a_at.ravel(), b_at.ravel()
    correlation = np.zeros(len(pairs))
    views = [(float(p[3]), float(p[4])) for p in pairs]
    for a_zoom, b_zoom in dict.fromkeys(views):
        rows = np.flatnonzero([v == (a_zoom, b_zoom) for v in views])
        for i in range(0, len(rows), FINE_BATCH):
            part = rows[i:i + FINE_BATCH]
            correlation[part] = fine_correlations(a_fine[a_at[part]], b_fine[b_at[part]], mirror[part], a_zoom, b_zoom)
    return correlation


FINE_BATCH = 256
"""Images decoded, and pairs compared, at once by the second stage: its memory stays small whatever the count."""


def _fine_of(prints: Prints, rows: np.ndarray) -> np.ndarray:
    assert prints.decode is not None
    return np.concatenate([fine_pictures(prints.decode(rows[i:i + FINE_BATCH]))
                           for i in range(0, len(rows), FINE_BATCH)])


def dataset_decoder(dataset: Dataset, workers: int = 4) -> Callable[[np.ndarray], np.ndarray]:
    """:attr:`Prints.decode` for ``dataset``: rows -> their canonical images, decoded as stage 1 decodes them
    (:func:`crs.data.images.dataset_image`; threads: PIL releases the GIL)."""
    from crs.data.images import dataset_image

    def decode(rows: np.ndarray) -> np.ndarray:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return np.stack(list(pool.map(lambda r: dataset_image(dataset, int(r)).numpy(), rows)))
    return decode


def find_overlaps(a: Prints, b: Prints, a_name: str = "a", b_name: str = "b", block: int | None = None,
                  max_hamming: int = MAX_HAMMING, min_correlation: float = MIN_CORRELATION) -> list[Overlap]:
    """Every pair (image of ``a``, image of ``b``) that is a copy, sorted by ``b``'s id: ``exact`` (same
    bytes), ``near``, or through a view (:data:`VIEWS`: ``b`` flipped, either image a centred crop of the
    other, or both); a pair is reported once. Per pair, the view whose thumbnail detail correlates best (of
    ``b`` as it is, and of ``b`` mirrored) goes to the second stage (:func:`fine_scores`), and the one it
    confirms best is reported.

    Per view, ``block`` rows of ``b`` are compared with all of ``a`` at once (default:
    :data:`PAIRS_PER_BLOCK` pairs); details are computed for candidate rows only."""
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
    crop_at = (MIN_CROP_CANDIDATE if a.decode is not None and b.decode is not None
               else max(min_correlation, MIN_CROP_CORRELATION))
    best: dict[tuple[int, int, bool], tuple[float, float, float, Overlap]] = {}  # (b row, a row, mirror): its view
    hashes: dict[tuple[str, float, bool], np.ndarray] = {}
    for a_zoom, b_zoom, mirror, kind in VIEWS if len(a) and len(b) else ():
        a_hash = hashes.setdefault(("a", a_zoom, False), _view_hashes(a, a_zoom, False))
        b_hash = hashes.setdefault(("b", b_zoom, mirror), _view_hashes(b, b_zoom, mirror))
        for start in range(0, len(b), block):
            stop = min(start + block, len(b))
            distance = _popcount(np.bitwise_xor(b_hash[start:stop, None], a_hash[None, :]))
            rows, cols = np.nonzero(distance <= max_hamming)
            keep = [k for k, r in enumerate(rows.tolist()) if start + r not in exact_b]
            if not keep:
                continue
            rows, cols = rows[keep], cols[keep]
            a_rows, a_at = np.unique(cols, return_inverse=True)
            b_rows, b_at = np.unique(start + rows, return_inverse=True)
            a_detail = details(_view(a.thumbs[a_rows], a_zoom, False))
            b_detail = details(_view(b.thumbs[b_rows], b_zoom, mirror))
            correlation = np.einsum("ij,ij->i", b_detail[b_at.ravel()], a_detail[a_at.ravel()])
            for r, c, corr in zip(rows.tolist(), cols.tolist(), correlation.tolist(), strict=True):
                key = (start + r, c, mirror)
                if corr < (min_correlation if a_zoom == b_zoom == 1.0 else crop_at) or (
                        key in best and best[key][0] >= corr):
                    continue
                best[key] = (corr, a_zoom, b_zoom, Overlap(a_name, str(a.ids[c]), b_name, str(b.ids[start + r]),
                                                           kind, int(distance[r, c]), float(corr)))
    keys = list(best)
    scores = fine_scores(a, b, [(k[1], k[0], k[2], best[k][1], best[k][2]) for k in keys])
    chosen: dict[tuple[int, int], tuple[float, Overlap]] = {}  # a pair once: its view the second stage liked best
    for key, score in zip(keys, scores.tolist(), strict=True):
        if score >= MIN_FINE_CORRELATION and (key[:2] not in chosen or score > chosen[key[:2]][0]):
            chosen[key[:2]] = (score, best[key][3])
    found += [overlap for _, overlap in chosen.values()]
    found.sort(key=lambda o: (o.b_id, o.kind != "exact", o.distance, o.a_id))
    return found


def overlapping_ids(overlaps: Sequence[Overlap]) -> list[str]:
    """The ``b`` ids that overlap ``a``, each once, in order."""
    return list(dict.fromkeys(o.b_id for o in overlaps))


def overlap_report(source: str, overlaps: Sequence[Overlap], allow_overlap: bool) -> dict[str, Any]:
    """What goes with a shift target into its cache and the run's audit: the pairs found, and the target ids
    dropped from its evaluation (none when ``allow_overlap``)."""
    shared = overlapping_ids(overlaps)
    return {"source": source, "n_overlapping": len(shared), "allowed": bool(allow_overlap),
            "dropped": [] if allow_overlap else shared, "pairs": [o.to_dict() for o in overlaps]}
