"""Parse ``--shard I/N`` into the (index, count) pair the extractor checks."""

from __future__ import annotations

import click


def parse_shard(text: str) -> tuple[int, int]:
    """``"1/4"`` -> ``(1, 4)`` for the ``--shard`` option."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise click.BadParameter(f"{text!r} must look like i/n, e.g. 0/4", param_hint="--shard") from None
    from crs.extract.runner import check_shard  # torch: imported when a shard is asked for

    try:
        return check_shard((index, count))  # type: ignore[return-value]
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--shard") from None


