"""Open, create and read one data set's zarr store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import zarr

from crs.data.base import Dataset, Task, inferred_design

CACHE_FORMAT_VERSION = 1
FEATURE_DTYPE = "float16"


class CacheError(RuntimeError):
    """The cache is missing, incomplete or inconsistent; the message names the array and the fix."""


def store_path(cache_root: Path | str, dataset_name: str) -> Path:
    return Path(cache_root) / f"{dataset_name}.zarr"


@dataclass(frozen=True)
class SampleTable:
    """What stage 2 needs of a data set, read back from the cache (no images, no paths)."""

    name: str
    task: Task
    modality: str
    image_size: int
    ids: np.ndarray
    labels: np.ndarray
    splits: np.ndarray
    groups: np.ndarray
    subgroups: dict[str, np.ndarray] = field(default_factory=dict)
    """Attribute -> category label per image (sex, age band, view...); empty when the data set has none."""
    split_design: str = "stratified"
    """How the test split was drawn (:data:`crs.data.base.SPLIT_DESIGNS`, decision 0085)."""
    split_design_recorded: bool = True
    """False for a store written before crs recorded the design: ``split_design`` is then inferred
    (:func:`crs.data.base.inferred_design`); ``crs extract`` records it without recomputing anything."""

    def indices(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.splits == split)


def test_digest(dataset: Dataset) -> str:
    """sha256 of the test-split ids in row order: corrupted features are stored in that order."""
    test_ids = np.asarray(dataset.ids)[np.asarray(dataset.splits) == "test"]
    return hashlib.sha256("\n".join(map(str, test_ids.tolist())).encode()).hexdigest()


def table_digest(dataset: Dataset) -> str:
    """sha256 of the whole sample table (ids, labels, splits, groups, subgroup categories): any change
    rewrites it. A data set without subgroups hashes as before they existed."""
    hasher = hashlib.sha256()
    for values in (dataset.ids, dataset.splits, dataset.groups):
        hasher.update("\n".join(map(str, np.asarray(values).tolist())).encode() + b"\0")
    labels = np.ascontiguousarray(dataset.labels)
    hasher.update(str(labels.dtype).encode() + str(labels.shape).encode() + labels.tobytes())
    for attribute in dataset.subgroups.columns:
        values = dataset.subgroups[attribute].to_numpy()
        hasher.update(f"subgroup:{attribute}\0".encode() + "\n".join(map(str, values.tolist())).encode() + b"\0")
    return hasher.hexdigest()


StoreMode = Literal["r", "r+", "a", "w", "w-"]


def child_group(parent: zarr.Group, path: str) -> zarr.Group:
    """``parent[path]`` where the layout says it is a group (zarr types every child as Array | Group)."""
    return cast(zarr.Group, parent[path])


def child_array(parent: zarr.Group, path: str) -> zarr.Array:
    """``parent[path]`` where the layout says it is an array (zarr types every child as Array | Group)."""
    return cast(zarr.Array, parent[path])


def _strings(values: Any) -> np.ndarray:
    """zarr returns numpy's variable-width StringDType; plain fixed-width str arrays are easier downstream."""
    return np.array([str(v) for v in np.asarray(values).tolist()], dtype=str)


STORE_OPENERS: list[Callable[[Path, str], Any]] = []
"""Ways to open a store folder other than as a plain folder, each returning a zarr store or None. The
read-through of a URL cache (:mod:`crs.cache.readthrough`, imported with :mod:`crs.cache`) adds itself:
it depends on this module, never the other way round."""


class FeatureStore:
    """One data set's store: the sample table plus feature groups per encoder fingerprint."""

    def __init__(self, path: Path | str, mode: StoreMode = "r"):
        self.path = Path(path)
        if mode == "r" and not self.path.exists():
            raise CacheError(f"no cache store at {self.path}; run `crs extract` first")
        # a URL cache's read-through mirror fetches each feature chunk on first read (decision 0187)
        opened = next((found for opener in STORE_OPENERS if (found := opener(self.path, mode)) is not None), None)
        self.root = zarr.open_group(opened or str(self.path), mode=mode)

    # -- sample table -----------------------------------------------------------------------
    def write_table(self, dataset: Dataset) -> None:
        """Store ids, labels, splits and groups, rewriting them when any of them changed.

        Feature groups are never deleted here (``crs cache gc`` does that): each records the
        image-list and test-split digests it was computed for, and an encoder's ``current``
        pointer is dropped when its group no longer matches the new table, so stage 2 can never
        read features whose rows are not this table's rows.
        """
        digest = dataset.id_digest()
        table = table_digest(dataset)
        attrs = self.root.attrs
        if attrs.get("id_digest") == digest and attrs.get("table_digest") == table:
            if attrs.get("split_design") != dataset.split_design:  # a store written before the design was kept
                self.root.attrs.update({"split_design": dataset.split_design})
            return
        for name, values in (("ids", dataset.ids), ("splits", dataset.splits), ("groups", dataset.groups)):
            array = self.root.create_array(name, shape=(len(values),), dtype=str, overwrite=True)
            array[:] = np.asarray(values).astype(str)
        labels = np.asarray(dataset.labels)
        label_array = self.root.create_array(
            "labels", shape=labels.shape, dtype=labels.dtype, overwrite=True, compressors=None
        )
        label_array[...] = labels
        attributes = [str(a) for a in dataset.subgroups.columns]
        for attribute in attributes:  # categories only (crs.data.subgroups refused identifiers and free text)
            values = dataset.subgroups[attribute].to_numpy().astype(str)
            array = self.root.create_array(f"subgroups/{attribute}", shape=(len(values),), dtype=str, overwrite=True)
            array[:] = values
        self.root.attrs.update(
            {
                "format_version": CACHE_FORMAT_VERSION,
                "dataset": dataset.name,
                "task": {"name": dataset.task.name, "kind": dataset.task.kind,
                         "class_names": list(dataset.task.class_names)},
                "modality": dataset.modality,
                "image_size": dataset.image_size,
                "n_images": len(dataset),
                "id_digest": digest,
                "test_digest": test_digest(dataset),
                "table_digest": table,
                "subgroups": attributes,
                "split_design": dataset.split_design,
            }
        )
        self.drop_stale_current()

    def drop_stale_current(self) -> list[str]:
        """Unset ``current`` for encoders whose current group was computed for another image list or test split."""
        dropped = []
        ids, test = self.root.attrs.get("id_digest"), self.root.attrs.get("test_digest")
        for encoder in self.encoder_names():
            node = child_group(self.root, f"encoders/{encoder}")
            current = cast(str | None, node.attrs.get("current"))
            if current is None or current not in node:
                continue
            fields = cast(dict[str, Any], child_group(node, current).attrs.get("fields", {}))
            if fields.get("image_ids_sha256") != ids or fields.get("test_ids_sha256", test) != test:
                del node.attrs["current"]
                dropped.append(encoder)
        return dropped

    def read_table(self) -> SampleTable:
        attrs = self.root.attrs
        if "id_digest" not in attrs:
            raise CacheError(f"{self.path} has no sample table; run `crs extract` first")
        task = cast(dict[str, Any], attrs["task"])
        splits = _strings(child_array(self.root, "splits")[:])
        recorded = cast(str | None, attrs.get("split_design"))
        return SampleTable(
            name=cast(str, attrs["dataset"]),
            task=Task(task["name"], task["kind"], tuple(task["class_names"])),
            modality=cast(str, attrs["modality"]),
            image_size=int(cast(int, attrs["image_size"])),
            ids=_strings(child_array(self.root, "ids")[:]),
            labels=np.asarray(child_array(self.root, "labels")[...]),
            splits=splits,
            groups=_strings(child_array(self.root, "groups")[:]),
            subgroups={str(a): _strings(child_array(self.root, f"subgroups/{a}")[:])
                       for a in cast(list, attrs.get("subgroups", []))},
            split_design=recorded if recorded is not None else inferred_design(splits),
            split_design_recorded=recorded is not None,
        )

    # -- encoder groups ---------------------------------------------------------------------
    def encoder_names(self) -> list[str]:
        if "encoders" not in self.root:
            return []
        return sorted(child_group(self.root, "encoders").group_keys())

    def fingerprints(self, encoder: str) -> list[str]:
        if encoder not in self.encoder_names():
            return []
        return sorted(child_group(self.root, f"encoders/{encoder}").group_keys())

    def current_fingerprint(self, encoder: str) -> str:
        """The fingerprint written by the latest extraction of ``encoder`` (stage 2 reads this one)."""
        if encoder not in self.encoder_names():
            raise CacheError(
                f"encoder {encoder!r} has no features in {self.path}; run `crs extract` for it "
                f"(present: {self.encoder_names() or 'none'})"
            )
        current = cast(str | None, child_group(self.root, f"encoders/{encoder}").attrs.get("current"))
        if current is None:
            raise CacheError(f"encoder {encoder!r} in {self.path} has no finished extraction")
        return current

    def encoder_group(self, encoder: str, fingerprint: str, fields: dict[str, Any] | None = None) -> zarr.Group:
        path = f"encoders/{encoder}/{fingerprint}"
        if path in self.root:
            return child_group(self.root, path)
        if fields is None:
            raise CacheError(f"no feature group {path} in {self.path}")
        group = self.root.require_group(path)
        group.attrs.update({"fields": fields, "complete": False})
        return group

    def mark_current(self, encoder: str, fingerprint: str) -> None:
        child_group(self.root, f"encoders/{encoder}").attrs["current"] = fingerprint
        child_group(self.root, f"encoders/{encoder}/{fingerprint}").attrs["complete"] = True

    def feature_array_names(self, encoder: str, fingerprint: str | None = None) -> list[str]:
        """Relative names of the feature arrays of one encoder: ``clean``, ``corrupt/<c>/<s>``."""
        fingerprint = fingerprint or self.current_fingerprint(encoder)
        group = self.encoder_group(encoder, fingerprint)
        names = []
        for name, node in group.members(max_depth=None):
            if isinstance(node, zarr.Array) and not name.endswith(("__done", "__sha256")):
                names.append(name)
        return sorted(names)

    def read_features(self, encoder: str, name: str = "clean", fingerprint: str | None = None) -> np.ndarray:
        """Load one whole feature array as float32 (stage 2 reads a matrix once, subsets in memory)."""
        return np.asarray(self.feature_array(encoder, name, fingerprint)[...], dtype=np.float32)

    def feature_array(self, encoder: str, name: str = "clean", fingerprint: str | None = None) -> zarr.Array:
        """One finished feature array, unread (stage 2 reads it in row blocks to bound its memory)."""
        fingerprint = fingerprint or self.current_fingerprint(encoder)
        group = self.encoder_group(encoder, fingerprint)
        if name not in group:
            raise CacheError(f"{self.path}: encoder {encoder!r} has no features {name!r}; run `crs extract`")
        done = np.asarray(child_array(group, f"{name}__done")[:])
        if not done.all():
            missing = np.flatnonzero(done == 0).tolist()
            raise CacheError(
                f"{self.path}: {encoder}/{name} has unfinished row chunks {missing}; re-run `crs extract` to resume"
            )
        return child_array(group, name)
