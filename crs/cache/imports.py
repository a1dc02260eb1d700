"""Bring features computed elsewhere (a hosted model, another cluster) into the cache layout.

An import lands in ``encoders/<encoder>/<fingerprint>`` exactly like an extraction, so stage 2
cannot tell the two apart. The fingerprint hashes ``source = "import:<file names>"``, the sha256 of
every imported file per condition, the image-id digest and the dimension: importing another file
gives a new fingerprint, importing the same file again is a no-op. Conditions imported one file at
a time (``clean``, then ``corrupt/<c>/<s>``) accumulate: the new group carries the earlier import's
other conditions over and the previous group turns stale (``crs cache gc`` removes it).

Rows are matched by image id, never by position: every id of the data set (``clean``) or of its
test split (``corrupt/...``) must appear exactly once, and no other id may.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crs.cache.fingerprint import fingerprint as hash_fields
from crs.cache.h5 import FeatureFileError, h5_conditions, read_h5
from crs.cache.store import FEATURE_DTYPE, CacheError, FeatureStore, SampleTable, store_path

DEFAULT_CHUNK_ROWS = 4096
FLOAT16_MAX = float(np.finfo(np.float16).max)
_CONDITION = re.compile(r"^(clean|corrupt/[A-Za-z0-9_.-]+/[1-9][0-9]*)$")
_ENCODER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ID_COLUMNS = ("id", "image_id", "ids")


class FeatureImportError(ValueError):
    """An import was refused; the one-line message names the file, the ids or the option to fix."""


@dataclass(frozen=True)
class ImportResult:
    dataset: str
    encoder: str
    fingerprint: str
    conditions: tuple[str, ...]
    carried: tuple[str, ...]
    rows: dict[str, int]
    dim: int
    previous: str | None
    unchanged: bool

    def format(self) -> str:
        if self.unchanged:
            return f"import: {self.dataset}/{self.encoder} already holds these features (fingerprint {self.fingerprint})"
        parts = ", ".join(f"{c} {self.rows[c]}x{self.dim}" for c in self.conditions)
        text = f"import: {self.dataset}/{self.encoder} {parts} -> fingerprint {self.fingerprint} (current)"
        if self.carried:
            text += f"; carried over {', '.join(self.carried)}"
        if self.previous:
            text += f"; {self.previous} is now stale (`crs cache gc` removes it)"
        return text


# -- reading files ----------------------------------------------------------------------------------

def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_ids(path: Path) -> np.ndarray:
    """Row ids from a text file (one per line) or a CSV (column ``id``/``image_id``, or its only column)."""
    if not path.is_file():
        raise FeatureImportError(f"ids file {path} not found")
    if path.suffix.lower() == ".csv":
        import pandas as pd

        table = pd.read_csv(path, dtype=str, keep_default_na=False)
        column = next((c for c in ID_COLUMNS if c in table.columns), None)
        if column is None and len(table.columns) == 1:
            column = table.columns[0]
        if column is None:
            raise FeatureImportError(
                f"ids file {path} has columns {list(table.columns)}; name the id column one of {list(ID_COLUMNS)}"
            )
        return table[column].str.strip().to_numpy(dtype=str)
    lines = [line.strip() for line in path.read_text().splitlines()]
    return np.array([line for line in lines if line], dtype=str)


def _load_numpy(path: Path, suffix: str):
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as error:  # object arrays need pickle, which could run code: refused
        raise FeatureImportError(
            f"{path} holds Python objects ({error}); save plain numeric features and string ids"
        ) from None
    except (OSError, EOFError) as error:
        raise FeatureImportError(f"{path} is not a readable {suffix} file ({error})") from None


def read_feature_file(path: Path, condition: str, ids_path: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features, ids) from an .npy (+ ids file), an .npz (``features``, ``ids``) or an .h5 file."""
    if not path.is_file():
        raise FeatureImportError(f"features file {path} not found")
    suffix = path.suffix.lower()
    ids = None
    if suffix == ".npy":
        features = _load_numpy(path, suffix)
        if ids_path is None:
            raise FeatureImportError(
                f"{path} is a bare .npy: give its row ids with --ids FILE (one id per line, or a CSV with an 'id' column)"
            )
    elif suffix == ".npz":
        with _load_numpy(path, suffix) as archive:
            missing = [k for k in ("features", "ids") if k not in archive.files and not (k == "ids" and ids_path)]
            if missing:
                raise FeatureImportError(f"{path} lacks array(s) {missing}; an .npz needs 'features' and 'ids'")
            features = archive["features"]
            if "ids" in archive.files:
                ids = np.asarray(archive["ids"]).astype(str)
    elif suffix in (".h5", ".hdf5"):
        try:
            features, ids = read_h5(path, condition)
        except OSError as error:
            raise FeatureImportError(f"{path} is not a readable HDF5 file ({error})") from None
        except FeatureFileError as error:
            raise FeatureImportError(str(error)) from None
        if ids is None and ids_path is None:
            raise FeatureImportError(f"{path} has a 'features' dataset but no 'ids'; add one or pass --ids FILE")
    else:
        raise FeatureImportError(f"{path}: unknown features format {suffix!r}; use .npy (+ --ids), .npz or .h5")
    if ids_path is not None:
        ids = read_ids(ids_path)
    return np.asarray(features), np.asarray(ids).astype(str)


# -- checking and aligning ------------------------------------------------------------------------

def _examples(values) -> str:
    shown = sorted(values)[:3]
    return ", ".join(repr(v) for v in shown) + (", ..." if len(values) > 3 else "")


def align_rows(features: np.ndarray, ids: np.ndarray, expected_ids: np.ndarray, source: str, target: str) -> np.ndarray:
    """Reorder ``features`` to ``expected_ids``; refuse wrong shapes, repeated, missing or extra ids, NaN/inf."""
    if features.ndim != 2 or features.shape[1] == 0:
        raise FeatureImportError(f"{source}: features must be a 2-D array (rows x dim), got shape {features.shape}")
    if not (np.issubdtype(features.dtype, np.floating) or np.issubdtype(features.dtype, np.integer)):
        raise FeatureImportError(f"{source}: features must be numeric, got dtype {features.dtype}")
    if ids.ndim != 1 or len(ids) != features.shape[0]:
        raise FeatureImportError(
            f"{source}: {features.shape[0]} feature rows but {ids.size} ids; give exactly one id per row"
        )
    repeated = [i for i, n in Counter(ids.tolist()).items() if n > 1]
    if repeated:
        raise FeatureImportError(f"{source}: {len(repeated)} id(s) appear more than once ({_examples(repeated)})")
    given, expected = set(ids.tolist()), set(expected_ids.tolist())
    missing, extra = expected - given, given - expected
    if missing:
        raise FeatureImportError(
            f"{source} lacks {len(missing)} of the {len(expected)} ids of {target} ({_examples(missing)}); "
            "every image needs a feature row"
        )
    if extra:
        raise FeatureImportError(
            f"{source} has {len(extra)} id(s) that are not in {target} ({_examples(extra)}); remove those rows"
        )
    position = {image_id: row for row, image_id in enumerate(ids.tolist())}
    ordered = np.asarray(features[[position[i] for i in expected_ids.tolist()]], dtype=np.float32)
    finite = np.isfinite(ordered).all(axis=1)
    if not finite.all():
        bad = expected_ids[~finite]
        raise FeatureImportError(
            f"{source}: {len(bad)} row(s) hold NaN or infinite features ({_examples(bad.tolist())}); fix them upstream"
        )
    largest = float(np.abs(ordered).max()) if ordered.size else 0.0
    if largest > FLOAT16_MAX:
        raise FeatureImportError(
            f"{source}: values up to {largest:.3g} exceed the float16 cache range ({FLOAT16_MAX:.0f}); rescale them"
        )
    return ordered


def expected_rows(table: SampleTable, condition: str) -> tuple[np.ndarray, str]:
    """The ids an array of ``condition`` holds, in store order, and how to name that set in errors."""
    if condition == "clean":
        return table.ids, f"data set {table.name!r}"
    return table.ids[table.indices("test")], f"the test split of data set {table.name!r}"


# -- writing ----------------------------------------------------------------------------------------

def _open_store(cache_root: Path, dataset: str) -> FeatureStore:
    path = store_path(cache_root, dataset)
    if not path.exists():
        raise FeatureImportError(
            f"no cache store for data set {dataset!r} at {path}; run `crs extract` once or give the spec "
            "to write its sample table"
        )
    return FeatureStore(path, mode="a")


def _previous_import(store: FeatureStore, encoder: str, table: SampleTable, dim: int) -> tuple[str | None, dict[str, Any]]:
    """The encoder's current group, and its imported conditions if they can be carried into a new group."""
    if encoder not in store.encoder_names():
        return None, {}
    root: Any = store.root
    current = root["encoders"][encoder].attrs.get("current")
    if current is None:
        return None, {}
    group: Any = store.encoder_group(encoder, str(current))
    fields = dict(group.attrs.get("fields", {}))
    same_rows = fields.get("image_ids_sha256") == root.attrs.get("id_digest")
    if not fields.get("imported") or not same_rows or int(fields.get("dim", -1)) != dim:
        return current, {}  # extracted features, another image list or another dim: start afresh
    return current, dict(fields.get("conditions", {}))


def store_attrs(store: FeatureStore) -> Any:
    return store.root.attrs


def table_digest(store: FeatureStore) -> str:
    return str(store_attrs(store)["id_digest"])


def _write_array(group, name: str, data: np.ndarray, chunk_rows: int) -> None:
    from crs.cache.writer import ChunkedFeatureArray

    array = ChunkedFeatureArray(group, name, data.shape[0], data.shape[1], chunk_rows)
    for chunk in array.pending_chunks():
        start, stop = array.chunk_bounds(chunk)
        array.write_chunk(chunk, data[start:stop])


def import_features(
    cache_root: Path | str,
    dataset: str,
    encoder: str,
    path: Path | str,
    condition: str = "clean",
    ids_path: Path | str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> ImportResult:
    """Store the features in ``path`` for ``condition`` (or ``all`` conditions of a crs export) under ``encoder``.

    The group is marked complete and current only after every array is written, so stage 2 uses it
    from then on and a crash mid-import leaves the previous current group in charge.
    """
    path, cache_root = Path(path), Path(cache_root)
    ids_path = Path(ids_path) if ids_path is not None else None
    if not path.is_file():
        raise FeatureImportError(f"features file {path} not found")
    if not _ENCODER_NAME.match(encoder):
        raise FeatureImportError(f"encoder name {encoder!r} must be letters, digits, '_', '-' or '.'")
    if condition == "all":
        if ids_path is not None:
            raise FeatureImportError("--ids cannot be used with --condition all: a crs export carries its own ids")
        if path.suffix.lower() not in (".h5", ".hdf5") or not h5_conditions(path):
            raise FeatureImportError(f"--condition all needs a crs export (.h5 from `crs cache export-h5`); {path} is not one")
        conditions = h5_conditions(path)
    elif _CONDITION.match(condition):
        conditions = [condition]
    else:
        raise FeatureImportError(f"condition {condition!r} must be 'clean', 'corrupt/<corruption>/<severity>' or 'all'")

    store = _open_store(cache_root, dataset)
    table = store.read_table()
    if table.name != dataset:
        raise CacheError(f"{store.path} holds data set {table.name!r}, not {dataset!r}")
    digest = file_sha256(path)
    new_arrays: dict[str, np.ndarray] = {}
    for name in conditions:
        features, ids = read_feature_file(path, name, ids_path)
        expected, target = expected_rows(table, name)
        source = path.name if len(conditions) == 1 else f"{path.name} [{name}]"
        new_arrays[name] = align_rows(features, ids, expected, source, target)
    dims = {name: array.shape[1] for name, array in new_arrays.items()}
    if len(set(dims.values())) != 1:
        raise FeatureImportError(f"{path.name}: conditions differ in feature dim {dims}; all must share one")
    dim = next(iter(dims.values()))

    previous, carried_conditions = _previous_import(store, encoder, table, dim)
    conditions_record = {**carried_conditions, **{name: {"file": path.name, "sha256": digest} for name in conditions}}
    files = sorted({entry["file"] for entry in conditions_record.values()})
    origin = _origin_fields(path)
    fields = {
        "name": encoder,
        "source": "import:" + ",".join(files),
        "imported": True,
        "weights": "unknown (features imported)",
        "conditions": conditions_record,
        "dim": dim,
        "feature_dtype": FEATURE_DTYPE,
        "corruption_suite_version": origin.get("corruption_suite_version", "unknown (features imported)"),
        "image_ids_sha256": table_digest(store),
        "origin": origin,
    }
    test_ids_sha256 = store_attrs(store).get("test_digest")
    if test_ids_sha256 is not None:  # corrupt/ rows follow the test split; its order enters the hash
        fields["test_ids_sha256"] = test_ids_sha256
    new_fingerprint = hash_fields(fields)
    rows = {name: int(array.shape[0]) for name, array in new_arrays.items()}
    if previous == new_fingerprint:
        return ImportResult(dataset, encoder, new_fingerprint, tuple(conditions), (), rows, dim, None, True)

    from crs.cache.lock import WriterLock, layout_lock_path, writer_lock_path

    carried = tuple(sorted(set(carried_conditions) - set(conditions)))
    # An import is a writer like `crs extract`: one per (store, encoder) at a time.
    with WriterLock(writer_lock_path(store.path, encoder), purpose=f"crs import-features {path.name}"):
        with WriterLock(layout_lock_path(store.path), purpose="create an imported feature group", wait=True):
            group = store.encoder_group(encoder, new_fingerprint, fields)
        for name in carried:
            _write_array(group, name, store.read_features(encoder, name, previous), chunk_rows)
        for name, data in new_arrays.items():
            _write_array(group, name, data, chunk_rows)
        store.mark_current(encoder, new_fingerprint)
    return ImportResult(dataset, encoder, new_fingerprint, tuple(conditions), carried, rows, dim, previous, False)


def _origin_fields(path: Path) -> dict[str, Any]:
    """The fingerprint fields a crs export carries (where its features first came from), else {}."""
    if path.suffix.lower() not in (".h5", ".hdf5"):
        return {}
    import json

    from crs.cache.h5 import _h5py

    with _h5py().File(path, "r") as f:
        raw = f.attrs.get("fields")
    try:
        return dict(json.loads(raw)) if raw else {}
    except (TypeError, ValueError):
        return {}


def write_table_from_spec(spec_path: Path | str, dataset: str, cache_root: Path | str | None = None) -> Path:
    """Write ``dataset``'s sample table (ids, labels, splits, groups) from a spec, decoding no image.

    Refuses to touch a store whose image list differs: rewriting the table would drop every
    encoder group in it.
    """
    from crs.data import load_entry
    from crs.spec import load_spec

    spec = load_spec(spec_path)
    cache_root = Path(cache_root) if cache_root is not None else spec.cache
    entries: dict[str, tuple[Any, Any]] = {}
    for entry in spec.datasets:
        entries[entry.name] = (entry, None)
        if entry.shift_target is not None:
            entries[entry.shift_target.name] = (entry.shift_target, entry)
    if dataset not in entries:
        raise FeatureImportError(f"data set {dataset!r} is not in {spec_path}; it names {sorted(entries)}")
    entry, source_entry = entries[dataset]
    loaded = load_entry(entry)
    if source_entry is not None:  # a shift target takes its source's canonical size, as in `crs extract`
        loaded.image_size = load_entry(source_entry).image_size
    from crs.cache.lock import WriterLock, layout_lock_path

    path = store_path(cache_root, dataset)
    with WriterLock(layout_lock_path(path), purpose="write the sample table", wait=True):
        store = FeatureStore(path, mode="a")
        existing = store_attrs(store).get("id_digest")
        if existing is not None and existing != loaded.id_digest():
            raise FeatureImportError(
                f"{path} already holds another image list for {dataset!r}; move it away or import into that list"
            )
        store.write_table(loaded)
    return path
