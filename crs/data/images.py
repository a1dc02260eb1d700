"""Decode an image file once into a uint8 tensor at the data set's canonical resolution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from crs.data.base import DataError


def load_image(path: Path | str, size: int) -> torch.Tensor:
    """Read ``path`` as RGB, resize to ``size`` x ``size`` (bilinear), return uint8 (3, size, size).

    Large JPEGs are decoded at reduced scale with PIL's ``draft`` (it only ever shrinks by a power
    of two, so the final resize still sets the exact size). A missing, truncated or unreadable file
    raises :class:`DataError` naming it.
    """
    path = Path(path)
    try:
        with Image.open(path) as image:
            image.draft("RGB", (size, size))
            image = image.convert("RGB")
            if image.size != (size, size):
                image = image.resize((size, size), Image.Resampling.BILINEAR)
            array = np.asarray(image, dtype=np.uint8)
    except FileNotFoundError as error:
        raise DataError(f"image not found: {path}") from error
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise DataError(f"image unreadable or truncated: {path} ({error})") from error
    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()
