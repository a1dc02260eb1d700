"""Your own encoder: ``python:MODULE:FUNCTION``.

``FUNCTION(weights)`` receives ``None``, ``"random"`` or a local path, and returns
``(module, preprocessing)``: ``module(x)`` maps a preprocessed batch to float (B, dim);
``preprocessing`` is a dict of spec fields (``input_size``, ``mean``, ``std``, ``interpolation``,
``crop_pct``, ``resize_mode``, ``grayscale``) that override the registered spec, so the cache
fingerprint always reflects the preprocessing the function really uses. The weights digest is the
sha256 of the path when one is given, else of the module's state dict.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

from torch import nn

from crs.encoders.encoder import Network, state_digest
from crs.encoders.registry import EncoderError, EncoderSpec
from crs.encoders.weights import RANDOM, RANDOM_SEED, file_digest

PREPROCESSING_KEYS = ("input_size", "mean", "std", "interpolation", "crop_pct", "resize_mode", "grayscale", "pre_resize")


def load_function(target: str):
    module_name, _, function_name = target.partition(":")
    if not module_name or not function_name:
        raise EncoderError(f"python source {target!r} must look like 'python:package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise EncoderError(f"cannot import {module_name!r} for python source {target!r}: {error}") from error
    try:
        return getattr(module, function_name)
    except AttributeError:
        raise EncoderError(f"module {module_name!r} has no function {function_name!r}") from None


def build(spec: EncoderSpec, weights) -> tuple[EncoderSpec, Network]:
    function = load_function(spec.source_target)
    result = function(None if weights is None else str(weights))
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module)):
        raise EncoderError(f"{spec.source}: must return (torch.nn.Module, preprocessing dict), got {type(result).__name__}")
    module, preprocessing = result
    unknown = set(preprocessing) - set(PREPROCESSING_KEYS)
    if unknown:
        raise EncoderError(f"{spec.source}: unknown preprocessing keys {sorted(unknown)}; allowed: {PREPROCESSING_KEYS}")
    spec = dataclasses.replace(spec, **preprocessing)
    if weights == RANDOM:
        digest = f"random:{RANDOM_SEED}"
    elif weights is not None:
        digest = file_digest(Path(weights))
    else:
        digest = f"state:{state_digest(module)}"
    return spec, Network(module, module, digest, f"built by {spec.source}")
