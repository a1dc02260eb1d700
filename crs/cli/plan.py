"""``crs plan SPEC``: what ``crs extract`` will do (forward passes, cache bytes, disk, time) before it runs."""

from __future__ import annotations

import json

import click

from crs.cli.stages import cache_option, spec_argument


@click.command()
@spec_argument
@cache_option
@click.option("--encoder", "encoders", multiple=True, help="Plan only these encoders (repeat the option).")
@click.option("--corruption-rows", type=click.IntRange(min=1), default=None, metavar="N",
              help="What if: corrupted variants for a patient-level subsample of about N test images per data set.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plan(spec_path: str, cache: str | None, encoders: tuple[str, ...], corruption_rows: int | None,
         as_json: bool) -> None:
    """Per data set and encoder: images, clean and corrupted forward passes, cached, bytes, time."""
    from crs.benchmark import Benchmark

    result = Benchmark(spec_path, cache=cache).plan(list(encoders) or None, corruption_rows)
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else result.format())
