"""``crs cache verify``: check every feature array of a store against what its writer recorded.

Per feature array: the shape, dtype and row chunking recorded at creation, the row count the
sample table implies (all images for ``clean``, the test split for ``corrupt/...``), and per
complete chunk: its file exists, it decodes, it is finite, and its sha256 equals the checksum
written before its flag. Incomplete chunks are reported too (a killed run: resume it). Leftover
temporary files of a killed write are reported and removed by ``repair``.

``repair`` marks every bad chunk incomplete (flag and checksum cleared), deletes arrays whose
shape or dtype is wrong, and removes temporary files; the next ``crs extract`` of the same spec
then recomputes exactly those chunks. Run it while no writer is running.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import zarr

from crs.cache.corrupt_rows import group_positions
from crs.cache.store import FEATURE_DTYPE, CacheError, child_array, child_group
from crs.cache.writer import CHECKSUM_SUFFIX, DONE_SUFFIX, chunk_checksum, chunk_file, is_marker_array
from crs.spec import for_setting

# Kinds of problem. Chunk-level ones are repaired by re-extracting that chunk.
CHUNK_KINDS = ("incomplete", "missing-chunk", "unreadable", "checksum", "no-checksum", "non-finite")
ARRAY_KINDS = ("shape", "dtype", "markers")
STORE_KINDS = ("table", "unfinished-table", "temp-file")
# What an interrupted extraction leaves: not damage, a later `crs extract` resumes (or a repair removes) it.
INTERRUPTED_KINDS = ("incomplete", "temp-file", "unfinished-table")


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a store: which array (path inside the store), which chunk, what."""

    store: str
    array: str
    kind: str
    detail: str
    chunk: int | None = None

    def __str__(self) -> str:
        where = self.array + (f" chunk {self.chunk}" if self.chunk is not None else "")
        return f"{Path(self.store).name}: {where}: {self.kind}: {self.detail}"

    @property
    def damaged(self) -> bool:
        """False for what an interrupted run leaves (unwritten chunks, temporary files): that resumes."""
        return self.kind not in INTERRUPTED_KINDS


def interrupted_summary(problems: list[Problem]) -> list[str]:
    """One line per feature group (and per store for temporary files) of what an interrupted run left.

    A cache killed mid-extraction has one ``incomplete`` problem per unwritten row chunk (171 on the
    demo); they say one thing: the group is unfinished and `crs extract` resumes it.
    """
    chunks: dict[tuple[str, str], dict[str, int]] = {}
    temp_files: dict[str, int] = {}
    for problem in problems:
        if problem.kind == "incomplete":
            group = "/".join(problem.array.split("/")[:3])
            per_array = chunks.setdefault((problem.store, group), {})
            per_array[problem.array] = per_array.get(problem.array, 0) + 1
        elif problem.kind == "temp-file":
            temp_files[problem.store] = temp_files.get(problem.store, 0) + 1
    lines = [f"{Path(p.store).name}: {p.detail}" for p in problems if p.kind == "unfinished-table"]
    lines += [f"{Path(store).name}: {group}: {sum(per_array.values())} row chunk(s) in {len(per_array)} array(s) "
             "not yet written (an unfinished extraction; `crs extract` resumes it)"
             for (store, group), per_array in chunks.items()]
    lines += [f"{Path(store).name}: {n} temporary file(s) left by an interrupted write (harmless; "
              "a repair removes them)" for store, n in temp_files.items()]
    return lines


def _check_table(store: Path, root: zarr.Group) -> tuple[list[Problem], int | None, int | None]:
    """The sample table: present and consistent. Returns (problems, n_images, n_test)."""
    problems = []
    attrs = root.attrs
    if "id_digest" not in attrs:  # written last: stage 1 stopped while writing the table (a full disk, a kill)
        return [Problem(str(store), "/", "unfinished-table", "sample table not finished (stage 1 stopped while "
                        "writing it); `crs extract` writes it again")], None, None
    lengths = {}
    for name in ("ids", "labels", "splits", "groups"):
        if name not in root:
            problems.append(Problem(str(store), name, "table", "missing sample-table array; re-run `crs extract`"))
            continue
        lengths[name] = child_array(root, name).shape[0]
    n_images = int(cast(int, attrs.get("n_images", -1)))
    for name, length in lengths.items():
        if length != n_images:
            problems.append(Problem(str(store), name, "table", f"{length} rows, the table records {n_images}"))
    n_test = None
    if "splits" in root and not problems:
        n_test = sum(1 for split in np.asarray(child_array(root, "splits")[:]).tolist() if str(split) == "test")
    return problems, n_images, n_test


def _check_array(store: Path, group: zarr.Group, prefix: str, name: str,
                 expected_rows: int | None, check_data: bool) -> list[Problem]:
    where = f"{prefix}/{name}"
    array = child_array(group, name)

    def problem(kind: str, detail: str, chunk: int | None = None) -> Problem:
        return Problem(str(store), where, kind, detail, chunk)

    done_name, checksum_name = f"{name}{DONE_SUFFIX}", f"{name}{CHECKSUM_SUFFIX}"
    if done_name not in group:
        return [problem("markers", f"no {done_name} flags: not written by the chunked writer")]
    recorded = dict(array.attrs)
    problems = []
    if str(array.dtype) != FEATURE_DTYPE or recorded.get("dtype", FEATURE_DTYPE) != FEATURE_DTYPE:
        problems.append(problem("dtype", f"dtype {array.dtype}, expected {FEATURE_DTYPE}"))
    n_rows, dim = (int(v) for v in array.shape) if array.ndim == 2 else (-1, -1)
    if array.ndim != 2 or ("n_rows" in recorded and (n_rows, dim) != (recorded["n_rows"], recorded["dim"])):
        problems.append(problem("shape", f"shape {tuple(array.shape)}, recorded ({recorded.get('n_rows')}, {recorded.get('dim')})"))
    if expected_rows is not None and array.ndim == 2 and n_rows != expected_rows:
        problems.append(problem("shape", f"{n_rows} rows, the sample table implies {expected_rows}"))
    if problems:
        return problems
    chunk_rows = int(cast(int, recorded.get("chunk_rows", array.chunks[0])))
    n_chunks = max(1, -(-n_rows // chunk_rows))
    done = np.asarray(child_array(group, done_name)[:])
    if done.shape != (n_chunks,) or array.chunks[0] != min(chunk_rows, max(n_rows, 1)):
        return [problem("markers", f"{done.shape[0]} flags for {n_chunks} chunks of {chunk_rows} rows")]
    checksums = np.asarray(child_array(group, checksum_name)[...]) if checksum_name in group else None
    for chunk in range(n_chunks):
        if done[chunk] == 0:
            problems.append(problem("incomplete", "not yet extracted; resume with `crs extract`", chunk))
            continue
        if done[chunk] != 1:
            problems.append(problem("markers", f"flag holds {done[chunk]}, expected 0 or 1", chunk))
            continue
        if not check_data:
            continue
        path = chunk_file(array, chunk)
        if path is not None and not path.is_file():
            problems.append(problem("missing-chunk", f"marked complete but {path} is missing", chunk))
            continue
        start, stop = chunk * chunk_rows, min((chunk + 1) * chunk_rows, n_rows)
        try:
            values = np.asarray(array[start:stop])
        except Exception as error:  # a truncated or garbled file fails to decode in many ways
            problems.append(problem("unreadable", f"cannot decode ({type(error).__name__}: {error})", chunk))
            continue
        if checksums is None or not checksums[chunk].any():
            problems.append(problem("no-checksum", "complete but no checksum was recorded", chunk))
        elif chunk_checksum(values) != bytes(checksums[chunk]):
            problems.append(problem("checksum", "sha256 of the stored float16 bytes differs from the recorded one", chunk))
            continue
        if not np.isfinite(values).all():
            problems.append(problem("non-finite", "holds NaN or infinite values", chunk))
    return problems


def verify_store(path: Path | str, check_data: bool = True) -> list[Problem]:
    """Every problem in one ``<dataset>.zarr`` store (empty list: the store is sound).

    ``check_data=False`` checks metadata and flags only (no chunk is read).
    """
    store = Path(path)
    if not (store / "zarr.json").is_file():
        raise CacheError(f"no cache store at {store}; pass a <dataset>.zarr folder or a cache folder")
    root = zarr.open_group(str(store), mode="r")
    problems, n_images, n_test = _check_table(store, root)
    problems += [
        Problem(str(store), str(p.relative_to(store)), "temp-file", "left by an interrupted write; `--repair` removes it")
        for p in sorted(store.rglob("*.partial"))
    ]
    if "encoders" not in root:
        return problems
    for encoder, encoder_group in sorted(child_group(root, "encoders").groups()):
        for fingerprint, group in sorted(encoder_group.groups()):
            prefix = f"encoders/{encoder}/{fingerprint}"
            names = sorted(name for name, node in group.members(max_depth=None)
                           if isinstance(node, zarr.Array) and not is_marker_array(name))
            positions = group_positions(group)  # a corruption subsample: its corrupted arrays hold these rows
            n_corrupt = n_test if positions is None else len(positions)
            for name in names:
                expected = n_images if name == "clean" else n_corrupt if name.startswith("corrupt/") else None
                problems += _check_array(store, group, prefix, name, expected, check_data)
    return problems


def verify_cache(cache_root: Path | str, check_data: bool = True) -> dict[str, list[Problem]]:
    """:func:`verify_store` for every store in a cache folder (or for one store path)."""
    root = Path(cache_root)
    if (root / "zarr.json").is_file():
        return {str(root): verify_store(root, check_data)}
    if not root.is_dir():
        raise for_setting(CacheError(f"cache folder {root} does not exist; pass the right cache folder"), "cache")
    stores = sorted(p for p in root.iterdir() if p.suffix == ".zarr" and (p / "zarr.json").is_file())
    return {str(store): verify_store(store, check_data) for store in stores}


@dataclass(frozen=True)
class RepairAction:
    problem: Problem
    action: str

    def __str__(self) -> str:
        return f"{self.problem} -> {self.action}"


def repair(problems: list[Problem]) -> list[RepairAction]:
    """Undo what a bad chunk or array claims, so the next extraction recomputes exactly that.

    Chunk problems: flag and checksum cleared (the chunk counts as never written). Shape, dtype
    and marker problems: the array and its markers are deleted (re-created whole). Temporary files:
    removed. The group stops being ``complete``; stage 2 refuses it until it is re-extracted.
    """
    actions = []
    for problem in problems:
        store = Path(problem.store)
        if problem.kind == "temp-file":
            (store / problem.array).unlink(missing_ok=True)
            actions.append(RepairAction(problem, "removed"))
            continue
        if problem.kind in ("table", "incomplete", "unfinished-table"):
            actions.append(RepairAction(problem, "left for `crs extract`"))
            continue
        root = zarr.open_group(str(store), mode="a")
        group_path, _, name = _split_array_path(problem.array)
        group = child_group(root, group_path)
        if problem.kind in CHUNK_KINDS:
            assert problem.chunk is not None, "verify_store gives every chunk-level problem its chunk"
            child_array(group, f"{name}{DONE_SUFFIX}")[problem.chunk] = 0
            if f"{name}{CHECKSUM_SUFFIX}" in group:
                child_array(group, f"{name}{CHECKSUM_SUFFIX}")[problem.chunk] = 0
            actions.append(RepairAction(problem, "marked incomplete"))
        else:
            for member in (name, f"{name}{DONE_SUFFIX}", f"{name}{CHECKSUM_SUFFIX}"):
                folder = store / group_path / member
                if folder.exists():
                    shutil.rmtree(folder)
            actions.append(RepairAction(problem, "array deleted (re-extracted whole)"))
        group.attrs["complete"] = False
    return actions


def _split_array_path(array: str) -> tuple[str, str, str]:
    """``encoders/<enc>/<fp>/corrupt/x/3`` -> (``encoders/<enc>/<fp>``, ``<enc>``, ``corrupt/x/3``)."""
    parts = array.split("/")
    if len(parts) < 4 or parts[0] != "encoders":
        raise CacheError(f"cannot repair {array}: not a feature array path")
    return "/".join(parts[:3]), parts[1], "/".join(parts[3:])
