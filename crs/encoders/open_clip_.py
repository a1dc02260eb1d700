"""The image tower of an open_clip model; the embedding is CLIP's projected image embedding.

Only the visual tower is built (``open_clip.model._build_vision_tower``), so no text tower, tokenizer
or text-model config is needed offline. Checkpoints are open_clip state dicts; keys under
``visual.`` are loaded strictly after stripping that prefix, and the text-tower keys are dropped by
rule (counted in the load summary). ``hf-hub:`` models carry their open_clip config in the spec's
``open_clip_config`` option, copied from the hub repository's ``open_clip_config.json``.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from crs.encoders.checkpoint import load_into, read_state_dict
from crs.encoders.encoder import Network
from crs.encoders.registry import EncoderError, EncoderSpec
from crs.encoders.text import TOKENIZER_FILES, TextTower, TextTowerError, digest_of
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


# --- the text tower (zero-shot) -------------------------------------------------------------------

CLIP_INIT_LOGIT_SCALE = math.log(1 / 0.07)
"""open_clip's initial log logit scale: what a random-weight model carries (exp: 14.29)."""


def _text_config(config: dict):
    open_clip = _open_clip()
    return open_clip.model.CLIPTextCfg(**config["text_cfg"])


def _text_module(spec: EncoderSpec, config: dict) -> nn.Module:
    """The text tower as open_clip builds it: a TextTransformer, or an HF text encoder (BiomedCLIP)."""
    open_clip = _open_clip()
    text_cfg = dict(config["text_cfg"])
    if text_cfg.get("hf_model_name"):
        values = spec.text_options.get("hf_text_config")
        if values is None:
            raise TextTowerError(f"encoder {spec.name!r}: its text tower is a Hugging Face model; the entry "
                                 "needs the 'hf_text_config' text option (the model's config.json values)")
        transformers = __import__("transformers")
        hf_config = transformers.AutoConfig.for_model(**values)
        pooler_type = text_cfg.get("hf_pooler_type", text_cfg.get("pooler_type"))
        encoder = open_clip.hf_model.HFTextEncoder(
            text_cfg["hf_model_name"], output_dim=config["embed_dim"], config=hf_config, pooler_type=pooler_type,
            proj_type=text_cfg.get("hf_proj_type", text_cfg.get("proj")), pretrained=False)
        # open_clip builds the model by name with add_pooling_layer only for its "cls_pooler", so a
        # checkpoint (BiomedCLIP's) has no BERT pooler weights; given a config it keeps the pooler
        if pooler_type != "cls_pooler" and getattr(encoder.transformer, "pooler", None) is not None:
            encoder.transformer.pooler = None
        return encoder
    return open_clip.model._build_text_tower(config["embed_dim"], _text_config(config),
                                             quick_gelu=config.get("quick_gelu", False))


def _tokenizer(spec: EncoderSpec, config: dict, folder: Path | None):
    """open_clip's BPE tokenizer (its vocabulary ships in the wheel), or an HF tokenizer from ``folder``."""
    open_clip = _open_clip()
    text_cfg = config["text_cfg"]
    context = int(text_cfg.get("context_length", 77))
    if not (text_cfg.get("hf_tokenizer_name") or text_cfg.get("hf_model_name")):
        return open_clip.tokenizer.SimpleTokenizer(context_length=context), "open_clip BPE (bpe_simple_vocab_16e6)"
    if folder is None or not any((folder / name).is_file() for name in TOKENIZER_FILES):
        where = "no tokenizer folder was given" if folder is None else f"{folder} holds none of {list(TOKENIZER_FILES)}"
        raise TextTowerError(f"encoder {spec.name!r}: tokenizer missing ({where}); put the model's tokenizer "
                             "files beside its weights, or name a tokenizer folder")
    kwargs = dict(text_cfg.get("tokenizer_kwargs", {}))
    return open_clip.tokenizer.HFTokenizer(str(folder), context_length=context, **kwargs), f"HF tokenizer ({folder})"


def _truncation_is_exact(text: Any) -> bool:
    """A causal open_clip TextTransformer pooled at the end token (argmax), without CLS or pad mask."""
    return (getattr(text, "attn_mask", None) is not None and getattr(text, "cls_emb", None) is None
            and not getattr(text, "use_pad_mask", False) and getattr(text, "pool_type", "") == "argmax")


def truncated_forward(text: Any, tokens: torch.Tensor) -> torch.Tensor:
    """A causal TextTransformer on tokens cut after the longest prompt's end token.

    With a causal mask and end-token pooling, positions after a prompt's end token never reach its
    pooled output, so dropping the padding columns is exact and costs ~5x less at 77 tokens.
    """
    if not _truncation_is_exact(text):
        return text(tokens)
    length = int(tokens.argmax(dim=-1).max()) + 1
    tokens = tokens[:, :length]
    x = text.token_embedding(tokens) + text.positional_embedding[:length]
    x = text.transformer(x, attn_mask=text.attn_mask[:length, :length])
    x = text.ln_final(x)
    pooled = x[torch.arange(x.shape[0]), tokens.argmax(dim=-1)]
    projection = text.text_projection
    if projection is None:
        return pooled
    return projection(pooled) if isinstance(projection, nn.Linear) else pooled @ projection


BUCKET_PROMPTS = 16
"""Prompts per length bucket of :func:`bucketed_forward`: enough rows for an efficient matrix product."""


def bucketed_forward(text: Any, tokens: torch.Tensor) -> torch.Tensor:
    """:func:`truncated_forward` on buckets of prompts of similar length, in the prompts' order.

    Tokenised once; sorted by length and cut into buckets of ``BUCKET_PROMPTS``, each padded only to
    its own longest prompt. A prompt's embedding does not depend on the other rows of its batch, so
    this is the same computation on fewer padding tokens (the ISIC set: 13 tokens on average, 21 at
    most). Towers where truncation is not exact run in one forward."""
    if not _truncation_is_exact(text) or len(tokens) <= BUCKET_PROMPTS:
        return truncated_forward(text, tokens)
    lengths = tokens.argmax(dim=-1)
    order = torch.argsort(lengths, stable=True)
    out = [truncated_forward(text, tokens[order[start:start + BUCKET_PROMPTS]])
           for start in range(0, len(order), BUCKET_PROMPTS)]
    embedded = torch.cat(out)
    result = torch.empty_like(embedded)
    result[order] = embedded
    return result


def build_text(spec: EncoderSpec, weights, tokenizer_folder: Path | None) -> TextTower:
    """The text tower, tokenizer, logit scale and bias of an open_clip entry, from its image tower's weights."""
    config, hub, _ = model_config(spec)
    text = _text_module(spec, config)
    link = "sigmoid" if "init_logit_bias" in config else "softmax"
    if link != spec.text_options.get("link", "softmax"):
        raise TextTowerError(f"encoder {spec.name!r}: its text options say link {spec.text_options.get('link', 'softmax')!r}, "
                             f"open_clip's config says {link!r}; fix the entry")
    custom = bool(config.get("custom_text")) or bool(config["text_cfg"].get("hf_model_name"))
    if weights == RANDOM:
        scale = math.exp(float(config.get("init_logit_scale", CLIP_INIT_LOGIT_SCALE)))
        bias = float(config.get("init_logit_bias", 0.0))
        tokenize, tokenizer_name = _tokenizer(spec, config, tokenizer_folder)
        digest, summary = f"random:{RANDOM_SEED}", "random weights; scale and bias at open_clip's initial values"
    else:
        path = resolve(spec, weights, hf_repo=hub, hf_filenames=HF_WEIGHT_FILES)
        state_dict = read_state_dict(path)
        tokenize, tokenizer_name = _tokenizer(spec, config, tokenizer_folder or path.parent)
        if "logit_scale" not in state_dict:
            raise TextTowerError(f"{path}: no 'logit_scale' in the checkpoint; is this an open_clip CLIP checkpoint?")
        scale = min(math.exp(float(state_dict["logit_scale"])), 100.0)
        bias = float(state_dict["logit_bias"]) if "logit_bias" in state_dict else 0.0
        if custom:
            keys = {k: v for k, v in state_dict.items() if k.startswith("text.")}
            strip: tuple[str, ...] = ("text.",)
        else:
            skip = ("visual.", "logit_scale", "logit_bias")
            keys = {k: v for k, v in state_dict.items() if not k.startswith(skip) and k != "attn_mask"}
            strip = ()
        keys = {k: v for k, v in keys.items() if not k.endswith("position_ids")}
        report = load_into(text, keys, strip=strip, source=f"{spec.source} text tower ({path})")
        digest, summary = file_digest(path), report.summary()
    text = text.eval().requires_grad_(False)

    def embed(prompts):
        device = next(text.parameters()).device
        return bucketed_forward(text, tokenize(list(prompts)).to(device))

    return TextTower(spec, embed, scale, bias, link, digest_of(digest, tokenizer_name), f"{summary}; {tokenizer_name}",
                     module=text)
