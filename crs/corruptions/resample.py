"""PIL BOX resampling as batched torch ops: shared by the float and uint8 forms of ``pixelate``.

A leaf module: ``ops`` and ``uint8_ops`` both read it, and it reads neither.
"""

from __future__ import annotations

import functools

import torch


def box_weights(source: int, target: int) -> torch.Tensor:
    """(target, source) matrix of PIL BOX resampling: each output averages the input it covers.

    Output cell j covers input span [j * source / target, (j + 1) * source / target); an input
    pixel contributes the fraction of it inside that span. (``F.interpolate(mode="area")`` rounds
    the spans to whole pixels instead, which made pixelate blockier than ImageNet-C's.)
    """
    edges = torch.arange(target + 1, dtype=torch.float64) * source / target
    left, right = edges[:-1, None], edges[1:, None]
    pixel = torch.arange(source, dtype=torch.float64)[None, :]
    overlap = (torch.minimum(right, pixel + 1) - torch.maximum(left, pixel)).clamp(min=0)
    return (overlap / overlap.sum(dim=1, keepdim=True)).float()


def box_taps(source: int, target: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`box_weights` as taps: (target, m) input indices and weights, m = most inputs per output.

    Each output cell covers a few neighbouring inputs, so gathering those (zero-weight padding for
    shorter spans) is a handful of passes where the dense matrix product was a full GEMM.
    """
    weights = box_weights(source, target)
    covered = weights > 0
    first = covered.float().argmax(dim=1)
    span = int(covered.sum(dim=1).max())
    index = (first[:, None] + torch.arange(span)[None, :]).clamp(max=source - 1)
    tap_weights = weights.gather(1, index) * (first[:, None] + torch.arange(span)[None, :] < source)
    return index, tap_weights


@functools.lru_cache(maxsize=64)
def _cached_box_taps(source: int, target: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`box_taps` once per (source, target): building it cost 10 µs per image per pass at batch 16."""
    return box_taps(source, target)


def box_resample(x: torch.Tensor, dim: int, target: int) -> torch.Tensor:
    """BOX-resample along ``dim`` (-2 rows or -1 columns): one gather, multiply and add per tap.

    Columns run as rows of the transposed image (whole-row copies instead of strided gathers);
    products are made in place. Shared by the float and uint8 forms of :func:`pixelate`.
    """
    index, weights = _cached_box_taps(x.shape[dim], target)
    index, weights = index.to(x.device), weights.to(x.device, x.dtype)
    rows = x if dim == -2 else x.transpose(-1, -2).contiguous()
    out = rows.index_select(-2, index[:, 0]).mul_(weights[:, 0, None])
    for tap in range(1, index.shape[1]):
        out.add_(rows.index_select(-2, index[:, tap]).mul_(weights[:, tap, None]))
    return out if dim == -2 else out.transpose(-1, -2)
