"""Sample tables, task kinds, group-aware splits and nested label fractions.

Every data set loader (synthetic, ISIC 2019, APTOS 2019, CheXpert, MIMIC-CXR, folder) returns a
:class:`Dataset`: one row per image with a stable id, a path relative to the data root, a group id
(patient or lesion), a split and labels. Stage 1 stores ids, labels, splits and groups in the cache
so stage 2 never needs the images again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.spec import DEFAULT_FIT, FIT_MODES, MODALITIES, TASK_KINDS  # noqa: F401  (the loaders read them here)

SPLITS = ("train", "val", "test")
log = logging.getLogger("crs.data")

SPLIT_DESIGNS = ("stratified", "official", "imported")
"""How a data set's test split was drawn (decision 0085), which the case bootstrap follows:
``stratified``: crs drew it (:func:`group_split`: whole groups within label strata), so the bootstrap
resamples groups within the same strata; ``official``: the loader's own test list (CheXpert's
valid.csv, every image of a shift target or of MIMIC-CXR), and ``imported``: a split read from the
user's CSV (a folder data set's split column); neither was drawn by label, so the bootstrap resamples
whole groups without strata."""


def inferred_design(splits: np.ndarray) -> str:
    """The design of a split whose loader did not say (an older cache): ``official`` where every row is
    ``test`` (no split was drawn: a shift target's whole cohort), else ``stratified`` (crs's own split,
    what every built-in loader drew by default)."""
    splits = np.asarray(splits)
    return "official" if len(splits) and bool(np.all(splits == "test")) else "stratified"


class DataError(ValueError):
    """A data set is missing, malformed or inconsistent; the message names the thing and the fix."""


@dataclass(frozen=True)
class Task:
    """What is predicted: the kind and the ordered class (or label) names."""

    name: str
    kind: str
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.kind not in TASK_KINDS:
            raise DataError(f"task {self.name!r}: kind {self.kind!r} is not one of {TASK_KINDS}")
        if len(self.class_names) < 2 and self.kind != "multilabel":
            raise DataError(f"task {self.name!r}: needs at least 2 classes, got {self.class_names}")

    @property
    def n_outputs(self) -> int:
        return len(self.class_names)


@dataclass(frozen=True)
class RowAccounting:
    """How a loader went from the rows its CSVs list to the images it kept, for ``crs datasets check``.

    ``dropped``: rows removed, by reason (``lateral view``, ``missing or unreadable``...);
    ``groups_lost``: groups (patients) that had listed rows but no kept image; ``notes``: what
    a user should know about the splits (a radiologist-labelled file pooled into them).
    """

    rows_listed: int
    dropped: dict[str, int] = field(default_factory=dict)
    groups_lost: int = 0
    group_word: str = "groups"
    notes: tuple[str, ...] = ()


@dataclass
class Dataset:
    """A labelled image set ready for stage 1.

    ``labels`` is int64 of shape (N,) for multiclass/ordinal, or float32 of shape (N, L) for
    multilabel with NaN where a label is to be ignored (for example CheXpert uncertain labels under
    the ``ignore`` policy). ``paths`` are relative to ``root`` and never escape it.
    ``splits`` holds "train", "val", "test" (a shift target has only "test").
    ``fit`` says how non-square images become square (``crop``, ``pad``, ``squash``); empty means
    the modality's default (:data:`DEFAULT_FIT`).
    ``subgroups`` holds one categorical column per patient-group attribute (sex, age band, view...),
    one row per image; empty when the data set has none (:mod:`crs.data.subgroups` fills it).
    ``label_map`` is what a label map did to a target cohort (:mod:`crs.data.label_map`): the classes
    scored, those with no counterpart; empty when no map was applied.
    ``split_design`` says how the test split was drawn (:data:`SPLIT_DESIGNS`); empty: ``official``
    when every row is test, else ``stratified`` (:func:`inferred_design`).
    """

    name: str
    root: Path
    task: Task
    modality: str
    image_size: int
    ids: np.ndarray
    paths: list[str]
    groups: np.ndarray
    labels: np.ndarray
    splits: np.ndarray
    metadata: pd.DataFrame = field(default_factory=pd.DataFrame)
    skipped: list[str] = field(default_factory=list)
    fit: str = ""
    accounting: RowAccounting | None = None
    subgroups: pd.DataFrame = field(default_factory=pd.DataFrame)
    label_map: dict[str, Any] = field(default_factory=dict)
    split_design: str = ""

    def __post_init__(self) -> None:
        self.fit = self.fit or default_fit(self.modality)
        self.split_design = self.split_design or inferred_design(self.splits)
        if self.split_design not in SPLIT_DESIGNS:
            raise DataError(f"data set {self.name!r}: split_design={self.split_design!r} is not one of {SPLIT_DESIGNS}")
        if self.fit not in FIT_MODES:
            raise DataError(f"data set {self.name!r}: fit={self.fit!r} is not one of {FIT_MODES}")
        n = len(self.ids)
        for attr in ("paths", "groups", "labels", "splits"):
            if len(getattr(self, attr)) != n:
                raise DataError(f"data set {self.name!r}: {attr} has {len(getattr(self, attr))} rows, ids has {n}")
        if len(set(self.ids.tolist())) != n:
            counts = pd.Series(np.asarray(self.ids).astype(str)).value_counts(sort=False)
            twice = counts[counts > 1]
            raise DataError(
                f"data set {self.name!r}: image ids are not unique: {twice.index[0]!r} is listed {int(twice.iloc[0])} "
                f"times ({len(twice)} id(s) listed more than once, {int(twice.sum() - len(twice))} extra row(s)); "
                "remove the duplicate rows from its CSV or give each image its own id")
        bad = set(np.unique(self.splits).tolist()) - set(SPLITS)
        if bad:
            raise DataError(f"data set {self.name!r}: unknown split names {sorted(bad)}")

    def __len__(self) -> int:
        return len(self.ids)

    def indices(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.splits == split)

    def subset(self, keep: np.ndarray) -> Dataset:
        """A copy keeping the rows where ``keep`` (bool mask or index array) selects."""
        keep = np.asarray(keep)
        idx = np.flatnonzero(keep) if keep.dtype == bool else keep
        meta = self.metadata.iloc[idx].reset_index(drop=True) if len(self.metadata) else self.metadata
        subgroups = self.subgroups.iloc[idx].reset_index(drop=True) if len(self.subgroups.columns) else self.subgroups
        return Dataset(
            self.name, self.root, self.task, self.modality, self.image_size, self.ids[idx],
            [self.paths[i] for i in idx], self.groups[idx], self.labels[idx], self.splits[idx], meta,
            list(self.skipped), self.fit, self.accounting, subgroups, dict(self.label_map), self.split_design,
        )

    def id_digest(self) -> str:
        """sha256 of the ordered image ids; it enters the cache fingerprint."""
        return hashlib.sha256("\n".join(map(str, self.ids.tolist())).encode()).hexdigest()


def default_fit(modality: str) -> str:
    """The documented fit mode of a modality (``pad`` for any other: it neither crops nor distorts)."""
    return DEFAULT_FIT.get(modality, "pad")


def safe_join(root: Path, relative: str) -> Path:
    """Join a CSV path onto the data root, refusing any path that escapes the root."""
    root = Path(root).resolve()
    candidate = (root / relative).resolve()
    if candidate != root and root not in candidate.parents:
        raise DataError(f"path {relative!r} points outside the data root {root}; fix the CSV entry")
    return candidate


def stratify_key(labels: np.ndarray) -> np.ndarray:
    """One integer per row for stratification: the class, or the first positive label (+1, 0 = none)."""
    if labels.ndim == 1:
        return labels.astype(np.int64)
    positive = np.nan_to_num(labels, nan=0.0) > 0.5
    first = np.where(positive.any(axis=1), positive.argmax(axis=1) + 1, 0)
    return first.astype(np.int64)


def _group_keys(groups: np.ndarray, labels: np.ndarray) -> pd.Series:
    """Each group's stratum (index: group id as str, sorted): the majority :func:`stratify_key` of its
    rows, ties to the smaller key."""
    keys = stratify_key(labels)
    counts = pd.DataFrame({"group": np.asarray(groups).astype(str), "key": keys}).value_counts().reset_index(name="n")
    counts = counts.sort_values(["group", "n", "key"], ascending=[True, False, True], kind="stable")
    return counts.drop_duplicates("group").set_index("group")["key"].sort_index()


MIN_GROUPS_PER_STRATUM = 3
"""A stratum of this many groups gives each split of non-zero proportion at least one group."""


def _split_keys(groups: np.ndarray, labels: np.ndarray) -> pd.Series:
    """The strata :func:`group_split` draws in: :func:`_group_keys`, or one stratum for all when every stratum
    is smaller than :data:`MIN_GROUPS_PER_STRATUM` but the groups together are not. Such a stratum would
    round every share to 0 and send all its groups to train, so a small data set whose groups each fall
    in a stratum of their own (a dozen patients, each with another first finding) would have no test."""
    keys = _group_keys(groups, labels)
    sizes = keys.value_counts()
    if len(keys) >= MIN_GROUPS_PER_STRATUM and int(sizes.max()) < MIN_GROUPS_PER_STRATUM:
        return pd.Series(0, index=keys.index, dtype=np.int64)
    return keys


def split_strata(groups: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N,) each row's group's stratum key (:func:`_group_keys`): the bootstrap of a ``stratified`` split
    resamples groups within these (decision 0085).

    The key of a group does not depend on the other groups, so the test rows alone give the strata the
    split drew them in. :func:`_split_keys`' pooling does depend on them (whether every stratum of the
    *whole* data set is small), so it is not applied here: judged on the test rows alone it pooled test
    sets whose data set was split by strata (it moved the golden tables' replicates; decision 0123).
    Where a whole data set was pooled, its strata are of one or two groups, and lone groups are pooled
    by the resampling anyway."""
    groups = np.asarray(groups).astype(str)
    return _group_keys(groups, labels).reindex(groups).to_numpy().astype(np.int64)


def group_split(
    groups: np.ndarray,
    labels: np.ndarray,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
) -> np.ndarray:
    """Assign whole groups to train/val/test, stratified by each group's majority label.

    Deterministic for a given seed and input order; no group appears in two splits. Within each
    stratum, a split with a non-zero proportion gets at least one group once the stratum has three
    or more groups; a split whose proportion is 0 gets none. A smaller stratum rounds its shares, so
    its groups go to train at the default proportions; when every stratum is that small, all groups
    form one stratum (:func:`_split_keys`). Fewer than three groups in all cannot fill three splits:
    they go to train, with a warning naming the empty split.
    """
    if len(proportions) != 3 or not np.isclose(sum(proportions), 1.0) or min(proportions) < 0:
        raise DataError(f"split proportions must be three non-negative numbers summing to 1, got {proportions}")
    groups = np.asarray(groups).astype(str)
    group_key = _split_keys(groups, labels)
    rng = np.random.default_rng(seed)
    names_out: list[np.ndarray] = []
    splits_out: list[np.ndarray] = []
    for _, members in group_key.groupby(group_key, sort=True):
        names = members.index.to_numpy()
        rng.shuffle(names)
        n = len(names)
        n_test = int(round(n * proportions[2]))
        n_val = int(round(n * proportions[1]))
        if n >= 3:
            n_test = max(n_test, 1) if proportions[2] > 0 else 0
            n_val = max(n_val, 1) if proportions[1] > 0 else 0
        assigned = np.full(n, "train", dtype=object)
        assigned[:n_test] = "test"
        assigned[n_test:n_test + n_val] = "val"
        names_out.append(names)
        splits_out.append(assigned)
    lookup = pd.Series(np.concatenate(splits_out), index=np.concatenate(names_out))
    empty = [name for name, share in zip(SPLITS, proportions, strict=True) if share > 0 and not (lookup == name).any()]
    if empty and len(lookup):
        log.warning("only %d group(s) (patients or lesions) to split: %s got none at proportions %s; "
                    "at least %d groups are needed", len(lookup), " and ".join(empty), list(proportions),
                    MIN_GROUPS_PER_STRATUM)
    return lookup.reindex(groups).to_numpy().astype(str)


VALIDATION_STREAM = 1
"""Random stream of the validation rows drawn at a label fraction (see ``nested_label_fractions``)."""


def nested_label_fractions(
    labels: np.ndarray,
    fractions: Sequence[float],
    seed: int,
    min_per_class: int = 3,
    stream: int = 0,
) -> dict[float, np.ndarray]:
    """Nested, stratified subsets of training rows for each label fraction.

    Returns sorted index arrays into ``labels``. Subsets are nested (the 1 % subset lies inside the
    5 % one ...) because each is a prefix of one stratified random order. Every class (or every
    label with positives, for multilabel) gets at least ``min_per_class`` rows where it has them,
    so each probe sees every class. The same seed gives the same subsets for every encoder, which
    is what makes the seed bootstrap paired.

    ``stream`` names an independent random stream for the same seed: the training draw is stream 0,
    the validation draw at the same fraction (``VALIDATION_STREAM``) another, so the two are
    independent but each is reproducible and shared by every encoder.
    """
    fractions = sorted(float(f) for f in fractions)
    if not fractions or fractions[0] <= 0 or fractions[-1] > 1:
        raise DataError(f"label fractions must lie in (0, 1], got {fractions}")
    n = len(labels)
    rng = np.random.default_rng(seed if stream == 0 else [seed, stream])
    keys = stratify_key(labels)
    # Stratified order: interleave classes so any prefix keeps class proportions.
    position = np.empty(n)
    for key in np.unique(keys):
        members = np.flatnonzero(keys == key)
        rng.shuffle(members)
        position[members] = (np.arange(len(members)) + rng.random()) / len(members)
    order = np.lexsort((rng.random(n), position))
    # Floor: the first rows of each class (or each positive label) move to the front.
    if labels.ndim == 1:
        columns = [labels == c for c in np.unique(labels)]
    else:
        columns = [np.nan_to_num(labels[:, j], nan=0.0) > 0.5 for j in range(labels.shape[1])]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    front: list[int] = []
    for column in columns:
        members = np.flatnonzero(column)
        members = members[np.argsort(rank[members])][:min_per_class]
        front.extend(members.tolist())
    front_unique = list(dict.fromkeys(sorted(front, key=lambda i: rank[i])))
    in_front = set(front_unique)
    rest = [i for i in order.tolist() if i not in in_front]
    full_order = np.array(front_unique + rest, dtype=np.int64)
    subsets: dict[float, np.ndarray] = {}
    for fraction in fractions:
        size = max(int(round(fraction * n)), len(front_unique))
        subsets[fraction] = np.sort(full_order[:size])
    return subsets
