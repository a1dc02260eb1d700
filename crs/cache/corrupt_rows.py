"""Which test rows an encoder group's corrupted arrays hold (a corruption subsample, or the whole split).

A group made with ``[extract] corruption_rows`` records the subsample under its ``corrupt_rows``
attribute (positions into the test split, the ids' sha256, the N asked for), and every corrupted
array records the sha256 of its rows' ids (``rows_sha256``; absent on older arrays: the whole test
split). Stage 1 and imports recreate a corrupted array whose rows differ from the ones wanted, so a
changed subsample never reuses stale features; stage 2 reads the positions to take the subsample's
labels and groups, and refuses arrays that disagree with the group.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import zarr

from crs.cache.store import CacheError, child_array, child_group
from crs.cache.writer import MARKER_SUFFIXES
from crs.data.subsample import CorruptionRows

GROUP_ATTR = "corrupt_rows"
ARRAY_ATTR = "rows_sha256"


def array_rows_digest(group: zarr.Group, name: str, test_digest: str) -> str | None:
    """sha256 of the ids an existing array ``name`` holds (``test_digest`` for arrays older than this record), or None."""
    if name not in group:
        return None
    return cast(str, child_array(group, name).attrs.get(ARRAY_ATTR, test_digest))


def drop_array(group: zarr.Group, name: str) -> None:
    """Delete a feature array and its markers (its rows are not the ones wanted any more)."""
    for suffix in ("", *MARKER_SUFFIXES):
        if f"{name}{suffix}" in group:
            del group[f"{name}{suffix}"]


def record_rows(group: zarr.Group, rows: CorruptionRows) -> None:
    """Store the group's corrupted rows (nothing for the whole split, as before subsamples existed)."""
    if rows.is_full:
        if GROUP_ATTR in group.attrs:
            del group.attrs[GROUP_ATTR]
    elif group.attrs.get(GROUP_ATTR) != rows.record():
        group.attrs[GROUP_ATTR] = rows.record()


def mark_array(group: zarr.Group, name: str, rows: CorruptionRows) -> None:
    """Record on array ``name`` which rows it holds (written only when it changes)."""
    array = child_array(group, name)
    if array.attrs.get(ARRAY_ATTR) != rows.digest:
        array.attrs[ARRAY_ATTR] = rows.digest


def group_positions(group: zarr.Group) -> np.ndarray | None:
    """Positions into the test split of the group's corrupted rows; None: the whole test split."""
    record = cast(dict[str, Any] | None, group.attrs.get(GROUP_ATTR))
    return None if record is None else np.asarray(record["positions"], dtype=np.int64)


def checked_positions(store: Any, encoder: str, names: list[str], test_digest: str) -> np.ndarray | None:
    """The current group's corrupted-row positions, after checking every corrupted array agrees with them.

    ``store`` is a :class:`crs.cache.store.FeatureStore`; ``names`` its corrupted array names.
    """
    group = child_group(store.root, f"encoders/{encoder}/{store.current_fingerprint(encoder)}")
    record = cast(dict[str, Any] | None, group.attrs.get(GROUP_ATTR))
    wanted = test_digest if record is None else str(record["ids_sha256"])
    for name in names:
        if array_rows_digest(group, name, test_digest) != wanted:
            raise CacheError(
                f"{store.path}: {encoder}/{name} holds other test rows than the group's corrupted rows "
                "(a changed corruption_rows left it behind); re-run `crs extract` (or the import) to rewrite it"
            )
    return group_positions(group)
