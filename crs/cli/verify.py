"""``crs cache verify [--cache DIR | --spec SPEC] [--repair]``: check (and repair) the feature cache.

Exit codes: 0 every store is sound; 1 problems were found (each printed on its own line, naming
the store, the array and the chunk); 2 a usage or input error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from crs.benchmark import Benchmark
from crs.cache.verify import Problem, verify_cache


def _report(results: dict[str, list[Problem]], quiet: bool) -> int:
    count = 0
    for store, problems in results.items():
        if not problems and not quiet:
            click.echo(f"{Path(store).name}: ok")
        for problem in problems:
            click.echo(f"BAD {problem}")
        count += len(problems)
    return count


def _report_images(results: dict[str, Any], quiet: bool) -> int:
    """One line per data set; one ``CHANGED`` line per image file that differs from the cache's record."""
    count = 0
    for dataset, outcome in results.items():
        if isinstance(outcome, str):
            click.echo(f"images {dataset}: not checked: {outcome}")
            continue
        if not outcome and not quiet:
            click.echo(f"images {dataset}: every file as recorded")
        for change in outcome:
            click.echo(f"CHANGED {dataset}: {change}")
        count += len(outcome)
    return count


@click.command("verify")
@click.option("--cache", "cache_root", type=click.Path(file_okay=True), default=None,
              help="Cache folder or one <dataset>.zarr store (default: the spec's cache, else ./cache).")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False), default=None,
              help="Spec whose cache to check; needed by --repair to re-extract.")
@click.option("--repair", is_flag=True, help="Mark bad chunks incomplete and re-extract only those (needs --spec).")
@click.option("--metadata-only", is_flag=True, help="Check shapes, dtypes and flags without reading chunk data.")
@click.option("--images", is_flag=True,
              help="Also re-hash every image file of the spec's data sets against the cache's record (needs --spec).")
@click.option("-q", "--quiet", is_flag=True, help="Print problems only.")
def verify(cache_root: str | None, spec_path: str | None, repair: bool, metadata_only: bool, images: bool,
           quiet: bool) -> None:
    """Check every feature array against its recorded shape, dtype, completeness and chunk checksums."""
    if repair and spec_path is None:
        raise click.UsageError("--repair re-extracts bad chunks and needs the spec: crs cache verify --spec SPEC.toml --repair")
    if images and spec_path is None:
        raise click.UsageError("--images reads the image files the spec names: crs cache verify --spec SPEC.toml --images")
    bench = Benchmark(spec_path, cache=cache_root) if spec_path is not None else None
    changed_images = _report_images(bench.verify_images(), quiet) if images and bench is not None else 0
    root = bench.spec.cache if bench is not None else Path(cache_root or "cache")
    results = verify_cache(root, check_data=not metadata_only)
    found = _report(results, quiet)
    if found and bench is not None and repair:
        repaired = bench.repair_cache(results, progress=not quiet)
        for action in repaired.actions:
            click.echo(f"repair: {action}")
        stats = repaired.extract
        click.echo(f"repair: re-extracted {stats.chunks_written} chunk(s) ({stats.total_forward} forward passes)")
        results = bench.verify_cache(check_data=not metadata_only)
        found = _report(results, quiet=True)
        if found:
            click.echo(f"verify: {found} problem(s) remain after repair (groups this spec does not produce "
                       "are not re-extracted; `crs cache gc` removes stale ones)")
    if found or changed_images:
        click.echo(f"verify: {found} problem(s) in {root}"
                   + (f"; {changed_images} image file(s) changed" if changed_images else ""), err=True)
        raise SystemExit(1)
    if not quiet:
        click.echo(f"verify: {len(results)} store(s) sound")
