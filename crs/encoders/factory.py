"""``create(name_or_spec, weights, device, input_size)``: the one way to build an encoder."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from crs.encoders import baseline, hf, open_clip_, python_, timm_
from crs.encoders.encoder import Encoder, Network
from crs.encoders.registry import EncoderError, EncoderSpec, get_spec
from crs.encoders.text import TextTower, TextTowerError, zero_shot_support
from crs.encoders.weights import RANDOM, RANDOM_SEED

# (spec, weights) -> the network; python sources may also hand back an updated spec.
Builder = Callable[[EncoderSpec, Any], Network | tuple[EncoderSpec, Network]]


BUILDERS: dict[str, Builder] = {
    "timm": timm_.build,
    "checkpoint": timm_.build_from_checkpoint,
    "open_clip": open_clip_.build,
    "hf": hf.build,
    "python": python_.build,
    "baseline": baseline.build,
}
"""Source kind -> builder. Each loader module imports its library (timm, open_clip, transformers) only when it builds."""


def with_input_size(spec: EncoderSpec, input_size: int | None) -> EncoderSpec:
    """``spec`` at another network input resolution (``pre_resize`` scaled with it); None keeps it."""
    if input_size is None or input_size == spec.input_size:
        return spec
    pre_resize = None if spec.pre_resize is None else max(
        int(input_size), int(round(spec.pre_resize * input_size / spec.input_size)))
    return dataclasses.replace(spec, input_size=int(input_size), pre_resize=pre_resize)


def create(
    name_or_spec: str | EncoderSpec,
    weights: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
    input_size: int | None = None,
    precision: str = "auto",
) -> Encoder:
    """Build a frozen encoder.

    ``weights``: ``None`` finds local weights (``$CRS_WEIGHTS_DIR`` or the Hugging Face cache) and
    fails with a message naming the file expected; a path uses that file or folder; ``"random"``
    builds deterministic random weights (seed ``RANDOM_SEED``) without any download.
    ``input_size`` overrides the network input resolution (for fast CPU runs); it changes the spec,
    so it changes the cache fingerprint. ``precision="float64"`` (CPU only) runs the module and the
    preprocessing in float64 (``[extract] precision``, decision 0176); it enters the fingerprint too.
    """
    spec = get_spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    if not isinstance(spec, EncoderSpec):
        raise EncoderError(f"expected an encoder name or EncoderSpec, got {type(name_or_spec).__name__}")
    spec = with_input_size(spec, input_size)
    if weights is not None and str(weights) != RANDOM:
        weights = Path(weights)
    build = BUILDERS.get(spec.source_kind)
    if build is None:
        raise EncoderError(f"no loader for source kind {spec.source_kind!r}; known: {sorted(BUILDERS)}")
    # Fixed seed around construction: random weights are identical on every run and machine.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        built = build(spec, weights)
    if isinstance(built, tuple):  # python sources may update the spec (their own preprocessing)
        spec, network = built
    else:
        network = built
    return Encoder(spec, network, device, precision)


def create_text(
    name_or_spec: str | EncoderSpec,
    weights: str | os.PathLike | None = None,
    tokenizer: str | os.PathLike | None = None,
) -> TextTower:
    """Build the text tower of a vision-language entry, from the same weights as its image tower.

    ``weights``: as for :func:`crs.encoders.create` (``"random"`` builds seeded random weights and
    the checkpoint-free default scale and bias). ``tokenizer``: a folder with the tokenizer files;
    default, the weights folder (open_clip models with their BPE vocabulary need none).
    """
    spec = get_spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    support = zero_shot_support(spec)
    if not support.available:
        raise TextTowerError(f"encoder {spec.name!r} cannot be scored zero-shot: {support.reason}")
    weights_arg = weights if weights is None or str(weights) == RANDOM else Path(weights)
    tokenizer_arg = None if tokenizer is None else Path(tokenizer)
    if tokenizer_arg is not None and not tokenizer_arg.is_dir():
        raise TextTowerError(f"encoder {spec.name!r}: tokenizer folder {tokenizer_arg} does not exist")
    kind = spec.text_options["kind"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        if kind == "open_clip":
            return open_clip_.build_text(spec, weights_arg, tokenizer_arg)
        if kind == "hf":
            return hf.build_text(spec, weights_arg, tokenizer_arg)
    raise TextTowerError(f"encoder {spec.name!r}: unknown text tower kind {kind!r}; use 'open_clip' or 'hf'")
