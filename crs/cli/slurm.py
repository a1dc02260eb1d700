"""``crs extract --slurm``: stage 1 submitted as a SLURM job array (submitit), sized from the plan.

:func:`site_options` are the sbatch options a site asks for; ``crs plan --sbatch`` takes the same ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from crs.benchmark import Benchmark


def site_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """sbatch's options for the job (``crs plan --sbatch`` and ``crs extract --slurm``)."""
    for option in reversed([
        click.option("--partition", default=None, help="SLURM partition."),
        click.option("--cpus-per-task", type=click.IntRange(min=1), default=None,
                     help="CPU cores per task (image decoding runs on them) [default: 8, or fewer when the "
                          "partition's nodes have fewer (sinfo)]."),
        click.option("--account", default=None, help="SLURM account to charge (--account)."),
        click.option("--qos", default=None, help="SLURM quality of service (--qos)."),
        click.option("--mem", default=None, help="Memory per node, as sbatch takes it (e.g. 32G)."),
        click.option("--constraint", default=None, help="Node features (--constraint, e.g. a100)."),
        click.option("--gres", default=None,
                     help="Generic resources instead of --gpus (e.g. gpu:a100:1) [default on a GPU device: --gpus=1, "
                          "or --gres=gpu:1 where the cluster does not take --gpus]."),
        click.option("--time", "time_minutes", type=click.IntRange(min=1), default=None, metavar="MINUTES",
                     help="Time limit per task [default: from the plan's estimate]; a task warned before it "
                          "stops and requeues itself."),
        click.option("--sbatch-option", "sbatch_extra", multiple=True, metavar="OPTION",
                     help="Any other sbatch option, passed through (repeat it), e.g. --sbatch-option=--reservation=x."),
    ]):
        command = option(command)
    return command


def site_from(params: dict[str, Any], device: str) -> Any:
    """The :class:`crs.extract.site.SiteOptions` of the command's options, fitted to the cluster (sinfo)."""
    from crs.extract.site import SiteError, SiteOptions, fit_to_cluster, parse_extra

    try:
        site = SiteOptions(partition=params["partition"], account=params["account"], qos=params["qos"],
                           mem=params["mem"], constraint=params["constraint"], gres=params["gres"],
                           cpus_per_task=params["cpus_per_task"], gpus_per_task=1 if device == "cuda" else 0,
                           extra=parse_extra(params["sbatch_extra"]), time_minutes=params["time_minutes"])
        site = fit_to_cluster(site)
    except SiteError as error:
        raise click.UsageError(str(error)) from None
    for note in site.notes:
        click.echo(f"sbatch: {note}")
    return site


def slurm_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``crs extract`` that submit it to SLURM instead of running it here."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option("--slurm", is_flag=True, help="Submit stage 1 as a SLURM job array (submitit) and wait for it."),
        click.option("--tasks", type=click.IntRange(min=1), default=None,
                     help="With --slurm: array tasks (shards) [default: about 4 estimated hours and at most 1,000,000 forward "
                          "passes each]."),
        site_options,
        click.option("--slurm-logs", type=click.Path(file_okay=False), default="crs-slurm-logs", show_default=True,
                     help="With --slurm: folder for submitit's scripts, logs and results."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _quiet_submitit() -> None:
    """submitit warns on every status poll when accounting (sacct) is off; say it once, in one short line."""
    class _Once(logging.Filter):
        seen = False

        def filter(self, record: logging.LogRecord) -> bool:
            if "sacct" not in record.getMessage():
                return True
            if not _Once.seen:
                _Once.seen = True
                click.echo("slurm: sacct does not answer (accounting is off?); task states are read from "
                           "submitit's result files instead", err=True)
            return False

    for name in ("submitit", "submitit.slurm.slurm"):
        logging.getLogger(name).addFilter(_Once())
    # sacct itself prints "Slurm accounting storage is disabled" on every poll: keep its stderr out of ours.
    from submitit.slurm.slurm import SlurmJob

    watcher = SlurmJob.watcher
    if not getattr(watcher, "_crs_quiet", False):
        make = watcher._make_command

        def quiet_command() -> list[str] | None:
            command = make()
            return None if command is None else ["sh", "-c", 'exec "$@" 2>/dev/null', "sacct", *command]

        watcher._make_command = quiet_command  # type: ignore[method-assign]
        watcher._crs_quiet = True  # type: ignore[attr-defined]


def submit_extract(bench: Benchmark, spec_path: str, cache: str | None, tasks: int | None, params: dict[str, Any],
                   logs: str, allow_overlap: bool = False) -> None:
    from crs.extract.sbatch import default_tasks, shard_plan
    from crs.extract.submit import SlurmOptions, submit_array

    spec = bench.spec
    plan = bench.plan()
    if plan.passes == plan.cached_passes:
        click.echo("slurm: every forward pass of the plan is in the cache already: nothing to extract, no job submitted")
        return
    device = "cuda" if spec.extract.device.startswith("cuda") else "cpu"
    site = site_from(params, device)
    count = tasks or default_tasks(plan, device)[0]
    shards = shard_plan(plan, count, spec.extract.batch_size, spec.extract.chunk_rows, device)
    minutes = site.time_minutes or shards.time_limit_seconds // 60
    options = SlurmOptions(count, minutes, site, Path(logs))
    _quiet_submitit()
    jobs = submit_array(spec, options, allow_overlap)
    click.echo(f"slurm: submitted array {jobs[0].job_id.split('_')[0]}: {count} task(s), "
               f"{plan.passes - plan.cached_passes:,} forward passes to go, time limit {options.minutes} min each "
               "(a task warned before it is requeued by submitit and resumes); "
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
    bench.mirror.announce = click.echo
    bench.mirror.push()  # a URL cache: the tasks filled this machine's mirror; its finished chunks go up
    if failed:
        raise RuntimeError(f"{failed} of {count} task(s) failed; run the same command again to redo "
                                   "only what is missing (the cache keeps every complete chunk)")
