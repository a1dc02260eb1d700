"""What is in a cache folder (``crs cache ls``) and what may be deleted from it (``crs cache gc``).

Both read only zarr metadata and the ``<array>__done`` chunk flags, never the features, so they are
instant on caches of any size. Sizes are bytes on disk, summed over the files of each group.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from crs.cache.lock import live_holder, live_writer
from crs.cache.store import FeatureStore
from crs.spec import for_setting

# Bookkeeping arrays the chunked writer keeps beside each feature array (flags, checksums).
MARKER_SUFFIXES = ("__done", "__sha256")

# The fingerprint fields shown by `crs cache ls` beside the hash (the full set is in --json).
SUMMARY_FIELDS = ("source", "weights", "input_size", "corruption_suite_version", "feature_dtype")


@dataclass(frozen=True)
class ArrayInfo:
    """One feature array: its name inside the group (``clean``, ``corrupt/<c>/<s>``) and progress."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    chunks_done: int
    n_chunks: int

    @property
    def complete(self) -> bool:
        return self.chunks_done == self.n_chunks


@dataclass(frozen=True)
class FingerprintInfo:
    """One feature group ``encoders/<encoder>/<fingerprint>`` of one store."""

    store: str
    dataset: str
    encoder: str
    fingerprint: str
    current: bool
    complete: bool
    arrays: tuple[ArrayInfo, ...]
    fields: dict[str, Any]
    bytes: int
    writer: str | None = None  # "pid N, host H" while a live extraction holds this encoder's writer lock

    @property
    def state(self) -> str:
        if self.writer is not None and not self.complete:
            return f"writing ({self.writer})"
        return "current" if self.current else "stale"

    def summary_fields(self) -> dict[str, Any]:
        """The few fields a person checks first: where the features came from and for what."""
        fields = dict(self.fields)
        preprocessing = fields.get("preprocessing") or {}
        if isinstance(preprocessing, dict) and "input_size" in preprocessing:
            fields.setdefault("input_size", preprocessing["input_size"])
        return {key: fields[key] for key in SUMMARY_FIELDS if key in fields}


@dataclass(frozen=True)
class StoreInfo:
    """One data set's store: its sample table summary and every feature group in it."""

    path: str
    dataset: str
    task_kind: str
    n_images: int
    bytes: int
    groups: tuple[FingerprintInfo, ...]


def disk_bytes(path: Path) -> int:
    """Bytes of every file below ``path`` (apparent sizes, which is what deleting them frees)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:  # removed while we walked (a concurrent gc or writer)
                continue
    return total


def store_paths(cache_root: Path | str) -> list[Path]:
    """Every ``<dataset>.zarr`` store directly under the cache root, sorted by name."""
    root = Path(cache_root)
    if not root.is_dir():
        raise for_setting(FileNotFoundError(f"cache folder {root} does not exist; pass the right cache folder"), "cache")
    return sorted(p for p in root.iterdir() if p.is_dir() and p.suffix == ".zarr" and (p / "zarr.json").exists())


def feature_array_names(group: Any) -> list[str]:
    """Feature arrays of one group (``clean``, ``corrupt/<c>/<s>``), without the writer's markers."""
    return sorted(
        name for name, node in group.members(max_depth=None)
        if isinstance(node, zarr.Array) and not name.endswith(MARKER_SUFFIXES)
    )


def _array_infos(group: Any) -> tuple[ArrayInfo, ...]:
    infos = []
    for name in feature_array_names(group):
        node = group[name]
        done_name = f"{name}__done"
        if done_name in group:
            flags = np.asarray(group[done_name][:])
            chunks_done, n_chunks = int(flags.sum()), int(flags.size)
        else:  # an array with no flags was never started by the chunked writer
            chunks_done, n_chunks = 0, 1
        infos.append(ArrayInfo(name, tuple(int(n) for n in node.shape), str(node.dtype), chunks_done, n_chunks))
    return tuple(sorted(infos, key=lambda info: (info.name != "clean", info.name)))


def describe_store(path: Path) -> StoreInfo:
    """Read one store's sample-table attributes and every feature group's metadata."""
    store = FeatureStore(path)
    root: Any = store.root  # zarr's typing of node lookups is a wide union; these are groups
    attrs: Any = root.attrs
    groups = []
    for encoder in store.encoder_names():
        current = root["encoders"][encoder].attrs.get("current")
        live = live_writer(path, encoder)
        writer = None if live is None else (f"pid {live[1].pid}, host {live[1].host}" if live[1] else f"lock {live[0]}")
        for fingerprint in store.fingerprints(encoder):
            group = root[f"encoders/{encoder}/{fingerprint}"]
            arrays = _array_infos(group)
            complete = bool(group.attrs.get("complete", False)) and all(a.complete for a in arrays) and bool(arrays)
            groups.append(
                FingerprintInfo(
                    store=str(path), dataset=str(attrs.get("dataset", path.stem)), encoder=encoder,
                    fingerprint=fingerprint, current=fingerprint == current, complete=complete, arrays=arrays,
                    fields=dict(group.attrs.get("fields", {})),
                    bytes=disk_bytes(path / "encoders" / encoder / fingerprint),
                    writer=writer,
                )
            )
    task = attrs.get("task", {})
    return StoreInfo(
        path=str(path), dataset=str(attrs.get("dataset", path.stem)), task_kind=str(task.get("kind", "?")),
        n_images=int(attrs.get("n_images", 0)), bytes=disk_bytes(path), groups=tuple(groups),
    )


def list_cache(cache_root: Path | str) -> list[StoreInfo]:
    """Describe every store of a cache folder."""
    return [describe_store(path) for path in store_paths(cache_root)]


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def format_listing(stores: list[StoreInfo]) -> str:
    """The text of ``crs cache ls``: store, then encoder/fingerprint lines, then their arrays."""
    if not stores:
        return "no stores in this cache"
    lines = []
    for store in stores:
        lines.append(f"{store.dataset} ({store.task_kind}, {store.n_images} images, {human_bytes(store.bytes)}) {store.path}")
        if not store.groups:
            lines.append("  no encoder features yet")
        for group in store.groups:
            if group.writer is not None and not group.complete:
                # A live extraction is filling this group: not garbage, just not finished yet.
                label = group.state
            else:
                label = f"{group.state} {'complete' if group.complete else 'INCOMPLETE'}"
            lines.append(f"  {group.encoder} {group.fingerprint} {label} {human_bytes(group.bytes)}")
            summary = ", ".join(f"{key}={value}" for key, value in group.summary_fields().items())
            if summary:
                lines.append(f"    {summary}")
            for array in group.arrays:
                shape = "x".join(str(n) for n in array.shape)
                done = "" if array.complete else f" ({array.chunks_done}/{array.n_chunks} chunks)"
                lines.append(f"    {array.name} {shape} {array.dtype}{done}")
    return "\n".join(lines)


def listing_json(stores: list[StoreInfo]) -> list[dict[str, Any]]:
    """JSON-ready form of the listing (``crs cache ls --json``)."""
    out = []
    for store in stores:
        entry = asdict(store)
        entry["groups"] = []
        for group in store.groups:
            item = asdict(group)
            item["state"] = group.state
            item["arrays"] = [{**asdict(a), "shape": list(a.shape), "complete": a.complete} for a in group.arrays]
            entry["groups"].append(item)
        out.append(entry)
    return out


# -- garbage collection ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Removal:
    """One feature group that ``gc`` removes (or would remove, with ``--dry-run``), and why."""

    store: str
    encoder: str
    fingerprint: str
    reason: str
    bytes: int


@dataclass(frozen=True)
class GcReport:
    removed: tuple[Removal, ...]
    kept_locked: tuple[str, ...]
    dry_run: bool

    @property
    def bytes_freed(self) -> int:
        return sum(r.bytes for r in self.removed)

    def format(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        lines = [
            f"{verb} {Path(r.store).name}/{r.encoder}/{r.fingerprint} ({r.reason}, {human_bytes(r.bytes)})"
            for r in self.removed
        ]
        lines += [f"kept {name}: a live writer holds its lock" for name in self.kept_locked]
        freed = "would free" if self.dry_run else "freed"
        lines.append(f"gc: {len(self.removed)} feature group(s), {freed} {human_bytes(self.bytes_freed)}")
        return "\n".join(lines)


def _live_writer(store_path: Path, encoder: str) -> str | None:
    """Who holds a writer lock of (store, encoder), any shard, if a live process does; None otherwise.

    A group that is not current may be an extraction in progress: gc must not delete it under a
    running writer.
    """
    return live_holder(store_path, encoder)


def garbage(stores: list[StoreInfo]) -> list[tuple[FingerprintInfo, str]]:
    """Feature groups no reader uses: stale fingerprints, and incomplete groups that are not current."""
    chosen = []
    for store in stores:
        for group in store.groups:
            if group.current:
                continue
            reason = "stale fingerprint" if group.complete else "incomplete, not current"
            chosen.append((group, reason))
    return chosen


def collect_garbage(cache_root: Path | str, dry_run: bool = False) -> GcReport:
    """Delete every group that is not its encoder's ``current`` one, unless a live writer holds it.

    The current group of every encoder is never touched, whatever the spec says: removing an
    encoder from a spec drops it from the score, not from the cache.
    """
    removed, kept = [], []
    for group, reason in garbage(list_cache(cache_root)):
        store_path = Path(group.store)
        holder = _live_writer(store_path, group.encoder)
        if holder is not None:
            kept.append(f"{store_path.name}/{group.encoder}/{group.fingerprint} (held by {holder})")
            continue
        removed.append(Removal(group.store, group.encoder, group.fingerprint, reason, group.bytes))
        if not dry_run:
            _delete_group(store_path, group.encoder, group.fingerprint)
    return GcReport(tuple(removed), tuple(kept), dry_run)


def _delete_group(store_path: Path, encoder: str, fingerprint: str) -> None:
    """Remove one fingerprint group; drop the encoder node too when nothing is left in it."""
    root: Any = zarr.open_group(str(store_path), mode="a")
    encoders = root["encoders"]
    encoder_group = encoders[encoder]
    del encoder_group[fingerprint]
    if not list(encoder_group.group_keys()) and not list(encoder_group.array_keys()):
        del encoders[encoder]
    leftover = store_path / "encoders" / encoder / fingerprint
    if leftover.exists():  # zarr removes the keys it knows; stray files (a torn write) go too
        shutil.rmtree(leftover)
