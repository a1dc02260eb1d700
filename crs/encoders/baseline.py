"""Non-neural baselines: a floor any learned encoder should beat, with no weights to fetch."""

from __future__ import annotations

import torch
from torch import nn

from crs.encoders.catalog import PIXEL_STATS_BINS, PIXEL_STATS_DIM, PIXEL_STATS_GRID
from crs.encoders.encoder import Network
from crs.encoders.registry import EncoderError, EncoderSpec

__all__ = ["PIXEL_STATS_BINS", "PIXEL_STATS_DIM", "PIXEL_STATS_GRID", "PixelStats", "build"]


class PixelStats(nn.Module):
    """Per-channel mean and std on a 4x4 grid of cells, plus an 8-bin per-channel histogram.

    Expects the spec's preprocessing with mean 0 and std 1, so inputs are intensities in [0, 1].
    """

    def __init__(self, grid: int = PIXEL_STATS_GRID, bins: int = PIXEL_STATS_BINS):
        super().__init__()
        self.grid, self.bins = grid, bins

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        if height % self.grid or width % self.grid:
            raise EncoderError(f"pixel_stats needs a size divisible by {self.grid}, got {height}x{width}")
        cells = x.reshape(batch, channels, self.grid, height // self.grid, self.grid, width // self.grid)
        cells = cells.permute(0, 1, 2, 4, 3, 5).reshape(batch, channels, self.grid * self.grid, -1)
        mean = cells.mean(dim=-1)
        std = cells.std(dim=-1, unbiased=False)
        bin_index = (x.clamp(0, 1) * self.bins).long().clamp(max=self.bins - 1).flatten(2)
        histogram = torch.zeros(batch, channels, self.bins, dtype=x.dtype, device=x.device)
        histogram.scatter_add_(2, bin_index, torch.ones_like(bin_index, dtype=x.dtype))
        histogram = histogram / bin_index.shape[-1]
        return torch.cat([mean.flatten(1), std.flatten(1), histogram.flatten(1)], dim=1)


BASELINES = {"pixel_stats": PixelStats}


def build(spec: EncoderSpec, weights) -> Network:
    try:
        module = BASELINES[spec.source_target]()
    except KeyError:
        raise EncoderError(f"unknown baseline {spec.source_target!r}; known: {sorted(BASELINES)}") from None
    return Network(module, module, weights_digest=f"baseline:{spec.source_target}:v1", load_summary="no weights")
