"""Stage 1's progress over every shard, read from the cache alone: passes done and to go per data set,
the rate chunks have been finishing at lately, an estimate of the time left, and the writers running.

The chunk flags are the single source of truth (DESIGN.md 8f): shards on other hosts, requeued
tasks and earlier runs all show, and nothing else has to be kept up to date.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from crs.cache.progress import RECENT_SECONDS, RecentRate, live_writers, recent_rate
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.extract.plan import ExtractPlan, PlanRow, _duration


@dataclass(frozen=True)
class Progress:
    passes: int
    done: int
    per_dataset: tuple[tuple[str, int, int], ...]  # (data set, passes, done)
    rate: RecentRate
    writers: tuple[str, ...]
    unmarked: tuple[str, ...] = ()
    """(data set, encoder) pairs whose chunks are all done but whose group is not yet current: shards that
    each filled their own mirror of a cache URL, none seeing the others' chunks (docs/cluster.md)."""

    @property
    def to_go(self) -> int:
        return self.passes - self.done

    @property
    def seconds_left(self) -> float | None:
        per_second = self.rate.per_second
        return None if per_second is None else self.to_go / per_second

    def format(self) -> str:
        share = self.done / self.passes if self.passes else 1.0
        lines = [f"status: {self.done:,} of {self.passes:,} forward passes done ({share:.1%}), {self.to_go:,} to go"]
        for name, passes, done in self.per_dataset:
            lines.append(f"  {name:<14} {done:>12,} of {passes:>12,} done, {passes - done:>12,} to go")
        per_second = self.rate.per_second
        if self.to_go == 0 and self.unmarked:
            lines.append(f"status: every chunk is done, but {len(self.unmarked)} group(s) are not yet marked "
                         f"current (first: {self.unmarked[0]}; shards on separate mirrors of a cache URL): run "
                         "`crs extract SPEC` once (no forward pass) before stage 2")
        elif self.to_go == 0:
            lines.append("status: complete; stage 2 can run")
        elif per_second is None:
            lines.append(f"status: no chunk finished in the last {RECENT_SECONDS // 60} min; time left unknown "
                         "(is any task running?)")
        else:
            lines.append(f"status: {per_second:,.0f} passes/s over the last {_duration(self.rate.seconds)} "
                         f"(all writers together); about {_duration(self.seconds_left or 0.0)} left at that rate")
        lines.append("writers running here: " + (", ".join(self.writers) if self.writers else "none")
                     + " (locks taken on other hosts are not probed)")
        return "\n".join(lines)


def progress(plan: ExtractPlan, now: float | None = None) -> Progress:
    """Progress of ``plan``'s cache (the plan counts complete chunks; the flags' times give the rate)."""
    datasets = list(dict.fromkeys(row.dataset for row in plan.rows))
    per_dataset = tuple((name, sum(r.passes for r in plan.rows if r.dataset == name),
                         sum(r.cached_passes for r in plan.rows if r.dataset == name)) for name in datasets)
    stores = [store_path(plan.cache, name) for name in datasets]
    rate = recent_rate(stores, now=time.time() if now is None else now)
    writers = tuple(f"{name}: {writer}" for name, store in zip(datasets, stores, strict=True)
                    for writer in live_writers(store))
    unmarked = tuple(f"{row.dataset}/{row.encoder}" for row in plan.rows
                     if row.passes and row.cached_passes == row.passes and not _current(plan.cache, row))
    return Progress(plan.passes, plan.cached_passes, per_dataset, rate, writers, unmarked)


def _current(cache: Path | str, row: PlanRow) -> bool:
    try:
        FeatureStore(store_path(cache, row.dataset)).current_fingerprint(row.encoder)
        return True
    except (CacheError, FileNotFoundError, KeyError):
        return False
