"""``crs publish``, ``crs verify`` and ``crs keygen``: results that travel (docs/publish.md)."""

from __future__ import annotations

import sys

import click

from crs.cli.flags import refuse_cache_url_option


@click.command()
@click.argument("run_folder", type=click.Path(exists=True, file_okay=False))
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("--cache", type=click.Path(file_okay=False), default=None, callback=refuse_cache_url_option,
              help="The cache the run read (default: the one its spec recorded); image ids and digests come from it.")
@click.option("--sign", "sign_key", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Sign the manifest with this Ed25519 private key (make one with `crs keygen NAME`).")
@click.option("--aggregates-only", is_flag=True,
              help="Share aggregates only (a hospital's run): axis errors, their bootstrap replicates and group sizes; "
                   "no image id, per-case row, prediction or record.")
@click.option("--min-cell", type=click.IntRange(min=1), default=None,
              help="With --aggregates-only: suppress cells (test sets, subgroups) with fewer images than this (default 10).")
def publish(run_folder: str, bundle: str, cache: str | None, sign_key: str | None, aggregates_only: bool,
            min_cell: int | None) -> None:
    """Write a scored RUN_FOLDER as a verifiable BUNDLE: records, predictions by image id, score, image digests, manifest."""
    from crs.publish import publish as write
    from crs.publish.aggregates import DEFAULT_MIN_CELL, publish_aggregates

    if min_cell is not None and not aggregates_only:
        raise click.BadParameter("--min-cell applies to --aggregates-only bundles; add --aggregates-only", param_hint="--min-cell")
    if aggregates_only:
        manifest = publish_aggregates(run_folder, bundle, min_cell=min_cell or DEFAULT_MIN_CELL, sign_key=sign_key)
    else:
        manifest = write(run_folder, bundle, cache=cache, sign_key=sign_key)
    click.echo(f"published {run_folder} -> {bundle} ({manifest.name}{', signed' if sign_key else ''}); "
               f"check it with: crs verify {bundle}")


@click.command()
@click.argument("bundle", type=click.Path(exists=True, file_okay=False))
@click.option("--key", "public_key", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The publisher's Ed25519 public key: the signature must hold.")
@click.option("--no-score", is_flag=True, help="Check the manifest and signature only, without re-scoring.")
def verify(bundle: str, public_key: str | None, no_score: bool) -> None:
    """Check a BUNDLE: manifest, every file's role, signature, re-score; say verified or what is missing. Exit 1 if a check fails."""
    from crs.publish import verify_bundle

    verification = verify_bundle(bundle, public_key=public_key, score=not no_score)
    for line in verification.lines():
        click.echo(line)
    sys.exit(0 if verification.holds else 1)


@click.command()
@click.argument("name", type=click.Path(dir_okay=False))
def keygen(name: str) -> None:
    """Write a new Ed25519 key pair NAME (private, owner-readable only) and NAME.pub (give this one away)."""
    from crs.publish import new_key_pair

    private, public = new_key_pair(name)
    click.echo(f"private key: {private} (keep it; sign with `crs publish RUN BUNDLE --sign {private}`)")
    click.echo(f"public key: {public} (publish it; check with `crs verify BUNDLE --key {public}`)")


@click.command()
@click.argument("bundles", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), required=True, help="Folder of the site.")
@click.option("--key", "keys", multiple=True, metavar="BUNDLE=PUBLIC_KEY",
              help="Check BUNDLE's signature with this public key (repeatable).")
@click.option("--rescore/--no-rescore", default=True, show_default=True,
              help="Re-score every full bundle. Without it no full bundle is shown as verified, only as 'not re-scored'.")
@click.option("--merged", "merged", multiple=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="A `crs merge` output folder: show its multi-site leaderboard too (repeatable).")
def leaderboard(bundles: tuple[str, ...], out: str, keys: tuple[str, ...], rescore: bool, merged: tuple[str, ...]) -> None:
    """Write static, self-contained leaderboard pages for published BUNDLES: leaderboards, encoder cards, verification."""
    from pathlib import Path

    from crs.publish.site import write_site

    public_keys = {}
    for item in keys:
        bundle, _, key = item.partition("=")
        if not key:
            raise click.BadParameter(f"{item!r}: give BUNDLE=PUBLIC_KEY", param_hint="--key")
        public_keys[bundle] = Path(key)
    index = write_site(list(bundles), out, public_keys=public_keys, rescore=rescore, merged=list(merged))
    extra = f", {len(merged)} multi-site result(s)" if merged else ""
    click.echo(f"leaderboard: {index} ({len(bundles)} bundle(s){extra}); open it in any browser")


@click.command()
@click.argument("bundles", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), required=True,
              help="Folder of the merged leaderboard (leaderboard.csv, leaderboard.txt, merged.json, subgroups.csv).")
@click.option("--key", "keys", multiple=True, metavar="[BUNDLE=]PUBLIC_KEY",
              help="Refuse a bundle unless it is signed by this key's owner: BUNDLE=KEY for one bundle, KEY alone for "
                   "every bundle not named (repeatable). Without any, bundles are checked by their manifest only.")
def merge(bundles: tuple[str, ...], out: str, keys: tuple[str, ...]) -> None:
    """Merge sites' aggregates-only BUNDLES (same replicate seed and n_boot) into a multi-site leaderboard."""
    from pathlib import Path

    from crs.publish.merge import TEXT_FILE
    from crs.publish.merge import merge as merge_sites

    public_keys: dict[str, str | Path] = {}
    for item in keys:
        bundle, sep, key = item.rpartition("=")
        name = bundle if sep else "*"
        if not key or not Path(key).is_file():
            raise click.BadParameter(f"{item!r}: {key or 'no key'} is not a file; give PUBLIC_KEY or BUNDLE=PUBLIC_KEY",
                                     param_hint="--key")
        if name in public_keys:
            raise click.BadParameter(f"{item!r}: a key for {'every bundle' if name == '*' else name} was given twice",
                                     param_hint="--key")
        public_keys[name] = key
    merge_sites(list(bundles), out, keys=public_keys or None)
    click.echo((Path(out) / TEXT_FILE).read_text().rstrip())
    click.echo(f"merged {len(bundles)} site(s) -> {out}")
