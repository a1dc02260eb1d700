"""``crs extract | probe | score | report | run | demo``: the stages of one spec, each a :class:`Benchmark` call."""

from __future__ import annotations

import time
from pathlib import Path

import click

from crs.benchmark import Benchmark
from crs.cli.shard import parse_shard
from crs.scoring.result import ScoreResult

spec_argument = click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
cache_option = click.option("--cache", type=click.Path(file_okay=False), help="Cache root (overrides the spec).")
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
    "--shard", default=None, metavar="I/N", help="Fill only row chunks k with k % N == I (run N workers, one per I)."
)
wait_option = click.option("--wait", is_flag=True, help="Wait for another writer of the same shard instead of exiting.")
skip_bad_option = click.option(
    "--skip-bad", is_flag=True,
    help="Skip missing or unreadable images and list them in audit.json and the records' metadata (default: stop).",
)


def _extract(bench: Benchmark, quiet: bool, shard: str | None = None, wait: bool = False) -> None:
    try:
        click.echo(bench.plan().summary_line())
    except Exception as error:  # the plan is a courtesy: extraction reports its own errors, by name
        click.echo(f"plan: not available ({str(error).splitlines()[0] if str(error) else type(error).__name__})")
    stats = bench.extract(progress=not quiet, shard=parse_shard(shard) if shard else None, wait=wait,
                          announce=lambda line: click.echo(f"extract: {line}"))
    counts = ", ".join(f"{name} {n:,}" for name, n in stats.forward_images.items())
    click.echo(
        f"extract: {stats.images_decoded:,} images decoded, forward passes per encoder: {counts or 'none'}"
        f" [{stats.seconds:.1f} s]"
    )
    if stats.passes_cached_at_start:
        click.echo(f"extract: kept {stats.passes_cached_at_start:,} of {stats.passes_planned:,} forward passes "
                   "from the cache")
    if stats.total_forward == 0:
        click.echo("extract: every encoder was cached; no forward pass ran")


def _probe(bench: Benchmark, jobs: int | str | None, cluster: str | None, quiet: bool, full: bool = False) -> None:
    started = time.perf_counter()
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


overwrite_option = click.option(
    "--overwrite", is_flag=True,
    help="Replace a stored score made with other [score] settings (default: refuse; the run folder is published).",
)


def _score(bench: Benchmark, to: str | None = None, overwrite: bool = False) -> ScoreResult:
    result = bench.score(to=to, overwrite=overwrite)
    if to is not None:
        click.echo(f"score: stored under {Path(to) / 'score'}; {bench.folder.root} left as it was")
    click.echo(result.format())
    for limit in bench.ranking_limits():
        click.echo(f"note: {limit}")
    return result


def _report(bench: Benchmark, score: ScoreResult | None = None) -> Path:
    if score is None:
        score, source = bench.stored_score()
        click.echo(source)
    path = bench.report(score)
    click.echo(f"report: {path.resolve()}")
    return path


def _all_stages(bench: Benchmark, jobs: int | str | None, cluster: str | None, quiet: bool,
                overwrite: bool = False) -> None:
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
def extract(spec_path: str, cache: str | None, out: str | None, quiet: bool, shard: str | None, wait: bool,
            skip_bad: bool) -> None:
    """Stage 1: cache clean and corrupted features of every encoder (skips what is cached)."""
    _extract(Benchmark(spec_path, cache=cache, output=out, skip_bad=skip_bad), quiet, shard, wait)


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
def run(spec_path: str, cache: str | None, out: str | None, jobs: int | str | None, cluster: str | None, quiet: bool,
        skip_bad: bool, overwrite: bool) -> None:
    """Extract, probe, score and report for one spec."""
    _all_stages(Benchmark(spec_path, cache=cache, output=out, skip_bad=skip_bad), jobs, cluster, quiet, overwrite)


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
