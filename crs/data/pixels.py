"""Map every pixel format a loader may meet onto the 8-bit range the encoders' inputs start from.

PIL opens a 16-bit grey PNG or TIFF as mode ``I;16`` (or ``I``); ``convert("RGB")`` then clips
every value above 255, so a film comes out nearly white. The rule here (decision 0045):

- 8-bit modes (``L``, ``RGB``, ``P``, ``CMYK``, ``YCbCr``, ``1`` ...) convert as PIL converts them;
  an alpha channel (``LA``, ``RGBA``, ``PA``, palette transparency) is dropped, the stored colour
  kept (as before this module existed, so 8-bit caches are unchanged).
- Unsigned integer grey (``I;16``, ``I;16B``, ``I;16L``, ``I;16N``, and ``I`` from PNG, PPM or an
  unsigned TIFF) is scaled by the maximum of its bit depth, ``round(v * 255 / (2**bits - 1))``:
  the full range of the type, never the image's own minimum and maximum (that would change
  contrast per image) and never clipped. The bit depth is the file's (TIFF ``BitsPerSample``;
  16 for PNG and PPM, whose ``I`` images hold 16-bit samples).
- Float grey (``F``) is taken as intensities in [0, 1] and scaled by 255.
- Anything else, or values outside the range the rule assumes (negative integers, floats outside
  [0, 1] or not finite), is refused with a :class:`DataError` naming the file: there is no
  faithful 8-bit picture to make of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from crs.data.base import DataError

# Modes PIL converts to RGB faithfully: 8 bits per sample (alpha, where present, is dropped).
EIGHT_BIT_MODES = frozenset({"1", "L", "P", "PA", "LA", "La", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr"})
UNSIGNED_16_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N"})
GREY_MODES = frozenset({"1", "L", "LA", "La"}) | UNSIGNED_16_MODES | {"I", "F"}
FIX = "convert it to an 8- or 16-bit grey or 8-bit colour PNG"


def bit_depth(image: Image.Image) -> int:
    """Bits per sample of ``image`` as the file stores it (what the scaling divides by)."""
    if image.mode == "1":
        return 1
    if image.mode in UNSIGNED_16_MODES:
        return 16
    if image.mode in ("I", "F"):
        tags = getattr(image, "tag_v2", None)
        if tags is not None and 258 in tags:  # TIFF BitsPerSample
            value = tags[258]
            return int(value[0] if isinstance(value, tuple) else value)
        return 16 if image.mode == "I" and image.format in ("PNG", "PPM") else 32
    return 8


def describe(image: Image.Image) -> str:
    """``mode, N-bit`` as `crs datasets check` lists it, e.g. ``I;16 16-bit``."""
    return f"{image.mode} {bit_depth(image)}-bit"


def _signed_tiff(image: Image.Image) -> bool:
    tags = getattr(image, "tag_v2", None)
    if tags is None or 339 not in tags:  # TIFF SampleFormat: 1 unsigned, 2 signed, 3 float
        return False
    value = tags[339]
    return int(value[0] if isinstance(value, tuple) else value) == 2


def to_eight_bit(image: Image.Image, path: Path | str, grey_ok: bool = False) -> Image.Image:
    """``image`` (loaded) as an 8-bit picture: mode ``RGB``, or ``L`` for grey ones when ``grey_ok``.

    Raises :class:`DataError` naming ``path`` for a mode or value range with no faithful mapping.
    """
    mode = image.mode
    if mode in EIGHT_BIT_MODES:
        if mode in ("1", "L", "LA", "La") and grey_ok:
            return image.convert("L")
        if mode == "P" and "transparency" in image.info:
            image = image.convert("RGBA")  # PIL's documented route for palette transparency; alpha then dropped
        return image.convert("RGB")
    if mode in UNSIGNED_16_MODES or mode == "I":
        bits = bit_depth(image)
        values = np.asarray(image).astype(np.int64)
        top = (1 << bits) - 1
        if mode == "I" and (_signed_tiff(image) or values.min(initial=0) < 0):
            raise DataError(f"image {path}: signed integer pixels (mode {mode}, {bits}-bit) have no faithful 8-bit "
                            f"mapping; {FIX}")
        if values.max(initial=0) > top:
            raise DataError(f"image {path}: values up to {values.max()} exceed its {bits}-bit range; {FIX}")
        grey = ((values * 255 + top // 2) // top).astype(np.uint8)
    elif mode == "F":
        values = np.asarray(image, dtype=np.float64)
        if not np.isfinite(values).all() or values.min(initial=0.0) < 0.0 or values.max(initial=0.0) > 1.0:
            low, high = float(np.nanmin(values)), float(np.nanmax(values))
            raise DataError(f"image {path}: float pixels in [{low:g}, {high:g}], not intensities in [0, 1]; "
                            f"crs cannot know their range; {FIX}")
        grey = np.rint(values * 255.0).astype(np.uint8)
    else:
        raise DataError(f"image {path}: mode {mode} has no faithful 8-bit mapping in crs; {FIX}")
    picture = Image.fromarray(grey)  # mode L
    return picture if grey_ok else picture.convert("RGB")
