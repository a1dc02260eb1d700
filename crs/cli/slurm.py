"""``crs extract --slurm``: stage 1 submitted as a SLURM job array (submitit), sized from the plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from crs.benchmark import Benchmark


def slurm_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``crs extract`` that submit it to SLURM instead of running it here."""
    for option in reversed([
        click.option("--slurm", is_flag=True, help="Submit stage 1 as a SLURM job array (submitit) and wait for it."),
        click.option("--tasks", type=click.IntRange(min=1), default=None,
                     help="With --slurm: array tasks (shards) [default: about 4 hours of estimated work each]."),
        click.option("--partition", default=None, help="With --slurm: the SLURM partition."),
        click.option("--cpus-per-task", type=click.IntRange(min=1), default=8, show_default=True,
                     help="With --slurm: CPU cores per task (image decoding runs on them)."),
        click.option("--slurm-logs", type=click.Path(file_okay=False), default="crs-slurm-logs", show_default=True,
                     help="With --slurm: folder for submitit's scripts, logs and results."),
    ]):
        command = option(command)
    return command


def submit_extract(bench: Benchmark, spec_path: str, cache: str | None, tasks: int | None, partition: str | None,
                   cpus_per_task: int, logs: str, allow_overlap: bool = False) -> None:
    from crs.extract.sbatch import shard_plan
    from crs.extract.shards import tasks_for
    from crs.extract.submit import SlurmOptions, submit_array

    spec = bench.spec
    plan = bench.plan()
    device = "cuda" if spec.extract.device.startswith("cuda") else "cpu"
    count = tasks or tasks_for(plan.seconds(device))
    shards = shard_plan(plan, count, spec.extract.batch_size, spec.extract.chunk_rows, device)
    options = SlurmOptions(count, shards.time_limit_seconds // 60, cpus_per_task, 1 if device == "cuda" else 0,
                           partition, Path(logs))
    jobs = submit_array(spec, options, allow_overlap)
    click.echo(f"slurm: submitted array {jobs[0].job_id.split('_')[0]}: {count} task(s), "
               f"{plan.passes - plan.cached_passes:,} forward passes to go, time limit {options.minutes} min each; "
               f"logs in {logs}; waiting (`crs status` shows progress from another shell)")
    failed = 0
    for job in jobs:
        try:
            result = job.result()
        except Exception as error:  # a task that failed for good: say which, go on with the others
            failed += 1
            click.echo(f"slurm: task {job.job_id} failed: {str(error).strip().splitlines()[-1:]}")
            continue
        made = sum(result["forward"].values())
        click.echo(f"slurm: task {job.job_id} (shard {result['shard']}): {made:,} forward passes")
    if failed:
        raise click.ClickException(f"{failed} of {count} task(s) failed; run the same command again to redo "
                                   "only what is missing (the cache keeps every complete chunk)")
