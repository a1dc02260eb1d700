"""What a corruption operator needs besides pixels: a leaf module shared by ``ops`` and ``uint8_ops``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

REFERENCE_SIDE = 224


@dataclass(frozen=True)
class Context:
    """What an operator needs besides pixels: who the images are and how to scale and seed."""

    ids: Sequence[object]
    name: str
    severity: int
    height: int
    width: int
    device: torch.device
    grayscale: bool

    @property
    def scale(self) -> float:
        """Spatial constants are stated at 224 px; this maps them to the batch's side."""
        return min(self.height, self.width) / REFERENCE_SIDE
