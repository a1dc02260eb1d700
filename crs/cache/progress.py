"""Progress of a store being filled, read from its chunk flags: passes done lately, and who is writing.

Every complete chunk has a flag file written once, when the chunk became durable; its modification
time says when. The passes finished in a recent window, over the window's span, give the rate all
writers together (every shard, every host) are filling the store at, with no bookkeeping besides
the flags. Live writers are the held lock files (one per store, encoder and shard).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import zarr

from crs.cache.direct import chunk_file
from crs.cache.lock import _is_locked, lock_folder
from crs.cache.writer import DONE_SUFFIX, is_marker_array

RECENT_SECONDS = 15 * 60


@dataclass(frozen=True)
class RecentRate:
    """Forward passes whose chunks were finished within the window, and the seconds they took."""

    passes: int
    seconds: float

    @property
    def per_second(self) -> float | None:
        return self.passes / self.seconds if self.passes and self.seconds > 0 else None


def finished_chunks(store: Path) -> list[tuple[float, int]]:
    """``(finish time, rows)`` of every complete chunk of every feature array in ``store``."""
    if not (Path(store) / "zarr.json").exists():
        return []
    root = zarr.open_group(str(store), mode="r")
    found = []
    for _, node in root.members(max_depth=None):
        if not isinstance(node, zarr.Group):
            continue
        for name, array in node.arrays():
            if is_marker_array(name) or f"{name}{DONE_SUFFIX}" not in node:
                continue
            flags_array = cast(zarr.Array, node[f"{name}{DONE_SUFFIX}"])
            flags = np.asarray(flags_array[:])
            chunk_rows = int(cast(int, array.attrs.get("chunk_rows", array.chunks[0])))
            n_rows = int(array.shape[0])
            for chunk in np.flatnonzero(flags).tolist():
                path = chunk_file(flags_array, chunk)
                if path is not None and path.exists():
                    rows = min(chunk_rows, n_rows - chunk * chunk_rows)
                    found.append((path.stat().st_mtime, rows))
    return found


def recent_rate(stores: Iterable[Path], window: float = RECENT_SECONDS, now: float | None = None) -> RecentRate:
    """How fast the stores are being filled: passes in chunks finished in the last ``window`` seconds."""
    now = time.time() if now is None else now
    recent = [(when, rows) for store in stores for when, rows in finished_chunks(store) if when >= now - window]
    if len(recent) < 2:
        return RecentRate(0, 0.0)
    return RecentRate(sum(rows for _, rows in recent), now - min(when for when, _ in recent))


def live_writers(store: Path) -> list[str]:
    """The lock files of writers running now (``writer.<encoder>.shard-<i>-of-<n>``), by name."""
    folder = lock_folder(store)
    if not folder.is_dir():
        return []
    return [path.stem for path in sorted(folder.glob("writer.*.lock")) if _is_locked(path)]
