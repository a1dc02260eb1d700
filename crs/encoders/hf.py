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
import math
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from crs.encoders.checkpoint import load_into
from crs.encoders.encoder import Network
from crs.encoders.registry import EncoderError, EncoderSpec
from crs.encoders.text import TOKENIZER_FILES, TextTower, TextTowerError, digest_of, folder_digest
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


# --- the text tower (zero-shot) -------------------------------------------------------------------

TEXT_OUTPUTS = ("text_embeds", "pooler_output")
RANDOM_SCALE_BIAS = {"softmax": (math.log(1 / 0.07), 0.0), "sigmoid": (math.log(10.0), -10.0)}
"""The models' initial log scale and bias (CLIP: log 1/0.07; SigLIP: log 10 and -10): what random weights carry."""


def _hf_tokenizer(spec: EncoderSpec, folder: Path | None):
    transformers = _transformers()
    found = folder is not None and any((folder / name).is_file() for name in TOKENIZER_FILES)
    if not found:
        where = "no tokenizer folder was given" if folder is None else f"{folder} holds none of {list(TOKENIZER_FILES)}"
        raise TextTowerError(f"encoder {spec.name!r}: tokenizer missing ({where}); use the model's own folder "
                             "(tokenizer.json or vocab files beside config.json), or name a tokenizer folder")
    return transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def _scale_bias(folder: Path, link: str) -> tuple[float, float, str]:
    state = _read_folder_state(folder)
    if "logit_scale" not in state:
        raise TextTowerError(f"{folder}: no 'logit_scale' in its safetensors; zero-shot needs the full "
                             "image-text checkpoint (CLIPModel / SiglipModel), not a tower alone")
    scale = float(state["logit_scale"].float().exp())
    bias = float(state["logit_bias"].float()) if "logit_bias" in state else 0.0
    if link == "sigmoid" and "logit_bias" not in state:
        raise TextTowerError(f"{folder}: a sigmoid (SigLIP) checkpoint needs 'logit_bias'; none found")
    return min(scale, 100.0) if link == "softmax" else scale, bias, "from the checkpoint"


def _text_config(folder: Path, config_class):
    """The text config of a full CLIP / SigLIP folder, with the joint-space width from its top level.

    ``CLIPTextModelWithProjection.from_pretrained`` on a ``CLIPModel`` folder reads ``text_config`` only,
    whose ``projection_dim`` defaults to 512 while ``CLIPModel`` keeps it at the top level: a 768-wide
    model (MONET's ViT-L/14) would get a re-initialised projection with only a warning.
    """
    values = json.loads((folder / "config.json").read_text())
    text = dict(values.get("text_config", values))
    if "projection_dim" in values:
        text["projection_dim"] = values["projection_dim"]
    text = {k: v for k, v in text.items() if k not in ("model_type", "architectures", "transformers_version")}
    return config_class(**text)


def build_text(spec: EncoderSpec, weights, tokenizer_folder: Path | None) -> TextTower:
    """The text model, tokenizer, scale and bias of a CLIP / SigLIP entry from its weights folder."""
    transformers = _transformers()
    options = spec.text_options
    model_class = getattr(transformers, options["hf_class"])
    config_class = getattr(transformers, options["hf_config_class"])
    link, output = options.get("link", "softmax"), options.get("output", "text_embeds")
    if output not in TEXT_OUTPUTS:
        raise TextTowerError(f"unknown text output {output!r}; choose one of {TEXT_OUTPUTS}")
    max_length = int(options.get("max_length", 77))
    padding = options.get("padding", "longest")
    if weights == RANDOM:
        tokenizer = _hf_tokenizer(spec, tokenizer_folder)
        model = model_class(config_class(**options["hf_config"]))
        log_scale, bias = RANDOM_SCALE_BIAS[link]
        scale, digest, summary = math.exp(log_scale), f"random:{RANDOM_SEED}", "random weights (config only)"
    else:
        folder = resolve(spec, weights, want_folder=True, hf_repo=spec.source_target)
        tokenizer = _hf_tokenizer(spec, tokenizer_folder or folder)
        model, info = model_class.from_pretrained(folder, local_files_only=True, output_loading_info=True,
                                                  config=_text_config(folder, config_class))
        missing = list(info.get("missing_keys", [])) + [str(m[0]) if isinstance(m, tuple) else str(m)
                                                        for m in info.get("mismatched_keys", [])]
        if missing:
            raise TextTowerError(f"{spec.source} ({folder}): {len(missing)} text weights missing or of another shape, "
                                 f"e.g. {missing[:5]}; zero-shot needs the full image-text checkpoint")
        scale, bias, _ = _scale_bias(folder, link)
        digest, summary = file_digest(folder), f"from_pretrained({folder})"
    model = model.eval().requires_grad_(False)

    def embed(prompts):
        batch = tokenizer(list(prompts), padding=padding, truncation=True, max_length=max_length, return_tensors="pt")
        device = next(model.parameters()).device
        kwargs = {"input_ids": batch["input_ids"].to(device)}
        if "attention_mask" in batch and padding != "max_length":
            kwargs["attention_mask"] = batch["attention_mask"].to(device)
        return getattr(model(**kwargs), output)

    tokenizer_digest = folder_digest(Path(tokenizer.name_or_path))
    return TextTower(spec, embed, scale, bias, link, digest_of(digest, tokenizer_digest), f"{summary}; tokenizer {tokenizer.name_or_path}", module=model)
