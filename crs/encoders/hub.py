"""Where a registry entry's weights live on the Hugging Face Hub, and under which name crs reads them.

One answer per entry, from the registry alone (no network): a timm entry's ``hf_hub_id`` from timm's
pretrained config, an open_clip entry's hub repository from open_clip's pretrained config (or its
``hf-hub:`` source), an ``hf:`` entry's repository (a whole model folder), a ``checkpoint:`` entry's
``hub_repo``. The revision is the entry's ``hub_revision``. ``crs weights fetch``
(:mod:`crs.encoders.fetch`) downloads from there into ``<weights folder>/<name>/``, where
:func:`crs.encoders.weights.resolve` looks first.
"""

from __future__ import annotations

from dataclasses import dataclass

from crs.encoders.registry import EncoderSpec

HUB_PAGE = "https://huggingface.co/{repo}"
FOLDER_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model")
"""What a model folder (``hf:`` entries) needs: config, weights, tokenizer and processor files; never
the framework duplicates (``*.bin``, ``*.h5``, ``*.msgpack``) of the same weights."""


@dataclass(frozen=True)
class HubSource:
    """``repo`` at ``revision``: the first of ``files`` that exists (one weights file), or with
    ``folder`` every file matching :data:`FOLDER_PATTERNS` (a model folder with config.json)."""

    repo: str
    revision: str
    files: tuple[str, ...] = ()
    folder: bool = False

    @property
    def page(self) -> str:
        return HUB_PAGE.format(repo=self.repo)


def hub_source(spec: EncoderSpec) -> HubSource | None:
    """The Hub repository of ``spec``'s weights, or None when they are not on the Hub (see :func:`not_on_hub`)."""
    from crs.encoders import open_clip_, timm_

    kind = spec.source_kind
    if spec.hub_repo:
        files = (spec.weights_file,) if spec.weights_file else timm_.HF_WEIGHT_FILES
        return HubSource(spec.hub_repo, spec.hub_revision, files, folder=kind == "hf")
    if kind == "timm":
        import timm

        config = timm.models.get_pretrained_cfg(spec.source_target)
        repo = getattr(config, "hf_hub_id", None) if config is not None else None
        return HubSource(str(repo).rstrip("/"), spec.hub_revision, timm_.HF_WEIGHT_FILES) if repo else None
    if kind == "open_clip":
        _, repo, _ = open_clip_.model_config(spec)
        return HubSource(str(repo).rstrip("/"), spec.hub_revision, open_clip_.HF_WEIGHT_FILES) if repo else None
    if kind == "hf":
        return HubSource(spec.source_target, spec.hub_revision, folder=True)
    return None


def needs_weights(spec: EncoderSpec) -> bool:
    """Whether the entry loads a weights file at all (baselines and python sources carry their own)."""
    return spec.source_kind in ("timm", "open_clip", "hf", "checkpoint")


def not_on_hub(spec: EncoderSpec) -> str:
    """Why ``crs weights fetch`` cannot get ``spec``'s weights, and where to get them by hand."""
    where = spec.weights_url or "the model's authors"
    name = spec.weights_file or "model.safetensors"
    return f"not on the Hugging Face Hub: download {name} from {where} into the weights folder's {spec.name}/"
