"""Patient- or lesion-level stratified bootstrap draws of a task's test rows.

Images of one patient (or lesion) are not independent: they share the patient's anatomy, disease
and acquisition. Resampling images treats every image as new information and makes the bootstrap
too narrow (on 300 patients x 4 images the AUROC bootstrap SD was 0.0157 image-level against 0.0279
over fresh test sets). Here each replicate draws whole groups with replacement, within strata, and
every row of a drawn group gets the group's count. A data set without groups gives every image its
own group, which is the image-level bootstrap.

Strata are formed on groups (see :func:`group_strata`): for multiclass, ordinal and binary tasks the
group's majority class (ties to the smaller class), the rule ``crs.data.group_split`` uses to keep
whole groups in one split; for multilabel tasks the label with the most positive entries among the
group's images (ties to the first label), or "no positive". A stratum of n groups is resampled n
times, so class shares stay near their test-set values and a macro AUROC seldom loses a class.
Strata with a single group are pooled (a lone group in its own stratum would be drawn exactly once
in every replicate and add no variance). See docs/decisions/0008-group-level-bootstrap.md.

Which strata follows the test set's sampling design (decision 0085, :data:`crs.data.base.SPLIT_DESIGNS`):
a ``stratified`` split (crs's own, :func:`crs.data.base.group_split`) is resampled within the strata the
split drew it in (:func:`crs.data.base.split_strata`: for single-label tasks the rule above; for
multilabel ones the majority of each image's first positive label); an ``official`` or ``imported``
split was not drawn by label, so its groups are resampled without strata (one stratum), and the class
shares vary between replicates as they would between fresh test sets. Without a design (``design=None``)
the strata of :func:`group_strata` are used, as before designs were recorded.

Every replicate has its own random stream (``SeedSequence(seed, spawn_key=(replicate,))``), so the
draws do not depend on the block size and any block can be recomputed alone. The counts are shared
by every encoder and every condition of the task (the same test rows), which keeps the comparison
of encoders paired.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from crs.data.base import SPLIT_DESIGNS, split_strata
from crs.scoring.formula import ScoreInputError

RESAMPLED_AS = {
    "stratified": "whole patients or lesions within the split's label strata",
    "official": "whole patients or lesions, no strata",
    "imported": "whole patients or lesions, no strata",
}
"""How the case bootstrap resamples a test set of each design, in the words the report prints."""

DRAWN_AS = {
    "stratified": "drawn by crs's split (patients within label strata)",
    "official": "the loader's own test list",
    "imported": "a split read from the data set's CSV",
}


def design_line(row: Mapping[str, str]) -> str:
    """One data set's line: how its rows were drawn and resampled (``row``: one of
    :meth:`crs.scoring.layouts.TaskLayout.design_rows`, as summary.json keeps them)."""
    known = "" if row.get("known") == "recorded" else ", inferred: written before crs recorded it"
    return (f"{row['data_set']} ({row['rows']}): {row['design']}, {DRAWN_AS.get(row['design'], row['design'])}"
            f"{known}; resampled {row['resampled']}")


class ResampleError(ScoreInputError):
    """Group ids, strata or draw settings that cannot give a bootstrap; the message says the fix."""


def group_strata(groups: np.ndarray, labels: np.ndarray, kind: str) -> np.ndarray:
    """One stratum per row: the stratum of the row's group (see the module docstring).

    ``labels``: (N,) classes for multiclass, ordinal and binary; (N, L) 0/1/NaN for multilabel.
    Returns (N,) int64, equal for every row of a group.
    """
    groups = np.asarray(groups)
    labels = np.asarray(labels)
    if len(groups) != len(labels):
        raise ResampleError(
            f"{len(groups)} group ids for {len(labels)} label rows; give one group id per test row"
        )
    _, group_index = np.unique(groups, return_inverse=True)
    group_index = group_index.ravel()
    n_groups = int(group_index.max()) + 1 if len(group_index) else 0
    if kind == "multilabel":
        if labels.ndim != 2:
            raise ResampleError(f"multilabel labels must be (N, L), got shape {labels.shape}")
        positive = np.nan_to_num(labels.astype(np.float64), nan=0.0) == 1.0
        counts = np.zeros((n_groups, labels.shape[1]))
        np.add.at(counts, group_index, positive.astype(np.float64))
        stratum = np.where(counts.max(axis=1) > 0, counts.argmax(axis=1), labels.shape[1])
    else:
        if labels.ndim != 1:
            raise ResampleError(f"{kind} labels must be (N,), got shape {labels.shape}")
        classes, class_index = np.unique(labels.astype(np.int64), return_inverse=True)
        counts = np.zeros((n_groups, len(classes)))
        np.add.at(counts, (group_index, class_index.ravel()), 1.0)
        stratum = classes[counts.argmax(axis=1)]  # argmax takes the first maximum: ties to the smaller class
    return stratum[group_index].astype(np.int64)


@dataclass(frozen=True)
class GroupBootstrap:
    """Stratified group bootstrap of one set of test rows; draws (replicates x rows) counts on demand.

    ``row_group`` (N,) maps each row to its group 0..G-1; ``group_stratum`` (G,) each group to its
    (pooled) stratum; ``seed`` is the entropy of every replicate's stream (an int or a sequence of
    ints, e.g. ``[seed, task_number]`` so tasks draw independently).
    """

    row_group: np.ndarray
    group_stratum: np.ndarray
    seed: int | tuple[int, ...]

    @property
    def n_rows(self) -> int:
        return len(self.row_group)

    @property
    def n_groups(self) -> int:
        return len(self.group_stratum)

    @property
    def count_dtype(self) -> np.dtype:
        """uint16 while a stratum has at most 65535 groups (a count never exceeds its stratum's size)."""
        largest = int(np.bincount(self.group_stratum).max()) if self.n_groups else 0
        return np.dtype(np.uint16) if largest <= np.iinfo(np.uint16).max else np.dtype(np.uint32)

    def group_counts(self, replicates: range | Sequence[int]) -> np.ndarray:
        """(len(replicates), G) how often each group is drawn: n_s draws with replacement per stratum of n_s groups."""
        replicates = list(replicates)
        # groups sorted by stratum; each stratum is a contiguous run [start, start + size)
        by_stratum = np.argsort(self.group_stratum, kind="stable")
        sizes = (
            np.bincount(self.group_stratum)[np.unique(self.group_stratum)]
            if self.n_groups
            else np.zeros(0, int)
        )
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        slot_start = np.repeat(starts, sizes)
        slot_size = np.repeat(sizes, sizes).astype(np.float64)
        counts = np.zeros((len(replicates), self.n_groups), dtype=self.count_dtype)
        entropy = list(self.seed) if isinstance(self.seed, tuple) else self.seed
        for row, replicate in enumerate(replicates):
            rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(int(replicate),)))
            picks = slot_start + np.floor(rng.random(self.n_groups) * slot_size).astype(np.int64)
            counts[row, by_stratum] = np.bincount(picks, minlength=self.n_groups).astype(self.count_dtype)
        return counts

    def counts(self, replicates: range | Sequence[int]) -> np.ndarray:
        """(len(replicates), N) row counts: each row carries its group's count."""
        return self.group_counts(replicates)[:, self.row_group]

    def blocks(self, n_replicates: int, block: int) -> Iterator[tuple[range, np.ndarray]]:
        """(replicate range, row counts) for replicates 0..n_replicates-1, ``block`` at a time.

        The counts of a replicate are the same whatever the block size.
        """
        if n_replicates < 0 or block < 1:
            raise ResampleError(f"need n_replicates >= 0 and block >= 1, got {n_replicates} and {block}")
        for start in range(0, n_replicates, block):
            replicates = range(start, min(start + block, n_replicates))
            yield replicates, self.counts(replicates)


def design_strata(design: str, groups: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N,) strata of a test set drawn by ``design``: the split's label strata where crs drew it
    (``stratified``), one stratum otherwise (``official``, ``imported``)."""
    if design not in SPLIT_DESIGNS:
        raise ResampleError(f"sampling design {design!r} is not one of {SPLIT_DESIGNS}; rerun `crs probe` to record it")
    if design == "stratified":
        return split_strata(groups, labels)
    return np.zeros(len(labels), dtype=np.int64)


def _pool_lone_strata(group_stratum: np.ndarray) -> np.ndarray:
    """Pool strata holding one group: several lone groups form one stratum; a single lone group joins the smallest other."""
    sizes = np.bincount(group_stratum)
    lone = sizes[group_stratum] == 1
    if lone.sum() >= 2:
        group_stratum = np.where(lone, len(sizes), group_stratum)
    elif lone.sum() == 1 and (sizes > 1).any():
        group_stratum = np.where(lone, int(np.argmin(np.where(sizes > 1, sizes, np.inf))), group_stratum)
    return np.unique(group_stratum, return_inverse=True)[1].ravel()


def group_bootstrap(
    groups: np.ndarray | None,
    labels: np.ndarray,
    kind: str,
    seed: int | Sequence[int] = 0,
    strata: np.ndarray | None = None,
    design: str | None = None,
) -> GroupBootstrap:
    """The group bootstrap of one task's test rows (or its shift target's), stratified as they were drawn.

    ``groups`` (N,) patient or lesion ids (None: every row its own group, the image-level
    bootstrap); ``design`` how the rows were drawn (:data:`crs.data.base.SPLIT_DESIGNS`; see the
    module docstring; None: the strata of :func:`group_strata`); ``strata`` (N,) overrides both and
    must be constant within a group.
    """
    labels = np.asarray(labels)
    n_rows = len(labels)
    groups = np.arange(n_rows) if groups is None else np.asarray(groups)
    if len(groups) != n_rows:
        raise ResampleError(f"{len(groups)} group ids for {n_rows} test rows; give one group id per test row")
    if strata is None and design is not None:
        strata = design_strata(design, groups, labels)
    row_strata = group_strata(groups, labels, kind) if strata is None else np.asarray(strata).astype(np.int64)
    if len(row_strata) != n_rows:
        raise ResampleError(f"{len(row_strata)} strata for {n_rows} test rows; give one stratum per test row")
    _, first_row, row_group = np.unique(groups, return_index=True, return_inverse=True)
    row_group = row_group.ravel().astype(np.int64)
    group_stratum = row_strata[first_row]
    if not np.array_equal(group_stratum[row_group], row_strata):
        raise ResampleError("strata differ between rows of one group; give each group a single stratum")
    group_stratum = _pool_lone_strata(np.unique(group_stratum, return_inverse=True)[1].ravel())
    entropy = tuple(int(s) for s in seed) if isinstance(seed, Sequence) else int(seed)
    return GroupBootstrap(row_group, group_stratum.astype(np.int64), entropy)
