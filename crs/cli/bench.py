"""``crs bench``: speed measured as ratios against the obvious way, side by side in one run."""

from __future__ import annotations

import click

from crs.bench import corruptions as corruptions_bench
from crs.bench import extract as extract_bench
from crs.bench import probes as probes_bench


@click.group("bench")
def bench() -> None:
    """Benchmarks (ratios against a baseline measured in the same run; absolute times are context only)."""


@bench.command("probes")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--quick", is_flag=True, help="Small sizes, for a smoke run.")
@click.option("--device", default="cpu", show_default=True)
def probes(as_json: bool, quick: bool, device: str) -> None:
    """Stage 2 for one unit: crs probe engine against a careful scikit-learn loop."""
    probes_bench.run(json_out=as_json, quick=quick, device=device)


@bench.command("corruptions")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--markdown", "as_markdown", is_flag=True, help="Print the per-corruption table of docs/corruptions.md."
)
def corruptions(as_json: bool, as_markdown: bool) -> None:
    """The chest X-ray corruption suite: batched torch against two per-image loops.

    The published MedMNIST-C 0.1.0 loop (the suite's source), and a tuned PIL/numpy/scipy loop of our
    exact definitions (the stricter baseline).
    """
    corruptions_bench.run(json_out=as_json, markdown_out=as_markdown)


@bench.command("extract")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--quick", is_flag=True, help="Fewer images, one repeat.")
@click.option("--device", default="cpu", show_default=True)
def extract(as_json: bool, quick: bool, device: str) -> None:
    """Stage 1 pipeline images/s as a ratio of the bare forward pass (resnet50, vit_base, random weights)."""
    extract_bench.run(json_out=as_json, quick=quick, device=device)


@bench.command("all")
@click.option("--quick", is_flag=True, help="Smoke sizes.")
@click.pass_context
def all_(ctx: click.Context, quick: bool) -> None:
    """Every benchmark in turn."""
    ctx.invoke(extract, as_json=False, quick=quick, device="cpu")
    ctx.invoke(corruptions, as_json=False, as_markdown=False)
    ctx.invoke(probes, as_json=False, quick=quick, device="cpu")
