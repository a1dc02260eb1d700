"""uint8 -> uint8 forms of :func:`ops.contrast` and :func:`ops.pixelate`, for decoded (uint8) batches.

``api`` hands a uint8 batch to these (through ``ops.UINT8_OPERATORS``) instead of converting it to
float, running the float operator and rounding the full-size result back. They give the float
path's bytes: :func:`pixelate_uint8` exactly; :func:`contrast_uint8` exactly in every sweep we ran,
with one level allowed where the float blend's per-pixel rounding could land on the other side
of a .5 boundary.

``ops`` imports this module to register these; what both need (:class:`Context`, the BOX
resampler) lives in the leaf modules ``context`` and ``resample``, so this module never reads ``ops``.
"""

from __future__ import annotations

import torch

from crs.corruptions.context import Context
from crs.corruptions.lazy import functional as _functional
from crs.corruptions.resample import box_resample


def _round_to_uint8(x: torch.Tensor) -> torch.Tensor:
    """Float [0, 1] -> uint8 as ``api`` rounds: clamp, x 255, half to even (int32 route: faster)."""
    return x.clamp(0, 1).mul_(255).round_().to(torch.int32).to(torch.uint8)


# ------------------------------------------------------------------------------------- contrast
def contrast_uint8(source: torch.Tensor, factor: float, context: Context) -> torch.Tensor:
    """:func:`ops.contrast` on uint8: one 256-entry table per image, all applied in one gather.

    Given an image's mean grey the blend ``mean + factor (x - mean)`` is a function of the value
    alone, so each image gets its own table. The mean is torchvision's (the grey weights for 3
    channels, the channel itself for 1), reduced over the same float tensor the float path
    builds, so it is the same float32 number; the tables run the same blend on the 256 levels and
    round as ``api`` does. The B tables sit in one (B * 256,) tensor indexed by
    ``level + 256 * image``: one gather for the batch instead of five full-size float passes.
    """
    batch = source.shape[0]
    x = source.to(torch.float32).div_(255)  # api._to_float: same values, same layout
    grey = x if x.shape[1] == 1 else _functional().rgb_to_grayscale(x)
    mean = grey.mean(dim=(-3, -2, -1)).view(batch, 1)
    del x, grey
    levels = torch.arange(256, dtype=torch.float32, device=source.device).div_(255).expand(batch, 256)
    # torchvision's _blend, operation for operation: image.mul(ratio).add_(mean, alpha=1 - ratio)
    tables = _round_to_uint8(levels.mul(factor).add_(mean, alpha=1.0 - factor))
    offsets = torch.arange(0, 256 * batch, 256, dtype=torch.int32, device=source.device)
    index = source.reshape(batch, -1).to(torch.int32).add_(offsets[:, None])
    return tables.view(-1).index_select(0, index.view(-1)).view(source.shape)


# ------------------------------------------------------------------------------------- pixelate
def nearest_exact_index(source: int, target: int, device: torch.device | None = None) -> torch.Tensor:
    """Source index of each of ``target`` outputs of ``F.interpolate(mode="nearest-exact")``, int64.

    ATen's ``nearest_neighbor_exact_compute_source_index``: ``min(floorf((j + 0.5) * scale),
    source - 1)``, ``scale = float(source) / target`` in float32; the product is exact in float64
    and ``floorf`` takes it rounded to float32.
    """
    scale = float(torch.tensor(source, dtype=torch.float32) / target)
    position = (torch.arange(target, dtype=torch.float64) + 0.5).mul_(scale).float()
    return position.floor_().long().clamp_(max=source - 1).to(device)


def upsample_nearest_exact(small: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``F.interpolate(small, (height, width), mode="nearest-exact")`` for a contiguous uint8 batch.

    A gather for the columns on the small image, then whole rows copied by ``index_select``;
    ``F.interpolate`` on uint8 ran 2-4x slower on CPU.
    """
    columns = nearest_exact_index(small.shape[-1], width, small.device)
    wide = small.gather(-1, columns.expand(*small.shape[:-1], width))
    return wide.index_select(-2, nearest_exact_index(small.shape[-2], height, small.device))


def pixelate_uint8(source: torch.Tensor, factor: float, context: Context) -> torch.Tensor:
    """:func:`ops.pixelate` on uint8: round the small image, then upsample bytes; the same bytes.

    The BOX downsample runs the float path's arithmetic on the float path's values, so the small
    image is bit for bit the float path's. Nearest upsampling only copies values, so rounding the
    small image first gives the bytes the float path gets by rounding the full-size one, and the
    full-size work (upsample, clamp, x 255, round, convert) becomes a byte gather.
    """
    height, width = source.shape[-2:]
    x = source.to(torch.float32).div_(255)  # api._to_float
    rows = box_resample(x, -2, max(1, int(height * factor)))
    del x
    small = _round_to_uint8(box_resample(rows, -1, max(1, int(width * factor))).contiguous())
    return upsample_nearest_exact(small, height, width)
