"""``crs weights fetch SPEC``: download the spec's encoder weights from the Hugging Face Hub, once, into
the folder crs reads them from (``$CRS_WEIGHTS_DIR``, or ``--to``), digests recorded beside them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from crs.encoders.fetch import FAILED, FETCHED, fetch_spec
from crs.encoders.weights import weights_dir
from crs.spec import load_spec


@click.group("weights")
def weights_group() -> None:
    """Fetch encoder weights from the Hugging Face Hub into the folder crs reads (crs itself never downloads)."""


@weights_group.command("fetch")
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
@click.option("--to", "to", type=click.Path(file_okay=False), default=None,
              help="Weights folder to fill [default: $CRS_WEIGHTS_DIR, where crs reads weights].")
@click.option("--encoders", default=None, metavar="A,B", help="Only these encoders of the spec.")
def fetch(spec_path: str, to: str | None, encoders: str | None) -> None:
    """Download each encoder's weights from its Hub repository and revision in the registry.

    Files go to WEIGHTS/<encoder>/ under the Hub's names, with crs-weights.json (repository, revision,
    commit, sha256 of each file). Gated models name their licence and the page to accept it on; run
    where there is internet (a login node), then extract anywhere. HF_ENDPOINT and HF_TOKEN are honoured.
    """
    reads = weights_dir()
    if to is None and reads is None:
        raise click.UsageError("no weights folder: set CRS_WEIGHTS_DIR (the folder crs reads weights from) "
                               "or pass --to DIR")
    root = Path(to).expanduser() if to is not None else reads
    assert root is not None
    spec = load_spec(spec_path)
    names = [name.strip() for name in encoders.split(",") if name.strip()] if encoders else None
    done = fetch_spec(spec, root, names, announce=lambda line: click.echo(f"weights: {line}"))
    for outcome in done:
        click.echo(f"weights: {outcome.line()}", err=outcome.status == FAILED)
    fetched = sum(outcome.status == FETCHED for outcome in done)
    failed = [outcome.encoder for outcome in done if outcome.status == FAILED]
    click.echo(f"weights: {fetched} fetched, {len(done) - fetched - len(failed)} skipped, {len(failed)} failed "
               f"-> {root.resolve()}")
    if reads is None or Path(os.path.abspath(reads)) != Path(os.path.abspath(root)):
        click.echo(f"weights: crs reads weights from $CRS_WEIGHTS_DIR; set CRS_WEIGHTS_DIR={root.resolve()} "
                   "before `crs check` and `crs extract`")
    if failed:
        click.echo(f"crs: error: could not fetch the weights of {', '.join(failed)} (see above)", err=True)
        sys.exit(1)
