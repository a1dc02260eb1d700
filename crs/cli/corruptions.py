"""``crs corruptions``: list the suites, draw a severity grid for one image, print the calibration table."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from crs.corruptions import MODALITIES, SUITE_VERSION, corruption, suite
from crs.corruptions.calibration import calibration_table, markdown, synthetic_images
from crs.corruptions.grid import corruption_grid
from crs.data.images import load_image


@click.group(name="corruptions")
def corruptions() -> None:
    """Acquisition corruptions per modality (suite version enters the cache fingerprint)."""


@corruptions.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the suites as JSON.")
def list_command(as_json: bool) -> None:
    """List every modality's corruptions with their five severity parameters."""
    table = {
        modality: [
            {
                "name": name,
                "family": corruption(modality, name).family,
                "parameter": corruption(modality, name).parameter_meaning,
                "severities": [_plain(p) for p in corruption(modality, name).parameters],
                "source": corruption(modality, name).source,
            }
            for name in suite(modality)
        ]
        for modality in MODALITIES
    }
    if as_json:
        click.echo(json.dumps({"suite_version": SUITE_VERSION, "modalities": table}, indent=2))
        return
    click.echo(f"corruption suite {SUITE_VERSION}")
    for modality, entries in table.items():
        click.echo(f"\n{modality} ({len(entries)} corruptions x 5 severities)")
        for entry in entries:
            click.echo(f"  {entry['name']:<20} {entry['parameter']}: {_short(entry['severities'])}")


def _plain(parameter):
    return list(parameter) if isinstance(parameter, tuple) else parameter


def _short(severities) -> str:
    # zoom_blur's severities are lists of ten zoom factors: show the range only
    return ", ".join(f"{s[0]}..{s[-1]}" if isinstance(s, list) and len(s) > 2 else str(s) for s in severities)


@corruptions.command(name="show")
@click.argument("modality", type=click.Choice(MODALITIES))
@click.option(
    "--image",
    "image_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="Image file to corrupt (any format PIL reads).",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="PNG to write.")
@click.option(
    "--size",
    type=int,
    default=224,
    show_default=True,
    help="Side the image is resized to first: use the data set's canonical resolution.",
)
def show_command(modality: str, image_path: Path, out: Path, size: int) -> None:
    """Draw IMAGE under every corruption (rows) and severity (columns) of MODALITY's suite."""
    image = load_image(image_path, size)
    corruption_grid(image, modality, out, image_id=image_path.stem)
    click.echo(f"wrote {out}")


@corruptions.command(name="calibrate")
@click.option(
    "--size", type=int, default=224, show_default=True, help="Image side (the constants' reference is 224)."
)
@click.option("--count", type=int, default=8, show_default=True, help="Synthetic images per modality.")
@click.option(
    "--modality",
    "modalities",
    type=click.Choice(MODALITIES),
    multiple=True,
    help="Limit to these modalities (default: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON instead of Markdown.")
def calibrate_command(size: int, count: int, modalities: tuple[str, ...], as_json: bool) -> None:
    """Mean PSNR / SSIM per corruption and severity on the project's synthetic images."""
    rows = []
    for modality in modalities or MODALITIES:
        images, ids = synthetic_images(modality, count, size)
        rows += calibration_table(images, modality, ids)
    if as_json:
        click.echo(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        click.echo(
            f"Suite {SUITE_VERSION}; {count} synthetic images per modality at {size} px; cells: PSNR dB / SSIM.\n"
        )
        click.echo(markdown(rows))
