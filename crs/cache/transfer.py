"""``crs cache push FOLDER URL`` / ``crs cache pull URL FOLDER``: move a cache between a folder and object
storage, copying only what the destination lacks, each object whole and checked, flags last.

Object stores have no rename: an object appears whole when its PUT succeeds, or not at all. The order
of a transfer keeps the destination a valid cache at every moment, so a killed or failed transfer
leaves nothing that reads as valid and a re-run resumes it:

1. data objects (feature chunks, their checksums, the sample table) and array metadata;
2. the ``<array>__done`` flag objects: a chunk counts as complete only once its data is there;
3. group metadata (``zarr.json`` of groups, deepest first): an encoder's ``current`` pointer and a
   group's ``complete`` attribute arrive after everything they point at.

Each object is compared with the destination by size and MD5 (S3's ETag of a single PUT, else the
bytes read back); equal objects are kept. Every object written is checked against the MD5 of the
bytes sent (the ETag the server computed, or a read-back). A push refuses a folder whose feature
chunks do not match their recorded sha256 (``crs cache verify``); a pull ends with that same check
on the folder it wrote, against checksums the extraction recorded: verified end to end.
Chunk journals (``<array>/journal``), writer locks and temporary ``*.partial`` files are never copied.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crs.cache.fetched import fetched_paths
from crs.cache.journal import JOURNAL_FOLDER
from crs.cache.object_lock import ObjectLock
from crs.cache.remote import open_url, remote_error
from crs.cache.store import CacheError
from crs.cache.sync_record import load_record, save_record
from crs.cache.verify import verify_cache
from crs.cache.writer import DONE_SUFFIX

SKIPPED_PARTS = (f"/{JOURNAL_FOLDER}/", "/.crs-locks/")


class _DroppedConnections(logging.Filter):
    """When the network fails mid-batch, the batch's other requests die inside aiohttp and asyncio logs
    each as "Task exception was never retrieved"; the transfer already stops with one line that says
    what failed, so these echoes are dropped (other asyncio records pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage().startswith("Task exception was never retrieved")
                    and isinstance(error, OSError))


def _one_line_on_network_faults() -> None:
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _DroppedConnections) for f in asyncio_log.filters):
        asyncio_log.addFilter(_DroppedConnections())


@dataclass(frozen=True)
class TransferReport:
    """What one push or pull did: objects and bytes copied, objects already there, chunks verified."""

    action: str
    source: str
    destination: str
    copied: int
    copied_bytes: int
    kept: int
    verified_stores: int
    kept_local: tuple[str, ...] = ()
    """A pull: folder files that differ from the URL's objects and were written there since the last
    transfer (unpushed work, decision 0190), left as they are."""
    verified: bool = True
    kept_remote: tuple[str, ...] = ()
    """A push: group metadata only the URL changed since the folder's last transfer, left as it is there."""

    def format(self) -> str:
        checked = (f"{self.verified_stores} store(s) verified against their chunk checksums" if self.verified
                   else "chunk data not read")
        line = (f"{self.action}: {self.source} -> {self.destination}: {self.copied} object(s) copied "
                f"({self.copied_bytes:,} bytes), {self.kept} already there; {checked}")
        if self.kept_local:
            line += (f"; kept {len(self.kept_local)} file(s) of {self.destination} that differ from {self.source} "
                     f"and were written here since the last push or pull (first: {self.kept_local[0]}): "
                     f"`crs cache push {self.destination} {self.source}` sends them, "
                     f"`crs cache pull {self.source} {self.destination} --overwrite` takes the URL's")
        if self.kept_remote:
            line += (f"; kept {len(self.kept_remote)} newer group metadata object(s) of {self.destination} that "
                     f"another writer changed since this folder's last push or pull (first: {self.kept_remote[0]}): "
                     f"`crs cache pull {self.destination} {self.source}` brings them here")
        return line


def push(folder: Path | str, url: str, stores: Sequence[str] | None = None) -> TransferReport:
    """Copy the cache folder ``folder`` (its ``<dataset>.zarr`` stores) to ``url``, only what it lacks.

    ``stores``: only these store folders (``<dataset>.zarr``), verified and copied alone: a URL cache
    pushes each data set's stores once they are written, without reading the whole mirror again."""
    import fsspec

    folder = Path(folder)
    if not folder.is_dir():
        raise CacheError(f"cache folder {folder} does not exist; give the folder `crs extract` wrote")
    parts = [""] if stores is None else [name for name in stores if (folder / name).is_dir()]
    checked = {found: problems for part in parts for found, problems in verify_cache(folder / part).items()}
    damaged = [str(p) for problems in checked.values() for p in problems if p.damaged]
    if damaged:
        raise CacheError(f"{len(damaged)} damaged chunk(s) in {folder} (first: {damaged[0]}); "
                         "run `crs cache verify --spec SPEC --repair` before pushing")
    remote, root = open_url(url)
    _one_line_on_network_faults()
    step = _Step(load_record(folder, url), keep_local=False)
    with ObjectLock(url):  # one writer per URL: two pushes never interleave their objects
        copied, size, kept = _copy_tree(fsspec.filesystem("file"), str(folder.resolve()), remote, root, url,
                                        None if stores is None else parts, step)
    save_record(folder, url, step.in_step)
    return TransferReport("push", str(folder), url, copied, size, kept, len(checked), kept_remote=tuple(step.kept_remote))


def pull(url: str, folder: Path | str, *, overwrite: bool = False, verify: bool = True) -> TransferReport:
    """Copy the cache at ``url`` into the folder ``folder``, only what it lacks, then verify every chunk.

    A folder file that differs from the URL's object is replaced only when it still holds what the last
    push or pull left (the URL changed since); one written here since (unpushed work) is kept and named
    in the report, unless ``overwrite`` (decision 0190). ``verify=False`` skips the chunk checksums (the
    caller checks them itself, or reads only metadata)."""
    import fsspec

    folder = Path(folder)
    remote, root = open_url(url)
    _one_line_on_network_faults()
    folder.mkdir(parents=True, exist_ok=True)
    step = _Step(load_record(folder, url), keep_local=not overwrite, fetched=fetched_paths(folder))
    copied, size, kept = _copy_tree(remote, root, fsspec.filesystem("file"), str(folder.resolve()), url, step=step)
    save_record(folder, url, step.in_step)
    checked = verify_cache(folder) if verify else {}
    damaged = [str(p) for problems in checked.values() for p in problems if p.damaged]
    if damaged and step.kept_local:  # the damage may be in a file kept as local work, not in the URL's copy
        raise CacheError(f"{len(damaged)} chunk(s) in {folder} do not match their recorded checksums (first: "
                         f"{damaged[0]}), and {len(step.kept_local)} file(s) there were kept as written locally "
                         f"(first: {step.kept_local[0]}); `crs cache pull {url} {folder} --overwrite` takes the "
                         "URL's copies, then the check is repeated")
    if damaged:
        raise CacheError(f"{len(damaged)} chunk(s) pulled from {url} do not match their recorded checksums "
                         f"(first: {damaged[0]}); the copy at {url} is damaged: re-extract those chunks")
    return TransferReport("pull", url, str(folder), copied, size, kept, len(checked), tuple(step.kept_local), verify)


def _relative_objects(filesystem: Any, root: str, url: str) -> dict[str, dict[str, Any]]:
    """Every object under ``root`` by its path relative to it, without journals, locks or temporary files."""
    try:
        found = filesystem.find(root, withdirs=False, detail=True) if filesystem.exists(root) else {}
    except Exception as error:  # network, credentials, no such bucket: one line
        raise remote_error(url, "listing", error) from None
    objects = {}
    for path, info in found.items():
        relative = path[len(root):].lstrip("/") if path.startswith(root) else path
        if any(part in f"/{relative}" for part in SKIPPED_PARTS) or relative.endswith(".partial"):
            continue
        if ".zarr/" not in f"{relative}/" and not relative.split("/")[0].endswith(".zarr"):
            continue  # only the stores: nothing else of a folder travels
        objects[relative] = info
    return objects


def _phase(relative: str, metadata: bytes) -> tuple[int, int]:
    """Sort key that keeps the destination valid: data and array metadata, flags, groups (deepest first)."""
    if relative.endswith("zarr.json"):
        try:
            node_type = json.loads(metadata).get("node_type")
        except ValueError:
            node_type = "array"
        if node_type == "group":
            return (2, -relative.count("/"))
        return (0, 0)
    return (1, 0) if f"{DONE_SUFFIX}/" in relative else (0, 0)


def _md5(info: dict[str, Any], read: Callable[[], bytes]) -> str:
    """MD5 of an object: S3's ETag of a single-part upload, else computed from its bytes."""
    etag = str(info.get("ETag") or info.get("etag") or "").strip('"')
    if len(etag) == 32 and "-" not in etag:
        return etag
    return hashlib.md5(read()).hexdigest()


BATCH_OBJECTS = 64
BATCH_BYTES = 256 << 20
"""Objects moved at once (concurrent requests); memory stays under about ``BATCH_BYTES``."""


@dataclass
class _Step:
    """A transfer's bookkeeping against the folder's sync record (decision 0190): what the folder held
    at the last transfer, whether a target file changed since is kept (a pull), and what ends equal."""

    recorded: dict[str, str]
    keep_local: bool
    fetched: set[str] = field(default_factory=set)
    """Chunks a read-through fetched from the URL (crs.cache.readthrough): the URL's bytes, never local work."""
    in_step: dict[str, str] = field(default_factory=dict)
    kept_local: list[str] = field(default_factory=list)
    kept_remote: list[str] = field(default_factory=list)
    """A push: group metadata the URL changed since the folder's last transfer while the folder's copy did
    not (another writer marked a group current): the URL's newer copy is kept."""


def _copy_tree(source: Any, source_root: str, target: Any, target_root: str, url: str,
               stores: Sequence[str] | None = None, step: _Step | None = None) -> tuple[int, int, int]:
    # ``stores``: only objects of these store folders are compared and copied (None: every store).
    # ``step``: record what ends equal; with ``keep_local``, a target object that differs from the
    # source and from the record (written at the target since the last transfer) is left as it is.
    # Metadata and flags are read first and written as read, then the data is listed: a writer still
    # filling the source may set a flag meanwhile, but a flag sent as set had its data written before
    # that second listing, so the data is sent too. Markers that appear later wait for the next transfer.
    def listed() -> dict[str, dict[str, Any]]:
        found = _relative_objects(source, source_root, url)
        return found if stores is None else {r: info for r, info in found.items() if r.split("/")[0] in stores}

    markers = [f"{source_root}/{r}" for r in listed() if _is_marker(r)]
    snapshot = _read_many(source, markers, url)
    wanted = {r: info for r, info in listed().items() if not _is_marker(r) or f"{source_root}/{r}" in snapshot}
    present = _relative_objects(target, target_root, url)
    phases = {r: _phase(r, snapshot.get(f"{source_root}/{r}", b"{}")) for r in wanted}
    copied = size = kept = 0
    for _, in_phase in itertools.groupby(sorted(wanted, key=lambda r: (phases[r], r)), key=phases.get):
        todo = []
        for relative in in_phase:
            source_path, target_path = f"{source_root}/{relative}", f"{target_root}/{relative}"
            held = snapshot.get(source_path)
            size_wanted = len(held) if held is not None else int(wanted[relative].get("size", -2))
            there = present.get(relative)
            if there is None:
                todo.append(relative)
                continue
            target_sum = _md5(there, functools.partial(_read_plain, target, target_path, url)) \
                if int(there.get("size", -1)) == size_wanted or (step is not None and step.keep_local) else None
            if int(there.get("size", -1)) == size_wanted:
                source_sum = hashlib.md5(held).hexdigest() if held is not None else \
                    _md5(wanted[relative], functools.partial(_read_plain, source, source_path, url))
                if target_sum == source_sum:
                    kept += 1
                    if step is not None:
                        step.in_step[relative] = source_sum
                    continue
            if step is not None and step.keep_local and step.recorded.get(relative) != target_sum \
                    and relative not in step.fetched:
                step.kept_local.append(relative)  # written here since the last transfer: never overwritten
                continue
            if step is not None and not step.keep_local and held is not None and phases[relative][0] == 2 \
                    and step.recorded.get(relative) == hashlib.md5(held).hexdigest() \
                    and _phase(relative, _read_plain(target, target_path, url))[0] == 2:
                step.kept_remote.append(relative)  # a push: only the URL changed this group's metadata since
                continue  # (sound group metadata another writer wrote; a damaged object is mended below)
            todo.append(relative)
        for batch in _batches(todo, wanted):
            paths = [f"{source_root}/{r}" for r in batch]
            data = {**_read_many(source, [p for p in paths if p not in snapshot], url),
                    **{p: snapshot[p] for p in paths if p in snapshot}}
            _write_many(target, {f"{target_root}/{r}": data[f"{source_root}/{r}"] for r in batch}, url)
            if step is not None:
                step.in_step.update({r: hashlib.md5(data[f"{source_root}/{r}"]).hexdigest() for r in batch})
            copied += len(batch)
            size += sum(len(data[p]) for p in paths)
    return copied, size, kept


def _is_marker(relative: str) -> bool:
    """zarr metadata and completion flags: small, and what says whether the rest is valid."""
    return relative.endswith("zarr.json") or f"{DONE_SUFFIX}/" in relative


def _batches(relatives: list[str], infos: dict[str, dict[str, Any]]) -> list[list[str]]:
    batches: list[list[str]] = [[]]
    weight = 0
    for relative in relatives:
        item = int(infos[relative].get("size", 0))
        if batches[-1] and (len(batches[-1]) >= BATCH_OBJECTS or weight + item > BATCH_BYTES):
            batches.append([])
            weight = 0
        batches[-1].append(relative)
        weight += item
    return [batch for batch in batches if batch]


def _read_many(filesystem: Any, paths: list[str], url: str) -> dict[str, bytes]:
    """The bytes of ``paths`` (concurrent requests on an object store)."""
    from fsspec.implementations.local import LocalFileSystem

    if not paths:
        return {}
    if isinstance(filesystem, LocalFileSystem):
        return {path: Path(path).read_bytes() for path in paths}
    try:
        found = filesystem.cat(paths, on_error="raise")
    except Exception as error:
        raise remote_error(url, "reading from", error) from None
    return found if isinstance(found, dict) else {paths[0]: found}


def _write_many(filesystem: Any, objects: dict[str, bytes], url: str) -> None:
    """Write each object whole and check it: a local file through a temporary name and a rename (after
    fsync); objects by one PUT each (concurrently), each ETag (or read-back) equal to the MD5 sent."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(filesystem, LocalFileSystem):
        for path, data in objects.items():
            _write_local(Path(path), data)
        return
    try:
        answers = filesystem.pipe(objects)
    except Exception as error:
        raise remote_error(url, "writing to", error) from None
    answers = answers if isinstance(answers, list) and len(answers) == len(objects) else [None] * len(objects)
    for (path, data), answer in zip(objects.items(), answers, strict=True):
        info = answer if isinstance(answer, dict) else {}
        if _md5(info, functools.partial(_read_plain, filesystem, path, url)) != hashlib.md5(data).hexdigest():
            raise CacheError(f"{url}: {path} reads back other bytes than were sent; re-run the transfer")


def _write_local(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, suffix=".partial")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _read_plain(filesystem: Any, path: str, url: str) -> bytes:
    try:
        return filesystem.cat_file(path)
    except Exception as error:
        raise remote_error(url, f"reading {path} from", error) from None
