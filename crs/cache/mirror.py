"""A cache given as a URL (``s3://bucket/prefix``), served as a local mirror folder kept in step with the
bucket by ``crs cache push`` and ``pull`` at the stage boundaries (decision 0178).

Every stage reads and writes the mirror (``spec.cache``) exactly as it would a cache folder: journals,
locks, O_DIRECT reads and the goldens stay what they are. :class:`MirrorSync` pulls once, before the
first stage of a :class:`crs.benchmark.Benchmark` reads the cache (only what the mirror lacks, then
every chunk checked against its recorded sha256), and pushes each data set's stores once extracted
(under the URL's object lock: two writers never interleave; data, then flags, then group metadata).
A push that finds the lock held by another live writer waits for it, up to twice the lock's lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from crs.cache.lock import lease_seconds
from crs.cache.object_lock import RemoteLockHeld
from crs.cache.readthrough import LazyPullReport, forget_fetched, prepare, status
from crs.cache.store import store_path
from crs.cache.transfer import TransferReport, pull, push
from crs.spec import Spec, cache_budget_bytes


class MirrorSync:
    """The pull and push of one spec's URL cache; a no-op for a cache folder (``spec.cache_url`` None)."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.pulled: TransferReport | None = None
        self.pushed: TransferReport | None = None
        self.prepared: LazyPullReport | None = None
        self.fetched_before = (0, 0)
        self.announce: Callable[[str], None] | None = None
        """Receives each transfer's one line (the CLI prints it; the Python API keeps them silent)."""

    def pull(self) -> TransferReport | None:
        """Fetch what the mirror lacks from the URL, once per benchmark (the bytes fetched once)."""
        if self.spec.cache_url is None or self.pulled is not None:
            return None
        self.pulled = pull(self.spec.cache_url, self.spec.cache)
        forget_fetched(self.spec.cache)  # the mirror is whole now: none of its chunks may be evicted
        self._say(self.pulled)
        return self.pulled

    def pull_for_reading(self) -> LazyPullReport | None:
        """Before a stage that only reads (probe, report): fetch what the mirror lacks except feature chunks,
        which the read-through fetches on first read within the spec's ``cache_budget`` (decision 0187).
        A no-op for a folder cache, after a whole pull, or once per benchmark."""
        if self.spec.cache_url is None or self.pulled is not None or self.prepared is not None:
            return None
        self.prepared = prepare(self.spec.cache_url, self.spec.cache, cache_budget_bytes(self.spec.cache_budget))
        self.fetched_before = self.prepared.status.fetched_bytes, self.prepared.status.fetched_chunks
        if self.announce is not None:
            self.announce(f"cache {self.prepared.format()}")
        return self.prepared

    def read_through_line(self) -> str | None:
        """One line after a reading stage: the bytes the read-through fetched during it, and what it holds."""
        found = status(self.spec.cache) if self.prepared is not None else None
        if found is None:
            return None
        fetched, chunks = found.fetched_bytes - self.fetched_before[0], found.fetched_chunks - self.fetched_before[1]
        self.fetched_before = found.fetched_bytes, found.fetched_chunks
        return (f"cache read-through: fetched {fetched:,} bytes in {chunks} chunk(s) this stage; holds "
                f"{found.held_bytes:,} bytes in {found.held_chunks} chunk(s) of a {found.budget:,}-byte budget "
                f"({found.budget_setting})")

    def push(self, datasets: Sequence[str] | None = None) -> TransferReport | None:
        """Send what the URL lacks from the mirror (after extraction: the finished chunks); ``datasets``: only
        these data sets' stores (what stage 1 just wrote), else every store of the mirror."""
        if self.spec.cache_url is None:
            return None
        deadline = time.monotonic() + 2 * lease_seconds()
        while True:
            try:
                stores = None if datasets is None else [store_path(self.spec.cache, name).name for name in datasets]
                self.pushed = push(self.spec.cache, self.spec.cache_url, stores)
                break
            except RemoteLockHeld:  # another writer's push (a shard, another machine): its turn first
                if time.monotonic() > deadline:
                    raise
                time.sleep(2.0)
        self._say(self.pushed)
        return self.pushed

    def _say(self, report: TransferReport) -> None:
        if self.announce is not None:
            self.announce(f"cache {report.format()}")
