"""Stage 1 as a SLURM job array submitted through submitit (docs/decisions/0066).

One array task per shard; each calls :func:`crs.extract.stage.extract_spec` with its own
``(index, count)`` passed as an argument (not read from the environment, so a task resubmitted on
its own keeps its shard). The task is a submitit ``Checkpointable``: when SLURM preempts it or
its time runs out (warned ``signal_seconds`` before, with the same lead as the array
script's), submitit requeues it, and the requeued task resumes from the cache's chunk flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import submitit

from crs.extract.site import SiteOptions, signal_seconds
from crs.spec import Spec


@dataclass(frozen=True)
class SlurmOptions:
    tasks: int
    minutes: int
    site: SiteOptions = field(default_factory=SiteOptions)
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
    params = options.site.submitit_parameters()
    extra: dict[str, Any] = {"requeue": True, **params.pop("additional_parameters", {})}
    minutes = max(1, int(math.ceil(options.minutes)))
    executor.update_parameters(
        time=minutes, array_parallelism=options.tasks, job_name="crs-extract", additional_parameters=extra,
        signal_delay_s=signal_seconds(minutes * 60), **params,
    )
    count = options.tasks
    return executor.map_array(ExtractShard(), [spec] * count, list(range(count)), [count] * count,
                              [allow_overlap] * count)
