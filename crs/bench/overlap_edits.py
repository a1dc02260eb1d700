"""What the duplicate check finds: edited copies found, and false pairs among distinct images, per image family.

``python -m crs.bench.overlap_edits [--images 40] [--size 256] [--image-size 224]``

Five generated families of ``--images`` pictures of ``--size`` px: ``structured`` (gradient, ellipses,
stripes: :func:`crs.bench.overlap_cost.picture`), ``texture`` (smoothed colour noise), and the synthetic
generator's ``dermoscopy``, ``fundus`` and ``chest`` drawings (:mod:`crs.data.synthetic`: one anatomy,
one layout, so distinct pictures look alike; chest ones one finding pattern in six, written as JPEG
at quality 90, which smooths away the noise that tells them apart). Each picture is saved as JPEG
(quality 90) and, edited, as JPEG at quality 85: cropped by 2, 3, 4 and 5 % per side, flipped left to
right, flipped and cropped by 4 %. Every edited set is compared with the originals by
:func:`crs.data.overlap.find_overlaps` on prints of stage 1's canonical decode (``--image-size``; crop
for the colour families, pad for chest). Per family and edit: copies found (of ``--images``), the
kind, and the pairs that join an edited picture to another original (false); ``distinct`` is the
originals against themselves (pairs of two different pictures: false).
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

from crs.bench.overlap_cost import picture
from crs.data import synthetic
from crs.data.fit import fit_square
from crs.data.overlap import Prints, find_overlaps, image_prints

FAMILIES = ("structured", "texture", "dermoscopy", "fundus", "chest")
FIT = {"chest": "pad"}


def family(name: str, n: int, size: int) -> list[Image.Image]:
    """``n`` distinct pictures of one family."""
    out = []
    for i in range(n):
        if name == "structured":
            array = picture(1000 + i, size)
        elif name == "texture":
            rng = np.random.default_rng(i)
            noise = gaussian_filter(rng.standard_normal((size, size, 3)), (rng.uniform(1, 6),) * 2 + (0,))
            array = ((noise - noise.min()) / (noise.max() - noise.min()) * 255).astype(np.uint8)
        else:
            rng = np.random.default_rng([0, 1, 1, i])
            if name == "dermoscopy":
                drawn = synthetic._dermoscopy(rng, i % 8, size)
            elif name == "fundus":
                drawn = synthetic._fundus(rng, i % 5, size)
            else:
                drawn = synthetic._chest(rng, (np.arange(5) == i % 6).astype(float), size, "a")
            array = (np.clip(drawn, 0, 1) * 255).round().astype(np.uint8)
        out.append(Image.fromarray(array))
    return out


def _jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=quality)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def _crop(fraction: float) -> Callable[[Image.Image], Image.Image]:
    def edit(image: Image.Image) -> Image.Image:
        width, height = image.size
        dx, dy = round(width * fraction), round(height * fraction)
        return image.crop((dx, dy, width - dx, height - dy))
    return edit


def _flip(image: Image.Image) -> Image.Image:
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


EDITS: dict[str, Callable[[Image.Image], Image.Image]] = {
    "crop 2 %": _crop(0.02), "crop 3 %": _crop(0.03), "crop 4 %": _crop(0.04), "crop 5 %": _crop(0.05),
    "flip": _flip, "flip + crop 4 %": lambda image: _crop(0.04)(_flip(image)),
}


def _prints(images: list[Image.Image], size: int, fit: str, tag: str) -> Prints:
    pixels = np.stack([np.asarray(fit_square(image, size, fit).convert("RGB")).transpose(2, 0, 1) for image in images])
    phash, thumbs = image_prints(pixels)
    ids = np.array([f"{tag}{i}" for i in range(len(images))])
    return Prints(ids, ids, phash, thumbs, decode=lambda rows: pixels[rows])


def measure(name: str, n: int, size: int, image_size: int) -> list[dict[str, Any]]:
    originals = family(name, n, size)
    fit = FIT.get(name, "crop")
    base = _prints([_jpeg(image, 90) for image in originals], image_size, fit, "o")
    again = Prints(base.ids, np.char.add("again-", base.sha256), base.phash, base.thumbs, base.decode)
    pairs = find_overlaps(base, again)  # the same pictures, not taken for exact copies: every pair is looked at
    rows = [{"family": name, "edit": "distinct", "found": "", "false": sum(p.a_id != p.b_id for p in pairs)}]
    for edit, change in EDITS.items():
        edited = _prints([_jpeg(change(_jpeg(image, 90)), 85) for image in originals], image_size, fit, "e")
        pairs = find_overlaps(base, edited)
        right = [p for p in pairs if p.a_id[1:] == p.b_id[1:]]
        kinds = sorted({p.kind for p in right})
        rows.append({"family": name, "edit": edit, "found": f"{len({p.b_id for p in right})}/{n}",
                     "kind": "/".join(kinds), "false": len(pairs) - len(right)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    args = parser.parse_args()
    rows = [row for name in FAMILIES for row in measure(name, args.images, args.size, args.image_size)]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
