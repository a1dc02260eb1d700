"""One encoder's features on one data set as a single HDF5 file, for people who use other tools.

File layout (``crs cache export-h5``; ``crs import-features`` reads it back)::

    /ids              (N,)  utf-8 strings, the store's row order
    /labels           (N,) int64 or (N, L) float32 (NaN = ignored label)
    /splits, /groups  (N,)  utf-8 strings
    /test_ids         (N_test,) the rows of every corrupt/ array, in order
    /corrupt_ids      (N_sub,) instead, when they hold a corruption subsample (``[extract] corruption_rows``)
    /features/clean                     (N, D) float16
    /features/corrupt/<corruption>/<severity>   (N_test, D) float16

Root attributes: ``format = "crs-features"``, ``format_version``, ``dataset``, ``encoder``,
``fingerprint``, ``task_name``, ``task_kind``, ``class_names``, ``modality``, ``image_size`` and
``fields`` (the fingerprint fields as JSON). Features keep the cache's float16 so an export and a
re-import are bit-identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crs.cache.corrupt_rows import group_positions
from crs.cache.fingerprint import canonical_json
from crs.cache.inspect import feature_array_names
from crs.cache.store import CacheError, FeatureStore, store_path

H5_FORMAT = "crs-features"
H5_FORMAT_VERSION = 1


def _h5py():
    try:
        import h5py
    except ModuleNotFoundError:
        raise ModuleNotFoundError("HDF5 export and import need h5py; install it with `pip install h5py`") from None
    return h5py


def export_h5(cache_root: Path | str, dataset: str, encoder: str, out: Path | str,
              fingerprint: str | None = None) -> Path:
    """Write ``encoder``'s current (or the named) features on ``dataset`` and its sample table to ``out``.

    Written to ``out`` + ``.tmp`` and renamed, so a crash never leaves a file that looks finished.
    Features are copied one row chunk at a time, so memory stays at one chunk whatever the size.
    """
    h5py = _h5py()
    store = FeatureStore(store_path(cache_root, dataset))
    table = store.read_table()
    fingerprint = fingerprint or store.current_fingerprint(encoder)
    group: Any = store.encoder_group(encoder, fingerprint)
    if not group.attrs.get("complete", False):
        raise CacheError(f"{store.path}: {encoder}/{fingerprint} is not complete; finish `crs extract` before exporting")
    names = feature_array_names(group)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    strings = h5py.string_dtype("utf-8")
    with h5py.File(tmp, "w") as f:
        f.create_dataset("ids", data=table.ids.astype(object), dtype=strings)
        f.create_dataset("splits", data=table.splits.astype(object), dtype=strings)
        f.create_dataset("groups", data=table.groups.astype(object), dtype=strings)
        f.create_dataset("test_ids", data=table.ids[table.indices("test")].astype(object), dtype=strings)
        f.create_dataset("labels", data=table.labels)
        positions = group_positions(group)  # a corruption subsample: its own ids
        if positions is not None:
            f.create_dataset("corrupt_ids", data=table.ids[table.indices("test")][positions].astype(object),
                             dtype=strings)
        for name in names:
            done = np.asarray(group[f"{name}__done"][:])
            if not done.all():
                raise CacheError(f"{store.path}: {encoder}/{name} has unfinished chunks; finish `crs extract` first")
            source = group[name]
            node = f.create_dataset(f"features/{name}", shape=source.shape, dtype=source.dtype)
            step = int(source.chunks[0])
            for start in range(0, source.shape[0], step):
                # Raw float16 from zarr (not read_features' float32) so the export is bit-exact.
                node[start:start + step] = np.asarray(source[start:start + step])
            node.attrs["condition"] = name
            node.attrs["rows"] = "ids" if name == "clean" else "test_ids" if positions is None else "corrupt_ids"
        attrs = {
            "format": H5_FORMAT, "format_version": H5_FORMAT_VERSION, "dataset": table.name,
            "encoder": encoder, "fingerprint": fingerprint, "task_name": table.task.name,
            "task_kind": table.task.kind, "class_names": json.dumps(list(table.task.class_names)),
            "modality": table.modality, "image_size": table.image_size,
            "fields": canonical_json(dict(group.attrs.get("fields", {}))),
        }
        f.attrs.update(attrs)
    tmp.replace(out)
    return out


def is_crs_export(path: Path | str) -> bool:
    h5py = _h5py()
    with h5py.File(path, "r") as f:
        return f.attrs.get("format") == H5_FORMAT


def h5_conditions(path: Path | str) -> list[str]:
    """Feature conditions in a crs export (``clean``, ``corrupt/<c>/<s>``), or ``[]`` for other files."""
    h5py = _h5py()
    names: list[str] = []
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") != H5_FORMAT or "features" not in f:
            return []

        def visit(name: str, node) -> None:
            if isinstance(node, h5py.Dataset):
                names.append(name)

        f["features"].visititems(visit)
    return sorted(names, key=lambda n: (n != "clean", n))


@dataclass
class H5Features:
    """One condition's features in an open HDF5 file: the dataset (sliced in row blocks) and its ids."""

    file: Any
    dataset: Any
    ids: np.ndarray | None

    def close(self) -> None:
        self.file.close()


def open_h5_features(path: Path | str, condition: str) -> H5Features:
    """``condition``'s features from a crs export, or ``features`` (+ ``ids``) from a plain file, opened.

    ``ids`` is None when a plain file has no ``ids`` dataset (the caller then needs an ids file).
    The caller closes the returned object; nothing but the ids is read here.
    """
    h5py = _h5py()
    f = h5py.File(path, "r")
    try:
        if f.attrs.get("format") == H5_FORMAT:
            key = f"features/{condition}"
            if key not in f:
                raise FeatureFileError(f"{path} has no features for condition {condition!r}; it holds {h5_conditions(path)}")
            node = f[key]
            rows = node.attrs.get("rows", "ids" if condition == "clean" else "test_ids")
            return H5Features(f, node, _decode(f[rows][...]))
        if "features" not in f:
            raise FeatureFileError(
                f"{path} is neither a crs export nor a file with a 'features' dataset (it holds {sorted(f.keys())})"
            )
        return H5Features(f, f["features"], _decode(f["ids"][...]) if "ids" in f else None)
    except BaseException:
        f.close()
        raise


def export_fields(path: Path | str) -> dict[str, Any]:
    """The fingerprint fields a crs export carries (where its features first came from), else {}."""
    path = Path(path)
    if path.suffix.lower() not in (".h5", ".hdf5"):
        return {}
    with _h5py().File(path, "r") as f:
        raw = f.attrs.get("fields") if f.attrs.get("format") == H5_FORMAT else None
    try:
        return dict(json.loads(raw)) if raw else {}
    except (TypeError, ValueError):
        return {}


def _decode(values: np.ndarray) -> np.ndarray:
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values).tolist()], dtype=str)


class FeatureFileError(ValueError):
    """An imported features file is unreadable or lacks what it must hold; the message names the file."""
