"""Where an encoder's weights would be loaded from, found without building the network (the pre-flight check).

:func:`locate_weights` asks the same question as each builder (:mod:`crs.encoders.timm_`,
``open_clip_``, ``hf``) with the same arguments to :func:`crs.encoders.weights.resolve`, so it
raises the same :class:`~crs.encoders.weights.WeightsNotFoundError`, but builds nothing: a spec of
twelve large encoders is checked in a second, not in minutes of model construction.
"""

from __future__ import annotations

import os
from pathlib import Path

from crs.encoders import open_clip_, timm_
from crs.encoders.registry import EncoderSpec
from crs.encoders.weights import RANDOM, resolve


def locate_weights(spec: EncoderSpec, weights: str | os.PathLike | None) -> Path | None:
    """The local weights file or folder ``create(spec, weights)`` would load; None when it needs none.

    Random weights, baselines and python sources need no file. Raises
    :class:`~crs.encoders.weights.WeightsNotFoundError` naming the file expected and where to get it.
    """
    if weights is not None and str(weights) == RANDOM:
        return None
    kind = spec.source_kind
    if kind == "timm":
        import timm

        config = timm.models.get_pretrained_cfg(spec.source_target)
        hub = getattr(config, "hf_hub_id", None) if config is not None else None
        return resolve(spec, weights, hf_repo=hub, hf_filenames=timm_.HF_WEIGHT_FILES)
    if kind == "checkpoint":
        return resolve(spec, weights)
    if kind == "open_clip":
        _, hub, _ = open_clip_.model_config(spec)
        return resolve(spec, weights, hf_repo=hub, hf_filenames=open_clip_.HF_WEIGHT_FILES)
    if kind == "hf":
        return resolve(spec, weights, want_folder=True, hf_repo=spec.source_target)
    return None  # baseline and python sources carry or load their own weights
