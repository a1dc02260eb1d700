"""Which chunks each of ``n`` shards fills, balanced by forward passes; and the shard a scheduler started.

A shard is a contiguous stretch of the data set's rows: every chunk of every array of every encoder
is a unit of work keyed by the data-set row of its first position and weighted by its rows (each
row of a chunk is one forward pass), the units are walked in row order and cut into ``n`` runs of
equal passes. So each shard gets about ``1/n`` of every encoder's passes (its time, too, however
much one encoder costs against another) and decodes mostly its own images. A shard's passes differ
from ``passes / n`` by less than one unit (the largest chunk) per data set.

The cut depends only on the chunk layout of the arrays, which every shard reads from the same store,
so shards started anywhere, at any time, agree on it. Batches are still cut at every array's chunk
edges (``runner.batch_windows``): a sharded store is bit-identical to one written in one go.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from crs.spec import for_setting


@dataclass(frozen=True)
class ChunkUnit:
    """One chunk of one array: where it starts in the data set's row order, and its forward passes."""

    row: float  # data-set row of its first position (a fraction x images when the rows are not known)
    passes: int
    array: int  # the array's index among its encoder's arrays (clean first, then each corrupted variant)
    chunk: int
    encoder: int = 0  # the encoder's index in the walk


def assign(units: Sequence[ChunkUnit], count: int) -> list[int]:
    """The shard (``0 .. count - 1``) of each unit: units in row order, cut into runs of equal passes.

    A unit goes to the shard whose share of the cumulative passes holds the unit's midpoint, so
    every unit goes to exactly one shard and each shard's passes are within one unit of
    ``total / count``. Units that start at the same row (the same chunk of every encoder, every
    corrupted variant) alternate between encoders, so a cut through them splits every encoder alike.
    """
    if count < 1:
        raise ValueError(f"shard count {count} must be at least 1")
    order = sorted(range(len(units)), key=lambda k: (units[k].row, units[k].array, units[k].encoder, units[k].chunk))
    total = sum(unit.passes for unit in units)
    shards = [0] * len(units)
    if total == 0:
        return shards
    before = 0
    for k in order:
        middle = before + units[k].passes / 2
        shards[k] = min(count - 1, int(middle * count // total))
        before += units[k].passes
    return shards


def passes_per_shard(units: Sequence[ChunkUnit], count: int) -> list[int]:
    """Forward passes each shard fills (they sum to every unit's passes, each counted once)."""
    totals = [0] * count
    for unit, shard in zip(units, assign(units, count), strict=True):
        totals[shard] += unit.passes
    return totals


def array_units(array: int, n_rows: int, chunk_rows: int, row_of_position: Sequence[float] | np.ndarray | None = None,
                encoder: int = 0, scale: float = 1.0) -> list[ChunkUnit]:
    """The chunks of one array of ``n_rows`` positions in chunks of ``chunk_rows``.

    ``row_of_position``: the data-set row of each position (None: ``position x scale``; the clean
    array's positions are its rows).
    """
    units = []
    for chunk, start in enumerate(range(0, n_rows, chunk_rows)):
        stop = min(start + chunk_rows, n_rows)
        row = start * scale if row_of_position is None else row_of_position[start]
        units.append(ChunkUnit(float(row), stop - start, array, chunk, encoder))
    return units


# Scheduler variables, in the order they are read: (index, count, what starts them).
ENVIRONMENT_SHARDS = (
    ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "a SLURM job array"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM tasks (srun)"),
    ("RANK", "WORLD_SIZE", "torchrun"),
)


def shard_from_environment(environ: Mapping[str, str]) -> tuple[tuple[int, int], str]:
    """``((index, count), source)`` of the shard the scheduler started this process as.

    A SLURM array task is ``SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN`` of ``SLURM_ARRAY_TASK_COUNT``
    (arrays need not start at 0); an array of several-task jobs multiplies out (task ``p`` of array
    task ``a`` is shard ``a * ntasks + p``). Then ``SLURM_PROCID``/``SLURM_NTASKS``, then torchrun's
    ``RANK``/``WORLD_SIZE``.
    """
    def number(name: str) -> int:
        try:
            return int(environ[name])
        except ValueError:
            raise for_setting(ValueError(
                f"environment variable {name}={environ[name]!r} is not a whole number; "
                "give the shard as i/n instead"), "shard") from None

    if "SLURM_ARRAY_TASK_ID" in environ and "SLURM_ARRAY_TASK_COUNT" in environ:
        index = number("SLURM_ARRAY_TASK_ID") - number("SLURM_ARRAY_TASK_MIN") \
            if "SLURM_ARRAY_TASK_MIN" in environ else number("SLURM_ARRAY_TASK_ID")
        count = number("SLURM_ARRAY_TASK_COUNT")
        tasks = number("SLURM_NTASKS") if "SLURM_NTASKS" in environ and "SLURM_PROCID" in environ else 1
        if tasks > 1:
            return _checked(index * tasks + number("SLURM_PROCID"), count * tasks), "a SLURM job array of srun tasks"
        return _checked(index, count), ENVIRONMENT_SHARDS[0][2]
    for index_name, count_name, source in ENVIRONMENT_SHARDS[1:]:
        if index_name in environ and count_name in environ:
            return _checked(number(index_name), number(count_name)), source
    names = ", ".join(f"{i}/{c}" for i, c, _ in ENVIRONMENT_SHARDS)
    raise for_setting(ValueError(
        f"no scheduler shard in the environment (looked for {names}); "
        "start it as a SLURM array or torchrun task, or give the shard as i/n"), "shard")


def _checked(index: int, count: int) -> tuple[int, int]:
    if count < 1 or not 0 <= index < count:
        raise for_setting(ValueError(
            f"the scheduler's shard {index} of {count} is invalid (need 0 <= index < count); "
            "check the job's array range or give the shard as i/n"), "shard")
    return index, count


def tasks_for(seconds: float, hours_per_task: float = 4.0, most: int = 1000) -> int:
    """Array tasks for a run of ``seconds`` on one device, about ``hours_per_task`` each."""
    if not math.isfinite(seconds) or seconds <= 0:
        return 1
    return max(1, min(most, math.ceil(seconds / (hours_per_task * 3600))))
