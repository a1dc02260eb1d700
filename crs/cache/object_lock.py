"""One writer per cache URL in object storage: a lock object created only if absent, held by a lease.

Object stores have no ``flock``; S3 (and moto's server) refuse a ``PutObject`` with
``If-None-Match: *`` when the key exists (``PreconditionFailed``), so exactly one of two writers
creates ``<url>/.crs-locks/writer.lock``. Its body names the holder (pid, host, start time, lease).
The holder rewrites it every ``lease / 4`` seconds (a heartbeat thread). A lock not rewritten for
``lease`` seconds (the server's ``LastModified`` against this machine's clock: a skew near the lease,
default 120 s, would misjudge) belongs to a dead writer, and so at once does a lock written on this
host by a process that is gone: either is taken over with one log line naming it (decision 0138's
rules). Locks are never copied (:mod:`crs.cache.transfer` skips them).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import threading
from datetime import UTC, datetime
from typing import Any

from crs.cache.lock import lease_seconds
from crs.cache.remote import open_url, remote_error
from crs.cache.store import CacheError

log = logging.getLogger("crs.cache.object_lock")
LOCK_KEY = ".crs-locks/writer.lock"


class RemoteLockHeld(CacheError):
    """Another live writer holds the cache URL's lock; the message names it."""


def _exists_error(error: BaseException) -> bool:
    """True for the refusal of a create-only write (s3fs maps it to FileExistsError or EINVAL)."""
    if isinstance(error, FileExistsError):
        return True
    return isinstance(error, OSError) and error.errno == errno.EINVAL and "recondition" in str(error)


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


class ObjectLock:
    """``with ObjectLock(url):`` holds the writer lock of the cache at ``url`` (RemoteLockHeld if taken)."""

    def __init__(self, url: str, lease: float | None = None):
        self.url = url
        self.lease = lease if lease is not None else lease_seconds()
        self.filesystem, root = open_url(url)
        self.key = f"{root}/{LOCK_KEY}"
        self.body = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "lease_seconds": self.lease,
                                "started": datetime.now(UTC).isoformat(timespec="seconds"),
                                "token": os.urandom(8).hex()}).encode()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ObjectLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        if not self._create() and not self._ours():
            holder, age, dead_here = self._holder()
            if age is not None and age <= self.lease and not dead_here:
                raise RemoteLockHeld(
                    f"{self.url} is being written by {holder} (lock renewed {age:.0f} s ago, lease {self.lease:.0f} s); "
                    "wait for it to finish, or re-run once it has stopped for longer than the lease"
                )
            why = "its process is gone" if dead_here else f"not renewed for {'?' if age is None else f'{age:.0f}'} s"
            log.warning("taking over the lock of %s from %s: %s (lease %.0f s)", self.url, holder, why, self.lease)
            with contextlib.suppress(FileNotFoundError):
                self.filesystem.rm_file(self.key)
            if not self._create() and not self._ours():  # another writer took it over first
                holder, _, _ = self._holder()
                raise RemoteLockHeld(f"{self.url} is being written by {holder}; wait for it to finish")
        self._thread = threading.Thread(target=self._heartbeat, name="crs-object-lock", daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with contextlib.suppress(Exception):
            if self.filesystem.cat_file(self.key) == self.body:
                self.filesystem.rm_file(self.key)

    def _create(self) -> bool:
        try:
            self.filesystem.pipe_file(self.key, self.body, mode="create")
            return True
        except Exception as error:
            if _exists_error(error):
                return False
            raise remote_error(self.url, "locking", error) from None

    def _ours(self) -> bool:
        """True when the lock object holds this writer's body: its create-only PUT landed but the answer was
        lost, and the client's retry was refused because the object now exists (decision 0192)."""
        try:
            self.filesystem.invalidate_cache(self.key)
            return bool(self.filesystem.cat_file(self.key) == self.body)
        except FileNotFoundError:
            return False
        except Exception as error:
            raise remote_error(self.url, "reading the lock of", error) from None

    def _holder(self) -> tuple[str, float | None, bool]:
        """Who holds the lock, seconds since the server last saw it rewritten (None: it vanished), and
        whether it was written on this host by a process that is gone (free at once, as decision 0138)."""
        try:
            self.filesystem.invalidate_cache(self.key)
            info: dict[str, Any] = self.filesystem.info(self.key)
            holder = json.loads(self.filesystem.cat_file(self.key))
        except FileNotFoundError:
            return "nobody (released)", None, False
        except Exception as error:
            raise remote_error(self.url, "reading the lock of", error) from None
        modified = info.get("LastModified")
        age = (datetime.now(UTC) - modified).total_seconds() if isinstance(modified, datetime) else None
        dead_here = holder.get("host") == socket.gethostname() and not _alive(holder.get("pid"))
        return f"pid {holder.get('pid')} on host {holder.get('host')}", age, dead_here

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease / 4):
            with contextlib.suppress(Exception):
                if self.filesystem.cat_file(self.key) == self.body:  # still ours
                    self.filesystem.pipe_file(self.key, self.body)
