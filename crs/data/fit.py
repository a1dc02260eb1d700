"""Make the square canonical image from a picture of any shape, by an explicit fit mode.

Every image is decoded once at its own aspect ratio; the fit mode says how it becomes the
``size`` x ``size`` canonical image that corruptions and encoders start from:

* ``crop``: scale so the shorter side is ``size``, keep the centred square (the borders of the
  longer side are lost; nothing is distorted),
* ``pad``: scale so the longer side is ``size``, centre it on a black square (nothing is lost or
  distorted; black bars carry no signal),
* ``squash``: scale each side to ``size`` independently: a 4:3 photo becomes 1:1 and a circle an
  ellipse. The old behaviour, kept for comparison; it distorts every non-square image.

Square pictures take the same single resize in every mode, so data sets of square images
(the synthetic benchmark) decode exactly as before. The default per modality is in
:data:`crs.data.base.DEFAULT_FIT`; the choice is recorded in
docs/decisions/0007-fit-modes-and-dicom-window.md.
"""

from __future__ import annotations

from PIL import Image

from crs.data.base import FIT_MODES, DataError

RESAMPLE = Image.Resampling.BILINEAR


def check_fit(fit: str) -> str:
    """``fit`` if it is a known mode, else a one-line error listing the modes."""
    if fit not in FIT_MODES:
        raise DataError(f"fit={fit!r} is not one of {FIT_MODES} (crop: centre square; pad: black bars; squash: distorts)")
    return fit


def fit_square(image: Image.Image, size: int, fit: str) -> Image.Image:
    """``image`` as ``size`` x ``size`` by ``fit``; the aspect ratio is kept except by ``squash``."""
    check_fit(fit)
    width, height = image.size
    if width == height or fit == "squash":
        return image if image.size == (size, size) else image.resize((size, size), RESAMPLE)
    if fit == "crop":
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        box = (left, top, left + side, top + side)
        return image.crop(box) if side == size else image.resize((size, size), RESAMPLE, box=box)
    longer = max(width, height)
    scaled = (max(1, round(width * size / longer)), max(1, round(height * size / longer)))
    inner = image if scaled == image.size else image.resize(scaled, RESAMPLE)
    canvas = Image.new(image.mode, (size, size), 0)
    canvas.paste(inner, ((size - scaled[0]) // 2, (size - scaled[1]) // 2))
    return canvas
