"""An encoder's own preprocessing as batched torch ops, so it runs on the encoder's device.

Input: float (B, 3, H, W) in [0, 1] at the data set's canonical size (corruptions are applied
before this step, so a severity means the same for every encoder). Output: the tensor the network
expects. Resizes use ``antialias=True`` so downscaling matches PIL, which timm, open_clip and the
transformers image processors use at evaluation time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from crs.encoders.registry import EncoderError, EncoderSpec


def _resize(x: torch.Tensor, size: tuple[int, int], interpolation: str) -> torch.Tensor:
    if tuple(x.shape[-2:]) == size:
        return x
    if interpolation in ("bilinear", "bicubic"):
        return F.interpolate(x, size=size, mode=interpolation, align_corners=False, antialias=True)
    return F.interpolate(x, size=size, mode=interpolation)


def resize_shortest(x: torch.Tensor, shortest: int, interpolation: str) -> torch.Tensor:
    """Resize so the shorter side is ``shortest``, keeping the aspect ratio (torchvision ``Resize(int)``)."""
    height, width = x.shape[-2:]
    if height <= width:
        size = (shortest, max(1, int(shortest * width / height)))
    else:
        size = (max(1, int(shortest * height / width)), shortest)
    return _resize(x, size, interpolation)


def center_crop(x: torch.Tensor, size: int) -> torch.Tensor:
    """Centre crop to ``size`` x ``size``, with torchvision's rounding of the offsets."""
    height, width = x.shape[-2:]
    if height < size or width < size:
        raise EncoderError(f"cannot centre-crop {size} px from a {height}x{width} image; resize first")
    top = int(round((height - size) / 2.0))
    left = int(round((width - size) / 2.0))
    return x[..., top:top + size, left:left + size]


def resize_size(spec: EncoderSpec) -> int:
    """The shorter-side size before the crop, as timm computes it: floor(input_size / crop_pct)."""
    return int(spec.input_size / spec.crop_pct)


def preprocess(x: torch.Tensor, spec: EncoderSpec, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Resize, crop, and normalise a batch per ``spec`` (see :class:`EncoderSpec`) in ``dtype``
    (float64 for ``[extract] precision = "float64"``, decision 0176)."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise EncoderError(f"expected images of shape (B, 3, H, W), got {tuple(x.shape)}")
    if not torch.is_floating_point(x):
        raise EncoderError(f"expected float images in [0, 1], got dtype {x.dtype}; divide uint8 by 255")
    x = x.to(dtype)
    if spec.grayscale:
        x = x.mean(dim=1, keepdim=True).expand(-1, 3, -1, -1)
    if spec.pre_resize is not None:
        # Stands in for PIL's Lanczos resize of the stored film; antialiased bicubic is torch's closest.
        x = _resize(x, (spec.pre_resize, spec.pre_resize), "bicubic")
    if spec.resize_mode == "squash":
        x = _resize(x, (spec.input_size, spec.input_size), spec.interpolation)
    else:
        x = resize_shortest(x, resize_size(spec), spec.interpolation)
        x = center_crop(x, spec.input_size)
    mean = torch.tensor(spec.mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(spec.std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()
