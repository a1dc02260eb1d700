"""How many cores stage 1 may really use, and the thread settings that follow from it.

``os.cpu_count()`` counts the machine's cores; a job on a shared host often may use fewer: its CPU
affinity (taskset, Slurm's cpusets) and its cgroup's CPU quota (containers, Kubernetes limits)
cap it. Running as many intra-op threads as the machine has cores beside a busy neighbour makes
torch's threads wait on each other at every barrier (issue 24 measured 2.9x slower beside one
busy loop on 2 cores, where losing one core explains 2x).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path


def affinity_cores() -> int:
    """Cores this process may be scheduled on (its CPU affinity), or ``os.cpu_count()`` where unknown."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cgroup_quota_cores(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The cgroup's CPU quota in cores (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), or None when unlimited."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota != "max" and float(period) > 0:
            return float(quota) / float(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = float((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = float((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def usable_cores(root: Path = Path("/sys/fs/cgroup")) -> int:
    """Cores stage 1 may use: the affinity set, capped by the cgroup quota (rounded down, at least 1)."""
    cores = affinity_cores()
    quota = cgroup_quota_cores(root)
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return max(1, cores)


@dataclass(frozen=True)
class ThreadPlan:
    """Intra-op threads for the forward pass and workers for decoding, from the usable cores."""

    cores: int
    intra_op_threads: int
    decode_workers: int
    source: str

    def describe(self) -> str:
        return (f"{self.intra_op_threads} intra-op thread(s), {self.decode_workers} decode worker(s) "
                f"({self.cores} usable core(s); {self.source})")


def thread_plan(threads: int | None = None, device: str = "cpu", cores: int | None = None) -> ThreadPlan:
    """Threads for stage 1: ``threads`` when the spec sets it, else the usable cores.

    On CPU the forward pass gets every usable core and one decode thread runs beside it (decoding
    is a fraction of a forward pass there, and a second pool would fight the intra-op threads); on
    a GPU the CPU's only job is decoding, so it gets every core.
    """
    usable = usable_cores() if cores is None else cores
    source = "affinity and cgroup quota"
    if threads is not None:
        usable, source = max(1, int(threads)), "[extract] threads"
    if device.startswith("cuda"):
        return ThreadPlan(usable, 1, max(1, usable), source)
    return ThreadPlan(usable, usable, 1, source)
