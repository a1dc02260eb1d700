"""``crs cache verify [--cache DIR|URL | --spec SPEC] [--repair]``: check (and repair) the feature cache.

A cache URL (given, or the spec's) is checked through its mirror, pulled first: what the bucket holds
is what is read (decision 0191).

Exit codes: 0 nothing is damaged (chunks an interrupted extraction has not written yet are listed,
one ``INCOMPLETE`` line per feature group: they resume); 1 damage was found (each problem printed on
its own ``BAD`` line, naming the store, the array and the chunk) or an image file changed; 2 a usage
or input error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from crs.benchmark import Benchmark
from crs.cache.url_commands import is_url, pull_mirror, refuse_kept_local
from crs.cache.verify import Problem, interrupted_summary, verify_cache
from crs.cli.flags import cache_url_option


def _report(results: dict[str, list[Problem]], quiet: bool) -> int:
    """``BAD`` lines for damage; one ``INCOMPLETE`` line per unfinished group (it resumes). Returns the damage count."""
    count = 0
    for store, problems in results.items():
        damaged = [problem for problem in problems if problem.damaged]
        if not damaged and not quiet:
            click.echo(f"{Path(store).name}: ok" + (" (unfinished: see below)" if problems else ""))
        for problem in damaged:
            click.echo(f"BAD {problem}")
        for line in interrupted_summary([problem for problem in problems if not problem.damaged]):
            click.echo(f"INCOMPLETE {line}")
        count += len(damaged)
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
              callback=cache_url_option,
              help="Cache folder, one <dataset>.zarr store, or an s3:// URL (its mirror is pulled first: what the "
                   "bucket holds is checked) [default: the spec's cache, else ./cache].")
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
    root = bench.spec.cache if bench is not None else Path(cache_root or "cache")
    url = bench.spec.cache_url if bench is not None else cache_root if is_url(cache_root) else None
    if url is not None:  # the bucket's bytes: every object compared by size and MD5, what differs fetched
        root, pulled = pull_mirror(url)
        click.echo(f"cache {pulled.format()}")
        refuse_kept_local(pulled, "verify")
        if bench is not None:  # pulled once: a repair's extraction must not pull the bad chunks' flags back
            bench.mirror.pulled = pulled
    changed_images = _report_images(bench.verify_images(), quiet) if images and bench is not None else 0
    results = verify_cache(root, check_data=not metadata_only)
    found = _report(results, quiet)
    if any(results.values()) and bench is not None and repair:  # unfinished groups resume too
        bench.mirror.announce = click.echo  # a URL cache: the repair's extraction pushes each data set it redid
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
    unfinished = sum(1 for problems in results.values() if problems)
    if not quiet:
        click.echo(f"verify: {len(results)} store(s) sound, nothing damaged"
                   + (f"; {unfinished} with unfinished extractions (`crs extract` resumes them)" if unfinished else ""))
