"""``crs plan SPEC``: what ``crs extract`` will do (forward passes, cache bytes, disk, time) before it runs.

``--sbatch FILE`` also writes a SLURM array script sized from the plan (``crs.extract.sbatch``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from crs.cache.filesystem import is_network_filesystem
from crs.cli.slurm import site_from, site_options
from crs.cli.stages import cache_option, spec_argument
from crs.spec import url_scheme


@click.command()
@spec_argument
@cache_option
@click.option("--encoder", "encoders", multiple=True, help="Plan only these encoders (repeat the option).")
@click.option("--corruption-rows", type=click.IntRange(min=1), default=None, metavar="N",
              help="What if: corrupted variants for a patient-level subsample of about N test images per data set.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--sbatch", "sbatch_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write a SLURM array script for stage 1 sized from the plan (one task per shard).")
@click.option("--tasks", type=click.IntRange(min=1), default=None,
              help="Array tasks for --sbatch [default: about 4 hours of estimated work and at most 1,000,000 "
                   "forward passes each].")
@click.option("--allow-missing", is_flag=True,
              help="Write the --sbatch script even when `crs check` finds missing data or weights here.")
@site_options
def plan(spec_path: str, cache: str | None, encoders: tuple[str, ...], corruption_rows: int | None,
         as_json: bool, sbatch_path: str | None, tasks: int | None, allow_missing: bool,
         **site_params: Any) -> None:
    """Per data set and encoder: images, clean and corrupted forward passes, cached, bytes, time."""
    from crs.benchmark import Benchmark

    bench = Benchmark(spec_path, cache=cache)
    result = bench.plan(list(encoders) or None, corruption_rows)
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else result.format())
    if sbatch_path is None:
        return
    if encoders:
        raise click.BadParameter("an array script extracts every encoder of the spec; drop --encoder",
                                 param_hint="--sbatch")
    from crs.extract.sbatch import default_tasks, sbatch_script, shard_plan

    if result.passes == result.cached_passes:
        click.echo(f"sbatch: {sbatch_path} not written: every forward pass of the plan is in the cache already, so "
                   f"there is nothing to extract and no job to submit; go on with `crs run {spec_path}` "
                   "(stage 2 needs no GPU)")
        return
    spec = bench.spec
    device = "cuda" if spec.extract.device.startswith("cuda") else "cpu"
    _check_before_script(bench, spec_path, sbatch_path, allow_missing)
    count, why = (tasks, "as asked") if tasks else default_tasks(result, device)
    shards = shard_plan(result, count, spec.extract.batch_size, spec.extract.chunk_rows, device)
    command = [sys.executable, "-m", "crs", "extract", str(Path(spec_path).resolve()), "--shard", "auto", "-q"]
    if cache:
        command += ["--cache", cache if url_scheme(cache) else str(Path(cache).resolve())]
    site = site_from(site_params, device)
    script = sbatch_script(result, shards, command, spec.name, device, os.getcwd(), site)
    Path(sbatch_path).write_text(script)
    click.echo(f"sbatch: {sbatch_path}: {count} task(s) ({why}), {sum(shards.passes):,} forward passes in all "
               f"(largest task {max(shards.passes):,}), time limit "
               f"{site.time_minutes or shards.time_limit_seconds // 60} min each; "
               f"submit with `sbatch {sbatch_path}`")
    local = [path for path in (sys.executable, str(Path(spec_path).resolve()), os.getcwd())
             if not is_network_filesystem(path)]
    if local:
        click.echo(f"sbatch: note: the script runs {sys.executable} on {Path(spec_path).resolve()} from {os.getcwd()}; "
                   f"{', '.join(local)} {'is' if len(local) == 1 else 'are'} on a local file system of this machine, "
                   f"so the compute nodes may not see {'it' if len(local) == 1 else 'them'}: install crs and keep the "
                   "spec on a shared file system, or edit the script's paths")


class ScriptNotWritten(RuntimeError):
    """``--sbatch`` refused to write its script; printed as one ``crs: error:`` line like every other error."""


def _check_before_script(bench: Any, spec_path: str, sbatch_path: str, allow_missing: bool) -> None:
    """`crs check` before writing a job script: a script that cannot find its data or weights wastes a queue wait."""
    from crs.extract.preflight import preflight

    report = preflight(bench.spec)
    if report.ok:
        return
    first = report.problems[0].message
    more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
    if not allow_missing:
        raise ScriptNotWritten(
            f"sbatch: {sbatch_path} not written: {first}{more}; fix what `crs check {spec_path}` lists, "
            "or pass --allow-missing if the compute nodes have what this machine lacks")
    click.echo(f"sbatch: warning: `crs check` finds {len(report.problems)} problem(s) here: {first}{more}; "
               "written anyway (--allow-missing)")


@click.command()
@spec_argument
@cache_option
def status(spec_path: str, cache: str | None) -> None:
    """Stage 1's progress over every shard, from the cache's chunk flags: passes done, to go, time left."""
    from crs.benchmark import Benchmark
    from crs.extract.status import progress

    click.echo(progress(Benchmark(spec_path, cache=cache).plan()).format())
