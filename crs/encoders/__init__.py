"""Frozen image encoders: a registry of specs and one way to build them, ``create(name)``.

>>> encoder = create("resnet18", weights="random", input_size=64)
>>> encoder.embed(torch.rand(2, 3, 96, 96)).shape
torch.Size([2, 512])

The registry (``registry``) imports nothing that fills it: this package imports ``catalog`` (the
built-in specs register themselves on import) and ``plugins`` (installed packages' specs, read
before the first look-up), as timm's ``models/__init__`` imports its model modules. The names that
build networks (``create``, ``Encoder``, ...) load torch on first access, not on import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crs.encoders import catalog, plugins  # noqa: F401  (they fill the registry on import)
from crs.encoders.registry import (
    PUBLIC_KEYS,
    EncoderError,
    EncoderSpec,
    all_specs,
    available,
    get_spec,
    register,
)
from crs.encoders.weights import RANDOM, RANDOM_SEED, WeightsNotFoundError
from crs.lazy import lazy_exports

if TYPE_CHECKING:
    from crs.encoders.checkpoint import CheckpointError, LoadReport
    from crs.encoders.encoder import Encoder, Network
    from crs.encoders.factory import create, create_text

# what builds or loads a network imports torch (about 2 CPU s a process): loaded on first access, so
# reading the registry (reports, the probe stage, `crs encoders list`) does not pay it
_WITH_TORCH = {
    "CheckpointError": "crs.encoders.checkpoint",
    "LoadReport": "crs.encoders.checkpoint",
    "Encoder": "crs.encoders.encoder",
    "Network": "crs.encoders.encoder",
    "create": "crs.encoders.factory",
    "create_text": "crs.encoders.factory",
}

__all__ = [
    "PUBLIC_KEYS", "RANDOM", "RANDOM_SEED", "CheckpointError", "Encoder", "EncoderError", "EncoderSpec",
    "LoadReport", "Network", "WeightsNotFoundError", "all_specs", "available", "create", "create_text", "get_spec",
    "register",
]


__getattr__, __dir__ = lazy_exports(__name__, _WITH_TORCH, __all__)
