"""timm models and raw checkpoints loaded into timm architectures.

``timm:NAME`` builds ``timm.create_model(NAME, num_classes=0)``: the output is timm's own pooled
pre-logits feature (global average for CNNs, the final-norm CLS token for ViTs unless the spec's
``timm_kwargs`` choose another ``global_pool``). Weights are read by crs itself with
``torch.load(weights_only=True)`` or safetensors, passed through the architecture's own
``checkpoint_filter_fn`` where timm has one, and loaded strictly.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from crs.encoders.checkpoint import load_into, read_state_dict, strip_prefixes
from crs.encoders.encoder import Network
from crs.encoders.registry import EncoderError, EncoderSpec
from crs.encoders.weights import RANDOM, RANDOM_SEED, file_digest, resolve

HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _timm():
    try:
        import timm  # heavy (seconds to import): only when a timm encoder is built
    except ImportError as error:
        raise EncoderError("timm is not installed; `pip install timm`") from error
    return timm


def create_architecture(arch: str, spec: EncoderSpec) -> nn.Module:
    """``timm.create_model(arch, pretrained=False, num_classes=0)`` at the spec's input size."""
    timm = _timm()
    kwargs = dict(spec.options.get("timm_kwargs", {}))
    kwargs.setdefault("num_classes", 0)
    default_size = timm.models.get_pretrained_cfg(arch).input_size[-1] if timm.models.get_pretrained_cfg(arch) else None
    try:
        if spec.input_size != default_size:
            try:
                return timm.create_model(arch, pretrained=False, img_size=spec.input_size, **kwargs)
            except TypeError:  # convolutional nets take any size and have no img_size argument
                pass
        return timm.create_model(arch, pretrained=False, **kwargs)
    except RuntimeError as error:
        if "Unknown model" in str(error):
            raise EncoderError(f"timm has no model {arch!r} (timm {timm.__version__}); check the spec source") from error
        raise


def _filter_for(module: nn.Module):
    """The architecture's own checkpoint filter (format conversion, position-embedding resampling)."""
    return getattr(sys.modules.get(type(module).__module__), "checkpoint_filter_fn", None)


def _classifier_prefixes(module: nn.Module) -> tuple[str, ...]:
    classifier = getattr(module, "pretrained_cfg", {}).get("classifier") or ()
    names = (classifier,) if isinstance(classifier, str) else tuple(classifier)
    return tuple(f"{n}." for n in names)


def load_checkpoint(module: nn.Module, path: Path, spec: EncoderSpec, source: str) -> str:
    """Read ``path`` safely, apply the spec's strip / rename / drop rules, filter, and load strictly."""
    options = spec.options
    state_dict = read_state_dict(path, options.get("wrapper_key"))
    for old, new in options.get("rename_prefixes", ()):
        state_dict = {(new + k[len(old):] if k.startswith(old) else k): v for k, v in state_dict.items()}
    state_dict = strip_prefixes(state_dict, options.get("strip_prefixes", ()))
    converter = options.get("convert")
    if converter == "beit_to_timm":
        state_dict = beit_to_timm(state_dict)
    drop = tuple(options.get("drop_prefixes", ()))
    kept = {k: v for k, v in state_dict.items() if not (drop and k.startswith(drop))}
    dropped = len(state_dict) - len(kept)
    filter_fn = _filter_for(module)
    if filter_fn is not None:
        kept = filter_fn(kept, module)
    # A headless network (num_classes=0) does not load a classifier; said here, not silently skipped.
    report = load_into(module, kept, drop=_classifier_prefixes(module), source=f"{source} ({path})")
    return f"{report.summary()}; {dropped} dropped by the spec's drop_prefixes {list(drop)}"


def beit_to_timm(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """BEiT/CAE-style ViT keys (q_bias, v_bias, gamma_1, gamma_2) -> timm VisionTransformer keys."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        if key.endswith("attn.q_bias"):
            v_bias = state_dict[key.replace("q_bias", "v_bias")]
            out[key.replace("q_bias", "qkv.bias")] = torch.cat([value, torch.zeros_like(value), v_bias])
        elif key.endswith("attn.v_bias"):
            continue
        elif ".gamma_1" in key or ".gamma_2" in key:
            out[key.replace("gamma_1", "ls1.gamma").replace("gamma_2", "ls2.gamma")] = value
        else:
            out[key] = value
    return out


def build(spec: EncoderSpec, weights) -> Network:
    """``timm:NAME``: random weights, an explicit file, $CRS_WEIGHTS_DIR, or the HF cache."""
    name = spec.source_target
    module = create_architecture(name, spec)
    if weights == RANDOM:
        return Network(module, module, f"random:{RANDOM_SEED}", "random weights (pretrained=False)")
    pretrained_cfg = cast(dict[str, Any] | None, module.pretrained_cfg)  # timm sets it on every model
    hub_id = (pretrained_cfg or {}).get("hf_hub_id")
    path = resolve(spec, weights, hf_repo=hub_id, hf_filenames=HF_WEIGHT_FILES)
    summary = load_checkpoint(module, path, spec, source=spec.source)
    return Network(module, module, file_digest(path), summary)


def build_from_checkpoint(spec: EncoderSpec, weights) -> Network:
    """``checkpoint:ARCH``: a raw checkpoint (RETFound, PanDerm...) loaded into a timm architecture."""
    module = create_architecture(spec.source_target, spec)
    if weights == RANDOM:
        return Network(module, module, f"random:{RANDOM_SEED}", "random weights (pretrained=False)")
    path = resolve(spec, weights)
    summary = load_checkpoint(module, path, spec, source=spec.source)
    return Network(module, module, file_digest(path), summary)
