"""A fixed, stratified, patient-level subsample of the test split (for a corruption grid sized by precision).

Corrupted variants are most of stage 1's forward passes (CheXpert: 93 %). Evaluating them on a
subsample of the test split's patients (lesions) instead of all of them cuts that cost in
proportion; the subsample is drawn by whole groups, so the patient-level bootstrap stays valid,
in a stratified random order of the groups, so label prevalence is kept, and is fingerprinted by
the ids it holds. Not yet a stage-1 setting: ``crs plan --corruption-rows N`` uses it to state the
forward passes a subsample of about N images would save (see docs/plan.md).
"""

from __future__ import annotations

import hashlib

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
