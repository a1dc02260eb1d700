"""Decode one DICOM file into 8-bit pixels, reading no tag but those that shape the pixels.

A PACS export is DICOM: 12-16 bit grey films (MONOCHROME1 stores white as 0), rescale slope and
intercept, a VOI LUT or a window that says how the film is meant to be seen, and compressed
transfer syntaxes. :func:`read_dicom` turns one file into what every other image becomes: an
8-bit array at its own geometry, decoded once. Grey films go through the DICOM display chain:

1. the modality LUT (Modality LUT Sequence, or rescale slope and intercept),
2. the first VOI LUT (VOI LUT Sequence, preferred) or window (centre, width, VOI LUT function),
   mapped from its declared output range to 0-255; without either, a robust window from the
   0.5th to the 99.5th percentile of the modality values,
3. MONOCHROME1 inverted (so bone is white in every film),

colour (RGB, YBR, palette colour) is scaled from its bit depth. Pixels that are not square
(pixel spacing, imager pixel spacing or pixel aspect ratio more than 1 % apart) are resampled to
square so the picture keeps its physical shape. Multi-frame objects and objects without pixel
data are refused with one line naming the file.

Privacy: the file is read with ``specific_tags`` set to :data:`PIXEL_TAGS`, so patient name, id,
dates and every other tag are never parsed; nothing but the pixel array leaves this module, and
no message names a tag's value (only the file, the transfer syntax, the frame count or the kind
of object).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crs.data.base import DataError

DICOM_SUFFIXES = (".dcm", ".dicom", ".dic")
INSTALL_HINT = "pip install 'crs[dicom]'"

# The only tags ever parsed: pixel data, its layout and the display chain (no patient, study or date tag).
PIXEL_TAGS = (
    "SOPClassUID", "SamplesPerPixel", "PhotometricInterpretation", "PlanarConfiguration", "NumberOfFrames",
    "Rows", "Columns", "BitsAllocated", "BitsStored", "HighBit", "PixelRepresentation",
    "PixelSpacing", "ImagerPixelSpacing", "PixelAspectRatio",
    "RescaleIntercept", "RescaleSlope", "RescaleType", "ModalityLUTSequence",
    "VOILUTSequence", "WindowCenter", "WindowWidth", "VOILUTFunction",
    "RedPaletteColorLookupTableDescriptor", "GreenPaletteColorLookupTableDescriptor",
    "BluePaletteColorLookupTableDescriptor", "RedPaletteColorLookupTableData",
    "GreenPaletteColorLookupTableData", "BluePaletteColorLookupTableData",
    "SegmentedRedPaletteColorLookupTableData", "SegmentedGreenPaletteColorLookupTableData",
    "SegmentedBluePaletteColorLookupTableData",
    "ExtendedOffsetTable", "ExtendedOffsetTableLengths",
    "FloatPixelData", "DoubleFloatPixelData", "PixelData",
)
GREY = ("MONOCHROME1", "MONOCHROME2")
COLOUR = ("RGB", "YBR_FULL", "YBR_FULL_422", "YBR_RCT", "YBR_ICT", "PALETTE COLOR")
PERCENTILE_WINDOW = (0.5, 99.5)
# Pixels whose two spacings differ by more than this share are resampled to square.
SQUARE_PIXEL_TOLERANCE = 0.01


@dataclass(frozen=True)
class DicomProblem:
    """Why a DICOM file cannot be used: a kind ``crs datasets check`` groups by, and a PHI-free detail."""

    kind: str  # "unsupported transfer syntax" | "no pixel data" | "multi-frame" | "unsupported pixels" | "unreadable"
    detail: str


class DicomError(DataError):
    """A DICOM file crs cannot use; ``problem`` says which kind, for the data-set check."""

    def __init__(self, path: Path, problem: DicomProblem):
        super().__init__(f"DICOM {path}: {problem.kind}: {problem.detail}")
        self.problem = problem


def _pydicom() -> Any:
    # pydicom is an optional dependency (the `dicom` extra): imported only when a DICOM file is met.
    try:
        import pydicom
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise DataError(f"reading DICOM files needs pydicom: {INSTALL_HINT}") from None
    return pydicom


def looks_like_dicom(path: Path | str) -> bool:
    """True for a DICOM suffix or the ``DICM`` marker at byte 128 (PACS exports often have no suffix)."""
    path = Path(path)
    if path.suffix.lower() in DICOM_SUFFIXES:
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(132)
    except OSError:
        return False
    return len(head) == 132 and head[128:132] == b"DICM"


def _read(path: Path) -> Any:
    """The file's pixel-shaping tags only (:data:`PIXEL_TAGS`) and its file meta information."""
    pydicom = _pydicom()
    try:
        # force: files without the 128-byte preamble are still DICOM when the suffix says so.
        return pydicom.dcmread(path, specific_tags=list(PIXEL_TAGS), force=True)
    except FileNotFoundError:
        raise
    except Exception as error:  # pydicom raises many types for a damaged file; none carries PHI we pass on
        raise DicomError(path, DicomProblem("unreadable", type(error).__name__)) from None


def _transfer_syntax(ds: Any) -> Any:
    meta = getattr(ds, "file_meta", None)
    uid = meta.get("TransferSyntaxUID") if meta is not None else None
    if uid is None:
        from pydicom.uid import ImplicitVRLittleEndian

        return ImplicitVRLittleEndian
    return uid


def _screen(path: Path, ds: Any) -> None:
    """Refuse what cannot become one 8-bit picture, before any pixel is decoded."""
    if "PixelData" not in ds:
        if "FloatPixelData" in ds or "DoubleFloatPixelData" in ds:
            raise DicomError(path, DicomProblem("unsupported pixels", "float pixel data (a parametric map), not an image"))
        sop_class = getattr(ds.get("SOPClassUID"), "name", "")
        kind = f"a DICOM object ({sop_class})" if sop_class else "a DICOM object"
        raise DicomError(path, DicomProblem("no pixel data", f"{kind} without pixel data; list image files only"))
    frames = int(ds.get("NumberOfFrames") or 1)
    if frames > 1:
        raise DicomError(path, DicomProblem("multi-frame", f"{frames} frames; export one frame per file"))
    photometric = str(ds.get("PhotometricInterpretation", ""))
    if photometric not in GREY + COLOUR:
        raise DicomError(path, DicomProblem("unsupported pixels", f"photometric interpretation {photometric or 'missing'}"))
    syntax = _transfer_syntax(ds)
    from pydicom.pixels import get_decoder  # optional dependency, present once _read has run

    try:
        decoder = get_decoder(syntax)
    except NotImplementedError:
        raise DicomError(path, DicomProblem(
            "unsupported transfer syntax", f"{getattr(syntax, 'name', syntax)} has no pixel decoder in pydicom"
        )) from None
    if not decoder.is_available:
        raise DicomError(path, DicomProblem(
            "unsupported transfer syntax",
            f"{getattr(syntax, 'name', syntax)} needs a decoder plugin that is not installed: {INSTALL_HINT}",
        ))


def weighted_percentile(values: np.ndarray, counts: np.ndarray, q: tuple[float, ...]) -> np.ndarray:
    """``np.percentile`` (linear method) of the array holding each ``values[i]`` ``counts[i]`` times.

    Lets the percentile window be read from a histogram of the stored values instead of every
    pixel; the virtual index and the interpolation follow numpy's own formulas, so the result is
    numpy's (checked in the tests).
    """
    order = np.argsort(values, kind="stable")
    ordered, cumulative = values[order], np.cumsum(counts[order])
    n = int(cumulative[-1])
    virtual = (n - 1) * np.true_divide(np.asarray(q, dtype=np.float64), 100)
    below = np.floor(virtual)
    gamma = virtual - below
    a = ordered[np.searchsorted(cumulative, below, side="right")].astype(np.float64)
    b = ordered[np.searchsorted(cumulative, np.minimum(below + 1, n - 1), side="right")].astype(np.float64)
    return np.where(gamma >= 0.5, b - (b - a) * (1 - gamma), a + (b - a) * gamma)


def _window_range(values: np.ndarray, ds: Any, counts: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """The VOI output and its declared (low, high) display range; ``counts`` weighs ``values`` (a histogram)."""
    from pydicom.pixels import apply_voi, apply_windowing  # optional dependency, present once _read has run

    sequence = ds.get("VOILUTSequence")
    if sequence and sequence[0].get("LUTDescriptor") is not None and sequence[0].get("LUTData") is not None:
        depth = int(sequence[0].LUTDescriptor[2])
        return apply_voi(values, ds, 0), 0.0, float(2**depth - 1)
    if ds.get("WindowCenter") is not None and ds.get("WindowWidth") is not None:
        # The window's output range depends on bits stored, sign and rescale; pydicom's own
        # function maps -inf and +inf to its two ends, so the range is read, not re-derived.
        with np.errstate(over="ignore"):
            ends = apply_windowing(np.array([-np.inf, np.inf]), ds, 0)
        return apply_windowing(values, ds, 0), float(ends[0]), float(ends[1])
    if counts is None:
        low, high = np.percentile(values, PERCENTILE_WINDOW)
    else:
        low, high = weighted_percentile(np.asarray(values), counts, PERCENTILE_WINDOW)
    return values, float(low), float(high)


def _to_unit(values: np.ndarray, low: float, high: float) -> np.ndarray:
    if not high > low:
        return np.zeros(np.shape(values), dtype=np.float64)
    return np.clip((np.asarray(values, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


def _display(stored: np.ndarray, ds: Any, counts: np.ndarray | None = None) -> np.ndarray:
    from pydicom.pixels import apply_modality_lut  # optional dependency, present once _read has run

    shown, low, high = _window_range(apply_modality_lut(stored, ds), ds, counts)
    unit = _to_unit(shown, low, high)
    if str(ds.PhotometricInterpretation) == "MONOCHROME1":
        unit = 1.0 - unit
    return np.rint(unit * 255.0).astype(np.uint8)


def grey_to_uint8(stored: np.ndarray, ds: Any) -> np.ndarray:
    """Stored grey values -> 8-bit display values: modality LUT, VOI LUT or window, MONOCHROME1 inverted.

    Every step maps one stored value to one display value (the percentile window is fixed by the
    histogram first), so for integer pixels of up to 16 bits the chain runs once per stored level,
    into a lookup table, and the film is one gather: a 2,000 x 2,000 film costs milliseconds, not
    a dozen float64 passes over 4 million pixels.
    """
    if stored.dtype.kind not in "iu" or stored.dtype.itemsize > 2 or stored.size == 0:
        return _display(stored, ds)
    low = int(stored.min())
    offsets = stored.astype(np.int32) - low if stored.dtype.kind == "i" else stored - stored.dtype.type(low)
    counts = np.bincount(offsets.ravel())
    levels = (np.arange(len(counts)) + low).astype(stored.dtype)
    table = _display(levels, ds, counts)
    return table[offsets]


def colour_to_uint8(stored: np.ndarray, ds: Any) -> np.ndarray:
    """RGB (YBR already converted by pydicom) or palette colour -> 8-bit RGB."""
    if str(ds.PhotometricInterpretation) == "PALETTE COLOR":
        from pydicom.pixels import apply_color_lut

        rgb = apply_color_lut(stored, ds)
        depth = 8 if rgb.dtype == np.uint8 else 16
    else:
        rgb = stored
        depth = int(ds.get("BitsStored") or ds.get("BitsAllocated") or 8)
    if depth == 8 and rgb.dtype == np.uint8:
        return np.ascontiguousarray(rgb)
    return np.rint(_to_unit(rgb, 0.0, float(2**depth - 1)) * 255.0).astype(np.uint8)


def _column_stretch(ds: Any) -> float:
    """How much wider than tall one pixel is (1.0 for square pixels)."""
    for name in ("PixelSpacing", "ImagerPixelSpacing"):
        spacing = ds.get(name)
        if spacing is not None and len(spacing) == 2 and float(spacing[0]) > 0 and float(spacing[1]) > 0:
            return float(spacing[1]) / float(spacing[0])  # (row spacing, column spacing) in mm
    ratio = ds.get("PixelAspectRatio")
    if ratio is not None and len(ratio) == 2 and float(ratio[0]) > 0 and float(ratio[1]) > 0:
        return float(ratio[1]) / float(ratio[0])  # (vertical, horizontal) size of a pixel
    return 1.0


def _square_pixels(image: np.ndarray, stretch: float) -> np.ndarray:
    if abs(stretch - 1.0) <= SQUARE_PIXEL_TOLERANCE:
        return image
    from PIL import Image

    height, width = image.shape[:2]
    if stretch > 1:
        size = (max(1, round(width * stretch)), height)
    else:
        size = (width, max(1, round(height / stretch)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BILINEAR))


def read_dicom(path: Path | str) -> np.ndarray:
    """One DICOM image as uint8, (H, W) for grey or (H, W, 3) for colour, with square pixels.

    Raises :class:`DicomError` (a :class:`DataError`) naming the file for anything that is not a
    single decodable image, and ``FileNotFoundError`` for a missing file.
    """
    path = Path(path)
    return _decode(path, _read(path))


def _decode(path: Path, ds: Any) -> np.ndarray:
    try:
        _screen(path, ds)
        stored = ds.pixel_array
        if str(ds.PhotometricInterpretation) in GREY:
            if stored.ndim != 2:
                raise DicomError(path, DicomProblem("unsupported pixels", f"grey pixel array of shape {stored.shape}"))
            image = grey_to_uint8(stored, ds)
        else:
            image = colour_to_uint8(stored, ds)
        return _square_pixels(image, _column_stretch(ds))
    except DicomError:
        raise
    except Exception as error:  # damaged pixel data or layout tags; the type only, never a tag's value
        raise DicomError(path, DicomProblem("unreadable", f"pixels do not decode ({type(error).__name__})")) from None


def scan_dicom(path: Path | str, decode: bool = True) -> tuple[DicomProblem | None, str | None]:
    """(what stops this file from being used or None, sha256 of its stored pixel data or None).

    The digest covers the pixel data only, not the header, so two exports of one image (new UIDs,
    other dates) are found as one. ``decode`` also decodes the pixels (a truncated file fails
    there); without it only the layout and the transfer syntax's decoder are checked.
    """
    path = Path(path)
    try:
        ds = _read(path)
    except DicomError as error:
        return error.problem, None
    data = ds.get("PixelData")
    digest = hashlib.sha256(bytes(data)).hexdigest() if data is not None else None
    try:
        if decode:
            _decode(path, ds)
        else:
            _screen(path, ds)
    except DicomError as error:
        return error.problem, digest
    except Exception as error:  # a damaged layout tag (the type only, never its value)
        return DicomProblem("unreadable", type(error).__name__), digest
    return None, digest


def acquisition_kind(path: Path | str) -> tuple[str, bool] | None:
    """(DICOM Modality code, is grey) of one file, reading those two tags only; None if unreadable.

    Used by ``crs init`` to guess the data set's modality (OP: fundus photography, XC: external
    camera, CR/DX: radiographs); never stored anywhere.
    """
    pydicom = _pydicom()
    try:
        ds = pydicom.dcmread(path, specific_tags=["Modality", "PhotometricInterpretation"], force=True)
    except Exception:  # any damage: no hint from this file
        return None
    return str(ds.get("Modality", "") or ""), str(ds.get("PhotometricInterpretation", "")) in GREY
