"""``crs check SPEC``: the pre-flight check (every problem at once) that `crs run` and `crs extract` run first."""

from __future__ import annotations

import sys

import click

from crs.benchmark import Benchmark
from crs.cli.flags import SETTING_FLAGS, cache_url_option
from crs.extract.preflight import Finding, PreflightError, PreflightReport


def finding_line(finding: Finding) -> str:
    """A problem as the CLI prints it: with the flag of the setting that fixes it, where there is one."""
    flag = SETTING_FLAGS.get(finding.setting)
    return f"{finding.message} (option {flag})" if flag else finding.message


def print_problems(report: PreflightReport) -> None:
    """Every problem of a failed pre-flight check, on stderr, before the one-line error."""
    click.echo(f"crs check: {len(report.problems)} problem(s) found before any encoder ran:", err=True)
    for finding in report.problems:
        click.echo(f"  - {finding_line(finding)}", err=True)


def preflight_or_stop(bench: Benchmark) -> None:
    """Run the pre-flight check; on problems list them all, then raise the error the CLI prints as its last line."""
    bench.mirror.announce = click.echo  # a URL cache: the pull's one line
    try:
        bench.check()
    except PreflightError as error:
        if len(error.report.problems) > 1:
            print_problems(error.report)
        raise


@click.command("check")
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
@click.option("--cache", type=click.Path(file_okay=False), callback=cache_url_option,
              help="Cache root or s3:// URL (overrides the spec).")
@click.option("--out", type=click.Path(file_okay=False), help="Output folder (overrides the spec).")
def check(spec_path: str, cache: str | None, out: str | None) -> None:
    """Check data, labels, weights, folders, disk, image modes and the cache before any GPU time.

    Every problem is listed at once; exit 1 when there is any. `crs run` and `crs extract` run it first.
    """
    bench = Benchmark(spec_path, cache=cache, output=out)
    bench.mirror.announce = click.echo  # a URL cache is pulled first: the content check reads its records
    try:
        report = bench.check()
    except PreflightError as error:
        report = error.report
    for note in report.notes:
        click.echo(f"check: {note}")
    if report.ok:
        click.echo("check: ok: data, labels, weights, folders, disk, image modes and cache")
        return
    click.echo(f"check: {len(report.problems)} problem(s):")
    for finding in report.problems:
        click.echo(f"  - {finding_line(finding)}")
    sys.exit(1)
