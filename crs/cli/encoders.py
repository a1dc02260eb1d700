"""`crs encoders list | show`: what the registry knows about each encoder."""

from __future__ import annotations

import json

import click

from crs.encoders.registry import EncoderError, all_specs, get_spec
from crs.encoders.text import zero_shot_support


@click.group("encoders")
def encoders_group() -> None:
    """Inspect the encoder registry (sources, preprocessing, licences, pretraining data)."""


@encoders_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of spec objects.")
@click.option("--group", type=click.Choice(["general", "medical", "specialty", "baseline", "custom"]), default=None)
def list_encoders(as_json: bool, group: str | None) -> None:
    """List every registered encoder."""
    specs = [s for s in all_specs() if group is None or s.group == group]
    if as_json:
        click.echo(json.dumps([s.public_dict() for s in specs], indent=2))
        return
    width = max(len(s.name) for s in specs)
    for spec in specs:
        gated = " gated" if spec.gated else ""
        click.echo(f"{spec.name:<{width}}  {spec.group:<9}  {spec.dim:>5}  {spec.input_size:>4}px  {spec.source}{gated}")


@encoders_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the spec as a JSON object.")
def show_encoder(name: str, as_json: bool) -> None:
    """Show one encoder's full spec."""
    try:
        spec = get_spec(name)
    except EncoderError as error:
        raise click.BadParameter(str(error), param_hint="NAME") from None
    data = spec.public_dict()
    support = zero_shot_support(spec)
    data["zero_shot"] = {"available": support.available, "why": support.reason}
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for key, value in data.items():
        if key == "zero_shot":
            value = f"{'yes' if support.available else 'no'}: {support.reason}"
        if isinstance(value, list):
            value = ", ".join(map(str, value)) or "-"
        click.echo(f"{key:<17} {value}")
    click.echo(f"{'before that':<17} each data set's canonical decode: image_size px, made square by its fit "
               "(crop | pad | squash), part of the cache fingerprint (docs/datasets.md)")
