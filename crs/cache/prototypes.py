"""Zero-shot text prototypes, cached like features: per encoder fingerprint and prompt-set hash.

A prototype set is what a text tower makes of one prompt set: per class the unit embeddings of its
prompts averaged and renormalised (CLIP's prompt ensemble), for multilabel tasks a negative set too
(CheXzero's pairs), the per-variant prototypes behind the prompt-sensitivity spread, and the model's
logit scale and bias. It lives in the task's store under ``prototypes/<encoder>/<fingerprint>/<digest>``
(beside, not inside, the feature groups), so a new prompt set adds text embeddings only, and a new
image extraction (a new fingerprint) never meets stale prototypes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import zarr

from crs.cache.store import CacheError, FeatureStore, child_group, store_path

LINKS = ("softmax", "sigmoid")


@dataclass(frozen=True)
class Prototypes:
    """Unit prototypes (K, D), optional negatives (K, D), variants (V, K, D), and the model's scale and bias."""

    positive: np.ndarray
    scale: float
    bias: float
    link: str
    prompt_set: str
    digest: str
    class_names: tuple[str, ...]
    negative: np.ndarray | None = None
    variants_positive: np.ndarray | None = None
    variants_negative: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise CacheError(f"prototypes {self.prompt_set!r}: link {self.link!r} is not one of {LINKS}")
        if self.positive.ndim != 2 or self.positive.shape[0] != len(self.class_names):
            raise CacheError(f"prototypes {self.prompt_set!r}: positive must be (classes={len(self.class_names)}, dim), "
                             f"got {self.positive.shape}")
        if not (np.isfinite(self.scale) and self.scale > 0 and np.isfinite(self.bias)):
            raise CacheError(f"prototypes {self.prompt_set!r}: scale must be positive and bias finite, "
                             f"got {self.scale} and {self.bias}")
        if self.negative is not None and self.negative.shape != self.positive.shape:
            raise CacheError(f"prototypes {self.prompt_set!r}: negative {self.negative.shape} differs from positive "
                             f"{self.positive.shape}")


def ensemble(embeddings: np.ndarray) -> np.ndarray:
    """Unit embeddings (n, D) of one class's prompts -> their mean, renormalised (CLIP's prompt ensemble)."""
    mean = np.asarray(embeddings, np.float64).mean(axis=0)
    return (mean / np.linalg.norm(mean)).astype(np.float32)


def _group(store: FeatureStore, encoder: str) -> str:
    return f"prototypes/{encoder}/{store.current_fingerprint(encoder)}"


def write_prototypes(store: FeatureStore, encoder: str, prototypes: Prototypes) -> None:
    """Store ``prototypes`` for the encoder's current features (arrays first, the ``complete`` flag last)."""
    task_classes = tuple(cast(dict, store.root.attrs["task"])["class_names"])
    if tuple(prototypes.class_names) != task_classes:
        raise CacheError(f"prototypes {prototypes.prompt_set!r} are for classes {list(prototypes.class_names)}, "
                         f"{store.path} holds {list(task_classes)}")
    dim = int(store.feature_array(encoder, "clean").shape[1])
    if prototypes.positive.shape[1] != dim:
        raise CacheError(f"prototypes {prototypes.prompt_set!r} have dim {prototypes.positive.shape[1]}; encoder "
                         f"{encoder!r}'s features in {store.path} have dim {dim}: the text and image towers differ")
    path = f"{_group(store, encoder)}/{prototypes.digest}"
    group = store.root.require_group(path)
    group.attrs["complete"] = False
    for name in ("positive", "negative", "variants_positive", "variants_negative"):
        value = getattr(prototypes, name)
        if value is None:
            continue
        array = group.create_array(name, shape=value.shape, dtype="float32", overwrite=True, compressors=None)
        array[...] = np.asarray(value, np.float32)
    group.attrs.update({"scale": float(prototypes.scale), "bias": float(prototypes.bias), "link": prototypes.link,
                        "prompt_set": prototypes.prompt_set, "class_names": list(prototypes.class_names),
                        "complete": True})


def read_prototypes(store: FeatureStore, encoder: str, digest: str) -> Prototypes | None:
    """The finished prototypes of ``digest`` for the encoder's current features, or None."""
    path = f"{_group(store, encoder)}/{digest}"
    if path not in store.root:
        return None
    group = child_group(store.root, path)
    attrs = group.attrs
    if not attrs.get("complete"):
        return None

    def array(name: str) -> np.ndarray | None:
        return np.asarray(cast(zarr.Array, group[name])[...]) if name in group else None

    return Prototypes(
        positive=cast(np.ndarray, array("positive")), scale=float(cast(float, attrs["scale"])),
        bias=float(cast(float, attrs["bias"])), link=str(attrs["link"]), prompt_set=str(attrs["prompt_set"]),
        digest=digest, class_names=tuple(cast(list, attrs["class_names"])), negative=array("negative"),
        variants_positive=array("variants_positive"), variants_negative=array("variants_negative"),
    )


def stored_digests(store: FeatureStore, encoder: str) -> list[str]:
    """The prompt-set digests with finished prototypes for the encoder's current features."""
    path = _group(store, encoder)
    if path not in store.root:
        return []
    group = child_group(store.root, path)
    return sorted(d for d in group.group_keys() if child_group(group, d).attrs.get("complete"))


def import_prototypes(cache_root: Path | str, dataset: str, encoder: str, path: Path | str) -> Prototypes:
    """Bring prototypes made elsewhere (a hosted model's text side) into the cache beside imported features.

    ``path``: an .npz with ``positive`` (K, D), ``scale``, ``link`` and optionally ``bias``, ``negative``,
    ``prompt_set`` (a name); the digest is the file's content hash.
    """
    path = Path(path)
    if not path.is_file():
        raise CacheError(f"prototypes file {path} not found")
    store = FeatureStore(store_path(cache_root, dataset), mode="r+")
    with np.load(path, allow_pickle=False) as data:
        missing = [key for key in ("positive", "scale", "link") if key not in data]
        if missing:
            raise CacheError(f"{path}: missing {missing}; a prototypes file holds positive (K, D), scale and link")
        digest = "imported-" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        classes = tuple(cast(dict, store.root.attrs["task"])["class_names"])
        prototypes = Prototypes(
            positive=np.asarray(data["positive"], np.float32), scale=float(data["scale"]),
            bias=float(data["bias"]) if "bias" in data else 0.0, link=str(data["link"]),
            prompt_set=str(data["prompt_set"]) if "prompt_set" in data else path.stem, digest=digest,
            class_names=classes, negative=np.asarray(data["negative"], np.float32) if "negative" in data else None,
        )
    norms = np.linalg.norm(prototypes.positive, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-3):
        raise CacheError(f"{path}: positive prototypes must be unit vectors (norms {norms.min():.3g}-{norms.max():.3g}); "
                         "normalise each row")
    write_prototypes(store, encoder, prototypes)
    return prototypes
