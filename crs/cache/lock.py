"""One writer per (store, encoder, shard): a lock file that records who holds it, judged from any node.

The lock is an exclusive ``flock`` on ``<cache>/.crs-locks/<dataset>/writer.<encoder>.shard-<i>-of-<n>.lock``;
the file's content names the holder (pid, host, start time and, under SLURM, its job, array task and
step) so a second writer can say who is in the way. The kernel drops a ``flock`` when its process
dies, but on another node the flock says nothing dependable (``localflock`` mounts, or no flock at all
across a network file system), and a lock file outlives a killed task. So a lock file whose flock is
free is judged (:func:`judge`):

- written on this host: its pid is gone, so it is free;
- written by this very SLURM task (same job id and task; a requeued task keeps its job id): free;
- written by another SLURM job: ``squeue`` says whether that job still runs; a job that is gone,
  pending again or finished no longer writes;
- otherwise (no SLURM, or ``squeue`` cannot answer): a lease. Every holder touches its lock file every
  ``lease / 4`` seconds (a heartbeat thread); a file not touched for ``lease`` seconds (default
  :data:`LEASE_SECONDS`, ``CRS_LOCK_LEASE_SECONDS`` to change it) belongs to a dead owner.

A dead owner's lock is taken over with one log line naming it and why it counts as dead.
Locks live beside the stores, not inside them, so copying a store never copies a lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from crs.cache.store import CacheError
from crs.spec import for_setting

log = logging.getLogger("crs.cache.lock")

LOCK_FOLDER = ".crs-locks"
LEASE_SECONDS = 120.0  # a holder that has not renewed its lock for this long is dead
LAYOUT_WAIT_SECONDS = 600.0  # the layout lock is held for seconds; a wait this long means something is wrong
# squeue states of a job whose processes may still write (anything else, or an unknown job, cannot)
SLURM_LIVE_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING",
                               "STAGE_OUT", "RESIZING"})
_SLURM_FIELDS = (("job", "SLURM_JOB_ID"), ("array_job", "SLURM_ARRAY_JOB_ID"), ("array_task", "SLURM_ARRAY_TASK_ID"),
                 ("step", "SLURM_STEP_ID"), ("procid", "SLURM_PROCID"))


def lease_seconds() -> float:
    """The lease a writer states in its lock file (``CRS_LOCK_LEASE_SECONDS``, default :data:`LEASE_SECONDS`)."""
    try:
        value = float(os.environ.get("CRS_LOCK_LEASE_SECONDS", LEASE_SECONDS))
    except ValueError:
        return LEASE_SECONDS
    return value if value > 0 else LEASE_SECONDS


def slurm_identity(environ: dict[str, str] | None = None) -> dict[str, str]:
    """This process's SLURM job, array task, step and task rank (empty outside SLURM)."""
    environ = dict(os.environ) if environ is None else environ
    if "SLURM_JOB_ID" not in environ:
        return {}
    return {key: environ[name] for key, name in _SLURM_FIELDS if name in environ}


class LockHeldError(CacheError):
    """Another live writer holds the lock; the message names it and how to proceed."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a lock."""

    pid: int
    host: str
    started: str
    purpose: str = ""
    slurm: dict[str, str] = field(default_factory=dict)
    lease: float = LEASE_SECONDS

    def describe(self) -> str:
        job = ""
        if self.slurm.get("job"):
            task = (f" (array {self.slurm['array_job']}_{self.slurm['array_task']})"
                    if self.slurm.get("array_task") else "")
            job = f", SLURM job {self.slurm['job']}{task}"
        return f"pid {self.pid} on host {self.host}{job} (started {self.started})"

    def same_slurm_task(self, other: dict[str, str]) -> bool:
        """True when ``other`` is this holder's SLURM task (a requeued task keeps its job id)."""
        keys = ("job", "step", "procid")
        return bool(self.slurm.get("job")) and all(self.slurm.get(k) == other.get(k) for k in keys)

    @staticmethod
    def me(purpose: str) -> LockHolder:
        return LockHolder(os.getpid(), socket.gethostname(), datetime.now(UTC).isoformat(timespec="seconds"),
                          purpose, slurm_identity(), lease_seconds())


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
        slurm = data.get("slurm") or {}
        return LockHolder(int(data["pid"]), str(data["host"]), str(data["started"]), str(data.get("purpose", "")),
                          {str(k): str(v) for k, v in slurm.items()} if isinstance(slurm, dict) else {},
                          float(data.get("lease", LEASE_SECONDS)))
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


def slurm_job_state(job: str) -> str | None:
    """The job's state as ``squeue`` says it (``GONE`` for a job it no longer knows), or None when
    ``squeue`` cannot answer (not installed, controller unreachable)."""
    if shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-j", job, "-t", "all", "-o", "%T"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode == 0:
        states = out.stdout.split()
        return states[0] if states else "GONE"
    if "invalid job id" in out.stderr.lower():
        return "GONE"
    return None


def _heartbeat_age(path: Path) -> float | None:
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


def judge(holder: LockHolder, path: Path) -> str | None:
    """Why the holder recorded in ``path`` is dead, or None while it may be alive.

    Called only when the lock's flock was free here (or for reports). On this host a free flock
    means the holder has gone; elsewhere the holder's SLURM job, then its lease, decide.
    """
    if holder.host == socket.gethostname():
        return "no longer running" if not _pid_alive(holder.pid) else "no longer holding it"
    if holder.slurm.get("job"):
        if holder.same_slurm_task(slurm_identity()):
            return "this very SLURM task, restarted (requeued or rerun)"
        state = slurm_job_state(holder.slurm["job"])
        if state is not None:
            if state not in SLURM_LIVE_STATES:
                return f"SLURM says job {holder.slurm['job']} is {state.lower()}"
            return None
    age = _heartbeat_age(path)
    if age is not None and age > holder.lease:
        return f"its lease expired: last renewed {age:.0f} s ago, lease {holder.lease:.0f} s"
    return None


class _Heartbeat:
    """Touches a held lock file every ``lease / 4`` seconds, so other nodes see its holder alive."""

    def __init__(self, descriptor: int, lease: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(descriptor, lease / 4), daemon=True,
                                        name="crs-lock-heartbeat")
        self._thread.start()

    def _beat(self, descriptor: int, interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(OSError):
                os.utime(descriptor)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class WriterLock:
    """An exclusive, self-describing lock file. Use as a context manager.

    ``wait=False``: a lock held by a live owner raises :class:`LockHeldError` naming it.
    ``wait=True``: poll until it is free, or ``timeout`` seconds pass (None: forever; the layout
    lock passes :data:`LAYOUT_WAIT_SECONDS`). A dead owner's lock is taken over either way, with one
    warning naming the owner and why it counts as dead (:func:`judge`).
    """

    def __init__(self, path: Path | str, purpose: str = "", wait: bool = False,
                 timeout: float | None = None, poll_seconds: float = 0.25):
        self.path = Path(path)
        self.purpose = purpose
        self.wait = wait
        self.timeout = timeout
        self.poll_seconds = poll_seconds
        self._descriptor: int | None = None
        self._heartbeat: _Heartbeat | None = None
        self.took_over: LockHolder | None = None

    def _held_message(self, holder: LockHolder | None) -> str:
        who = holder.describe() if holder else "another process"
        what = f" ({holder.purpose})" if holder and holder.purpose else ""
        lease = ""
        if holder is not None and holder.host != socket.gethostname():
            age = _heartbeat_age(self.path)
            lease = (f"; it renewed its lease {age:.0f} s ago and counts as dead {holder.lease:.0f} s after its last "
                     "renewal" if age is not None else "")
        return (
            f"{self.path.name} is held by {who}{what}{lease}; wait for it to finish (or pass wait), "
            f"or stop that process (if it has ended, delete {self.path})"
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
            if previous is not None:
                dead = judge(previous, self.path)
                if dead is None:  # flock free here, but its owner may be alive on another node
                    fcntl.flock(descriptor, fcntl.LOCK_UN)
                    os.close(descriptor)
                    if not self.wait and self._outwait_lease(previous):
                        continue  # not renewed for a whole lease: judged again, now dead
                    self._wait_or_raise(previous, deadline, announced)
                    announced = True
                    continue
                log.warning("taking over %s left by %s: %s", self.path.name, previous.describe(), dead)
                self.took_over = previous
            holder = LockHolder.me(self.purpose)
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, json.dumps(holder.__dict__).encode(), 0)
            os.fsync(descriptor)
            self._descriptor = descriptor
            self._heartbeat = _Heartbeat(descriptor, holder.lease)
            return self

    def _outwait_lease(self, holder: LockHolder) -> bool:
        """When only the lease can tell (no SLURM verdict), wait out what is left of it: True if the
        owner did not renew it meanwhile (a restarted task then takes over), False if it did (alive)."""
        if holder.host == socket.gethostname() or (holder.slurm.get("job") and slurm_job_state(holder.slurm["job"])):
            return False
        try:
            renewed = self.path.stat().st_mtime
        except OSError:
            return True
        left = holder.lease - (time.time() - renewed)
        if left <= 0:
            return True
        log.warning("waiting up to %.0f s for the lease of %s to run out (%s renewed it %.0f s ago; a live owner "
                    "renews it every %.0f s)", left + 1, self.path.name, holder.describe(), holder.lease - left,
                    holder.lease / 4)
        end = time.monotonic() + left + 1
        while time.monotonic() < end:
            time.sleep(min(self.poll_seconds * 4, max(0.0, end - time.monotonic())))
            try:
                if self.path.stat().st_mtime != renewed:
                    return False
            except OSError:
                return True
        return True

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
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
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


def layout_lock(store: Path | str, purpose: str) -> WriterLock:
    """The store's layout lock, waited for at most :data:`LAYOUT_WAIT_SECONDS` (it is held for seconds)."""
    return WriterLock(layout_lock_path(store), purpose, wait=True, timeout=LAYOUT_WAIT_SECONDS)


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

    A lock taken on another host counts as live until :func:`judge` finds its owner dead.
    """
    folder = lock_folder(store)
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob(f"writer.{encoder}.shard-*.lock")):
        holder = _read_holder(path)
        if _is_locked(path) or (holder is not None and holder.host != socket.gethostname()
                                and judge(holder, path) is None):
            return path, holder
    return None
