"""Frozen image encoders: a registry of specs and one way to build them, ``create(name)``.

>>> encoder = create("resnet18", weights="random", input_size=64)
>>> encoder.embed(torch.rand(2, 3, 96, 96)).shape
torch.Size([2, 512])

The registry (``registry``) imports nothing that fills it: this package imports ``catalog`` (the
built-in specs register themselves on import) and ``plugins`` (installed packages' specs, read
before the first look-up), as timm's ``models/__init__`` imports its model modules.
"""

from crs.encoders import catalog, plugins  # noqa: F401  (they fill the registry on import)
from crs.encoders.checkpoint import CheckpointError, LoadReport
from crs.encoders.encoder import Encoder, Network
from crs.encoders.factory import create, create_text
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

__all__ = [
    "PUBLIC_KEYS", "RANDOM", "RANDOM_SEED", "CheckpointError", "Encoder", "EncoderError", "EncoderSpec",
    "LoadReport", "Network", "WeightsNotFoundError", "all_specs", "available", "create", "create_text", "get_spec",
    "register",
]
