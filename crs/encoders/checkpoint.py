"""Raw checkpoints: safe loading, explicit key-prefix stripping, and loud key mismatches.

Checkpoints load with ``torch.load(weights_only=True)`` (no pickled code runs) or safetensors.
Key prefixes (``module.``, ``model.``, ``encoder.``...) are stripped only where the spec names
them, keys the spec declares as not needed (an MAE decoder, a text tower) are dropped and counted,
and any other missing or unexpected key is an error that lists the keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from crs.encoders.registry import EncoderError

# Checkpoint wrappers seen in the wild: {"model": sd}, {"state_dict": sd}, {"teacher": sd}...
WRAPPER_KEYS = ("state_dict", "model", "model_state_dict", "module", "teacher", "student")


class CheckpointError(EncoderError):
    """A checkpoint file cannot be read, or its keys do not match the architecture."""


@dataclass(frozen=True)
class LoadReport:
    """What happened to the checkpoint's keys when it was loaded into a network."""

    loaded: int
    dropped: tuple[str, ...]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]

    def summary(self) -> str:
        return (f"loaded {self.loaded} tensors; dropped {len(self.dropped)} by rule; "
                f"missing {len(self.missing)}; unexpected {len(self.unexpected)}")


def read_state_dict(path: Path | str, wrapper_key: str | None = None) -> dict[str, torch.Tensor]:
    """Read a state dict from ``.safetensors`` or a torch file, unwrapping ``{"model": ...}`` style wrappers."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.suffix == ".safetensors":
        return dict(load_file(str(path), device="cpu"))
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # pickle errors carry the class that could not be loaded
        raise CheckpointError(
            f"cannot read {path} with torch.load(weights_only=True): {str(error).splitlines()[0]}; "
            "re-save it as a plain state dict (torch.save(model.state_dict(), ...)) or as safetensors"
        ) from error
    keys = (wrapper_key,) if wrapper_key else WRAPPER_KEYS
    while isinstance(obj, Mapping) and not _is_tensor_dict(obj):
        inner = next((obj[k] for k in keys if k in obj and isinstance(obj[k], Mapping)), None)
        if inner is None:
            raise CheckpointError(
                f"{path}: found no state dict; top-level keys are {sorted(obj)[:10]}, expected tensors "
                f"or one of {list(keys)}")
        obj = inner
    if not isinstance(obj, Mapping):
        raise CheckpointError(f"{path}: holds a {type(obj).__name__}, not a state dict")
    return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def _is_tensor_dict(obj: Mapping) -> bool:
    return len(obj) > 0 and all(isinstance(v, torch.Tensor) for v in obj.values())


def strip_prefixes(state_dict: Mapping[str, torch.Tensor], prefixes: Iterable[str]) -> dict[str, torch.Tensor]:
    """Remove the first matching prefix from every key (each prefix is tried in the given order)."""
    prefixes = tuple(prefixes)
    out: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        new_key = next((key[len(p):] for p in prefixes if key.startswith(p)), key)
        if new_key in out:
            raise CheckpointError(f"stripping prefixes {prefixes} maps two keys onto {new_key!r}")
        out[new_key] = value
    return out


def load_into(
    module: nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    *,
    strip: Iterable[str] = (),
    drop: Iterable[str] = (),
    allow_missing: Iterable[str] = (),
    source: str = "checkpoint",
) -> LoadReport:
    """Load ``state_dict`` into ``module`` strictly, after stripping and dropping by explicit rule.

    ``drop``: key prefixes (after stripping) that are deliberately not loaded, such as ``decoder``
    for an MAE checkpoint; ``allow_missing``: module key prefixes that may stay at their initial
    value (rare; stated in the spec). Anything else that does not match raises :class:`CheckpointError`.
    """
    state_dict = strip_prefixes(state_dict, strip)
    drop = tuple(drop)
    dropped = tuple(sorted(k for k in state_dict if drop and k.startswith(drop)))
    kept = {k: v for k, v in state_dict.items() if not (drop and k.startswith(drop))}
    expected = module.state_dict()
    allow_missing = tuple(allow_missing)
    missing = tuple(sorted(k for k in expected if k not in kept and not (allow_missing and k.startswith(allow_missing))))
    unexpected = tuple(sorted(k for k in kept if k not in expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{source}: {len(missing)} missing keys {_show(missing)} and {len(unexpected)} unexpected keys "
            f"{_show(unexpected)}; fix the spec's strip/drop prefixes or use the matching architecture")
    bad_shapes = [f"{k}: {tuple(v.shape)} vs {tuple(expected[k].shape)}" for k, v in kept.items()
                  if tuple(v.shape) != tuple(expected[k].shape)]
    if bad_shapes:
        raise CheckpointError(f"{source}: shape mismatch for {_show(tuple(bad_shapes))}; wrong architecture?")
    module.load_state_dict(kept, strict=False)
    return LoadReport(loaded=len(kept), dropped=dropped, missing=(), unexpected=())


def _show(keys: tuple[str, ...], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return f"[{shown}{', ...' if len(keys) > limit else ''}]"
