"""`crs datasets`: list the data-set loaders and check a download before a run."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from crs.data import DATASET_DESCRIPTIONS, DATASET_LOADERS
from crs.data.check import check_dataset


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` with the value read as JSON when it parses (numbers, booleans, lists), else text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} is not key=value (for example -o uncertainty=ones)")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


@click.group("datasets")
def datasets() -> None:
    """Data-set loaders: list them, check a download."""


@datasets.command("list")
def list_loaders() -> None:
    """Print every registered loader with a one-line description."""
    for name in sorted(DATASET_LOADERS):
        click.echo(f"{name:<10} {DATASET_DESCRIPTIONS.get(name, '')}")


@datasets.command("check")
@click.argument("name")
@click.argument("root", type=click.Path(file_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Loader option, repeatable (e.g. -o uncertainty=ones, -o modality=fundus).")
@click.option("--workers", default=4, show_default=True, help="Threads reading images.")
def check(name: str, root: str, as_json: bool, options: tuple[str, ...], workers: int) -> None:
    """Read every image of data set NAME under ROOT; exit 1 with a one-line reason if anything is wrong."""
    report = check_dataset(name, root, workers=workers, **dict(parse_option(o) for o in options))
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(format_report(report))
    if not report.ok:
        click.echo(f"datasets check {name}: {report.reason()}", err=True)
        sys.exit(1)


def format_report(report: Any) -> str:
    """A short human-readable summary of a CheckReport."""
    found = report.n_images - report.n_missing
    rows = report.rows or {}
    dropped = ", ".join(f"{n:,} {reason}" for reason, n in rows.get("dropped", {}).items()) or "none"
    lines = [
        f"data set   {report.dataset}",
        f"root       {report.root}",
        f"rows       {rows.get('listed', report.n_images):,} listed, {rows.get('kept', report.n_images):,} kept; "
        f"dropped: {dropped}; {rows.get('groups_lost', 0):,} {rows.get('group_word', 'groups')} lost",
        f"images     {report.n_images} listed, {found} found, {report.n_missing} missing, {report.n_unreadable} unreadable",
        f"groups     {report.n_groups}",
    ]
    if report.classes:
        lines.append("classes    " + ", ".join(f"{k} {v}" for k, v in report.classes.items()))
    for split, entry in report.splits.items():
        lines.append(f"{split:<10} {entry['images']} images, {entry['groups']} groups")
    if report.pixel_formats:
        lines.append("pixels     " + ", ".join(f"{fmt} {n}" for fmt, n in report.pixel_formats.items()))
    lines.append(f"duplicates {len(report.duplicates)} across splits")
    lines.extend(f"note       {note}" for note in rows.get("notes", []))
    if report.dicom.get("n_files"):
        lines.append(f"dicom      {report.dicom['n_files']} file(s), {report.dicom['n_problems']} unusable")
    lines.append("status     " + ("ok" if report.ok else f"{len(report.problems)} problem(s)"))
    lines.extend(f"  - {problem}" for problem in report.problems)
    return "\n".join(lines)
