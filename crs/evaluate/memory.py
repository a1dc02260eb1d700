"""Memory of stage 2: a unit's peak as a formula of its sizes, the peak RSS actually reached, and
the number of workers that fits the machine.

The formula (``docs/performance.md`` derives it and checks it against measurements) counts what a
unit holds at its two peaks:

* fit: the clean features of the train, validation and test rows as stored (float16), the largest
  group tensor the probe backend builds (torch: every distinct subset of one label fraction rotated
  into float32, padded to D + 1 columns), the float32 validation matrix and the solver's buffers;
* evaluation: the clean test rows (float16) and, per condition, the probabilities of every probe
  (float32) with the metrics' temporaries (float64 copies, sort keys), about 62 bytes per
  probability.

Plus ``base_bytes(backend)``, the resident size of a worker that has imported numpy, torch, scikit-learn,
zarr and pandas. Everything else a unit holds (weights, records, the row blocks being read) is
small next to these at any size where memory matters.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

BASE_BYTES = {"torch": 680 * 2**20, "other": 260 * 2**20}
"""Resident size of a stage-2 worker before its first unit: its imports (measured 644-666 MiB with
torch imported, of which torch is ~480 MiB; 176-198 MiB without), plus a margin."""


def base_bytes(backend: str) -> int:
    return BASE_BYTES["torch" if backend == "torch" else "other"]

EVAL_BYTES_PER_PROBABILITY = 62
"""Evaluation workspace per probability of one condition (P x N x K): float32 probabilities,
a float64 copy and its temporaries, and the AUROC sort keys (uint64 plus a sorted copy)."""

PROJECTION_ROWS = 8192
"""Rows per block when the torch backend centers and rotates a subset (``crs.probes.torch_batched``)."""

READ_ROWS = 4096
"""Rows per block when a unit reads and predicts features (rounded to whole zarr chunks; the
cache's default chunk). Blocks of 4,096 x 1,024 float32 (16 MiB) stay under glibc's largest mmap
threshold, so their buffers are reused from the heap instead of faulted in afresh for every block
(at 16,384 rows the page faults cost as much as the float16 -> float32 conversion)."""

SAFETY = 0.8
"""Share of the available memory that ``jobs = "auto"`` plans to fill."""


@dataclass(frozen=True)
class UnitSize:
    """What a unit's memory depends on, known from the cache's tables and array shapes alone.

    ``groups``: per group of distinct training subsets fitted together (one label fraction), the
    row count of each subset; ``val_rows``: per distinct subset, the validation rows that choose
    its C. ``eval_rows``: rows of the largest evaluation condition (test split or shift target).
    """

    n_train: int
    n_val: int
    n_test: int
    eval_rows: int
    dim: int
    n_outputs: int
    n_probes: int
    n_distinct: int
    n_Cs: int
    groups: tuple[tuple[int, ...], ...]
    val_rows: tuple[int, ...]


def fit_bytes(size: UnitSize, backend: str = "torch", family: str = "logistic") -> int:
    """Bytes a unit holds while fitting, above the worker's base."""
    D, K = size.dim, size.n_outputs
    features = 2 * D * (size.n_train + size.n_val + size.n_test)
    if backend == "torch" and family == "logistic":
        largest = max((max(rows) for rows in size.groups), default=0)
        # the shared projection: every training row of the subsets larger than D, D + 1 float32
        # columns (bounded by the training split), and its basis V
        shared = 4 * (D + 1) * size.n_train + 4 * D * D if largest > D else 0
        group = 0
        for rows in size.groups:
            total = sum(rows)
            buffers = 24 * total * K * size.n_Cs  # L-BFGS logits, residuals and history
            if min(rows) > D and shared:
                # rows gathered from the shared projection; the largest subset alone uses it as is
                tensor = 0 if len(rows) == 1 and rows[0] == largest else 4 * (D + 1) * total
            else:
                # own bases: group tensor Z (D + 1 float32 columns per row) and V (D x rank)
                tensor = 4 * (D + 1) * total + 4 * D * sum(min(D, n) for n in rows)
            group = max(group, tensor + buffers)
        validation = 4 * D * size.n_val + 12 * sum(size.val_rows) * K
        # one block of rows being projected: gathered float16, centered float32, the product
        projection = 10 * D * PROJECTION_ROWS
        return features + shared + group + validation + projection
    # scikit-learn reference (and, roughly, ridge and knn): one subset standardised in float64 at a
    # time, every C's validation probabilities and weights kept until C is chosen
    largest = max((max(rows) for rows in size.groups), default=0)
    return features + 10 * D * largest + 8 * K * size.n_Cs * (sum(size.val_rows) + size.n_distinct * D)


def evaluation_bytes(size: UnitSize) -> int:
    """Bytes a unit holds while evaluating one condition, above the worker's base."""
    probabilities = size.n_probes * size.eval_rows * size.n_outputs
    return 2 * size.dim * size.n_test + EVAL_BYTES_PER_PROBABILITY * probabilities + 10 * size.dim * READ_ROWS


SLACK = (1.05, 64 * 2**20)
"""Margin on the modelled bytes: x1.05 plus 64 MiB for what the terms leave out (the allocator's
slack, short-lived copies of a block). Sized so the prediction bounds all five measured units
(docs/performance.md: 0.2-4 % under before the margin at ISIC and CheXpert size), not derived."""


def unit_peak_bytes(size: UnitSize, backend: str = "torch", family: str = "logistic") -> int:
    """Predicted peak resident memory of a worker running this unit."""
    modelled = max(fit_bytes(size, backend, family), evaluation_bytes(size))
    return base_bytes(backend) + int(SLACK[0] * modelled) + SLACK[1]


# --- the machine ---------------------------------------------------------------------------------


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers and schedulers set)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _cgroup_headroom() -> int | None:
    """Bytes left under this process's cgroup v2 memory limit, if it has one."""
    try:
        cgroup = Path("/proc/self/cgroup").read_text().strip().split("\n")[0].split("::", 1)[1]
        folder = Path("/sys/fs/cgroup") / cgroup.lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((folder / "memory.current").read_text())
    except (OSError, IndexError, ValueError):
        return None


def available_memory() -> int:
    """Bytes that new workers may use: the system's available memory, capped by a cgroup limit."""
    available = int(psutil.virtual_memory().available)
    headroom = _cgroup_headroom()
    return available if headroom is None else min(available, headroom)


def safe_jobs(peak_bytes: int, n_units: int, available: int | None = None, cores: int | None = None) -> int:
    """Workers that fit: at most the cores and the units, each worker planned at ``peak_bytes``, all
    within ``SAFETY`` of the available memory; at least 1."""
    available = available_memory() if available is None else available
    cores = usable_cores() if cores is None else cores
    fit = int(SAFETY * available // max(peak_bytes, 1))
    return max(1, min(cores, max(n_units, 1), fit))


# --- measuring the peak --------------------------------------------------------------------------


def _status_kib(field: str) -> int | None:
    try:
        match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def own_peak_rss_bytes() -> int:
    """This process's peak resident memory since it started its program, in bytes.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` is not that on Linux: a child started by fork and exec
    (``multiprocessing``'s spawn, ``subprocess``) inherits its parent's high-water mark across the
    exec, so a small child of a 3 GiB parent reports 3 GiB. The kernel's ``VmHWM`` belongs to the
    address space the exec made, so it counts this program alone; ``ru_maxrss`` is the fallback
    where ``/proc`` is absent (an upper bound there).
    """
    kib = _status_kib("VmHWM")
    if kib is not None:
        return 1024 * kib
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakRSS:
    """Peak resident memory of this process while the block runs, in bytes (``.peak``).

    On Linux the kernel's own high-water mark (``VmHWM``) is reset on entry through
    ``/proc/self/clear_refs`` and read on exit: exact, no sampling. Elsewhere, or where that file is
    not writable, psutil's RSS is sampled every 5 ms (``.exact`` is then False).
    """

    def __init__(self) -> None:
        self.peak = 0
        self.exact = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakRSS:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.exact = _status_kib("VmHWM") is not None
        except OSError:
            self.exact = False
        if self.exact:
            self.peak = 1024 * (_status_kib("VmHWM") or 0)  # the RSS now: the high-water mark was just reset
        if not self.exact:
            process = psutil.Process()

            def sample() -> None:
                while not self._stop.is_set():
                    self.peak = max(self.peak, process.memory_info().rss)
                    time.sleep(0.005)

            self.peak = process.memory_info().rss
            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.exact:
            self.peak = 1024 * (_status_kib("VmHWM") or 0)
        elif self._thread is not None:
            self._stop.set()
            self._thread.join()
