"""Stage 1 as a SLURM job array: each task's share of the plan, and the array script sized from it.

The shares are cut by the same rule the shards use (:func:`crs.extract.shards.assign`) on the
plan's chunk layout (:func:`crs.extract.chunking.chunk_rows_for`), so every planned forward pass
falls in exactly one task. Without the data, a corrupted chunk's place in the row order is its
share of the test split times the images (test rows spread evenly): the per-task passes are then
estimates within a chunk or so of what the tasks fill; their sum is exact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from crs.extract.chunking import chunk_rows_for
from crs.extract.plan import ExtractPlan, PlanRow, _duration
from crs.extract.shards import ChunkUnit, array_units, assign
from crs.extract.site import SiteOptions, signal_seconds

TIME_MARGIN = 2.0  # the time limit is this many times the largest task's estimate ...
TIME_EXTRA_SECONDS = 30 * 60  # ... plus this (start-up, imports, weights, the slowest node)
PASSES_PER_TASK = 1_000_000  # default tasks: no more forward passes than this each (decision 0139)


def default_tasks(plan: ExtractPlan, device: str) -> tuple[int, str]:
    """Array tasks when none are asked for, and why: about 4 estimated hours each, and no more than
    :data:`PASSES_PER_TASK` forward passes each (the GPU estimate is a bare forward pass at an H200's
    peak; real runs are decode-bound, so the estimate alone would give one task for millions of passes)."""
    from crs.extract.shards import tasks_for

    seconds = plan.seconds(device)
    by_time = tasks_for(seconds)
    to_go = plan.passes - plan.cached_passes
    by_passes = max(1, min(1000, math.ceil(to_go / PASSES_PER_TASK)))
    if by_passes > by_time:
        return by_passes, f"at most {PASSES_PER_TASK:,} forward passes each ({to_go:,} to go)"
    if by_time == 1:
        return 1, f"the {to_go:,} forward passes to go are about {_duration(seconds)} of estimated work in all"
    return by_time, "about 4 estimated hours each"


@dataclass(frozen=True)
class ShardPlan:
    """Per task: its forward passes (all planned ones, cached or not), those still to go, and seconds."""

    tasks: int
    passes: tuple[int, ...]
    passes_to_go: tuple[int, ...]
    seconds: tuple[float, ...]
    largest_chunk: int  # passes; a task's share is within one chunk per data set of passes / tasks

    @property
    def time_limit_seconds(self) -> int:
        return int(math.ceil((max(self.seconds, default=0.0) * TIME_MARGIN + TIME_EXTRA_SECONDS) / 60) * 60)


def row_units(row: PlanRow, encoder: int, batch_size: int, chunk_cap: int, encoders: int = 1) -> list[ChunkUnit]:
    """The chunks stage 1 would create for one plan row (new arrays), as units of work, in a run of
    ``encoders`` encoders on the row's data set (they share its loss budget)."""
    n_corrupt = row.test_images if row.corruption_images is None else row.corruption_images
    arrays = [row.images, *([n_corrupt] * row.variants)]
    sizes = chunk_rows_for(arrays, batch_size, chunk_cap, encoders)
    units = array_units(0, row.images, sizes[0], encoder=encoder)
    for k, (n_rows, chunk) in enumerate(zip(arrays[1:], sizes[1:], strict=True)):
        units.extend(array_units(1 + k, n_rows, chunk, None, encoder, scale=row.images / max(n_rows, 1)))
    return units


def shard_plan(plan: ExtractPlan, tasks: int, batch_size: int, chunk_cap: int, device: str) -> ShardPlan:
    """Cut every data set's chunks into ``tasks`` shares of equal forward passes, as the shards do."""
    passes, to_go, seconds = [0] * tasks, [0.0] * tasks, [0.0] * tasks
    largest = 0
    for dataset in dict.fromkeys(row.dataset for row in plan.rows):
        rows = [row for row in plan.rows if row.dataset == dataset]
        units: list[ChunkUnit] = []
        owner_row: list[PlanRow] = []
        for encoder, row in enumerate(rows):
            made = row_units(row, encoder, batch_size, chunk_cap, len(rows))
            units.extend(made)
            owner_row.extend([row] * len(made))
        largest = max([largest, *(unit.passes for unit in units)])
        for unit, row, task in zip(units, owner_row, assign(units, tasks), strict=True):
            share = unit.passes / row.passes if row.passes else 0.0
            passes[task] += unit.passes
            to_go[task] += share * row.passes_to_go
            seconds[task] += share * row.seconds[device] * (row.passes_to_go / row.passes if row.passes else 0.0)
    return ShardPlan(tasks, tuple(passes), tuple(round(n) for n in to_go), tuple(seconds), largest)


def slurm_time(seconds: int) -> str:
    """SLURM's ``D-HH:MM:SS``."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days}-{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def sbatch_script(plan: ExtractPlan, shards: ShardPlan, command: Sequence[str], name: str, device: str,
                  workdir: str, site: SiteOptions | None = None, output: str = "crs-extract-%A_%a.out") -> str:
    """A SLURM array script: one task per shard, each running ``command`` (which reads its shard from SLURM).

    The header states the plan's numbers and how the time limit was derived, so a reader can
    check the sizing before submitting. ``site`` adds what the site asks for (account, QOS, memory,
    GPUs ...). Each task is warned ``--signal=B:USR1@S`` seconds before its limit: the script then
    stops ``crs`` (SIGTERM: it ends after the forward call in flight, journaled) and requeues the
    task, which resumes from the cache's chunk flags; a short estimate costs a requeue, not a resubmission.
    """
    import shlex

    site = site or SiteOptions()
    limit = site.time_minutes * 60 if site.time_minutes else shards.time_limit_seconds
    warn = signal_seconds(limit)
    basis = sorted({row.time_basis[device] for row in plan.rows}) or ["none"]
    lines = [
        "#!/bin/bash",
        f"# Stage 1 of {name} as a SLURM job array, written {time.strftime('%Y-%m-%d %H:%M')} from `crs plan`.",
        f"# plan: {plan.passes:,} forward passes, {plan.passes - plan.cached_passes:,} to go, in "
        f"{shards.tasks} task(s) cut by forward passes (each within {shards.largest_chunk:,} passes per data set "
        "of an equal share)",
    ]
    for task in range(shards.tasks):
        lines.append(f"#   task {task}: {shards.passes[task]:,} passes ({shards.passes_to_go[task]:,} to go), "
                     f"about {_duration(shards.seconds[task])} on {device}")
    if site.time_minutes:
        lines.append(f"# time limit: {site.time_minutes} min, as asked (--time)")
    else:
        lines.append(f"# time limit: {TIME_MARGIN:g} x the largest task's estimate + {TIME_EXTRA_SECONDS // 60} min "
                     f"(estimate basis: {'; '.join(basis)})")
    lines += [
        f"# {warn} s before its limit a task stops cleanly and requeues itself; a failed or preempted task is",
        "# rerun as is (`scontrol requeue JOBID_TASK`, or resubmit the script): the cache's chunk flags say",
        "# what is done, and a task whose chunks are complete exits 0 at once.",
        f"#SBATCH --job-name=crs-extract-{name}",
        f"#SBATCH --array=0-{shards.tasks - 1}",
        "#SBATCH --ntasks=1",
        f"#SBATCH --time={slurm_time(limit)}",
        f"#SBATCH --output={output}",
        "#SBATCH --open-mode=append",  # a requeued task adds to its log instead of replacing it
        "#SBATCH --requeue",
        f"#SBATCH --signal=B:USR1@{warn}",
        *site.header_lines(),
    ]
    lines += [
        "set -uo pipefail",
        f"cd {shlex.quote(workdir)}",
        "requeue() {",
        '    echo "crs-sbatch: time limit in under ' + str(warn) + ' s: stopping job $SLURM_JOB_ID cleanly, then requeueing it"',
        '    kill -TERM "$crs" 2>/dev/null',
        '    wait "$crs"',
        '    scontrol requeue "$SLURM_JOB_ID"',
        "    exit 0",
        "}",
        "trap requeue USR1",
        " ".join(shlex.quote(part) for part in command) + " &",
        "crs=$!",
        'wait "$crs"  # a USR1 interrupts it and runs requeue()',
        "exit $?",
        "",
    ]
    return "\n".join(lines)
