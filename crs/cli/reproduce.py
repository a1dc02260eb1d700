"""``crs reproduce RUN_FOLDER`` and ``crs compare RUN_A RUN_B``: check a published table under the
reproducibility contract (docs/reproducibility.md)."""

from __future__ import annotations

import sys

import click
import pandas as pd

from crs.cli.stages import cache_option, jobs_option, quiet_option
from crs.evaluate.compare import Comparison


def _print(comparison: Comparison) -> None:
    """The verdict line, then the table of columns that differ at all (nothing when identical)."""
    click.echo(comparison.verdict())
    differing = comparison.table(differing_only=True)
    if len(differing):
        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 70):
            click.echo(differing.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    for problem in comparison.problems:
        click.echo(f"  {problem}")


@click.command()
@click.argument("run_folder", type=click.Path(exists=True, file_okay=False))
@cache_option
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Where the re-run writes its folder (default: a temporary folder, removed after).")
@jobs_option
@quiet_option
def reproduce(run_folder: str, cache: str | None, workdir: str | None, jobs: int | str | None, quiet: bool) -> None:
    """Re-run stage 2 and the score of RUN_FOLDER from its embedded spec and compare every table.

    Exits 1 when a column breaks the contract (docs/reproducibility.md), naming it and a record."""
    from crs.benchmark import reproduce as run

    comparison = run(run_folder, cache=cache, workdir=workdir, jobs=jobs, progress=not quiet)
    _print(comparison)
    sys.exit(0 if comparison.holds else 1)


@click.command()
@click.argument("run_a", type=click.Path(exists=True, file_okay=False))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False))
def compare(run_a: str, run_b: str) -> None:
    """Compare two run folders' records and score tables under the reproducibility contract; exit 1 if broken."""
    from crs.evaluate.artifacts import RunFolder
    from crs.evaluate.compare import compare_run_folders

    comparison = compare_run_folders(RunFolder(run_a), RunFolder(run_b), score=RunFolder(run_a).has_score())
    _print(comparison)
    sys.exit(0 if comparison.holds else 1)
