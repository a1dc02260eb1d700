"""Command line: ``crs demo | run | extract | probe | score | report`` and the inspection groups."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from crs.benchmark import Benchmark
from crs.cli.bench import bench
from crs.cli.cache import cache, import_features
from crs.cli.corruptions import corruptions
from crs.cli.datasets import datasets
from crs.cli.encoders import encoders_group
from crs.cli.init import init
from crs.cli.shard import parse_shard
from crs.scoring.result import ScoreResult
from crs.spec import SETTING_ATTRIBUTE

# Errors a user can fix: printed as one line and a non-zero exit, never a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, PermissionError, RuntimeError, OSError)


# The command-line flag of each setting a library error may name (crs.spec.for_setting).
SETTING_FLAGS = {
    "cache": "--cache", "output": "--out", "shard": "--shard", "cluster": "--cluster", "jobs": "--jobs",
}


def error_line(error: BaseException) -> str:
    """One line for a library error, with the flag of the setting that fixes it when it names one."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    flag = SETTING_FLAGS.get(getattr(error, SETTING_ATTRIBUTE, ""))
    return f"{message} (option {flag})" if flag else message


class FriendlyGroup(click.Group):
    """A click group that turns user errors into ``crs: error: <message>`` and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.ClickException:
            raise
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # output piped into `head` and closed: not an error
            sys.stderr.close()
            sys.exit(0)
        except USER_ERRORS as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"crs: error: {error_line(error)}", err=True)
            sys.exit(2)


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crs")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.pass_context
def cli(ctx: click.Context, debug: bool, verbose: int) -> None:
    """crs: which frozen image encoder should a clinical model build on?

    Stage 1 (extract) caches every encoder's features once; stage 2 (probe, score, report) fits
    thousands of light probes on the cache and ranks encoders by the Clinical Reliability Score.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if verbose:
        logging.getLogger("crs").setLevel(level)


def _benchmark(path: str, cache: str | None, out: str | None, skip_bad: bool = False) -> Benchmark:
    return Benchmark(path, cache=cache, output=out, skip_bad=skip_bad)


spec_argument = click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
cache_option = click.option("--cache", type=click.Path(file_okay=False), help="Cache root (overrides the spec).")
out_option = click.option("--out", type=click.Path(file_okay=False), help="Output folder (overrides the spec).")
jobs_option = click.option("--jobs", type=int, default=None, help="Worker processes for stage 2 (default: spec).")
cluster_option = click.option(
    "--cluster", default=None, help="Run stage 2 on Dask: tcp://HOST:PORT, or local:N for a local cluster."
)
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bars.")


def _extract(bench: Benchmark, quiet: bool, shard: str | None = None, wait: bool = False) -> None:
    stats = bench.extract(progress=not quiet, shard=parse_shard(shard) if shard else None, wait=wait)
    counts = ", ".join(f"{name} {n}" for name, n in stats.forward_images.items())
    click.echo(
        f"extract: {stats.images_decoded} images decoded, encoder forward passes (images): {counts or 'none'}"
        f" [{stats.seconds:.1f} s]"
    )
    if stats.total_forward == 0:
        click.echo("extract: every encoder was cached; no forward pass ran")


def _probe(bench: Benchmark, jobs: int | None, cluster: str | None, quiet: bool, full: bool = False) -> None:
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


def _score(bench: Benchmark, quiet: bool) -> ScoreResult:
    result = bench.score()
    click.echo(result.format())
    return result


def _report(bench: Benchmark, score: ScoreResult | None = None) -> Path:
    path = bench.report(score)
    click.echo(f"report: {path.resolve()}")
    return path


shard_option = click.option(
    "--shard", default=None, metavar="I/N", help="Fill only row chunks k with k % N == I (run N workers, one per I)."
)
wait_option = click.option("--wait", is_flag=True, help="Wait for another writer of the same shard instead of exiting.")
skip_bad_option = click.option(
    "--skip-bad", is_flag=True,
    help="Skip missing or unreadable images and list them in audit.json and the records' metadata (default: stop).",
)


@cli.command()
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
    _extract(_benchmark(spec_path, cache, out, skip_bad), quiet, shard, wait)


@cli.command()
@spec_argument
@cache_option
@out_option
@jobs_option
@cluster_option
@quiet_option
@click.option("--full", is_flag=True, help="Refit every unit instead of reusing unchanged ones.")
def probe(spec_path: str, cache: str | None, out: str | None, jobs: int | None, cluster: str | None, quiet: bool,
          full: bool) -> None:
    """Stage 2: fit probes on the cache and write run records (needs only the cache)."""
    _probe(_benchmark(spec_path, cache, out), jobs, cluster, quiet, full)


@cli.command()
@spec_argument
@cache_option
@out_option
@quiet_option
def score(spec_path: str, cache: str | None, out: str | None, quiet: bool) -> None:
    """Compute the axes, the CRS, bootstrap tiers and rank reversals from the run records."""
    _score(_benchmark(spec_path, cache, out), quiet)


@cli.command()
@spec_argument
@cache_option
@out_option
def report(spec_path: str, cache: str | None, out: str | None) -> None:
    """Write the HTML and Markdown report with figures."""
    _report(_benchmark(spec_path, cache, out))


@cli.command()
@spec_argument
@cache_option
@out_option
@jobs_option
@cluster_option
@quiet_option
@skip_bad_option
def run(spec_path: str, cache: str | None, out: str | None, jobs: int | None, cluster: str | None, quiet: bool,
        skip_bad: bool) -> None:
    """Extract, probe, score and report for one spec."""
    bench = _benchmark(spec_path, cache, out, skip_bad)
    _extract(bench, quiet)
    _probe(bench, jobs, cluster, quiet)
    result = _score(bench, quiet)
    _report(bench, result)


def demo_spec_path() -> Path:
    """The packaged quickstart spec (examples/quickstart.toml links to it)."""
    return Path(__file__).resolve().parent.parent / "specs" / "quickstart.toml"


@cli.command()
@cache_option
@out_option
@jobs_option
@quiet_option
def demo(cache: str | None, out: str | None, jobs: int | None, quiet: bool) -> None:
    """Run the whole pipeline on the built-in synthetic benchmark (no downloads)."""
    started = time.perf_counter()
    bench = _benchmark(str(demo_spec_path()), cache, out)
    click.echo(
        f"crs demo: {len(bench.spec.encoders)} encoders x {len(bench.spec.datasets)} tasks on the synthetic benchmark"
    )
    _extract(bench, quiet)
    _probe(bench, jobs, None, quiet)
    result = _score(bench, quiet)
    _report(bench, result)
    click.echo(f"demo finished in {time.perf_counter() - started:.0f} s")


for command in (encoders_group, datasets, corruptions, cache, import_features, bench):
    cli.add_command(command)
cli.add_command(init)


def main() -> None:
    cli(obj={})


if __name__ == "__main__":
    main()

