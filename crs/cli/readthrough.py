"""``crs cache readthrough URL|SPEC``: what this machine's read-through of a URL cache holds (decision 0187)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("readthrough")
@click.argument("source", metavar="URL|SPEC")
def readthrough(source: str) -> None:
    """The read-through of a URL cache on this machine: its budget, the feature chunks it holds, the bytes
    fetched so far. SOURCE is the cache URL (s3://bucket/prefix) or a spec whose cache is one."""
    from crs.cache.readthrough import status
    from crs.spec import cache_url_text, load_spec, mirror_folder, url_scheme

    if url_scheme(source) is not None:
        url = cache_url_text(source)
    else:
        if not Path(source).is_file():
            raise click.BadParameter(f"{source} is neither a cache URL (s3://bucket/prefix) nor a spec file",
                                     param_hint="URL|SPEC")
        spec = load_spec(source)
        if spec.cache_url is None:
            raise click.UsageError(f"{source}: its cache is the folder {spec.cache}, not a URL: nothing is read "
                                   "through (`crs cache ls --cache FOLDER` lists it)")
        url = spec.cache_url
    mirror = mirror_folder(url)
    found = status(mirror)
    if found is None:
        click.echo(f"read-through of {url}: none on this machine yet (mirror {mirror}); `crs probe` with this "
                   "cache sets it up, within the spec's cache_budget")
        return
    click.echo(f"read-through of {url}: mirror {mirror}")
    click.echo(f"budget: {found.budget:,} bytes ({found.budget_setting}; the spec's cache_budget)")
    click.echo(f"held: {found.held_bytes:,} bytes in {found.held_chunks} feature chunk(s), least recently read "
               "evicted first")
    click.echo(f"fetched: {found.fetched_bytes:,} bytes in {found.fetched_chunks} chunk(s) since it was set up")
