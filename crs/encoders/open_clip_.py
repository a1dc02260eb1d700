"""The image tower of an open_clip model; the embedding is CLIP's projected image embedding.

Only the visual tower is built (``open_clip.model._build_vision_tower``), so no text tower, tokenizer
or text-model config is needed offline. Checkpoints are open_clip state dicts; keys under
``visual.`` are loaded strictly after stripping that prefix, and the text-tower keys are dropped by
rule (counted in the load summary). ``hf-hub:`` models carry their open_clip config in the spec's
``open_clip_config`` option, copied from the hub repository's ``open_clip_config.json``.
"""

from __future__ import annotations

from types import SimpleNamespace

from torch import nn

from crs.encoders.checkpoint import load_into, read_state_dict
from crs.encoders.encoder import Network
from crs.encoders.registry import EncoderError, EncoderSpec
from crs.encoders.weights import RANDOM, RANDOM_SEED, file_digest, resolve

HF_WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def _open_clip():
    try:
        import open_clip  # heavy (seconds to import): only when an open_clip encoder is built
    except ImportError as error:
        raise EncoderError("open_clip is not installed; `pip install open_clip_torch`") from error
    return open_clip


def model_config(spec: EncoderSpec) -> tuple[dict, str | None, dict]:
    """(open_clip model config, HF repo holding the weights, pretrained preprocess config)."""
    open_clip = _open_clip()
    target = spec.source_target
    if target.startswith("hf-hub:"):
        config = spec.options.get("open_clip_config")
        if config is None:
            raise EncoderError(f"encoder {spec.name!r}: an hf-hub source needs the 'open_clip_config' build option")
        return dict(config["model_cfg"]), target[len("hf-hub:"):], dict(config.get("preprocess_cfg", {}))
    model_name, _, pretrained = target.partition("/")
    config = open_clip.get_model_config(model_name)
    if config is None:
        raise EncoderError(f"open_clip has no model {model_name!r} (open_clip {open_clip.__version__})")
    pretrained_cfg = open_clip.get_pretrained_cfg(model_name, pretrained) if pretrained else {}
    if pretrained and not pretrained_cfg:
        raise EncoderError(f"open_clip has no pretrained tag {pretrained!r} for {model_name!r}")
    config = dict(config)
    if pretrained_cfg.get("quick_gelu"):
        config["quick_gelu"] = True
    hub = (pretrained_cfg.get("hf_hub") or "").strip("/") or None
    return config, hub, pretrained_cfg


def build_visual(spec: EncoderSpec) -> nn.Module:
    """The image tower at the spec's input size, with open_clip's own construction code."""
    open_clip = _open_clip()
    config, _, _ = model_config(spec)
    vision_cfg = dict(config["vision_cfg"])
    vision_cfg["image_size"] = spec.input_size
    visual = open_clip.model._build_vision_tower(config["embed_dim"], vision_cfg, quick_gelu=config.get("quick_gelu", False))
    trunk = getattr(visual, "trunk", None)
    if trunk is not None and hasattr(trunk, "set_input_size") and vision_cfg.get("timm_model_name"):
        trunk.set_input_size(img_size=spec.input_size)  # TimmModel builds its trunk at the default size
    return visual


def load_visual(visual: nn.Module, path, spec: EncoderSpec) -> str:
    """Load the ``visual.`` part of an open_clip checkpoint strictly; text keys are dropped by rule."""
    state_dict = read_state_dict(path)
    prefix = spec.options.get("visual_prefix", "visual.")
    visual_keys = {k: v for k, v in state_dict.items() if k.startswith(prefix)}
    if not visual_keys:
        raise EncoderError(f"{path}: no keys start with {prefix!r}; is this an open_clip checkpoint?")
    dropped = len(state_dict) - len(visual_keys)
    open_clip = _open_clip()
    # Resample the position-embedding grid when the input size differs from the checkpoint's.
    if prefix == "visual.":
        open_clip.model.resize_pos_embed(visual_keys, SimpleNamespace(visual=visual))
    report = load_into(visual, visual_keys, strip=(prefix,), source=f"{spec.source} ({path})")
    return f"{report.summary()}; {dropped} text-tower keys dropped by rule"


def build(spec: EncoderSpec, weights) -> Network:
    visual = build_visual(spec)
    if weights == RANDOM:
        return Network(visual, visual, f"random:{RANDOM_SEED}", "random weights (no pretrained tag)")
    _, hub, _ = model_config(spec)
    path = resolve(spec, weights, hf_repo=hub, hf_filenames=HF_WEIGHT_FILES)
    summary = load_visual(visual, path, spec)
    return Network(visual, visual, file_digest(path), summary)
