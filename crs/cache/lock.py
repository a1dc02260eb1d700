"""One writer per (store, encoder, shard): a lock file that records who holds it.

The lock is an exclusive ``flock`` on ``<cache>/.crs-locks/<dataset>/writer.<encoder>.shard-<i>-of-<n>.lock``;
the file's content names the holder (pid, host, start time) so a second writer can say who is in
the way. The kernel drops a ``flock`` when its process dies, however it dies, so a lock file left by
a killed process on this host is free: the next writer takes it over and warns, naming the dead
holder. A lock file written on another host cannot be checked from here (``flock`` over network
file systems is not dependable), so it is refused with the command that clears it.

Locks live beside the stores, not inside them, so copying a store never copies a lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crs.cache.store import CacheError
from crs.spec import for_setting

log = logging.getLogger("crs.cache.lock")

LOCK_FOLDER = ".crs-locks"


class LockHeldError(CacheError):
    """Another live writer holds the lock; the message names it and how to proceed."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a lock."""

    pid: int
    host: str
    started: str
    purpose: str = ""

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host} (started {self.started})"

    @staticmethod
    def me(purpose: str) -> LockHolder:
        return LockHolder(os.getpid(), socket.gethostname(), datetime.now(UTC).isoformat(timespec="seconds"), purpose)


def lock_folder(store: Path | str) -> Path:
    """Where the locks of one store live: ``<cache>/.crs-locks/<dataset>/``."""
    store = Path(store)
    return store.parent / LOCK_FOLDER / store.stem


def writer_lock_path(store: Path | str, encoder: str, shard: tuple[int, int] | None = None) -> Path:
    index, count = shard or (0, 1)
    return lock_folder(store) / f"writer.{encoder}.shard-{index}-of-{count}.lock"


def layout_lock_path(store: Path | str) -> Path:
    """Held briefly while arrays and groups are created or the sample table is written."""
    return lock_folder(store) / "layout.lock"


def _read_holder(path: Path) -> LockHolder | None:
    try:
        data = json.loads(path.read_text() or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return LockHolder(int(data["pid"]), str(data["host"]), str(data["started"]), str(data.get("purpose", "")))
    except (KeyError, TypeError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WriterLock:
    """An exclusive, self-describing lock file. Use as a context manager.

    ``wait=False``: a held lock raises :class:`LockHeldError` naming the holder. ``wait=True``:
    poll until it is free (or ``timeout`` seconds pass).
    """

    def __init__(self, path: Path | str, purpose: str = "", wait: bool = False,
                 timeout: float | None = None, poll_seconds: float = 0.25):
        self.path = Path(path)
        self.purpose = purpose
        self.wait = wait
        self.timeout = timeout
        self.poll_seconds = poll_seconds
        self._descriptor: int | None = None
        self.took_over: LockHolder | None = None

    def _held_message(self, holder: LockHolder | None) -> str:
        who = holder.describe() if holder else "another process"
        what = f" ({holder.purpose})" if holder and holder.purpose else ""
        return (
            f"{self.path.name} is held by {who}{what}; wait for it to finish (or pass wait), "
            f"or stop that process; lock file: {self.path}"
        )

    def acquire(self) -> WriterLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise for_setting(CacheError(
                f"cannot create the lock folder {self.path.parent} ({error.strerror}); choose a writable cache folder"
            ), "cache") from None
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        announced = False
        while True:
            try:
                descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as error:
                raise CacheError(f"cannot open the lock file {self.path} ({error.strerror}); choose a writable cache folder") from None
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(descriptor)
                if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                self._wait_or_raise(_read_holder(self.path), deadline, announced)
                announced = True
                continue
            # The previous holder may have unlinked the file between our open and our flock.
            try:
                same_file = os.fstat(descriptor).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same_file = False
            if not same_file:
                os.close(descriptor)
                continue
            previous = _read_holder(self.path)
            if previous is not None and previous.host != socket.gethostname():
                fcntl.flock(descriptor, fcntl.LOCK_UN)
                os.close(descriptor)
                if not self.wait:
                    raise LockHeldError(
                        f"{self.path.name} was taken by {previous.describe()} on another host, which this host "
                        f"cannot check; if that process has ended, delete {self.path} and retry"
                    )
                self._wait_or_raise(previous, deadline, announced)
                announced = True
                continue
            if previous is not None:
                # Same host and the flock was free: the process that wrote this file is gone.
                state = "no longer running" if not _pid_alive(previous.pid) else "no longer holding it"
                log.warning(
                    "taking over %s left by %s, %s", self.path.name, previous.describe(), state,
                )
                self.took_over = previous
            holder = LockHolder.me(self.purpose)
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, json.dumps(holder.__dict__).encode(), 0)
            os.fsync(descriptor)
            self._descriptor = descriptor
            return self

    def _wait_or_raise(self, holder: LockHolder | None, deadline: float | None, announced: bool) -> None:
        if not self.wait:
            raise LockHeldError(self._held_message(holder))
        if deadline is not None and time.monotonic() > deadline:
            raise LockHeldError(f"gave up waiting after {self.timeout:.0f} s: " + self._held_message(holder))
        if not announced:
            log.warning("waiting: %s", self._held_message(holder))
        time.sleep(self.poll_seconds)

    def release(self) -> None:
        if self._descriptor is None:
            return
        # Unlink while still holding the flock; a waiter that opened the old file notices the
        # inode changed and opens the path again.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        fcntl.flock(self._descriptor, fcntl.LOCK_UN)
        os.close(self._descriptor)
        self._descriptor = None

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _is_locked(path: Path) -> bool:
    """True if a live process holds the flock on ``path`` (checked by trying to take it)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    finally:
        os.close(descriptor)


def live_holder(store: Path | str, encoder: str) -> str | None:
    """Who is writing ``encoder`` into ``store`` right now (any shard), or None.

    Used by ``crs cache gc`` so it never deletes a group under a running writer.
    """
    found = live_writer(store, encoder)
    if found is None:
        return None
    path, holder = found
    return holder.describe() if holder else f"a process holding {path}"


def live_writer(store: Path | str, encoder: str) -> tuple[Path, LockHolder | None] | None:
    """The lock file and holder of a live writer of ``encoder`` in ``store`` (any shard), or None.

    A lock taken on another host cannot be probed from here and counts as live.
    """
    folder = lock_folder(store)
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob(f"writer.{encoder}.shard-*.lock")):
        holder = _read_holder(path)
        if _is_locked(path) or (holder is not None and holder.host != socket.gethostname()):
            return path, holder
    return None
