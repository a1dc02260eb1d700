"""Vision models from transformers (optional extra: ``pip install crs[hf]``).

``hf:ORG/REPO`` builds ``build_options["hf_class"]`` (for example ``SiglipVisionModel``). Random
weights come from the config in ``build_options["hf_config"]`` (copied from the repository's
config.json; nothing is downloaded). Real weights come from a local model folder (``--weights``,
``$CRS_WEIGHTS_DIR/<name>/`` or the Hugging Face cache) via ``from_pretrained(local_files_only=True)``,
never with ``trust_remote_code``. A vision tower inside a larger model (MedGemma) is read from the
folder's safetensors with its key prefix stripped explicitly (``state_prefix``) and loaded strictly.

Pooling (``build_options["output"]``): ``pooler_output`` (SigLIP's attention-pool head, DINOv2's
layer-normed CLS), ``image_embeds`` (CLIP's projected embedding) or ``mean_tokens`` (mean of the
final hidden states over all patch tokens, for towers without a pooling head).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from crs.encoders.checkpoint import load_into
from crs.encoders.encoder import Network
from crs.encoders.registry import EncoderError, EncoderSpec
from crs.encoders.weights import RANDOM, RANDOM_SEED, file_digest, resolve

OUTPUTS = ("pooler_output", "image_embeds", "mean_tokens")


def _transformers():
    try:
        import transformers  # optional extra crs[hf], and heavy
    except ImportError as error:
        raise EncoderError("this encoder needs transformers; install the optional extra: pip install 'crs[hf]'") from error
    return transformers


def _config(spec: EncoderSpec, config_class, values: dict):
    config = config_class(**values)
    config.image_size = spec.input_size
    return config


class PooledVision(nn.Module):
    """Wraps a transformers vision model so ``forward(pixel_values)`` returns the spec's pooled output."""

    def __init__(self, model: nn.Module, output: str, native_size: int):
        super().__init__()
        if output not in OUTPUTS:
            raise EncoderError(f"unknown transformers output {output!r}; choose one of {OUTPUTS}")
        self.model, self.output, self.native_size = model, output, native_size

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        kwargs = {}
        if pixel_values.shape[-1] != self.native_size and "interpolate_pos_encoding" in self.model.forward.__code__.co_varnames:
            kwargs["interpolate_pos_encoding"] = True
        out = self.model(pixel_values=pixel_values, **kwargs)
        if self.output == "mean_tokens":
            return out.last_hidden_state.mean(dim=1)
        return getattr(out, self.output)


def check_processor_config(spec: EncoderSpec, folder: Path) -> None:
    """Refuse a weights folder whose preprocessor_config.json disagrees with the spec's mean/std."""
    path = Path(folder) / "preprocessor_config.json"
    if not path.is_file():
        return
    config = json.loads(path.read_text())
    for key, ours in (("image_mean", spec.mean), ("image_std", spec.std)):
        theirs = config.get(key)
        if theirs is not None and any(abs(float(a) - float(b)) > 1e-6 for a, b in zip(theirs, ours, strict=False)):
            raise EncoderError(
                f"encoder {spec.name!r}: {path} has {key}={theirs} but the spec uses {list(ours)}; "
                "the weights folder is for a different model, or the spec needs fixing")


def _read_folder_state(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise EncoderError(f"{folder}: no .safetensors files; this loader reads safetensors only")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(load_file(str(file), device="cpu"))
    return state


def build(spec: EncoderSpec, weights) -> Network:
    transformers = _transformers()
    options = spec.options
    model_class = getattr(transformers, options["hf_class"])
    config_class = getattr(transformers, options["hf_config_class"])
    native_size = int(options["hf_config"].get("image_size", spec.input_size))
    if weights == RANDOM:
        model = model_class(_config(spec, config_class, options["hf_config"]))
        wrapped = PooledVision(model, options["output"], spec.input_size)
        return Network(wrapped, wrapped, f"random:{RANDOM_SEED}", "random weights (config only, no download)")
    folder = resolve(spec, weights, want_folder=True, hf_repo=spec.source_target)
    check_processor_config(spec, folder)
    prefix = options.get("state_prefix")
    if prefix:
        # A vision tower inside a larger model: build from the folder's vision_config, load by prefix.
        folder_config = json.loads((folder / "config.json").read_text())
        values = folder_config.get("vision_config", options["hf_config"])
        values = {k: v for k, v in values.items() if k not in ("model_type", "architectures", "transformers_version")}
        native_size = int(values.get("image_size", native_size))
        model = model_class(config_class(**values))
        state = _read_folder_state(folder)
        prefixes = (prefix,) if isinstance(prefix, str) else tuple(prefix)
        tower = {k: v for k, v in state.items() if k.startswith(prefixes)}
        report = load_into(model, tower, strip=prefixes, source=f"{spec.source} ({folder})")
        summary = f"{report.summary()}; {len(state) - len(tower)} non-vision keys dropped by rule"
    else:
        model, info = model_class.from_pretrained(folder, local_files_only=True, output_loading_info=True)
        missing = list(info.get("missing_keys", []))
        if missing:
            raise EncoderError(
                f"{spec.source} ({folder}): {len(missing)} weights missing from the checkpoint, e.g. {missing[:5]}; "
                f"{options['hf_class']} would leave them random. Use the matching model folder")
        native_size = int(getattr(model.config, "image_size", native_size))
        unused = list(info.get("unexpected_keys", []))
        summary = f"from_pretrained({folder}); {len(unused)} keys not used by {options['hf_class']} (e.g. a text tower)"
    wrapped = PooledVision(model, options["output"], native_size)
    return Network(wrapped, wrapped, file_digest(folder), summary)
