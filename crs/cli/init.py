"""`crs init ROOT`: look at a folder of images with a CSV, write a commented spec that runs as is.

`crs init --from-bundle BUNDLE`: write a published bundle's spec, its local folders left to fill in.
"""

from __future__ import annotations

from pathlib import Path

import click

from crs.data.base import FIT_MODES, MODALITIES, TASK_KINDS
from crs.data.inspect_folder import FolderGuess, inspect_folder, inspect_shift_target, load_guess
from crs.data.starter_spec import (
    ShiftChoice,
    StarterChoices,
    check_command,
    data_set_name,
    describe,
    starter_spec_text,
)
from crs.encoders import available


@click.command("init")
@click.argument("root", type=click.Path(exists=True, file_okay=False, path_type=Path), required=False)
@click.option("--from-bundle", "bundle", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Write the spec of this published bundle instead (to extend it: crs run SPEC --extend BUNDLE); "
                   "its local folders are left as placeholders to fill in.")
@click.option("--spec", "-o", "spec_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
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
@click.option("--shift-target", "shift_targets", type=click.Path(exists=True, file_okay=False, path_type=Path),
              multiple=True,
              help="Another site's folder (with a CSV) to evaluate the probes on; labels matched by name. "
                   "Repeat for several sites: each is reported apart, robustness averages them.")
@click.option("--shift-label-column", "shift_label_columns", multiple=True,
              help="The shift targets' label column(s), when their names differ from the source's.")
@click.option("--encoders", default=None, help="Comma-separated registry names [default: the modality's starter set].")
@click.option("--weights", default=None, help='Weights for every encoder, e.g. "random" for a dry run without downloads.')
@click.option("--input-size", type=int, default=None, help="Input size for every encoder (with --weights random).")
@click.option("--image-size", type=int, default=224, show_default=True, help="Canonical decode size.")
@click.option("--device", default=None, help="cpu or cuda [default: cuda when visible].")
@click.option("--quick", is_flag=True, help="A first look in minutes: 2 fractions, 2 seeds, 2 corruptions x 2 severities.")
@click.option("--force", is_flag=True, help="Overwrite an existing spec file.")
def init(root: Path | None, bundle: Path | None, spec_path: Path | None, name: str | None, csv: str | None, image_column: str | None,
         label_columns: tuple[str, ...], kind: str | None, modality: str | None, group_column: str | None,
         split_column: str | None, fit: str | None, shift_targets: tuple[Path, ...], shift_label_columns: tuple[str, ...],
         encoders: str | None, weights: str | None, input_size: int | None, image_size: int, device: str | None,
         quick: bool, force: bool) -> None:
    """Inspect ROOT (a folder of images, PNG/JPEG/DICOM, with a CSV) and write a spec for it; asks nothing.

    With --from-bundle BUNDLE instead of ROOT: write the bundle's spec, with placeholders for the folders
    of this machine (data set roots, cache, output) to fill in before `crs run SPEC --extend BUNDLE`.
    """
    if bundle is not None:
        if root is not None:
            raise click.BadParameter("give ROOT or --from-bundle, not both", param_hint="ROOT")
        _from_bundle(bundle, spec_path, force)
        return
    if root is None:
        raise click.UsageError("give ROOT (a folder of images with a CSV) or --from-bundle BUNDLE")
    guess = inspect_folder(root, csv=csv, image_column=image_column, label_columns=label_columns or None,
                           kind=kind, modality=modality, group_column=group_column, split_column=split_column,
                           fit=fit)
    name = name or data_set_name(root)
    chosen = tuple(e.strip() for e in encoders.split(",") if e.strip()) if encoders else ()
    unknown = [e for e in chosen if e not in available()]
    if unknown:
        raise click.BadParameter(f"unknown encoder(s) {unknown}; see `crs encoders list`", param_hint="--encoders")
    shifts = _shift_choices(guess, name, shift_targets, shift_label_columns) if shift_targets else ()
    choices = StarterChoices(
        name=name, encoders=chosen, quick=quick, weights=weights, input_size=input_size, image_size=image_size,
        device=device, shift_targets=shifts,
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
    for shift in shifts:
        click.echo(f"  {'shift':<{width}}  {shift.root} as {shift.name!r}, labels matched by name, all images in test")
    for warning in guess.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"wrote {spec_path}")
    click.echo(f"next: {check_command(guess)}")
    click.echo(f"then: crs run {spec_path}")


def _shift_choices(guess: FolderGuess, name: str, roots: tuple[Path, ...], label_columns: tuple[str, ...]) -> tuple[ShiftChoice, ...]:
    """Each ``--shift-target`` folder inspected against the source, under a name of its own."""
    source_task = load_guess(guess).task
    taken = {name}
    shifts = []
    for root in roots:
        _, options = inspect_shift_target(guess, source_task, root, label_columns=label_columns or None)
        base = data_set_name(root)
        shift_name = f"{name}-shift" if base == name else base
        number = 2
        while shift_name in taken:  # two folders with one name (a/site, b/site): number them
            shift_name = f"{base}-{number}"
            number += 1
        taken.add(shift_name)
        shifts.append(ShiftChoice(shift_name, root.resolve(), options))
    return tuple(shifts)


def _from_bundle(bundle: Path, spec_path: Path | None, force: bool) -> None:
    """Write the bundle's spec as TOML, and say which placeholders to fill in."""
    from crs.cli.from_bundle import bundle_spec_text, read_bundle_spec

    spec = read_bundle_spec(bundle)
    text, to_fill = bundle_spec_text(spec, bundle)
    spec_path = spec_path or Path(f"{spec['name']}.toml")
    if spec_path.exists() and not force:
        raise click.BadParameter(f"{spec_path} exists; choose another path or add --force", param_hint="--spec")
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(text)
    click.echo(f"wrote {spec_path}: the spec of {bundle} ({len(spec['encoders'])} encoder(s), "
               f"{len(spec['datasets'])} data set(s))")
    folder = spec_path.parent.absolute() if str(spec_path.parent) == "." else spec_path.parent
    click.echo(f"fill in {len(to_fill)} placeholder(s), the values starting with \"FILL IN:\" (relative paths "
               f"resolve against the spec's folder, {folder}): {', '.join(to_fill)}")
    click.echo(f"add the encoders you bring to `encoders`, then: crs run {spec_path} --extend {bundle}")
