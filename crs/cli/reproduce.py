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
    """Two run folders side by side (leader, tier, which ranks moved); for runs of the same spec, then
    every records and score table under the reproducibility contract, exit 1 if broken."""
    from crs.evaluate.artifacts import RunFolder
    from crs.evaluate.compare import compare_run_folders, spec_differences
    from crs.evaluate.standings import standings_or_reason

    first, second = RunFolder(run_a), RunFolder(run_b)
    for line in standings_or_reason(first, second, (run_a.rstrip("/"), run_b.rstrip("/"))):
        click.echo(line)
    spec_a, spec_b = (folder.provenance().get("spec") for folder in (first, second))
    differ = spec_differences(spec_a, spec_b) if isinstance(spec_a, dict) and isinstance(spec_b, dict) else []
    click.echo("")
    if differ:
        shown = ", ".join(differ[:8]) + (f" and {len(differ) - 8} more" if len(differ) > 8 else "")
        click.echo(f"different specs ({shown}): the runs are compared by their rankings above; the "
                   "reproducibility contract (same numbers to 1e-6) applies to runs of one spec and is not checked.")
        sys.exit(0)
    comparison = compare_run_folders(first, second, score=first.has_score())
    _print(comparison)
    sys.exit(0 if comparison.holds else 1)
