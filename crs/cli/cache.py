"""``crs cache ls | gc | export-h5`` and ``crs import-features``: inspect, clean, export and fill the cache."""

from __future__ import annotations

import json
from pathlib import Path

import click

from crs.cache.h5 import export_h5
from crs.cache.imports import import_features as import_feature_file
from crs.cache.imports import write_table_from_spec
from crs.cache.inspect import collect_garbage, format_listing, list_cache, listing_json
from crs.cache.store import CacheError
from crs.cli.flags import cache_url_option, refuse_cache_url_option
from crs.cli.readthrough import readthrough
from crs.cli.verify import verify

cache_dir_option = click.option(
    "--cache", "cache_root", default="cache", show_default=True, type=click.Path(file_okay=False),
    callback=refuse_cache_url_option, help="Cache root folder (holds one <dataset>.zarr store per data set).",
)
cache_or_url_option = click.option(
    "--cache", "cache_root", default="cache", show_default=True, type=click.Path(file_okay=False),
    callback=cache_url_option,
    help="Cache root folder, or an s3:// URL (read through its local mirror, pulled first).",
)


@click.group("cache")
def cache() -> None:
    """Inspect, clean and export the feature cache."""


@cache.command("ls")
@cache_or_url_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def ls(cache_root: str, as_json: bool) -> None:
    """Every store, encoder and fingerprint: current or stale, complete or not, arrays, fields, size.

    With a URL, its mirror is pulled first (the pull's line goes to stderr) and listed."""
    from crs.cache.url_commands import is_url, pull_mirror

    if is_url(cache_root):
        folder, pulled = pull_mirror(cache_root)
        click.echo(f"cache {pulled.format()}", err=True)
        cache_root = str(folder)
    stores = list_cache(cache_root)
    if as_json:
        click.echo(json.dumps(listing_json(stores), indent=2, default=str))
    else:
        click.echo(format_listing(stores))


@cache.command("gc")
@cache_or_url_option
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def gc(cache_root: str, dry_run: bool) -> None:
    """Delete stale fingerprints and abandoned incomplete groups; every encoder's current group stays.

    With a URL, the stale groups are deleted from the bucket (under its writer lock) and its mirror."""
    from crs.cache.url_commands import collect_url_garbage, is_url

    if is_url(cache_root):
        report, pulled = collect_url_garbage(cache_root, dry_run=dry_run)
        click.echo(f"cache {pulled.format()}")
        click.echo(report.format())
        return
    click.echo(collect_garbage(cache_root, dry_run=dry_run).format())


@cache.command("push")
@click.argument("folder", type=click.Path(file_okay=False))
@click.argument("url")
def push_command(folder: str, url: str) -> None:
    """Copy the cache FOLDER to object storage URL (s3://bucket/prefix): only what it lacks, flags last.

    Resumable (a re-run copies what is missing), every object checked against the MD5 of what was
    sent; a folder with damaged chunks is refused. Credentials come from the AWS environment.
    """
    from crs.cache.transfer import push

    click.echo(push(folder, url).format())


@cache.command("pull")
@click.argument("url")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--overwrite", is_flag=True,
              help="Replace FOLDER's files that differ from URL even when written there since the last push or "
                   "pull (default: keep that unpushed work and name it).")
def pull_command(url: str, folder: str, overwrite: bool) -> None:
    """Copy the cache at URL into FOLDER: only what it lacks, then every chunk checked against its sha256.

    A file of FOLDER written there since its last push or pull (unpushed work) is never overwritten
    unless --overwrite: it is kept and named."""
    from crs.cache.transfer import pull

    click.echo(pull(url, folder, overwrite=overwrite).format())


@cache.command("export-h5")
@click.argument("encoder")
@click.argument("out", metavar="OUT.h5", type=click.Path(dir_okay=False))
@click.option("--dataset", default=None, help="Data set (store) to export; may be left out when only one store has ENCODER.")
@click.option("--fingerprint", default=None, help="Export this fingerprint instead of the current one.")
@cache_dir_option
def export_h5_command(encoder: str, out: str, dataset: str | None, fingerprint: str | None, cache_root: str) -> None:
    """Write ENCODER's features, ids, labels, splits and groups on one data set to OUT.h5."""
    dataset = dataset or _only_store_with(cache_root, encoder)
    path = export_h5(cache_root, dataset, encoder, out, fingerprint)
    click.echo(f"export: {dataset}/{encoder} -> {path} ({path.stat().st_size} bytes)")


def _only_store_with(cache_root: str, encoder: str) -> str:
    holders = sorted({s.dataset for s in list_cache(cache_root) for g in s.groups if g.encoder == encoder and g.current})
    if len(holders) != 1:
        raise click.UsageError(
            f"encoder {encoder!r} has current features in {len(holders)} stores {holders}; choose one with --dataset"
        )
    return holders[0]


@click.command("import-features")
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--dataset", required=True, help="Data set the rows belong to (its store must exist, or give --spec).")
@click.option("--encoder", required=True, help="Name to store the features under (it becomes a benchmark encoder).")
@click.option(
    "--condition", default="clean", show_default=True,
    help="clean (every image), corrupt/<corruption>/<severity> (test split), or all (a crs .h5 export).",
)
@click.option("--ids", "ids_path", type=click.Path(dir_okay=False), default=None,
              help="Row ids of FILE: text (one per line) or CSV with an 'id' column. Needed for .npy.")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False), default=None,
              help="Write the data set's sample table from this spec first (reads its CSV only; "
                   "the images need not be on this machine).")
@click.option("--cache", "cache_root", default=None, type=click.Path(file_okay=False),
              callback=refuse_cache_url_option,
              help="Cache root folder [default: the spec's cache with --spec, else 'cache'].")
@click.option("--corruption-rows", type=click.IntRange(min=1), default=None, metavar="N",
              help="Corrupted conditions hold the patient-level subsample of about N test images that "
                   "[extract] corruption_rows = N draws (default: the whole test split).")
@click.option("--prototypes", "prototypes_path", type=click.Path(dir_okay=False), default=None,
              help="Zero-shot text prototypes for ENCODER (.npz: positive, scale, link[, bias, negative]; "
                   "docs/zero_shot.md), stored beside the features.")
def import_features(file: str, dataset: str, encoder: str, condition: str, ids_path: str | None,
                    spec_path: str | None, cache_root: str | None, corruption_rows: int | None,
                    prototypes_path: str | None = None) -> None:
    """Store features computed elsewhere (.npy + --ids, .npz, .h5) in the cache under ENCODER.

    Rows are matched to the data set by id; missing, extra or repeated ids, NaN or infinite values
    and wrong row counts are refused. The file is read in row blocks (memory stays bounded whatever
    its size). A condition ENCODER's group lacks is added to it; other features for a condition it
    holds make a new group (new fingerprint) that becomes ENCODER's current one.
    """
    if spec_path is not None:  # the table lands in the spec's cache unless --cache names another
        cache_root = str(write_table_from_spec(spec_path, dataset, cache_root).parent)
    result = import_feature_file(Path(cache_root or "cache"), dataset, encoder, Path(file), condition, ids_path,
                                 corruption_rows_wanted=corruption_rows)
    click.echo(result.format())
    if prototypes_path is not None:
        from crs.cache.prototypes import import_prototypes

        try:
            imported = import_prototypes(Path(cache_root or "cache"), dataset, encoder, Path(prototypes_path))
        except CacheError as error:
            raise click.ClickException(str(error)) from None
        click.echo(f"prototypes {imported.prompt_set!r} ({imported.digest}, {len(imported.class_names)} classes, "
                   f"{imported.link} link) stored for {encoder}")


cache.add_command(verify)  # `crs cache verify` lives in its own module (verify.py), as it is the longest command
cache.add_command(readthrough)  # a URL cache's read-through on this machine (readthrough.py, decision 0187)
