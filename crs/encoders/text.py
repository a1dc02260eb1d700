"""The text tower of a vision-language encoder: prompts -> unit embeddings in the image tower's space.

Zero-shot needs three things from the same weights as the image tower: a tokenizer (from the
weights folder; open_clip's BPE vocabulary ships in its wheel), the text model with its projection,
and the checkpoint's ``logit_scale`` (and ``logit_bias`` for the sigmoid family, SigLIP). An
entry's ``text_tower`` options say how its text side is built (``kind``: ``open_clip`` or ``hf``), or
why it has none (``unavailable``); an image-only entry has no options at all.

The image features the cache holds are the entry's ``pooling`` output; :func:`zero_shot_support`
says for each entry whether that output is the projected embedding the text tower is matched to
(it is for every vision-language entry of the catalog, docs/decisions/0055).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from crs.encoders.registry import EncoderError, EncoderSpec

if TYPE_CHECKING:  # torch loads when a tower is built: `crs encoders show` reads support lines only
    import torch

LINKS = ("softmax", "sigmoid")
"""How a model turns image-text similarities into probabilities in training: CLIP's softmax over a
batch (scale only), SigLIP's per-pair sigmoid (scale and bias)."""

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer.model", "spiece.model", "vocab.json")
"""A weights folder holding any of these has a tokenizer."""


class TextTowerError(EncoderError):
    """An entry without a text tower was asked for zero-shot, or its tokenizer or text weights are missing."""


@dataclass(frozen=True)
class ZeroShotSupport:
    """Whether an entry can be scored zero-shot, and the one line that says why (or why not)."""

    available: bool
    reason: str


def zero_shot_support(spec: EncoderSpec) -> ZeroShotSupport:
    """Can ``spec`` be scored zero-shot from its cached features? One line either way."""
    options = spec.text_options
    if not options:
        return ZeroShotSupport(False, "image-only encoder: no text tower, so no zero-shot (probes only)")
    if "unavailable" in options:
        return ZeroShotSupport(False, str(options["unavailable"]))
    return ZeroShotSupport(True, f"{options.get('kind')} text tower, {options.get('link', 'softmax')} link; the cached "
                                 f"feature ({spec.pooling}) is the projected embedding in the text tower's space")


@dataclass
class TextTower:
    """A frozen text tower: ``encode(prompts)`` gives (n, dim) float32 unit vectors.

    ``logit_scale`` is the checkpoint's exp(logit_scale) (CLIP clamps it at 100), ``logit_bias`` its
    bias (0 for the softmax family); ``digest`` identifies weights and tokenizer (prototype cache key).
    """

    spec: EncoderSpec
    embed_tokens: Callable[[Sequence[str]], torch.Tensor]
    logit_scale: float
    logit_bias: float
    link: str
    digest: str
    load_summary: str = ""
    module: torch.nn.Module | None = None

    def to(self, device: str | torch.device) -> TextTower:
        """Move the text model to ``device``; the tokens follow it."""
        import torch

        if self.module is not None:
            self.module.to(torch.device(device))
        return self

    def encode(self, prompts: Sequence[str], batch_size: int = 512) -> np.ndarray:
        """Unit embeddings of ``prompts``: tokenised and embedded in one call per ``batch_size`` prompts
        (a whole prompt set at once), under ``torch.inference_mode``."""
        import torch

        with torch.inference_mode():
            return self._encode(list(prompts), batch_size)

    def _encode(self, prompts: list[str], batch_size: int) -> np.ndarray:
        import torch

        empty = [i for i, p in enumerate(prompts) if not str(p).strip()]
        if empty:
            raise TextTowerError(f"encoder {self.spec.name!r}: prompt {empty[0]} is empty; every prompt needs text")
        out = []
        for start in range(0, len(prompts), batch_size):
            emb = self.embed_tokens(prompts[start : start + batch_size]).float()
            if emb.ndim != 2 or emb.shape[1] != self.spec.dim:
                raise TextTowerError(
                    f"encoder {self.spec.name!r}: the text tower gives shape {tuple(emb.shape)}, the image "
                    f"features have dim {self.spec.dim}; the text and image towers do not match")
            out.append(torch.nn.functional.normalize(emb, dim=-1).cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, self.spec.dim), np.float32)


def digest_of(*parts: object) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(repr(part).encode() + b"\0")
    return sha.hexdigest()


def folder_digest(folder: Path) -> str:
    """sha256 over the tokenizer files of a folder (name and bytes), so a changed vocabulary is a new key."""
    sha = hashlib.sha256()
    for path in sorted(p for p in Path(folder).iterdir() if p.is_file() and ("token" in p.name or p.suffix in (
            ".model", ".txt", ".json") and p.name not in ("config.json",))):
        sha.update(path.name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()
