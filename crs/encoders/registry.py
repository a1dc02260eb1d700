"""Encoder specs and the name -> spec registry.

An :class:`EncoderSpec` holds everything needed to reproduce an embedding: where the network comes
from (``source``), how an image is turned into the network's input (size, crop, interpolation,
mean, std), which output is the embedding (``pooling``) and its width (``dim``). It also carries
what a reader of the report must know about the weights: licence, gated access and pretraining
data (so a report can flag an encoder that saw MIMIC-CXR or CheXpert while pretraining).

Sources:
  ``timm:NAME``                        a timm model (``NAME`` may carry a pretrained tag)
  ``open_clip:MODEL/PRETRAINED``       the image tower of an open_clip model
  ``open_clip:hf-hub:ORG/REPO``        the image tower of an open_clip model hosted on the HF hub
  ``hf:ORG/REPO``                      a transformers vision model
  ``checkpoint:TIMM_ARCH``             a raw checkpoint loaded into a timm architecture
  ``python:MODULE:FUNCTION``           your own encoder (see ``crs.encoders.python_``)
  ``baseline:NAME``                    a non-neural baseline that needs no weights
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

GROUPS = ("general", "medical", "specialty", "baseline", "custom")
INTERPOLATIONS = ("bilinear", "bicubic", "nearest", "area")
RESIZE_MODES = ("shortest", "squash")
SOURCE_KINDS = ("timm", "open_clip", "hf", "checkpoint", "python", "baseline")

# The keys that `crs encoders list --json` and `show --json` print, in this order.
PUBLIC_KEYS = (
    "name", "family", "group", "source", "input_size", "mean", "std", "interpolation", "crop_pct",
    "pooling", "dim", "license", "gated", "pretraining_data",
)


class EncoderError(ValueError):
    """An encoder name, spec, weight file or checkpoint is wrong; the message says how to fix it."""


@dataclass(frozen=True)
class EncoderSpec:
    """How to build one frozen encoder and turn an image into its embedding.

    Preprocessing, applied to a float image in [0, 1] (see ``crs.encoders.preprocess``):
    ``resize_mode="shortest"`` resizes the shorter side to ``round(input_size / crop_pct)`` and
    centre-crops ``input_size`` (timm and CLIP eval transforms); ``"squash"`` resizes straight to
    ``input_size`` x ``input_size`` (SigLIP). ``grayscale`` averages the channels first (chest
    X-ray encoders trained on single-channel films); ``pre_resize`` is an extra first resize some
    encoders were trained with (CheXzero stores films at 320 px before its 224 px resize). Then
    ``(x - mean) / std``.

    ``build_options`` are (key, value) pairs for the loader (timm kwargs, checkpoint key prefixes
    to strip, key prefixes that are deliberately not loaded, a transformers config).
    """

    name: str
    family: str
    group: str
    source: str
    input_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str
    crop_pct: float
    pooling: str
    dim: int
    license: str
    gated: bool = False
    pretraining_data: tuple[str, ...] = ()
    notes: str = ""
    resize_mode: str = "shortest"
    grayscale: bool = False
    pre_resize: int | None = None
    weights_file: str = ""
    weights_url: str = ""
    hub_repo: str = ""
    """The Hugging Face Hub repository of a ``checkpoint:`` entry's weights (``crs weights fetch``); timm,
    open_clip and ``hf:`` entries take theirs from their source (``crs.encoders.hub``)."""
    hub_revision: str = "main"
    """The Hub revision ``crs weights fetch`` asks for (a branch, tag or commit); the commit it resolves to
    is recorded beside the files."""
    build_options: tuple[tuple[str, Any], ...] = field(default=(), compare=True)
    text_tower: tuple[tuple[str, Any], ...] = ()
    """How the text side of a vision-language entry is built (``crs.encoders.text``), or
    ``(("unavailable", reason),)``; empty for image-only encoders. Not part of the image fingerprint."""

    def __post_init__(self) -> None:
        def bad(message: str) -> EncoderError:
            return EncoderError(f"encoder spec {self.name!r}: {message}")

        if not self.name or any(c.isspace() for c in self.name):
            raise bad("name must be a non-empty word without spaces")
        if self.group not in GROUPS:
            raise bad(f"group {self.group!r} is not one of {GROUPS}")
        if self.source_kind not in SOURCE_KINDS:
            raise bad(f"source {self.source!r} must start with one of {[k + ':' for k in SOURCE_KINDS]}")
        if self.input_size < 8:
            raise bad(f"input_size {self.input_size} is too small (need >= 8 pixels)")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise bad(f"mean {self.mean} and std {self.std} need three values each, std > 0")
        if self.interpolation not in INTERPOLATIONS:
            raise bad(f"interpolation {self.interpolation!r} is not one of {INTERPOLATIONS}")
        if not 0 < self.crop_pct <= 1:
            raise bad(f"crop_pct {self.crop_pct} must lie in (0, 1]")
        if self.resize_mode not in RESIZE_MODES:
            raise bad(f"resize_mode {self.resize_mode!r} is not one of {RESIZE_MODES}")
        if self.dim < 1:
            raise bad(f"dim {self.dim} must be positive")
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        object.__setattr__(self, "pretraining_data", tuple(self.pretraining_data))

    @property
    def source_kind(self) -> str:
        return self.source.split(":", 1)[0]

    @property
    def source_target(self) -> str:
        return self.source.split(":", 1)[1] if ":" in self.source else ""

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.build_options)

    @property
    def text_options(self) -> dict[str, Any]:
        return dict(self.text_tower)

    def public_dict(self) -> dict[str, Any]:
        """The documented JSON view (``PUBLIC_KEYS`` plus notes and where to get weights)."""
        full = asdict(self)
        out = {key: full[key] for key in PUBLIC_KEYS}
        out["mean"], out["std"] = list(self.mean), list(self.std)
        out["pretraining_data"] = list(self.pretraining_data)
        out.update(resize_mode=self.resize_mode, grayscale=self.grayscale, pre_resize=self.pre_resize,
                   weights_file=self.weights_file, weights_url=self.weights_url, hub_repo=self.hub_repo,
                   hub_revision=self.hub_revision, notes=self.notes)
        return out

    def preprocessing_fields(self) -> dict[str, Any]:
        """Everything about preprocessing that changes the embedding (enters the cache fingerprint)."""
        return {
            "input_size": self.input_size, "resize_mode": self.resize_mode, "crop_pct": self.crop_pct,
            "interpolation": self.interpolation, "mean": list(self.mean), "std": list(self.std),
            "grayscale": self.grayscale, "pre_resize": self.pre_resize,
        }


_REGISTRY: dict[str, EncoderSpec] = {}


def register(spec: EncoderSpec, *, replace: bool = False) -> EncoderSpec:
    """Add a spec to the registry; a second spec with the same name needs ``replace=True``."""
    if spec.name in _REGISTRY and not replace and _REGISTRY[spec.name] != spec:
        raise EncoderError(f"encoder {spec.name!r} is already registered; pass replace=True to override it")
    _REGISTRY[spec.name] = spec
    return spec


_BEFORE_LOOKUP: list[Callable[[], object]] = []


def before_first_lookup(loader: Callable[[], object]) -> None:
    """Run ``loader`` once, before the registry is next read (``plugins`` defers entry points this way).

    The registry imports no module that fills it: the built-in ``catalog`` registers its specs on
    import, ``plugins`` hands over its entry-point loader here, and ``crs.encoders`` imports both.
    """
    _BEFORE_LOOKUP.append(loader)


def _ensure_loaded() -> None:
    while _BEFORE_LOOKUP:
        _BEFORE_LOOKUP.pop(0)()


def available(group: str | None = None) -> list[str]:
    """Sorted names of every registered encoder (optionally of one group)."""
    _ensure_loaded()
    return sorted(n for n, s in _REGISTRY.items() if group is None or s.group == group)


def all_specs() -> list[EncoderSpec]:
    _ensure_loaded()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get_spec(name: str) -> EncoderSpec:
    """The spec registered under ``name``; an unknown name lists the closest known names."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=4, cutoff=0.4)
        hint = f"did you mean {', '.join(close)}?" if close else "run `crs encoders list` to see them"
        raise EncoderError(f"unknown encoder {name!r}; {hint}") from None
