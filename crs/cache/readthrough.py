"""A URL cache's bounded read-through of feature chunks: stage 2 reads each chunk from the network once
(issue 48 item 3, decision 0187).

Stages that only read the cache (probe, report) do not pull the whole bucket into the mirror.
:func:`prepare` copies what the mirror lacks of everything except feature chunk files (metadata,
sample tables, completion flags, checksums: small), and writes ``.crs-readthrough/settings.json``
into the mirror. From then on :class:`crs.cache.store.FeatureStore` opens that mirror's stores
through :class:`ReadThroughStore`: a feature chunk the mirror lacks is fetched on its first read,
checked against the sha256 its extraction recorded, written whole (temporary name, then rename) and
recorded in a ledger (``ledger.sqlite``: its size and the bytes fetched so far). When the chunks the
read-through fetched exceed the budget, those not read since the stage began go first (least recently
read first; a read touches the file's mtime), then the stage's own most recently read ones: scan
resistant, since stage 2 reads its working set in the same order each run. Chunks the mirror got
otherwise (an extraction, a full pull) are never evicted.

A chunk whose flag says "not written" reads as zarr reads it locally; a chunk marked complete that
the bucket lacks, or whose bytes do not match their checksum, stops the stage with one line: it never
reads as zarr's fill value or as wrong numbers. Several processes (the joblib workers) share the
mirror: a chunk is fetched under its lock held exclusively (one fetch per chunk), read under it held
shared (eviction skips it meanwhile), and fetched again if evicted between the two.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.storage import LocalStore

from crs.cache.fetched import LEDGER_FILE, READ_THROUGH_FOLDER
from crs.cache.remote import open_url
from crs.cache.store import STORE_OPENERS, CacheError
from crs.cache.sync_record import load_record, save_record
from crs.cache.writer import CHECKSUM_SUFFIX, DONE_SUFFIX, chunk_checksum, is_marker_array

FOLDER = READ_THROUGH_FOLDER
SETTINGS = "settings.json"
LEDGER = LEDGER_FILE
LOCK_STRIPES = 64
"""Per-chunk fetch locks, as this many lock files (a chunk's stripe: a hash of its key)."""
AUTO_FRACTION = 0.25
MIN_AUTO_BUDGET = 1 << 30
CHUNK_MARK = "/c/"
EVICTED_RETRIES = 8


# --- settings, budget, status ------------------------------------------------------------------


def settings_path(mirror: Path | str) -> Path:
    return Path(mirror) / FOLDER / SETTINGS


def auto_budget(mirror: Path | str, held: int = 0) -> int:
    """A quarter of the free space of the mirror's disk (counting what the read-through already holds),
    at least 1 GiB: room for stage 2's working set without filling the disk."""
    folder = Path(mirror)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    return max(MIN_AUTO_BUDGET, int(AUTO_FRACTION * (free + held)))


@dataclass(frozen=True)
class ReadThroughStatus:
    """The read-through of one mirror: its budget, what it holds and what it fetched (cumulative)."""

    mirror: str
    budget: int
    budget_setting: str
    held_bytes: int
    held_chunks: int
    fetched_bytes: int
    fetched_chunks: int

    def format(self) -> str:
        return (f"read-through {self.mirror}: holds {self.held_bytes:,} bytes in {self.held_chunks} chunk(s) "
                f"of a {self.budget:,}-byte budget ({self.budget_setting}); fetched {self.fetched_bytes:,} bytes "
                f"in {self.fetched_chunks} chunk(s) so far")


def status(mirror: Path | str) -> ReadThroughStatus | None:
    """The read-through of the mirror ``mirror``, or None when it has none (a folder cache, a full mirror)."""
    settings = _settings(Path(mirror))
    if settings is None:
        return None
    with _Ledger(Path(mirror)) as ledger:
        held_bytes, held_chunks = ledger.held()
        fetched_bytes, fetched_chunks = ledger.fetched()
    return ReadThroughStatus(str(mirror), int(settings["budget"]), str(settings["budget_setting"]),
                             held_bytes, held_chunks, fetched_bytes, fetched_chunks)


def _settings(mirror: Path) -> dict[str, Any] | None:
    try:
        return json.loads(settings_path(mirror).read_text())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None


# --- the lazy pull ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LazyPullReport:
    """What :func:`prepare` did: objects copied (all but feature chunks), kept, chunks left to first read."""

    url: str
    mirror: str
    copied: int
    copied_bytes: int
    kept: int
    deferred: int
    deferred_bytes: int
    status: ReadThroughStatus
    kept_local: tuple[str, ...] = ()
    """Mirror files that differ from the URL's and were written here since the last transfer: kept (0190)."""

    def format(self) -> str:
        line = (f"pull: {self.url} -> {self.mirror} (read-through): {self.copied} object(s) copied "
                f"({self.copied_bytes:,} bytes), {self.kept} already there; {self.deferred} feature chunk(s) "
                f"({self.deferred_bytes:,} bytes) fetched when first read, up to a {self.status.budget:,}-byte "
                f"budget ({self.status.budget_setting}; held now: {self.status.held_bytes:,} bytes)")
        if self.kept_local:
            line += (f"; kept {len(self.kept_local)} file(s) of {self.mirror} that differ from {self.url} and were "
                     f"written here since the last push or pull (first: {self.kept_local[0]}): `crs cache push "
                     f"{self.mirror} {self.url}` sends them, `crs cache pull {self.url} {self.mirror} --overwrite` "
                     "takes the URL's")
        return line


def prepare(url: str, mirror: Path | str, budget: int | None = None) -> LazyPullReport:
    """Make ``mirror`` a read-through of ``url``: copy what it lacks of everything but feature chunks,
    record the URL and the budget (``None``: :func:`auto_budget`), evict down to that budget."""
    import fsspec

    from crs.cache.transfer import _md5, _phase, _read_many, _read_plain, _relative_objects, _write_many

    mirror = Path(mirror)
    remote, root = open_url(url)
    objects = _relative_objects(remote, root, url)
    deferred = {r for r in objects if _is_feature_chunk(r, objects)}
    mirror.mkdir(parents=True, exist_ok=True)
    local = fsspec.filesystem("file")
    local_root = str(mirror.resolve())
    present = _relative_objects(local, local_root, url)
    recorded = load_record(mirror, url)
    todo, kept, in_step, kept_local = [], 0, {}, []
    for relative, info in objects.items():
        if relative in deferred:
            continue
        there = present.get(relative)
        if there is None:
            todo.append(relative)
            continue
        local_sum = _md5(there, functools.partial(_read_plain, local, f"{local_root}/{relative}", url))
        remote_sum = _md5(info, functools.partial(_read_plain, remote, f"{root}/{relative}", url))
        if local_sum == remote_sum:
            kept += 1
            in_step[relative] = remote_sum
        elif recorded.get(relative) != local_sum:  # written here since the last transfer: never overwritten (0190)
            kept_local.append(relative)
        else:
            todo.append(relative)
    data = _read_many(remote, [f"{root}/{r}" for r in todo], url)
    fetched = {r: data[f"{root}/{r}"] for r in todo}
    in_step.update({r: hashlib.md5(fetched[r]).hexdigest() for r in todo})
    rechecked = {_checksums_of(r) for r in todo if r in present} - {None}
    before = {array: _checksums(mirror / array) for array in rechecked if array is not None}
    for relative in sorted(todo, key=lambda r: (_phase(r, fetched[r]), r)):
        _write_many(local, {f"{local_root}/{relative}": fetched[relative]}, url)
    for array, old in before.items():  # checksums the bucket changed (a chunk re-extracted): drop those chunks
        _drop_changed_chunks(mirror / array, old, _checksums(mirror / array))
    save_record(mirror, url, in_step)  # a later whole pull tells these from work done here (decision 0190)
    folder = mirror / FOLDER
    folder.mkdir(exist_ok=True)
    with _Ledger(mirror) as ledger:
        ledger.forget_missing(mirror)
        held = ledger.held()[0]
        amount = budget if budget is not None else auto_budget(mirror, held)
        started = _now_on_disk(folder)  # chunks read from now on are this stage's (see _Ledger.evict)
        settings = {"url": url, "budget": amount, "budget_setting": "set" if budget is not None else "auto",
                    "stage_started_ns": started}
        _write_text(settings_path(mirror), json.dumps(settings))
        ledger.evict(mirror, amount, pinned=set(), run_started_ns=started)
    found = status(mirror)
    assert found is not None
    return LazyPullReport(url, str(mirror), len(todo), sum(map(len, fetched.values())), kept, len(deferred),
                          sum(int(objects[r].get("size", 0)) for r in deferred), found, tuple(sorted(kept_local)))


def forget_fetched(mirror: Path | str) -> None:
    """The mirror was pulled whole (an extraction): every chunk it holds is the mirror's own, none evictable."""
    if (Path(mirror) / FOLDER / LEDGER).exists():
        with _Ledger(Path(mirror)) as ledger:
            ledger.forget_all()


def _is_feature_chunk(relative: str, objects: dict[str, Any]) -> bool:
    """``<store>/encoders/.../<array>/c/<row>/0`` of an array written by the chunked writer (it has flags)."""
    array = _chunk_array(relative)
    return array is not None and f"{array}{DONE_SUFFIX}/zarr.json" in objects


def _chunk_array(relative: str) -> str | None:
    """The array path of a feature chunk key (``.../encoders/.../<array>``), None for any other object."""
    index = relative.rfind(CHUNK_MARK)
    if index < 0:
        return None
    array = relative[:index]
    if not ("/encoders/" in f"/{array}" and not is_marker_array(array)):
        return None
    return array


def _checksums_of(relative: str) -> str | None:
    """The feature array whose recorded checksums ``relative`` holds (their data or metadata), else None."""
    suffix = f"{CHECKSUM_SUFFIX}/"
    return relative[: relative.index(suffix)] if suffix in relative else None


def _checksums(array: Path) -> np.ndarray | None:
    try:
        return np.asarray(zarr.open_array(str(array.with_name(array.name + CHECKSUM_SUFFIX)), mode="r")[...])
    except Exception:  # not there (yet), or unreadable: every local chunk of the array is then dropped
        return None


def _drop_changed_chunks(array: Path, old: np.ndarray | None, new: np.ndarray | None) -> None:
    """Delete the local chunk files of ``array`` whose recorded checksum changed: the bucket holds newer ones."""
    folder = array / "c"
    if not folder.is_dir():
        return
    for chunk_folder in folder.iterdir():
        try:
            chunk = int(chunk_folder.name)
        except ValueError:
            continue
        same = (old is not None and new is not None and chunk < min(len(old), len(new))
                and bytes(old[chunk]) == bytes(new[chunk]))
        if not same:
            shutil.rmtree(chunk_folder, ignore_errors=True) if chunk_folder.is_dir() else chunk_folder.unlink()


def _now_on_disk(folder: Path) -> int:
    """The file system's clock now (the mtime a file written now gets; it may lag ``time.time_ns()``)."""
    mark = folder / "stage"
    mark.touch()
    os.utime(mark)
    return os.stat(mark).st_mtime_ns


def _write_text(path: Path, text: str) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".partial")
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


# --- the ledger ---------------------------------------------------------------------------------


class _Ledger:
    """The chunks the read-through fetched (path relative to the mirror, size) and the bytes fetched so far;
    sqlite, so the stage's worker processes share it safely."""

    def __init__(self, mirror: Path):
        (mirror / FOLDER).mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(mirror / FOLDER / LEDGER, timeout=600, isolation_level=None)
        self.connection.execute("PRAGMA synchronous=OFF")  # a lost row leaves a valid chunk unevicted, no more
        self.connection.execute("CREATE TABLE IF NOT EXISTS held (path TEXT PRIMARY KEY, size INTEGER)")
        self.connection.execute("CREATE TABLE IF NOT EXISTS totals (name TEXT PRIMARY KEY, value INTEGER)")

    def __enter__(self) -> _Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()

    def held(self) -> tuple[int, int]:
        size, count = self.connection.execute("SELECT COALESCE(SUM(size), 0), COUNT(*) FROM held").fetchone()
        return int(size), int(count)

    def fetched(self) -> tuple[int, int]:
        values = dict(self.connection.execute("SELECT name, value FROM totals").fetchall())
        return int(values.get("bytes", 0)), int(values.get("chunks", 0))

    def add(self, entries: dict[str, int]) -> None:
        with self._transaction():
            self.connection.executemany("INSERT OR REPLACE INTO held VALUES (?, ?)", entries.items())
            for name, value in (("bytes", sum(entries.values())), ("chunks", len(entries))):
                self.connection.execute("INSERT INTO totals VALUES (?, ?) ON CONFLICT(name) DO UPDATE "
                                        "SET value = value + excluded.value", (name, value))

    def evict(self, mirror: Path, budget: int, pinned: set[str], run_started_ns: int) -> int:
        """Delete fetched chunks (never ``pinned``) until the rest fit ``budget``: first those not read since
        this stage began, least recently read first; then, when this stage's own reads exceed the budget, the
        most recently read first. Stage 2 reads its working set in the same order each run, so a plain LRU
        would evict every chunk before the next run reads it again; this keeps the earliest part instead.
        A chunk whose lock a reader holds is skipped."""
        with self._transaction():
            rows = self.connection.execute("SELECT path, size FROM held").fetchall()
            total = sum(size for _, size in rows)
            if total <= budget:
                return 0
            order = []
            for path, size in rows:
                try:
                    read = os.stat(mirror / path).st_mtime_ns
                except FileNotFoundError:
                    read = -1
                order.append(((0, read) if read < run_started_ns else (1, -read), path, size))
            removed = 0
            for _, path, size in sorted(order):
                if total <= budget:
                    break
                if path in pinned or not _unlink_unless_locked(mirror, path):
                    continue  # being read (or fetched) right now: the next eviction may take it
                self.connection.execute("DELETE FROM held WHERE path = ?", (path,))
                total -= size
                removed += size
            return removed

    def forget_missing(self, mirror: Path) -> None:
        with self._transaction():
            gone = [(p,) for (p,) in self.connection.execute("SELECT path FROM held") if not (mirror / p).exists()]
            self.connection.executemany("DELETE FROM held WHERE path = ?", gone)

    def forget_all(self) -> None:
        self.connection.execute("DELETE FROM held")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")


@contextmanager
def _chunk_locks(mirror: Path, keys: Iterable[str], shared: bool = False) -> Iterator[None]:
    """Hold the locks of ``keys`` (their stripes, taken in order: two processes never deadlock): exclusive
    to fetch a chunk, shared to read one (eviction skips a chunk whose lock anyone holds)."""
    stripes = sorted({_stripe(key) for key in keys})
    handles = []
    try:
        for stripe in stripes:
            handle = open(_lock_file(mirror, stripe), "a+b")  # noqa: SIM115 (closed below, after the unlock)
            handles.append(handle)
            fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        for handle in handles:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()


def _unlink_unless_locked(mirror: Path, path: str) -> bool:
    """Delete the chunk ``path`` unless someone holds its lock (a reader now, or a fetch); True when deleted."""
    with open(_lock_file(mirror, _stripe(path)), "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            (mirror / path).unlink(missing_ok=True)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return True


def _stripe(key: str) -> int:
    return zlib.crc32(key.encode()) % LOCK_STRIPES


def _lock_file(mirror: Path, stripe: int) -> Path:
    folder = mirror / FOLDER / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stripe}.lock"


# --- the store ------------------------------------------------------------------------------------




@dataclass
class _ArrayMarks:
    metadata: bytes
    done: np.ndarray
    checksums: np.ndarray | None
    chunk_rows: int
    n_rows: int


class ReadThroughStore(LocalStore):
    """A mirror's store folder whose missing feature chunks are fetched from the URL on first read,
    verified, and kept within the read-through's budget."""

    def __init__(self, root: Path | str, *, read_only: bool = False) -> None:
        super().__init__(root, read_only=read_only)
        self.mirror = Path(root).parent
        self._marks: dict[str, _ArrayMarks | None] = {}
        self._remote: tuple[Any, str, str] | None = None

    async def get(self, key: str, prototype: BufferPrototype | None = None,
                  byte_range: ByteRequest | None = None) -> Buffer | None:
        if _chunk_array(key) is None or byte_range is not None:
            if byte_range is not None:
                await asyncio.to_thread(self.ensure, [key])
            return await super().get(key, prototype, byte_range)
        data = await asyncio.to_thread(self._read_whole, key)  # zarr's loop stays free while it fetches
        if data is None:
            return None  # a chunk never written (its flag says so): zarr's fill value, as in a folder
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    def _read_whole(self, key: str) -> bytes | None:
        with self.reading([key]):
            try:
                return (Path(self.root) / key).read_bytes()
            except FileNotFoundError:
                return None

    @contextmanager
    def reading(self, keys: list[str]) -> Iterator[None]:
        """Make the complete feature chunks among ``keys`` present and hold them (shared locks) while the
        caller reads them: eviction by another process waits. A chunk evicted between its fetch and the
        lock is fetched again."""
        for _ in range(EVICTED_RETRIES):
            wanted = self.ensure(keys)
            store = Path(self.root).name
            with _chunk_locks(self.mirror, (f"{store}/{key}" for key in wanted), shared=True):
                if all((Path(self.root) / key).is_file() for key in wanted):
                    yield
                    return
        raise CacheError(f"{Path(self.root).name}: chunks {keys[:3]} were evicted {EVICTED_RETRIES} times before "
                         "they could be read; raise the spec's cache_budget")

    def reading_chunks(self, array: zarr.Array, chunks: Iterable[int]) -> AbstractContextManager[None]:
        """For ``read_block``: row chunks ``chunks`` of ``array`` present and held while it reads their files."""
        return self.reading([f"{array.path}/{array.metadata.encode_chunk_key((c,) + (0,) * (array.ndim - 1))}"
                             for c in chunks])

    def ensure(self, keys: list[str]) -> list[str]:
        """Make the complete feature chunks among ``keys`` present (fetched and checked) and return them."""
        wanted = [key for key in keys if self._complete_chunk(key)]
        missing = [key for key in wanted if not _touch(Path(self.root) / key)]
        if not missing:
            return wanted
        store = Path(self.root).name
        with _chunk_locks(self.mirror, (f"{store}/{key}" for key in missing)):
            missing = [key for key in missing if not _touch(Path(self.root) / key)]  # another process fetched it
            if missing:
                self._fetch(missing)
        return wanted

    def _fetch(self, keys: list[str]) -> None:
        from crs.cache.transfer import _write_local

        settings = _settings(self.mirror)
        if settings is None:
            raise CacheError(f"{self.mirror} is no longer a read-through mirror; run the stage again")
        remote, root, url = self._remote_root(str(settings["url"]))
        store = Path(self.root).name
        paths = {key: f"{root}/{store}/{key}" for key in keys}
        try:
            found = remote.cat(list(paths.values()), on_error="return")
        except Exception as error:
            from crs.cache.remote import remote_error

            raise remote_error(url, "reading from", error) from None
        found = found if isinstance(found, dict) else {next(iter(paths.values())): found}
        entries = {}
        for key, path in paths.items():
            data = found.get(path)
            if isinstance(data, FileNotFoundError) or data is None:
                raise CacheError(f"{url}: {store}/{key} is marked complete but is not in the bucket; the copy at "
                                 f"{url} is damaged: re-extract it (`crs extract`, then the push)")
            if isinstance(data, BaseException):
                from crs.cache.remote import remote_error

                raise remote_error(url, "reading from", data)
            self._check(key, bytes(data), url)
            _write_local(Path(self.root) / key, bytes(data))
            entries[f"{store}/{key}"] = len(data)
        with _Ledger(self.mirror) as ledger:
            ledger.add(entries)
            ledger.evict(self.mirror, int(settings["budget"]), pinned=set(entries),
                         run_started_ns=int(settings.get("stage_started_ns", 0)))

    def _remote_root(self, url: str) -> tuple[Any, str, str]:
        if self._remote is None or self._remote[2] != url:
            remote, root = open_url(url)
            self._remote = (remote, root, url)
        return self._remote

    def _check(self, key: str, data: bytes, url: str) -> None:
        """The fetched bytes decode to the rows whose sha256 the extraction recorded, else one line."""
        from zarr.core.buffer import cpu
        from zarr.storage import MemoryStore

        array, chunk = self._split(key)
        marks = self._marks[array]
        assert marks is not None and marks.checksums is not None
        local_key = key[len(array) + 1:]
        memory = MemoryStore({"zarr.json": cpu.Buffer.from_bytes(marks.metadata),
                              local_key: cpu.Buffer.from_bytes(data)}, read_only=True)
        start, stop = chunk * marks.chunk_rows, min((chunk + 1) * marks.chunk_rows, marks.n_rows)
        try:
            values = np.asarray(zarr.open_array(memory, mode="r")[start:stop])
            sound = chunk_checksum(values) == bytes(marks.checksums[chunk])
        except Exception:  # garbled bytes fail to decode in many ways
            sound = False
        if not sound:
            raise CacheError(f"{url}: {Path(self.root).name}/{key} does not match the sha256 its extraction "
                             f"recorded; the copy at {url} is damaged: re-extract that chunk (`crs cache verify "
                             "--repair` where it was written, then `crs extract` and the push)")

    def _split(self, key: str) -> tuple[str, int]:
        index = key.rfind(CHUNK_MARK)
        return key[:index], int(key[index + len(CHUNK_MARK):].split("/")[0])

    def _complete_chunk(self, key: str) -> bool:
        """Whether ``key`` is a chunk of a chunked-writer feature array marked complete (a chunk that must
        exist); it must then have a recorded checksum to be fetched."""
        if _chunk_array(key) is None:
            return False
        array, chunk = self._split(key)
        if array not in self._marks:
            self._marks[array] = self._read_marks(array)
        marks = self._marks[array]
        if marks is None or chunk >= len(marks.done) or marks.done[chunk] != 1:
            return False
        if marks.checksums is None or not marks.checksums[chunk].any():
            raise CacheError(f"{Path(self.root).name}/{array} chunk {chunk} has no recorded checksum, so a fetched "
                             "copy cannot be checked; pull the cache whole (`crs cache pull URL FOLDER`)")
        return True

    def _read_marks(self, array: str) -> _ArrayMarks | None:
        root = Path(self.root)
        if not (root / f"{array}{DONE_SUFFIX}" / "zarr.json").is_file():
            return None
        done = np.asarray(zarr.open_array(str(root / f"{array}{DONE_SUFFIX}"), mode="r")[:])
        checksum_path = root / f"{array}{CHECKSUM_SUFFIX}"
        checksums = np.asarray(zarr.open_array(str(checksum_path), mode="r")[...]) \
            if (checksum_path / "zarr.json").is_file() else None
        metadata = (root / array / "zarr.json").read_bytes()
        opened = zarr.open_array(str(root / array), mode="r")
        recorded = dict(opened.attrs)
        chunk_rows = int(str(recorded.get("chunk_rows", opened.chunks[0])))
        return _ArrayMarks(metadata, done, checksums, chunk_rows, int(opened.shape[0]))


def _touch(path: Path) -> bool:
    """Mark a chunk file as just read (its mtime orders eviction); False when it is not there."""
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False


def store_for(path: Path, mode: str) -> ReadThroughStore | None:
    """The read-through store of a store folder inside a read-through mirror, else None (a plain folder)."""
    if not settings_path(path.parent).is_file():
        return None
    return ReadThroughStore(path, read_only=mode == "r")


if store_for not in STORE_OPENERS:
    STORE_OPENERS.append(store_for)
