"""A fixed, stratified, patient-level subsample of the test split (for a corruption grid sized by precision).

Corrupted variants are most of stage 1's forward passes (CheXpert: 93 %). Evaluating them on a
subsample of the test split's patients (lesions) instead of all of them cuts that cost in
proportion; the subsample is drawn by whole groups, so the patient-level bootstrap stays valid,
in a stratified random order of the groups, so label prevalence is kept, and is fingerprinted by
the ids it holds. ``[extract] corruption_rows = N`` makes stage 1 write corrupted arrays for these
rows only; ``crs plan`` states the forward passes saved (docs/plan.md, decision 0032).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from crs.data.base import stratify_key


def group_subsample(labels: np.ndarray, groups: np.ndarray, n_rows: int, seed: int = 0) -> np.ndarray:
    """Sorted positions of whole groups whose images add up to at least ``n_rows`` (all when fewer exist).

    Groups are ordered by a stratified random order (each group takes the stratum of its first
    image; strata are interleaved so any prefix keeps their proportions) and taken until the rows
    reach ``n_rows``.
    """
    labels, groups = np.asarray(labels), np.asarray(groups).astype(str)
    if n_rows >= len(groups):
        return np.arange(len(groups))
    names, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    keys = stratify_key(labels[first]) if len(names) else np.zeros(0)
    rng = np.random.default_rng([seed, 24])
    position = np.empty(len(names))
    for key in np.unique(keys):
        members = np.flatnonzero(keys == key)
        rng.shuffle(members)
        position[members] = (np.arange(len(members)) + rng.random()) / len(members)
    order = np.lexsort((rng.random(len(names)), position))
    sizes = np.bincount(inverse, minlength=len(names))
    taken = order[: int(np.searchsorted(np.cumsum(sizes[order]), n_rows)) + 1]
    return np.flatnonzero(np.isin(inverse, taken))


def subsample_digest(ids: np.ndarray) -> str:
    """sha256 of the subsample's image ids in row order (what a cache would fingerprint)."""
    return hashlib.sha256("\n".join(map(str, np.asarray(ids).tolist())).encode()).hexdigest()


@dataclass(frozen=True)
class CorruptionRows:
    """The test rows the corrupted variants are made for: positions into the test split, sorted.

    ``requested`` is the ``corruption_rows`` asked for (None: the whole split); ``digest`` the
    sha256 of the rows' image ids (what the cache records, so a changed subsample is new arrays).
    """

    positions: np.ndarray
    n_test: int
    requested: int | None
    digest: str

    @property
    def is_full(self) -> bool:
        return len(self.positions) == self.n_test

    def record(self) -> dict[str, Any]:
        """What a feature group stores about its corrupted rows (JSON)."""
        return {"positions": [int(p) for p in self.positions], "requested": self.requested, "ids_sha256": self.digest,
                "n_test": self.n_test}

    def note(self) -> str:
        """One line for logs and plans: what was asked and what was taken."""
        if self.requested is None:
            return f"corrupted variants for all {self.n_test:,} test images"
        if self.is_full:
            return (f"corruption_rows = {self.requested:,} is not below the {self.n_test:,} test images: "
                    "corrupted variants for the whole test split")
        return (f"corrupted variants for a patient-level subsample of {len(self.positions):,} of {self.n_test:,} "
                f"test images (corruption_rows = {self.requested:,})")


def check_corruption_rows(value: object) -> int | None:
    """``corruption_rows`` as a positive int, or None (the whole test split); a clear error otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) <= 0:
        raise ValueError(f"corruption_rows must be a positive number of test images (or unset for the whole "
                         f"test split), got {value!r}")
    return int(value)


def corruption_rows(test_ids: np.ndarray, test_labels: np.ndarray, test_groups: np.ndarray,
                    requested: int | None) -> CorruptionRows:
    """The corrupted rows for ``requested`` images of a test split given in store order (None: all of them)."""
    requested = check_corruption_rows(requested)
    test_ids = np.asarray(test_ids)
    if requested is None:
        positions = np.arange(len(test_ids))
    else:
        positions = group_subsample(test_labels, test_groups, requested)
    return CorruptionRows(positions, len(test_ids), requested, subsample_digest(test_ids[positions]))
