"""Bring features computed elsewhere (a hosted model, another cluster) into the cache layout.

An import lands in ``encoders/<encoder>/<fingerprint>`` exactly like an extraction, so stage 2
cannot tell the two apart. Rows are matched by image id, never by position: every id of the data
set (``clean``) or of its test split (``corrupt/...``) must appear exactly once, and no other id may.

Memory stays at a few row blocks whatever the file's size: the file is read in row blocks (see
:mod:`crs.cache.feature_files`), each block is checked (NaN, infinity, float16 range) and written
as float16 row chunks into a staging folder beside the stores, ``<cache>/.crs-staging/``. Rows that
are not in the store's order go through a spill file there first (written at their target rows,
then read back in chunk order). Only a fully written and checked condition is moved (renamed) into
the store, so a refused or interrupted import changes nothing that stage 2 reads.

Groups and fingerprints (decision record ``docs/decisions/0016-imported-groups-append.md``):
an imported group's fingerprint hashes its identity fields and the conditions it was created with
(file name, file sha256 and a content digest each). Adding a condition the group lacks is an
append: the array is moved into the current group, its fingerprint stays, and the condition is
recorded under the group's ``appended`` attribute (stage 2's incremental key changes with the new
array name). Importing other features for a condition the group already holds makes a new group
whose fields name every condition's content, so the fingerprint changes; the unchanged arrays are
hard-linked from the previous group (copied where links are impossible), never re-read.
Importing identical features again (the same file, or other files with the same float16 content)
changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import zarr

from crs.cache import corrupt_rows as stored_rows
from crs.cache.feature_files import FeatureFile, FeatureImportError, open_feature_file, read_ids
from crs.cache.fingerprint import fingerprint as hash_fields
from crs.cache.h5 import export_fields, h5_conditions
from crs.cache.lock import WriterLock, layout_lock, writer_lock_path
from crs.cache.store import (
    FEATURE_DTYPE,
    CacheError,
    FeatureStore,
    SampleTable,
    child_array,
    child_group,
    store_path,
)
from crs.cache.writer import CHECKSUM_SUFFIX, DONE_SUFFIX, ChunkedFeatureArray, fsync_file, is_marker_array
from crs.data import load_entry
from crs.data.check import FILE_LOADERS
from crs.data.shift import shift_target_dataset
from crs.data.subsample import CorruptionRows, corruption_rows, subsample_digest
from crs.spec import load_spec

__all__ = [
    "FeatureImportError", "ImportResult", "import_features", "read_ids", "write_table_from_spec",
    "STAGING_FOLDER", "DEFAULT_CHUNK_ROWS",
]

DEFAULT_CHUNK_ROWS = 4096
FLOAT16_MAX = float(np.finfo(np.float16).max)
STAGING_FOLDER = ".crs-staging"
_CONDITION = re.compile(r"^(clean|corrupt/[A-Za-z0-9_.-]+/[1-9][0-9]*)$")
_ENCODER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ARRAY_PARTS = (DONE_SUFFIX, CHECKSUM_SUFFIX, "")  # markers first, the array last: "array exists" => markers exist


@dataclass(frozen=True)
class ImportResult:
    """What one import did. ``added``: conditions appended to the encoder's group or written into a
    new one; ``replaced``: conditions whose features changed (they make a new group); ``kept``:
    conditions whose features were already there; ``linked``: conditions carried into a new group
    from ``previous`` (now stale) by hard link."""

    dataset: str
    encoder: str
    fingerprint: str
    conditions: tuple[str, ...]
    added: tuple[str, ...]
    replaced: tuple[str, ...]
    kept: tuple[str, ...]
    linked: tuple[str, ...]
    rows: dict[str, int]
    dim: int
    previous: str | None
    new_group: bool

    @property
    def unchanged(self) -> bool:
        return not self.added and not self.replaced

    def format(self) -> str:
        where = f"{self.dataset}/{self.encoder}"
        if self.unchanged:
            return f"import: {where} already holds these features (fingerprint {self.fingerprint})"
        written = [c for c in self.conditions if c in self.added or c in self.replaced]
        parts = ", ".join(f"{c} {self.rows[c]}x{self.dim}" for c in written)
        if self.new_group:
            text = f"import: {where} {parts} -> fingerprint {self.fingerprint} (current)"
        else:
            text = f"import: {where} {parts} added to fingerprint {self.fingerprint} (current)"
        if self.kept:
            text += f"; unchanged: {', '.join(self.kept)}"
        if self.linked:
            text += f"; linked {len(self.linked)} unchanged condition(s) from {self.previous}"
        if self.new_group and self.previous:
            text += f"; {self.previous} is now stale (`crs cache gc` removes it)"
        return text


# -- ids --------------------------------------------------------------------------------------------

def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _examples(values) -> str:
    shown = sorted(values)[:3]
    return ", ".join(repr(v) for v in shown) + (", ..." if len(values) > 3 else "")


@dataclass(frozen=True)
class _Rows:
    """The part of the sample table an import needs: the data set's name, ids and splits."""

    name: str
    ids: np.ndarray
    splits: np.ndarray
    corrupt: CorruptionRows | None = None  # the corrupted conditions' rows (None: the whole test split)

    @staticmethod
    def read(store: FeatureStore, corruption_rows_wanted: int | None = None) -> _Rows:
        attrs: Any = store.root.attrs
        if "id_digest" not in attrs:
            raise CacheError(f"{store.path} has no sample table; run `crs extract` first or give the spec")
        # zarr hands back numpy's variable-width StringDType; fixed-width str is what the rest compares with
        ids, splits = (np.array(np.asarray(child_array(store.root, key)[:]).tolist(), dtype=str) for key in ("ids", "splits"))
        rows = None
        if corruption_rows_wanted is not None:  # drawn as `crs extract` draws it, from the stored table
            table = store.read_table()
            test = table.indices("test")
            rows = corruption_rows(table.ids[test], table.labels[test], table.groups[test], corruption_rows_wanted)
        return _Rows(str(attrs["dataset"]), ids, splits, rows)


def expected_rows(table: SampleTable | _Rows, condition: str) -> tuple[np.ndarray, str]:
    """The ids an array of ``condition`` holds, in store order, and how to name that set in errors."""
    if condition == "clean":
        return table.ids, f"data set {table.name!r}"
    test_ids = table.ids[table.splits == "test"]
    rows = getattr(table, "corrupt", None)
    if rows is not None and not rows.is_full:
        return test_ids[rows.positions], (f"the corruption subsample ({len(rows.positions):,} test images, "
                                          f"corruption_rows = {rows.requested:,}) of data set {table.name!r}")
    return test_ids, f"the test split of data set {table.name!r}"


def match_rows(opened: FeatureFile, expected_ids: np.ndarray, source: str, target: str) -> np.ndarray:
    """For each store row, the file row holding it; refuse wrong shapes and repeated, missing or extra ids."""
    shape, ids = opened.shape, opened.ids
    if len(shape) != 2 or shape[1] == 0:
        raise FeatureImportError(f"{source}: features must be a 2-D array (rows x dim), got shape {shape}")
    if ids.ndim != 1 or len(ids) != shape[0]:
        raise FeatureImportError(f"{source}: {shape[0]} feature rows but {ids.size} ids; give exactly one id per row")
    repeated = [i for i, n in Counter(ids.tolist()).items() if n > 1]
    if repeated:
        raise FeatureImportError(f"{source}: {len(repeated)} id(s) appear more than once ({_examples(repeated)})")
    given, expected = set(ids.tolist()), set(expected_ids.tolist())
    missing, extra = expected - given, given - expected
    if missing:
        raise FeatureImportError(
            f"{source} lacks {len(missing)} of the {len(expected)} ids of {target} ({_examples(missing)}); "
            "every image of the sample table needs a feature row: add those rows, or remove those images "
            "from the data set's CSV and write the table again"
        )
    if extra:
        raise FeatureImportError(
            f"{source} has {len(extra)} id(s) that are not in {target} ({_examples(extra)}); remove those rows"
        )
    position = {image_id: row for row, image_id in enumerate(ids.tolist())}
    return np.fromiter((position[i] for i in expected_ids.tolist()), dtype=np.int64, count=len(expected_ids))


# -- writing one condition into the staging folder -------------------------------------------------

class _BlockChecks:
    """NaN/inf rows and the largest magnitude over every block, so the refusal counts the whole file."""

    def __init__(self, source: str, target_ids: np.ndarray):
        self.source, self.target_ids = source, target_ids
        self.bad_rows: list[int] = []
        self.n_bad = 0
        self.largest = 0.0

    def check(self, block: np.ndarray, store_rows: np.ndarray) -> bool:
        """Record the block's problems; True when the whole file is still clean (keep writing)."""
        if np.issubdtype(block.dtype, np.floating):
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                self.n_bad += int((~finite).sum())
                self.bad_rows.extend(store_rows[~finite][:3].tolist())
                block = block[finite]
        if block.size:
            self.largest = max(self.largest, float(np.abs(block).max()))
        return self.ok

    @property
    def ok(self) -> bool:
        return self.n_bad == 0 and self.largest <= FLOAT16_MAX

    def raise_if_bad(self) -> None:
        if self.n_bad:
            bad = self.target_ids[sorted(self.bad_rows)]
            raise FeatureImportError(
                f"{self.source}: {self.n_bad} row(s) hold NaN or infinite features ({_examples(bad.tolist())}); "
                "fix them upstream"
            )
        if self.largest > FLOAT16_MAX:
            raise FeatureImportError(
                f"{self.source}: values up to {self.largest:.3g} exceed the float16 cache range "
                f"({FLOAT16_MAX:.0f}); rescale them"
            )


def _as_float16(block: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return block.astype(np.float16)


def _stage_in_order(array: ChunkedFeatureArray, opened: FeatureFile, checks: _BlockChecks) -> None:
    """File rows already in store order: each row chunk is one contiguous block of the file."""
    for chunk in range(array.n_chunks):
        start, stop = array.chunk_bounds(chunk)
        block = opened.read(start, stop)
        if checks.check(block, np.arange(start, stop)):
            array.write_chunk(chunk, _as_float16(block))


def _stage_reordered(array: ChunkedFeatureArray, opened: FeatureFile, order: np.ndarray, checks: _BlockChecks,
                     spill: Path) -> None:
    """File rows in another order: read the file in order, write each row at its store row of a float16
    spill file (no mapping, so nothing counts towards resident memory), then copy the spill file chunk by chunk."""
    dim = opened.shape[1]
    row_bytes = dim * np.dtype(np.float16).itemsize
    store_row_of = np.empty_like(order)
    store_row_of[order] = np.arange(len(order))
    descriptor = os.open(spill, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(descriptor, len(order) * row_bytes)
        for start, block in opened.blocks():
            targets = store_row_of[start:start + len(block)]
            if not checks.check(block, targets):
                continue  # keep reading: the refusal counts every bad row of the file
            by_target = np.argsort(targets, kind="stable")
            targets, rows = targets[by_target], _as_float16(block)[by_target]
            runs = np.flatnonzero(np.diff(targets) != 1) + 1
            for first, last in zip(np.r_[0, runs], np.r_[runs, len(targets)], strict=True):
                os.pwrite(descriptor, rows[first:last].tobytes(), int(targets[first]) * row_bytes)
        if not checks.ok:
            return
        for chunk in range(array.n_chunks):
            start, stop = array.chunk_bounds(chunk)
            data = _pread_exact(descriptor, (stop - start) * row_bytes, start * row_bytes)
            array.write_chunk(chunk, np.frombuffer(data, dtype=np.float16).reshape(stop - start, dim))
    finally:
        os.close(descriptor)
        spill.unlink(missing_ok=True)


def _pread_exact(descriptor: int, count: int, offset: int) -> bytes:
    parts, read = [], 0
    while read < count:
        part = os.pread(descriptor, count - read, offset + read)
        if not part:
            raise OSError(f"spill file ended after {offset + read} bytes")
        parts.append(part)
        read += len(part)
    return b"".join(parts)


def content_digest(group: zarr.Group, name: str) -> str | None:
    """sha256 over an array's shape, row chunking and per-chunk checksums: equal digests, equal float16 bytes.

    None when the array is unfinished or has no checksums (it then never counts as unchanged).
    """
    checksums = f"{name}{CHECKSUM_SUFFIX}"
    if name not in group or checksums not in group or f"{name}{DONE_SUFFIX}" not in group:
        return None
    if not np.asarray(child_array(group, f"{name}{DONE_SUFFIX}")[:]).all():
        return None
    array = child_array(group, name)
    chunk_rows = int(cast(int, array.attrs.get("chunk_rows", array.chunks[0])))
    digest = hashlib.sha256(f"{tuple(array.shape)}|{chunk_rows}|".encode())
    digest.update(np.ascontiguousarray(child_array(group, checksums)[...], dtype=np.uint8).tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class _Staged:
    condition: str
    rows: int
    digest: str
    provenance: dict[str, str]


class _Staging:
    """``<cache>/.crs-staging/<dataset>/<encoder>/``: a zarr group for conditions being imported.

    One per (store, encoder): the encoder's writer lock makes it private. Removed when the import
    ends; a leftover from a killed import is removed by the next import of that encoder.
    """

    def __init__(self, cache_root: Path, dataset: str, encoder: str):
        self.path = cache_root / STAGING_FOLDER / dataset / encoder
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir(parents=True)
        self.group = zarr.open_group(str(self.path), mode="w")

    def stage(self, opened: FeatureFile, condition: str, order: np.ndarray, target_ids: np.ndarray,
              chunk_rows: int, source: str, provenance: dict[str, str]) -> _Staged:
        array = ChunkedFeatureArray(self.group, condition, len(order), opened.shape[1], chunk_rows, label=source)
        checks = _BlockChecks(source, target_ids)
        if np.array_equal(order, np.arange(len(order))):
            _stage_in_order(array, opened, checks)
        else:
            _stage_reordered(array, opened, order, checks, self.path / f"spill-{condition.replace('/', '_')}.f16")
        checks.raise_if_bad()
        digest = content_digest(self.group, condition)
        assert digest is not None  # every chunk was just written with its checksum
        return _Staged(condition, len(order), digest, {**provenance, "content": digest})

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        for folder in (self.path.parent, self.path.parent.parent):  # <dataset>/, then .crs-staging/, when empty
            try:
                folder.rmdir()
            except OSError:
                break


def _folder(group: zarr.Group) -> Path:
    return Path(cast(Any, group.store).root) / group.path


def _array_paths(folder: Path, name: str) -> list[Path]:
    return [folder / f"{name}{suffix}" for suffix in _ARRAY_PARTS]


def _move_array(staging: _Staging, target: zarr.Group, name: str) -> None:
    """Rename a staged array (markers first, data last) into ``target``; O(1), no data is copied."""
    if "/" in name:
        target.require_group(name.rsplit("/", 1)[0])
    folder = _folder(target)
    for source, destination in zip(_array_paths(staging.path, name), _array_paths(folder, name), strict=True):
        if destination.exists():  # a leftover of an interrupted import that never got recorded
            shutil.rmtree(destination)
        os.rename(source, destination)
    fsync_file(folder / f"{name}")


def _link_array(source_group: zarr.Group, target: zarr.Group, name: str) -> None:
    """Carry an unchanged array into a new group by hard links (chunk files are only ever replaced by
    rename, never rewritten in place, so the two groups cannot affect each other); copies where links fail."""
    if "/" in name:
        target.require_group(name.rsplit("/", 1)[0])
    for source, destination in zip(_array_paths(_folder(source_group), name), _array_paths(_folder(target), name),
                                   strict=True):
        for folder, _, files in os.walk(source):
            here = destination / Path(folder).relative_to(source)
            here.mkdir(parents=True, exist_ok=True)
            for file in files:
                if file == "zarr.json":  # metadata is small and rewritten when attributes change: copy it
                    shutil.copy2(Path(folder) / file, here / file)
                    continue
                try:
                    os.link(Path(folder) / file, here / file)
                except OSError:
                    shutil.copy2(Path(folder) / file, here / file)


# -- the import -------------------------------------------------------------------------------------

def _open_store(cache_root: Path, dataset: str) -> FeatureStore:
    path = store_path(cache_root, dataset)
    if not path.exists():
        raise FeatureImportError(
            f"no cache store for data set {dataset!r} at {path}; run `crs extract` once or give the spec "
            "to write its sample table"
        )
    return FeatureStore(path, mode="a")


@dataclass(frozen=True)
class _Current:
    """The encoder's current imported group, when new features can join it (same rows and dim)."""

    fingerprint: str
    group: zarr.Group
    fields: dict[str, Any]
    provenance: dict[str, dict[str, str]]  # every condition: as created plus appended

    def holds(self, name: str) -> bool:
        """Whether the group has an array ``name`` (a look at its folder: listing every member is slow)."""
        return (_folder(self.group) / name / "zarr.json").is_file()

    def arrays(self, store: FeatureStore, encoder: str) -> list[str]:
        return store.feature_array_names(encoder, self.fingerprint)


def _current_group(store: FeatureStore, encoder: str, dim: int) -> tuple[str | None, _Current | None]:
    """(the encoder's current fingerprint, that group if imported features of this dim may join it)."""
    if encoder not in store.encoder_names():
        return None, None
    current = cast(str | None, child_group(store.root, f"encoders/{encoder}").attrs.get("current"))
    if current is None:
        return None, None
    group = store.encoder_group(encoder, current)
    fields = dict(cast(dict[str, Any], group.attrs.get("fields", {})))
    attrs: Any = store.root.attrs
    same_rows = fields.get("image_ids_sha256") == attrs.get("id_digest") and fields.get(
        "test_ids_sha256", attrs.get("test_digest")) == attrs.get("test_digest")
    if not fields.get("imported") or not same_rows or int(fields.get("dim", -1)) != dim:
        return current, None  # extracted features, another image list or another dim: start afresh
    provenance = {**dict(fields.get("conditions", {})), **dict(cast(dict, group.attrs.get("appended", {})))}
    return current, _Current(current, group, fields, provenance)


def _identity_fields(encoder: str, dim: int, store: FeatureStore, origin: dict[str, Any]) -> dict[str, Any]:
    attrs: Any = store.root.attrs
    fields: dict[str, Any] = {
        "name": encoder,
        "imported": True,
        "weights": "unknown (features imported)",
        "dim": dim,
        "feature_dtype": FEATURE_DTYPE,
        "corruption_suite_version": origin.get("corruption_suite_version", "unknown (features imported)"),
        "image_ids_sha256": attrs["id_digest"],
        "origin": origin,
    }
    if attrs.get("test_digest") is not None:  # corrupt/ rows follow the test split; its order enters the hash
        fields["test_ids_sha256"] = attrs["test_digest"]
    return fields


def _conditions_to_import(path: Path, condition: str, ids_path: Path | None) -> list[str]:
    if condition == "all":
        if ids_path is not None:
            raise FeatureImportError("--ids cannot be used with --condition all: a crs export carries its own ids")
        conditions = h5_conditions(path) if path.suffix.lower() in (".h5", ".hdf5") else []
        if not conditions:
            raise FeatureImportError(f"--condition all needs a crs export (.h5 from `crs cache export-h5`); {path} is not one")
        return conditions
    if not _CONDITION.match(condition):
        raise FeatureImportError(f"condition {condition!r} must be 'clean', 'corrupt/<corruption>/<severity>' or 'all'")
    return [condition]


def import_features(
    cache_root: Path | str,
    dataset: str,
    encoder: str,
    path: Path | str,
    condition: str = "clean",
    ids_path: Path | str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    corruption_rows_wanted: int | None = None,
) -> ImportResult:
    """Store the features in ``path`` for ``condition`` (or ``all`` conditions of a crs export) under ``encoder``.

    ``corruption_rows_wanted``: corrupted conditions hold the corruption subsample of about that
    many test images (as ``[extract] corruption_rows`` draws it) instead of the whole test split.

    Every condition is read in row blocks, checked and written to the staging folder first; only
    then does anything in the store change: appended arrays are renamed into the current group, or
    a new group is filled and marked complete and current last. A refused or crashed import leaves
    the encoder's current group as it was.
    """
    path, cache_root = Path(path), Path(cache_root)
    ids_path = Path(ids_path) if ids_path is not None else None
    if not path.is_file():
        raise FeatureImportError(f"features file {path} not found")
    if not _ENCODER_NAME.match(encoder):
        raise FeatureImportError(f"encoder name {encoder!r} must be letters, digits, '_', '-' or '.'")
    conditions = _conditions_to_import(path, condition, ids_path)
    store = _open_store(cache_root, dataset)
    table = _Rows.read(store, corruption_rows_wanted)
    if table.name != dataset:
        raise CacheError(f"{store.path} holds data set {table.name!r}, not {dataset!r}")

    # Ids and shapes of every condition first (headers and ids only): refusals cost no feature reads.
    orders: dict[str, np.ndarray] = {}
    dims: dict[str, int] = {}
    for name in conditions:
        with open_feature_file(path, name, ids_path) as opened:
            expected, target = expected_rows(table, name)
            source = path.name if len(conditions) == 1 else f"{path.name} [{name}]"
            orders[name] = match_rows(opened, expected, source, target)
            dims[name] = opened.shape[1]
    if len(set(dims.values())) != 1:
        raise FeatureImportError(f"{path.name}: conditions differ in feature dim {dims}; all must share one")
    dim = next(iter(dims.values()))
    file_digest = file_sha256(path)
    provenance = {"file": path.name, "sha256": file_digest}

    # An import is a writer like `crs extract`: one per (store, encoder) at a time.
    with WriterLock(writer_lock_path(store.path, encoder), purpose=f"crs import-features {path.name}"):
        previous, current = _current_group(store, encoder, dim)
        rows = _corrupt_rows(store, table, conditions, current)
        staging = _Staging(cache_root, dataset, encoder)
        try:
            kept, staged = [], []
            for name in conditions:
                if current is not None and current.holds(name) and current.provenance.get(name, {}).get(
                        "sha256") == file_digest:
                    kept.append(name)  # the same file again: nothing to read
                    continue
                expected, _ = expected_rows(table, name)
                source = path.name if len(conditions) == 1 else f"{path.name} [{name}]"
                with open_feature_file(path, name, ids_path) as opened:
                    done = staging.stage(opened, name, orders[name], expected, chunk_rows, source, provenance)
                if current is not None and current.holds(name) and content_digest(current.group, name) == done.digest:
                    kept.append(name)  # the same features from another file
                    continue
                staged.append(done)
            result = _commit(store, dataset, encoder, dim, path, staging, staged, kept, conditions, previous, current)
            if rows is not None:
                group = store.encoder_group(encoder, result.fingerprint)
                for name in conditions:
                    if name.startswith("corrupt/"):
                        stored_rows.mark_array(group, name, rows)
                stored_rows.record_rows(group, rows)
        finally:
            staging.remove()
    return result


def _corrupt_rows(store: FeatureStore, table: _Rows, conditions: list[str], current: _Current | None,
                  ) -> CorruptionRows | None:
    """The rows of the corrupted conditions being imported (None: none is); refuses to mix them in one
    group with corrupted conditions of other rows (another ``corruption_rows``)."""
    if not any(name.startswith("corrupt/") for name in conditions):
        return None
    test = table.ids[table.splits == "test"]
    rows = table.corrupt or CorruptionRows(np.arange(len(test)), len(test), None, subsample_digest(test))
    if current is not None:
        whole_split = str(store.root.attrs.get("test_digest", ""))
        other = [name for name in _held_corrupt(current) if name not in conditions
                 and stored_rows.array_rows_digest(current.group, name, whole_split) != rows.digest]
        if other:
            raise FeatureImportError(
                f"the encoder's current group holds {len(other)} corrupted condition(s) of other test rows "
                f"({other[0]}, ...); import every corrupted condition with the same corruption_rows, or use a new "
                "encoder name"
            )
    return rows


def _held_corrupt(current: _Current) -> list[str]:
    """The corrupted conditions the group holds (a look at its folders: listing every member is slow)."""
    folder = _folder(current.group) / "corrupt"
    if not folder.is_dir():
        return []
    return sorted(f"corrupt/{c.name}/{s.name}" for c in folder.iterdir() if c.is_dir()
                  for s in c.iterdir() if (s / "zarr.json").is_file() and not is_marker_array(s.name))


def _commit(store: FeatureStore, dataset: str, encoder: str, dim: int, path: Path, staging: _Staging,
            staged: list[_Staged], kept: list[str], conditions: list[str], previous: str | None,
            current: _Current | None) -> ImportResult:
    """Move the staged conditions into the current group (append) or into a new group (replacement)."""
    rows = {s.condition: s.rows for s in staged}

    def result(fingerprint: str, added: tuple[str, ...], replaced: tuple[str, ...] = (), linked: tuple[str, ...] = (),
               previous: str | None = None, new_group: bool = False) -> ImportResult:
        return ImportResult(dataset, encoder, fingerprint, tuple(conditions), added, replaced, tuple(kept), linked,
                            rows, dim, previous, new_group)

    if not staged:
        assert current is not None  # with no current group every condition is staged
        return result(current.fingerprint, ())
    replaced = [s for s in staged if current is not None and current.holds(s.condition)]
    if current is not None and not replaced:  # only new conditions: an append, the fingerprint stays
        for item in staged:
            _move_array(staging, current.group, item.condition)
        appended = dict(cast(dict, current.group.attrs.get("appended", {})))
        appended.update({s.condition: s.provenance for s in staged})
        current.group.attrs["appended"] = appended
        return result(current.fingerprint, tuple(s.condition for s in staged))

    # A new group: its fields name the content of every condition it starts with.
    carried: dict[str, dict[str, str]] = {}
    if current is not None:
        new_names = {s.condition for s in staged}
        for name in current.arrays(store, encoder):
            if name in new_names:
                continue
            digest = content_digest(current.group, name)
            carried[name] = {**current.provenance.get(name, {"file": "unknown", "sha256": "unknown"}),
                             "content": digest or "unknown"}
    record = {**carried, **{s.condition: s.provenance for s in staged}}
    origin = dict(current.fields.get("origin", {})) if current is not None else export_fields(path)
    fields = _identity_fields(encoder, dim, store, origin)
    fields["source"] = "import:" + ",".join(sorted({entry["file"] for entry in record.values()}))
    fields["conditions"] = record
    new_fingerprint = hash_fields(fields)
    with layout_lock(store.path, "create an imported feature group"):
        stale = store.path / "encoders" / encoder / new_fingerprint
        if stale.exists():  # an older group with this exact content (never the current one): rebuilt
            shutil.rmtree(stale)
        group = store.encoder_group(encoder, new_fingerprint, fields)
    if current is not None:
        for name in carried:
            _link_array(current.group, group, name)
    for item in staged:
        _move_array(staging, group, item.condition)
    store.mark_current(encoder, new_fingerprint)
    added = tuple(s.condition for s in staged if s not in replaced)
    return result(new_fingerprint, added, tuple(s.condition for s in replaced), tuple(carried), previous, True)


# -- the sample table from a spec ---------------------------------------------------------------------

def write_table_from_spec(spec_path: Path | str, dataset: str, cache_root: Path | str | None = None) -> Path:
    """Write ``dataset``'s sample table (ids, labels, splits, groups) from a spec, opening no image.

    The table needs only the data set's CSV (labels, splits, ids, groups): loaders that read files
    are run with ``verify = "none"``, so the images need not be on this machine. Every row of the
    CSV is in the table (nothing is screened, so ``skip_bad`` has nothing to skip). Refuses to
    touch a store whose image list differs: rewriting the table would drop every encoder group in it.
    """
    spec = load_spec(spec_path)
    cache_root = Path(cache_root) if cache_root is not None else spec.cache
    entries: dict[str, tuple[Any, Any]] = {}
    for entry in spec.datasets:
        entries[entry.name] = (entry, None)
        for target in entry.shift_targets:
            entries[target.name] = (target, entry)
    if dataset not in entries:
        raise FeatureImportError(f"data set {dataset!r} is not in {spec_path}; it names {sorted(entries)}")
    entry, source_entry = entries[dataset]
    loaded = _table_only(entry)
    if source_entry is not None:  # a shift target takes its source's geometry and label space, as in `crs extract`
        loaded = shift_target_dataset(loaded, _table_only(source_entry))

    path = store_path(cache_root, dataset)
    with layout_lock(path, "write the sample table"):
        store = FeatureStore(path, mode="a")
        existing = store.root.attrs.get("id_digest")
        if existing is not None and existing != loaded.id_digest():
            raise FeatureImportError(
                f"{path} already holds another image list for {dataset!r}; move it away or import into that list"
            )
        store.write_table(loaded)
    return path


def _table_only(entry: Any):
    """Load a spec entry's table without opening its images (file loaders take ``verify = "none"``)."""
    extra = {"verify": "none"} if entry.loader in FILE_LOADERS else {}
    return load_entry(entry, **extra)
