"""Every random draw of the score, in one place: the seed multisets and each task's patient resamples.

* Seeds: one multiset of the probe seeds per replicate (:func:`draw_seed_counts`), shared by every
  encoder and task.
* Patients: per task, one stratified group resample of its test rows and one of each shift target's
  rows (:func:`crs.scoring.resample.group_bootstrap`), shared by every encoder and condition. Each is
  keyed on the task's **name and its test rows** (their group ids and labels), never its place among
  the run's tasks: the entropy is ``[seed, task_key(name, groups, labels), stream]`` with stream
  :data:`TEST_STREAM` for the test rows and ``SHIFT_STREAM + g`` for the g-th shift target by name. So a
  task draws the same patients alone and beside other tasks, which is what makes a merge of sites'
  replicates the replicates of their joint run (issue 42 item 3, decision 0144); and two hospitals'
  tasks of one name (each site's ``cxr``) draw from independent streams, as sites resampled apart must
  (keyed on the name alone, two sites with as many patients per label drew the very same multiplicities).

The CRS bootstrap (:mod:`crs.scoring.case_bootstrap`) and the subgroup tables (:mod:`crs.scoring.subgroups`)
both take their draws from here, so the two cannot drift apart.
"""

from __future__ import annotations

import hashlib

import numpy as np

from crs.scoring.resample import GroupBootstrap, group_bootstrap

TEST_STREAM, SHIFT_STREAM = 0, 1
"""Last entropy word of a task's draws: its test rows; its first shift target's rows (the g-th
target by name: ``SHIFT_STREAM + g``)."""


def task_key(task: str, groups: np.ndarray | None = None, labels: np.ndarray | None = None) -> int:
    """A task's stable 32-bit key: the first 4 bytes (big-endian) of the sha256 of its UTF-8 name, followed,
    when given, by its test rows' group ids (as text) and labels (float64). Not Python's ``hash()``, which
    is salted per process. Two tasks of one run have different names, so different keys but for a 1 in
    2**32 clash, which would only make their resamples alike."""
    digest = hashlib.sha256(str(task).encode("utf-8"))
    if groups is not None or labels is not None:
        digest.update(b"\x00groups\x00")
        if groups is not None:
            digest.update("\x1f".join(str(g) for g in np.asarray(groups).ravel().tolist()).encode("utf-8"))
        digest.update(b"\x00labels\x00")
        if labels is not None:
            found = np.ascontiguousarray(np.asarray(labels, dtype="<f8"))
            digest.update(repr(found.shape).encode("ascii"))
            digest.update(np.where(np.isnan(found), -1.0, found).tobytes())  # one NaN, whatever its payload
    return int.from_bytes(digest.digest()[:4], "big")


def task_entropy(seed: int, key: int | str, stream: int) -> tuple[int, int, int]:
    """The entropy of one of a task's resamples: ``(seed, key, stream)``, ``key`` a :func:`task_key` (a
    bare name: its name-only key)."""
    return int(seed), task_key(key) if isinstance(key, str) else int(key), int(stream)


def draw_seed_counts(n_seeds: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_seeds) float counts: one seed multiset per replicate, shared by every encoder and task."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot).astype(np.float64)


def draws_of_test_rows(
    groups: np.ndarray | None, labels: np.ndarray, kind: str, seed: int, key: int, design: str | None = None
) -> GroupBootstrap:
    """The group resample of a task's test rows (``groups``: patient or lesion ids, None: images;
    ``key``: the task's :func:`task_key` of its name and these rows)."""
    return group_bootstrap(groups, labels, kind, seed=task_entropy(seed, key, TEST_STREAM), design=design)


def draws_of_shift_target(
    groups: np.ndarray | None, labels: np.ndarray, kind: str, seed: int, key: int, target_number: int,
    design: str | None = None,
) -> GroupBootstrap:
    """The group resample of the rows of a task's shift target number ``target_number`` (by name), under
    the task's ``key`` (its name and test rows)."""
    entropy = task_entropy(seed, key, SHIFT_STREAM + int(target_number))
    return group_bootstrap(groups, labels, kind, seed=entropy, design=design)
