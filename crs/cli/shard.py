"""Parse ``--shard I/N`` (or ``auto``: from the scheduler's environment) into the (index, count) pair."""

from __future__ import annotations

import os

import click


def parse_shard(text: str) -> tuple[int, int]:
    """``"1/4"`` -> ``(1, 4)``; ``"auto"`` -> the shard a SLURM array, srun or torchrun started."""
    if text.strip().lower() == "auto":
        from crs.extract.shards import shard_from_environment

        try:
            return shard_from_environment(os.environ)[0]
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--shard") from None
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise click.BadParameter(f"{text!r} must look like i/n, e.g. 0/4, or auto", param_hint="--shard") from None
    from crs.extract.runner import check_shard  # torch: imported when a shard is asked for

    try:
        return check_shard((index, count))  # type: ignore[return-value]
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--shard") from None


def shard_text(shard: tuple[int, int] | None) -> str:
    return "none" if shard is None else f"{shard[0]}/{shard[1]}"


devices_option = click.option(
    "--devices", default=None, metavar="LIST|all",
    help="One worker process per device, each filling one shard: cuda:0,cuda:1,... or all (every GPU here); "
         "cpu,cpu runs two CPU workers.")


def extract_on_devices(bench: object, text: str, allow_overlap: bool = False) -> None:
    """``crs extract --devices``: spawn the workers, then say what each did in all."""
    from crs.extract.devices import extract_on_devices as run
    from crs.extract.devices import parse_devices

    try:
        devices = parse_devices(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--devices") from None
    click.echo(f"extract: {len(devices)} worker(s), one per device: {', '.join(devices)}")
    stats = run(bench.spec, devices, allow_overlap=allow_overlap)  # type: ignore[attr-defined]
    counts = ", ".join(f"{name} {n:,}" for name, n in stats.forward_images.items())
    click.echo(f"extract: {stats.images_decoded:,} images decoded by all workers, forward passes per encoder: "
               f"{counts or 'none'}")
