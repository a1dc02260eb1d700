"""Stage 1 as a SLURM job array submitted through submitit (docs/decisions/0066).

One array task per shard; each calls :func:`crs.extract.stage.extract_spec` with its own
``(index, count)`` passed as an argument (not read from the environment, so a task resubmitted on
its own keeps its shard). The task is a submitit ``Checkpointable``: when SLURM preempts it or
its time runs out, submitit requeues it, and the requeued task resumes from the cache's chunk flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit

from crs.spec import Spec


@dataclass(frozen=True)
class SlurmOptions:
    tasks: int
    minutes: int
    cpus_per_task: int = 8
    gpus_per_task: int = 0
    partition: str | None = None
    folder: Path = Path("crs-slurm-logs")


class ExtractShard(submitit.helpers.Checkpointable):
    """One array task: stage 1 of a spec for one shard; requeued as is when preempted or timed out."""

    def __call__(self, spec: Spec, index: int, count: int, allow_overlap: bool = False) -> dict[str, Any]:
        from crs.extract.stage import extract_spec

        stats = extract_spec(spec, progress=False, shard=(index, count), allow_overlap=allow_overlap)
        return {"shard": f"{index}/{count}", "forward": dict(stats.forward_images),
                "decoded": stats.images_decoded, "to_go_here": stats.passes_to_go_here,
                "left_to_other_shards": stats.chunks_left_to_other_shards}


def submit_array(spec: Spec, options: SlurmOptions, allow_overlap: bool = False) -> list[submitit.Job]:
    """Submit one array of ``options.tasks`` shards of ``spec`` and return its jobs (``job.result()`` waits).

    ``allow_overlap`` is an argument of every task (a requeued task keeps it), as the shard index is.
    """
    executor = submitit.SlurmExecutor(folder=str(options.folder), max_num_timeout=10)
    extra: dict[str, Any] = {"requeue": True}
    executor.update_parameters(
        time=max(1, int(math.ceil(options.minutes))), cpus_per_task=options.cpus_per_task,
        array_parallelism=options.tasks, job_name="crs-extract", additional_parameters=extra,
        **({"gpus_per_node": options.gpus_per_task} if options.gpus_per_task else {}),
        **({"partition": options.partition} if options.partition else {}),
    )
    count = options.tasks
    return executor.map_array(ExtractShard(), [spec] * count, list(range(count)), [count] * count,
                              [allow_overlap] * count)
