"""`crs datasets`: list the data-set loaders and check a download before a run."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from crs.data import DATASET_ACCESS, DATASET_DESCRIPTIONS, DATASET_LOADERS
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


@datasets.command("show")
@click.argument("name")
def show(name: str) -> None:
    """Print what loader NAME reads, its licence and access, and the shipped label maps onto or from it."""
    from crs.data.label_map import read_label_map, shipped_maps

    if name not in DATASET_LOADERS:
        raise click.ClickException(f"unknown loader {name!r}; known: {', '.join(sorted(DATASET_LOADERS))}")
    click.echo(f"loader     {name}")
    click.echo(f"reads      {DATASET_DESCRIPTIONS.get(name, '')}")
    click.echo(f"licence    {DATASET_ACCESS.get(name, 'see the data set page')}")
    for map_name in shipped_maps():
        label_map = read_label_map(map_name)
        if label_map.target_loader == name or map_name.startswith(f"{name}-to-"):
            pairs = ", ".join(f"{t}->{s}" for t, s in label_map.classes.items())
            none = f"; no counterpart: {', '.join(label_map.no_counterpart)}" if label_map.no_counterpart else ""
            click.echo(f"label map  {map_name}: {pairs}{none}")


@datasets.command("overlap")
@click.argument("spec_path", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print every overlapping pair as JSON.")
@click.option("--workers", default=4, show_default=True, help="Threads reading images.")
def overlap(spec_path: str, names: tuple[str, ...], as_json: bool, workers: int) -> None:
    """Images shared by the data sets and shift targets of SPEC (every pair, or the NAMES given); exit 1 if any.

    Prints kept by `crs extract` in the spec's cache are used; data sets without them are decoded here."""
    from crs.data import load_entry
    from crs.data.overlap import find_overlaps, fingerprint, overlapping_ids
    from crs.data.shift import adopt_source_geometry
    from crs.extract.overlap import cached_prints
    from crs.spec import load_spec

    spec = load_spec(spec_path)
    entries = [e for d in spec.datasets for e in (d, *d.shift_targets)]
    if names:
        unknown = sorted(set(names) - {e.name for e in entries})
        if unknown:
            raise click.ClickException(f"{unknown} are not data sets or shift targets of {spec_path}")
    bad_images = {"skip_bad": True} if spec.extract.skip_bad else {}
    loaded = {}
    for entry in spec.datasets:  # a target is decoded at its source's geometry, as stage 1 decodes it
        source = load_entry(entry, **bad_images)
        loaded[entry.name] = source
        for target in entry.shift_targets:
            if not names or target.name in names:
                loaded[target.name] = adopt_source_geometry(load_entry(target, **bad_images), source)
    entries = [e for e in entries if not names or e.name in names]
    prints = {}
    for e in entries:
        kept = cached_prints(loaded[e.name], spec.cache)
        prints[e.name] = kept if kept is not None else fingerprint(loaded[e.name], workers)
    pairs = []
    for i, first in enumerate(entries):
        for second in entries[i + 1:]:
            found = find_overlaps(prints[first.name], prints[second.name], first.name, second.name)
            pairs.append((first.name, second.name, found))
    if as_json:
        click.echo(json.dumps([o.to_dict() for _, _, found in pairs for o in found], indent=2))
    else:
        for a, b, found in pairs:
            exact = sum(o.kind == "exact" for o in found)
            edited = {kind: sum(o.kind == kind for o in found) for kind in ("flipped", "cropped", "flipped+cropped")}
            click.echo(f"{a} x {b}: {len(overlapping_ids(found))} image(s) of {b} also in {a} "
                       f"({exact} exact, {len(found) - exact - sum(edited.values())} near"
                       + "".join(f", {n} {kind}" for kind, n in edited.items() if n) + ")")
    if any(found for _, _, found in pairs):
        sys.exit(1)


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
