"""Command line: ``crs demo | run | extract | probe | score | report`` and the inspection groups."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from pathlib import Path

import click

from crs.spec import Spec, load_spec

# Errors a user can fix: printed as one line and a non-zero exit, never a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, PermissionError, RuntimeError, OSError)


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
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            click.echo(f"crs: error: {message}", err=True)
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


def _spec(path: str, cache: str | None, out: str | None, skip_bad: bool = False) -> Spec:
    spec = load_spec(path)
    changes: dict[str, object] = {}
    if cache:
        changes["cache"] = Path(cache)
    if out:
        changes["output"] = Path(out)
    if skip_bad:
        changes["extract"] = dataclasses.replace(spec.extract, skip_bad=True)
    return Spec(**{**spec.__dict__, **changes}) if changes else spec


spec_argument = click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
cache_option = click.option("--cache", type=click.Path(file_okay=False), help="Cache root (overrides the spec).")
out_option = click.option("--out", type=click.Path(file_okay=False), help="Output folder (overrides the spec).")
jobs_option = click.option("--jobs", type=int, default=None, help="Worker processes for stage 2 (default: spec).")
cluster_option = click.option(
    "--cluster", default=None, help="Run stage 2 on Dask: tcp://HOST:PORT, or local:N for a local cluster."
)
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bars.")


def _extract(spec: Spec, quiet: bool, shard: str | None = None, wait: bool = False) -> None:
    from crs import pipeline
    from crs.extract import parse_shard

    stats = pipeline.extract(spec, progress=not quiet, shard=parse_shard(shard) if shard else None, wait=wait)
    counts = ", ".join(f"{name} {n}" for name, n in stats.forward_images.items())
    click.echo(
        f"extract: {stats.images_decoded} images decoded, encoder forward passes (images): {counts or 'none'}"
        f" [{stats.seconds:.1f} s]"
    )
    if stats.total_forward == 0:
        click.echo("extract: every encoder was cached; no forward pass ran")


def _probe(spec: Spec, jobs: int | None, cluster: str | None, quiet: bool, full: bool = False) -> None:
    from crs import pipeline

    started = time.perf_counter()
    records = pipeline.probe(spec, jobs=jobs, cluster=cluster, progress=not quiet, full=full)
    n_probes = records.drop_duplicates(["encoder", "task", "label_fraction", "seed"]).shape[0]
    fitted, reused = records.attrs.get("units_fitted", 0), records.attrs.get("units_reused", 0)
    click.echo(
        f"probe: {n_probes} probes, {len(records)} evaluation records -> {spec.output / pipeline.RECORDS_FILE}"
        f" [{time.perf_counter() - started:.1f} s]"
    )
    if reused:
        click.echo(f"probe: {fitted} (encoder, task) units fitted, {reused} unchanged units reused (--full refits all)")


def _score(spec: Spec, quiet: bool):
    from crs import pipeline
    from crs.score_io import score_and_save

    result = score_and_save(spec, pipeline.read_records(spec))
    click.echo(result.format())
    return result


def _report(spec: Spec, score=None) -> Path:
    from crs import pipeline
    from crs.report import write_report
    from crs.score_io import load_or_score

    records = pipeline.read_records(spec)
    score = score or load_or_score(spec, records)
    path = write_report(score, records, spec.output, title=f"crs report: {spec.name}", spec=spec)
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
    _extract(_spec(spec_path, cache, out, skip_bad), quiet, shard, wait)


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
    _probe(_spec(spec_path, cache, out), jobs, cluster, quiet, full)


@cli.command()
@spec_argument
@cache_option
@out_option
@quiet_option
def score(spec_path: str, cache: str | None, out: str | None, quiet: bool) -> None:
    """Compute the axes, the CRS, bootstrap tiers and rank reversals from the run records."""
    _score(_spec(spec_path, cache, out), quiet)


@cli.command()
@spec_argument
@cache_option
@out_option
def report(spec_path: str, cache: str | None, out: str | None) -> None:
    """Write the HTML and Markdown report with figures."""
    _report(_spec(spec_path, cache, out))


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
    spec = _spec(spec_path, cache, out, skip_bad)
    _extract(spec, quiet)
    _probe(spec, jobs, cluster, quiet)
    result = _score(spec, quiet)
    _report(spec, result)


def demo_spec_path() -> Path:
    """The packaged quickstart spec (examples/quickstart.toml links to it)."""
    return Path(__file__).resolve().parent / "specs" / "quickstart.toml"


@cli.command()
@cache_option
@out_option
@jobs_option
@quiet_option
def demo(cache: str | None, out: str | None, jobs: int | None, quiet: bool) -> None:
    """Run the whole pipeline on the built-in synthetic benchmark (no downloads)."""
    started = time.perf_counter()
    spec = _spec(str(demo_spec_path()), cache, out)
    click.echo(f"crs demo: {len(spec.encoders)} encoders x {len(spec.datasets)} tasks on the synthetic benchmark")
    _extract(spec, quiet)
    _probe(spec, jobs, None, quiet)
    result = _score(spec, quiet)
    _report(spec, result)
    click.echo(f"demo finished in {time.perf_counter() - started:.0f} s")


def _register_optional_groups() -> None:
    """Attach command groups that live in their own modules (encoders, datasets, corruptions, ...)."""
    for module_name, attribute in (
        ("crs.cli_encoders", "encoders_group"),
        ("crs.cli_datasets", "datasets"),
        ("crs.cli_corruptions", "corruptions"),
        ("crs.cli_cache", "cache"),
        ("crs.cli_cache", "import_features"),
        ("crs.cli_bench", "bench"),
    ):
        try:
            module = __import__(module_name, fromlist=[attribute])
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        command = getattr(module, attribute, None)
        if command is not None:
            cli.add_command(command)


_register_optional_groups()


def main() -> None:
    cli(obj={})


if __name__ == "__main__":
    main()

