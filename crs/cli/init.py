"""`crs init ROOT`: look at a folder of images with a CSV, write a commented spec that runs as is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from crs.data.base import FIT_MODES, MODALITIES, TASK_KINDS
from crs.data.inspect_folder import inspect_folder, inspect_shift_target, load_guess
from crs.data.starter_spec import StarterChoices, check_command, data_set_name, describe, starter_spec_text
from crs.encoders import available


@click.command("init")
@click.argument("root", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the spec [default: ./NAME.toml].")
@click.option("--name", default=None, help="Data-set and run name [default: the folder's name].")
@click.option("--csv", default=None, help="The CSV, relative to ROOT [default: the one naming image files].")
@click.option("--image-column", default=None, help="CSV column with image paths relative to ROOT.")
@click.option("--label-column", "label_columns", multiple=True,
              help="Label column; repeat for a multilabel task (0/1/blank columns).")
@click.option("--kind", type=click.Choice(TASK_KINDS), default=None)
@click.option("--modality", type=click.Choice(MODALITIES), default=None, help="Picks the corruption suite.")
@click.option("--group-column", default=None, help="Patient or lesion column: its images stay in one split.")
@click.option("--split-column", default=None, help="Column holding train/val/test.")
@click.option("--fit", type=click.Choice(FIT_MODES), default=None,
              help="How non-square images become square [default: the modality's].")
@click.option("--shift-target", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Another site's folder (with a CSV) to evaluate the probes on; labels matched by name.")
@click.option("--shift-label-column", "shift_label_columns", multiple=True,
              help="The shift target's label column(s), when its names differ from the source's.")
@click.option("--encoders", default=None, help="Comma-separated registry names [default: the modality's starter set].")
@click.option("--weights", default=None, help='Weights for every encoder, e.g. "random" for a dry run without downloads.')
@click.option("--input-size", type=int, default=None, help="Input size for every encoder (with --weights random).")
@click.option("--image-size", type=int, default=224, show_default=True, help="Canonical decode size.")
@click.option("--device", default=None, help="cpu or cuda [default: cuda when visible].")
@click.option("--quick", is_flag=True, help="A first look in minutes: 2 fractions, 2 seeds, 2 corruptions x 2 severities.")
@click.option("--force", is_flag=True, help="Overwrite an existing spec file.")
def init(root: Path, spec_path: Path | None, name: str | None, csv: str | None, image_column: str | None,
         label_columns: tuple[str, ...], kind: str | None, modality: str | None, group_column: str | None,
         split_column: str | None, fit: str | None, shift_target: Path | None, shift_label_columns: tuple[str, ...],
         encoders: str | None, weights: str | None, input_size: int | None, image_size: int, device: str | None,
         quick: bool, force: bool) -> None:
    """Inspect ROOT (a folder of images, PNG/JPEG/DICOM, with a CSV) and write a spec for it; asks nothing."""
    guess = inspect_folder(root, csv=csv, image_column=image_column, label_columns=label_columns or None,
                           kind=kind, modality=modality, group_column=group_column, split_column=split_column,
                           fit=fit)
    name = name or data_set_name(root)
    chosen = tuple(e.strip() for e in encoders.split(",") if e.strip()) if encoders else ()
    unknown = [e for e in chosen if e not in available()]
    if unknown:
        raise click.BadParameter(f"unknown encoder(s) {unknown}; see `crs encoders list`", param_hint="--encoders")
    shift_name: str | None = None
    shift_options: dict[str, Any] = {}
    if shift_target is not None:
        source_task = load_guess(guess).task
        _, shift_options = inspect_shift_target(guess, source_task, shift_target,
                                                label_columns=shift_label_columns or None)
        shift_name = f"{name}-shift" if data_set_name(shift_target) == name else data_set_name(shift_target)
    choices = StarterChoices(
        name=name, encoders=chosen, quick=quick, weights=weights, input_size=input_size, image_size=image_size,
        device=device, shift_name=shift_name, shift_options=shift_options,
        shift_root=shift_target.resolve() if shift_target else None,
    )
    spec_path = spec_path or Path(f"{name}.toml")
    if spec_path.exists() and not force:
        raise click.BadParameter(f"{spec_path} exists; choose another path or add --force", param_hint="--spec")
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(starter_spec_text(guess, choices))

    width = max(len(what) for what, _, _ in describe(guess))
    click.echo(f"crs init: {guess.root}")
    for what, value, how in describe(guess):
        click.echo(f"  {what:<{width}}  {value}")
        click.echo(f"  {'':<{width}}  change: {how}")
    if shift_name:
        click.echo(f"  {'shift':<{width}}  {shift_target} as {shift_name!r}, labels matched by name, all images in test")
    for warning in guess.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"wrote {spec_path}")
    click.echo(f"next: {check_command(guess)}")
    click.echo(f"then: crs run {spec_path}")
