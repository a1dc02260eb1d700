"""Per-image random streams keyed by (image id, corruption, severity).

Every random draw a corruption makes for one image comes from a CPU ``torch.Generator`` (or, for
shot and impulse noise, a numpy ``PCG64``) seeded by a hash of the image id, the corruption name,
the severity and the suite version. A variant is
therefore a pure function of those keys: the same whatever the batch it sits in, its position,
the device, the number of devices or the shard. Draws are made on the CPU (CPU and CUDA generators
give different streams) and moved to the images' device afterwards.

Two kinds of stream exist. ``noise`` streams include the severity (fresh noise per severity, as the
issue asks). ``layout`` streams leave it out: where a corruption places something (motion angle,
light centre, hair paths, colour-shift sign), that placement is shared by all severities of one
image, so severity changes strength only and degradation is monotone image by image.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from crs.corruptions.version import SUITE_VERSION


def variant_seed(image_id: object, corruption: str, severity: int | None, stream: str) -> int:
    """A 63-bit seed from the suite version, image id, corruption, severity (or none) and stream."""
    key = f"{SUITE_VERSION}|{image_id}|{corruption}|{'' if severity is None else int(severity)}|{stream}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") & ((1 << 63) - 1)


def generator(image_id: object, corruption: str, severity: int | None, stream: str) -> torch.Generator:
    """A fresh CPU generator for one image's ``stream`` ("noise" or "layout")."""
    return torch.Generator(device="cpu").manual_seed(variant_seed(image_id, corruption, severity, stream))


def bit_generator(image_id: object, corruption: str, severity: int | None, stream: str) -> np.random.PCG64:
    """A fresh numpy PCG64 bit generator for one image's stream: for draws made from raw words.

    Used where numpy's draw is faster than torch's (64-bit words for the Poisson alias sampler,
    float32 uniforms for impulse noise); same key as :func:`generator`, a different stream.
    """
    return np.random.PCG64(variant_seed(image_id, corruption, severity, stream))


def per_image(
    ids: Sequence[object],
    corruption: str,
    severity: int | None,
    stream: str,
    draw,
) -> list[torch.Tensor]:
    """Call ``draw(generator)`` once per image id with that image's own generator."""
    return [draw(generator(image_id, corruption, severity, stream)) for image_id in ids]
