"""``crs extract | probe | score | report | run | demo``: the stages of one spec, each a :class:`Benchmark` call."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from crs.benchmark import Benchmark
from crs.cli.flags import cache_url_option
from crs.cli.shard import devices_option, extract_on_devices, parse_shard, shard_text
from crs.cli.slurm import slurm_options, submit_extract
from crs.scoring.result import ScoreResult

spec_argument = click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
cache_option = click.option("--cache", type=click.Path(file_okay=False), callback=cache_url_option,
                            help="Cache root (overrides the spec).")
out_option = click.option("--out", type=click.Path(file_okay=False), help="Output folder (overrides the spec).")


class JobsType(click.ParamType):
    """``--jobs``: a positive number of worker processes, or ``auto`` (as many as memory and cores allow)."""

    name = "N|auto"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        if text.isdigit() and int(text) >= 1:
            return int(text)
        self.fail(f"{value!r} is neither 'auto' nor a positive number of worker processes", param, ctx)


jobs_option = click.option(
    "--jobs", type=JobsType(), default=None,
    help="Worker processes for stage 2, or 'auto' (as many as memory and cores allow) [default: the spec's].",
)
cluster_option = click.option(
    "--cluster", default=None, help="Run stage 2 on Dask: tcp://HOST:PORT, or local:N for a local cluster."
)
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
shard_option = click.option(
    "--shard", default=None, metavar="I/N|auto",
    help="Fill only the I-th of N stretches of equal forward passes (run N workers, one per I); 'auto': I/N from "
         "SLURM_ARRAY_TASK_ID/COUNT, SLURM_PROCID/NTASKS or torchrun's RANK/WORLD_SIZE."
)
wait_option = click.option("--wait", is_flag=True, help="Wait for another writer of the same shard instead of exiting.")
skip_bad_option = click.option(
    "--skip-bad", is_flag=True,
    help="Skip missing or unreadable images and list them in audit.json and the records' metadata (default: stop).",
)


RESUMED_OPTIONS = ("cache", "out", "shard", "jobs", "cluster")
"""Options a resumed command must repeat to find the same cache and output (quiet and the like need not)."""


def _resume_command() -> str:
    """The command line that resumes the running command: its path, the spec and the options naming its folders."""
    ctx = click.get_current_context()
    words = [ctx.command_path]
    if ctx.params.get("spec_path"):
        words.append(str(ctx.params["spec_path"]))
    for name in RESUMED_OPTIONS:
        if ctx.params.get(name) is not None:
            words += [f"--{name}", str(ctx.params[name])]
    if ctx.params.get("skip_bad"):
        words.append("--skip-bad")
    return " ".join(words)


@contextlib.contextmanager
def _stage(bench: Benchmark, stage: str) -> Iterator[None]:
    """Turn Ctrl-C into what was kept and how to resume (instead of click's bare ``Aborted!``), exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo("", err=True)  # end a progress bar's line
        click.echo(f"crs: interrupted during {stage}", err=True)
        try:
            click.echo(f"crs: {bench.kept(stage)}", err=True)
        except Exception as error:  # a second problem must not hide the first: say so and carry on
            click.echo(f"crs: could not read what was kept ({str(error).splitlines()[0] if str(error) else error})",
                       err=True)
        click.echo(f"crs: to resume, run again: {_resume_command()}", err=True)
        sys.exit(130)


def _preflight(bench: Benchmark) -> None:
    """`crs check` before any encoder runs (imported here: it loads the encoder libraries, which score never needs)."""
    from crs.cli.check import preflight_or_stop

    preflight_or_stop(bench)


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (SLURM's warning before a time limit, ``scancel``, a requeue) stops stage 1 as Ctrl-C does:
    after the forward call in flight, its rows journaled, the locks released."""
    click.echo(f"crs: stopping on signal {signal.Signals(signum).name}", err=True)
    raise KeyboardInterrupt


def _extract(bench: Benchmark, quiet: bool, shard: str | None = None, wait: bool = False,
             allow_overlap: bool = False) -> None:
    main = threading.current_thread() is threading.main_thread()  # handlers can be set there only
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm) if main else None
    try:
        with _stage(bench, "extract"):
            _extract_stage(bench, quiet, shard, wait, allow_overlap)
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _extract_stage(bench: Benchmark, quiet: bool, shard: str | None = None, wait: bool = False,
                   allow_overlap: bool = False) -> None:
    bench.mirror.announce = click.echo  # a URL cache: one line per pull and push, with the bytes moved
    try:
        click.echo(bench.plan().summary_line())
    except Exception as error:  # the plan is a courtesy: extraction reports its own errors, by name
        click.echo(f"plan: not available ({str(error).splitlines()[0] if str(error) else type(error).__name__})")
    parsed = parse_shard(shard) if shard else None
    if shard is not None and parsed is not None and shard.strip().lower() == "auto":
        click.echo(f"extract: shard {shard_text(parsed)} from the environment")
    stats = bench.extract(progress=not quiet, shard=parsed, wait=wait,
                          announce=lambda line: click.echo(f"extract: {line}"), allow_overlap=allow_overlap)
    counts = ", ".join(f"{name} {n:,}" for name, n in stats.forward_images.items())
    click.echo(
        f"extract: {stats.images_decoded:,} images decoded, forward passes per encoder: {counts or 'none'}"
        f" [{stats.seconds:.1f} s]"
    )
    if stats.passes_cached_at_start:
        click.echo(f"extract: kept {stats.passes_cached_at_start:,} of {stats.passes_planned:,} forward passes "
                   "from the cache")
    if shard is not None and stats.passes_to_go_here == 0:
        click.echo(f"extract: shard {shard_text(parsed)}: its work is done (every chunk it fills is complete; "
                   f"{stats.chunks_left_to_other_shards:,} chunk(s) left to other shards); nothing to do")
    elif stats.total_forward == 0:
        click.echo("extract: every encoder was cached; no forward pass ran")


def _probe(bench: Benchmark, jobs: int | str | None, cluster: str | None, quiet: bool, full: bool = False) -> None:
    started = time.perf_counter()
    bench.mirror.announce = click.echo
    with _stage(bench, "probe"):
        outcome = bench.probe(jobs=jobs, cluster=cluster, progress=not quiet, full=full)
    click.echo(
        f"probe: {outcome.n_probes} probes, {len(outcome.records)} evaluation records -> {bench.folder.records_path}"
        f" [{time.perf_counter() - started:.1f} s]"
    )
    if outcome.units_reused:
        click.echo(
            f"probe: {outcome.units_fitted} (encoder, task) units fitted, {outcome.units_reused} unchanged units"
            " reused (--full refits all)"
        )
    for note in outcome.notes:
        click.echo(f"probe: {note}")


overwrite_option = click.option(
    "--overwrite", is_flag=True,
    help="Replace a stored score made with other [score] settings (default: refuse; the run folder is published).",
)


def _score(bench: Benchmark, to: str | None = None, overwrite: bool = False) -> ScoreResult:
    with _stage(bench, "score"):
        result = bench.score(to=to, overwrite=overwrite)
    if to is not None:
        click.echo(f"score: stored under {Path(to) / 'score'}; {bench.folder.root} left as it was")
    click.echo(result.format())
    for limit in bench.ranking_limits():
        click.echo(f"note: {limit}")
    if bench.spec.score.zero_shot:
        _zero_shot_summary(Path(to) if to is not None else bench.folder.root)
    return result


def _zero_shot_summary(root: Path) -> None:
    """A few lines on zero-shot (its leader, each model's AUROC and crossover), from its score.json."""
    from crs.scoring.zero_shot import read_zero_shot_summary
    from crs.scoring.zero_shot_text import summary_lines

    summary = read_zero_shot_summary(root)
    if summary is None:
        return
    for line in summary_lines(summary):
        click.echo(line)
    click.echo(f"zero-shot: details in {root / 'zero_shot' / 'score.json'} and the report's \"Zero-shot or a probe?\"")


def _report(bench: Benchmark, score: ScoreResult | None = None) -> Path:
    bench.mirror.announce = click.echo
    if score is None:
        score, source = bench.stored_score()
        click.echo(source)
    with _stage(bench, "report"):
        path = bench.report(score)
    click.echo(f"report: {path.resolve()}")
    return path


def _all_stages(bench: Benchmark, jobs: int | str | None, cluster: str | None, quiet: bool,
                overwrite: bool = False) -> None:
    _preflight(bench)
    for limit in bench.ranking_limits():  # said before the run, and again under the score
        click.echo(f"note: {limit}")
    _extract(bench, quiet)
    _probe(bench, jobs, cluster, quiet)
    _report(bench, _score(bench, overwrite=overwrite))


@click.command()
@spec_argument
@cache_option
@out_option
@quiet_option
@shard_option
@wait_option
@skip_bad_option
@click.option("--allow-overlap", is_flag=True,
              help="Keep shift-target images that are also in their source (default: drop them, listed in audit.json).")
@slurm_options
@devices_option
def extract(spec_path: str, cache: str | None, out: str | None, quiet: bool, shard: str | None, wait: bool,
            skip_bad: bool, allow_overlap: bool, slurm: bool, tasks: int | None, slurm_logs: str,
            devices: str | None, **site: Any) -> None:
    """Stage 1: cache clean and corrupted features of every encoder (skips what is cached)."""
    bench = Benchmark(spec_path, cache=cache, output=out, skip_bad=skip_bad)
    _preflight(bench)
    if devices is not None:
        if shard is not None or slurm:
            raise click.BadParameter("--devices makes one shard per device; drop --shard/--slurm",
                                     param_hint="--devices")
        extract_on_devices(bench, devices, allow_overlap)
        return
    if slurm:
        if shard is not None:
            raise click.BadParameter("--slurm makes one shard per task; drop --shard", param_hint="--slurm")
        submit_extract(bench, spec_path, cache, tasks, site, slurm_logs, allow_overlap)
        return
    _extract(bench, quiet, shard, wait, allow_overlap)


@click.command()
@spec_argument
@cache_option
@out_option
@jobs_option
@cluster_option
@quiet_option
@click.option("--full", is_flag=True, help="Refit every unit instead of reusing unchanged ones.")
def probe(spec_path: str, cache: str | None, out: str | None, jobs: int | str | None, cluster: str | None, quiet: bool,
          full: bool) -> None:
    """Stage 2: fit probes on the cache and write run records (needs only the cache)."""
    _probe(Benchmark(spec_path, cache=cache, output=out), jobs, cluster, quiet, full)


@click.command()
@spec_argument
@cache_option
@out_option
@quiet_option
@click.option("--to", type=click.Path(file_okay=False), default=None,
              help="Store the score under DIR/score instead of the run folder (explore without changing it).")
@overwrite_option
def score(spec_path: str, cache: str | None, out: str | None, quiet: bool, to: str | None, overwrite: bool) -> None:
    """Compute the axes, the CRS, bootstrap tiers and rank reversals from the run records."""
    _score(Benchmark(spec_path, cache=cache, output=out), to, overwrite)


@click.command()
@spec_argument
@cache_option
@out_option
def report(spec_path: str, cache: str | None, out: str | None) -> None:
    """Write the HTML and Markdown report with figures."""
    _report(Benchmark(spec_path, cache=cache, output=out))


@click.command()
@spec_argument
@cache_option
@out_option
@jobs_option
@cluster_option
@quiet_option
@skip_bad_option
@overwrite_option
@click.option("--extend", "bundle", type=click.Path(exists=True, file_okay=False), default=None,
              help="A published bundle (crs publish): run only the spec's encoders it lacks, with its splits, draws, "
                   "seeds and settings, and score them beside its encoders (docs/publish.md).")
@click.option("--allow-data-mismatch", is_flag=True,
              help="With --extend: go on when local image files differ from the bundle's (the run says so).")
def run(spec_path: str, cache: str | None, out: str | None, jobs: int | str | None, cluster: str | None, quiet: bool,
        skip_bad: bool, overwrite: bool, bundle: str | None, allow_data_mismatch: bool) -> None:
    """Extract, probe, score and report for one spec."""
    if bundle is not None:
        _extend(Benchmark(spec_path, cache=cache, output=out, skip_bad=skip_bad).spec, bundle, jobs, quiet,
                allow_data_mismatch)
        return
    _all_stages(Benchmark(spec_path, cache=cache, output=out, skip_bad=skip_bad), jobs, cluster, quiet, overwrite)


def _extend(spec, bundle: str, jobs: int | str | None, quiet: bool, allow_data_mismatch: bool) -> None:
    """``crs run --extend``: the new encoders only, then one score of everyone and the report."""
    from crs.publish.extend import extend

    outcome = extend(spec, bundle, allow_data_mismatch=allow_data_mismatch, jobs=jobs, progress=not quiet)
    if outcome.mismatches:
        click.echo(f"extend: {len(outcome.mismatches)} image file(s) differ from the bundle's (allowed); first: "
                   f"{outcome.mismatches[0]}")
    click.echo(f"extend: {', '.join(outcome.new_encoders)} added beside the bundle's "
               f"{', '.join(outcome.published_encoders)} (their records and predictions kept as published)")
    click.echo(outcome.score.format())
    click.echo(f"report: {outcome.report}")
    click.echo(f"extend finished in {outcome.seconds:.0f} s; publish it with: crs publish {outcome.spec.output} BUNDLE")


@click.command()
@cache_option
@out_option
@jobs_option
@quiet_option
def demo(cache: str | None, out: str | None, jobs: int | str | None, quiet: bool) -> None:
    """Run the whole pipeline on the built-in synthetic benchmark (no downloads)."""
    started = time.perf_counter()
    bench = Benchmark.demo(cache=cache, output=out)
    click.echo(
        f"crs demo: {len(bench.spec.encoders)} encoders x {len(bench.spec.datasets)} tasks on the synthetic benchmark"
    )
    _all_stages(bench, jobs, None, quiet)
    click.echo(f"demo finished in {time.perf_counter() - started:.0f} s")


STAGE_COMMANDS = (demo, run, extract, probe, score, report)
