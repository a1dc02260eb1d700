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
import time
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
    """Threads for stage 1: ``threads`` when the spec sets it, else ``OMP_NUM_THREADS`` when the
    environment sets it (both fixed), else the usable cores (adapted to the neighbours as the run goes).

    On CPU the forward pass gets every usable core and one decode thread runs beside it (decoding
    is a fraction of a forward pass there, and a second pool would fight the intra-op threads); on
    a GPU the CPU's only job is decoding, so it gets every core.
    """
    usable = usable_cores() if cores is None else cores
    source = "affinity and cgroup quota"
    if threads is None and os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        threads, source = int(os.environ["OMP_NUM_THREADS"]), "OMP_NUM_THREADS"
        usable = max(1, threads)
    elif threads is not None:
        usable, source = max(1, int(threads)), "[extract] threads"
    if device.startswith("cuda"):
        return ThreadPlan(usable, 1, max(1, usable), source)
    return ThreadPlan(usable, usable, 1, source)


def _cpu_busy_seconds(cpus: set[int]) -> float | None:
    """Busy CPU-seconds since boot of the given CPUs, from /proc/stat (None where unreadable)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        values = [int(v) for v in rest.split()]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        busy += sum(values[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / ticks


class ThreadGovernor:
    """Keeps torch's intra-op threads at the cores this process may use that others are not using.

    A busy neighbour on a shared host takes a core whatever the affinity says; torch's threads
    meet at a barrier in every parallel region, so one thread sharing a core with it makes all of
    them wait. Every ``interval`` seconds (between batches, never inside one) the governor reads
    how busy the usable CPUs were apart from this process (``/proc/stat`` minus this process's CPU
    time) and sets the threads to the cores left, at least one. A fixed ``threads`` setting turns
    it off. Thread counts do not change the features of the encoders tested (resnet18 and vit_tiny
    give identical bytes with 1 and 2 threads), so resumed stores stay bit-identical.
    """

    def __init__(self, plan: ThreadPlan, adaptive: bool, interval: float = 2.0, first_look: float = 0.1):
        self.plan, self.adaptive, self.interval, self.first_look = plan, adaptive, interval, first_look
        self.threads = plan.intra_op_threads
        self._previous: int | None = None
        self._last: tuple[float, float, float] | None = None
        try:
            self._cpus = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self._cpus = set(range(os.cpu_count() or 1))

    def _sample(self) -> tuple[float, float, float] | None:
        busy = _cpu_busy_seconds(self._cpus)
        return None if busy is None else (time.monotonic(), busy, time.process_time())

    def __enter__(self) -> ThreadGovernor:
        import torch

        self._previous = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        self._last = self._sample() if self.adaptive else None
        if self._last is not None:  # a first look at the neighbours before the first batch
            time.sleep(self.first_look)
            self.tick(force=True)
        return self

    def __exit__(self, *exc_info: object) -> None:
        import torch

        if self._previous is not None:
            torch.set_num_threads(self._previous)

    def others_busy(self, now: tuple[float, float, float]) -> float | None:
        """Cores the other processes kept busy since the last sample."""
        if self._last is None:
            return None
        wall = now[0] - self._last[0]
        if wall <= 0:
            return None
        return max(0.0, ((now[1] - self._last[1]) - (now[2] - self._last[2])) / wall)

    def tick(self, force: bool = False) -> None:
        """Between batches: re-read the neighbours' load once per interval and set the threads to fit."""
        if not self.adaptive or self._last is None:
            return
        if not force and time.monotonic() - self._last[0] < self.interval:
            return
        now = self._sample()
        if now is None:
            return
        others = self.others_busy(now)
        self._last = now
        if others is None:
            return
        threads = threads_for(self.plan.cores, others)
        if threads != self.threads:
            import torch

            torch.set_num_threads(threads)
            self.threads = threads


def threads_for(cores: int, others_busy: float) -> int:
    """Intra-op threads on ``cores`` usable cores when other processes keep ``others_busy`` of them busy."""
    return max(1, min(cores, int(cores - others_busy + 0.5)))
