"""Any labelled data set as the shift target of a task: its labels matched to the task's by name.

A shift target is evaluated with the probes trained on the source task, so its labels must be
the source's labels, in the source's order. Sites name their labels their own way
(``Pleural Effusion``, ``pleural_effusion``, ``PLEURAL-EFFUSION``); names are matched after
case folding and treating spaces, ``_`` and ``-`` alike. Anything that does not match is an error
that lists every unmatched name on both sides, never a silent drop:

* single-label tasks (multiclass, ordinal): every class the target uses must be a source class;
  source classes the target lacks are fine (they are absent from its test set, and reported so);
* multilabel tasks: every source label must be a target label; target labels the source does not
  have are left out (the probe has no output for them), and listed in :attr:`ShiftLabels.unused`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crs.data.base import DataError, Dataset, Task

SINGLE_LABEL = ("multiclass", "ordinal")


def label_key(name: str) -> str:
    """The form two label names are compared in: case-folded, with spaces, ``_`` and ``-`` alike."""
    return re.sub(r"[\s_\-]+", " ", str(name)).strip().casefold()


@dataclass(frozen=True)
class ShiftLabels:
    """How a target's labels map onto a source task: ``source_index[j]`` is the source position of
    target label ``j`` (-1 when the source has no such label: multilabel extras, in ``unused``)."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    source_index: tuple[int, ...]
    unused: tuple[str, ...] = ()


def _keys(names: Sequence[str], side: str, where: str) -> dict[str, int]:
    keys: dict[str, int] = {}
    for position, name in enumerate(names):
        key = label_key(name)
        if key in keys:
            raise DataError(f"{where}: {side} labels {names[keys[key]]!r} and {name!r} are the same name; rename one")
        keys[key] = position
    return keys


def match_labels(
    source: Sequence[str], target: Sequence[str], kind: str, where: str = "shift target",
    used: Sequence[str] | None = None,
) -> ShiftLabels:
    """Match ``target`` label names onto ``source`` by name, for a task of ``kind``.

    ``used`` (single-label tasks) names the target classes that occur in its data; only they must
    match (a declared but empty class may be missing from the source). Raises :class:`DataError`
    listing every name that does not match and the source's names.
    """
    source, target = tuple(map(str, source)), tuple(map(str, target))
    source_keys = _keys(source, "source", where)
    _keys(target, "target", where)
    index = tuple(source_keys.get(label_key(name), -1) for name in target)
    if kind in SINGLE_LABEL:
        needed = set(map(str, used)) if used is not None else set(target)
        unmatched = [name for name, i in zip(target, index, strict=True) if i < 0 and name in needed]
        if unmatched:
            raise DataError(
                f"{where}: target classes {unmatched} match no source class; source classes are {list(source)} "
                "(names are compared ignoring case, spaces, '_' and '-'); rename them in the target CSV or drop those rows"
            )
        return ShiftLabels(source, target, index)
    if kind != "multilabel":
        raise DataError(f"{where}: task kind {kind!r} is not one of {(*SINGLE_LABEL, 'multilabel')}")
    matched = {i for i in index if i >= 0}
    missing = [name for i, name in enumerate(source) if i not in matched]
    if missing:
        raise DataError(
            f"{where}: source labels {missing} have no target label column; target labels are {list(target)} "
            "(names are compared ignoring case, spaces, '_' and '-'); add or rename those columns"
        )
    unused = tuple(name for name, i in zip(target, index, strict=True) if i < 0)
    return ShiftLabels(source, target, index, unused)


def align_to_source(target: Dataset, source: Task) -> Dataset:
    """``target`` with its labels reordered into ``source``'s label space, and ``source`` as its task.

    Raises :class:`DataError` naming the unmatched labels, or the kinds when a single-label task
    meets a multilabel one (multiclass and ordinal are both single-label and mix freely).
    """
    where = f"shift target {target.name!r} of task {source.name!r}"
    kinds = {target.task.kind, source.kind}
    if "multilabel" in kinds and len(kinds) > 1:
        raise DataError(f"{where}: the target is {target.task.kind} and the source is {source.kind}; both must be multilabel or neither")
    labels = np.asarray(target.labels)
    aligned: np.ndarray
    if source.kind == "multilabel":
        mapping = match_labels(source.class_names, target.task.class_names, "multilabel", where)
        aligned = np.full((len(labels), len(source.class_names)), np.nan, dtype=np.float32)
        for j, i in enumerate(mapping.source_index):
            if i >= 0:
                aligned[:, i] = labels[:, j]
    else:
        used = sorted({target.task.class_names[int(code)] for code in np.unique(labels)})
        mapping = match_labels(source.class_names, target.task.class_names, source.kind, where, used=used)
        lookup = np.asarray(mapping.source_index, dtype=np.int64)
        aligned = lookup[labels.astype(np.int64)]
    return dataclasses.replace(target, task=source, labels=aligned)


def adopt_source_geometry(target: Dataset, source: Dataset) -> Dataset:
    """Give a shift target its source's canonical size and fit mode, so the shift measured is the site's.

    Stage 1 and the import of a shift target's sample table both apply this one rule.
    """
    target.image_size = source.image_size
    target.fit = source.fit
    return target


def shift_target_dataset(target: Dataset, source: Dataset) -> Dataset:
    """A loaded shift target as stage 1 stores it: the source's geometry, and its labels in the source's
    label space (matched by name, :func:`align_to_source`) when its label names differ.

    Stage 1 and the import of a shift target's sample table both apply this one rule, once per target.
    """
    target = adopt_source_geometry(target, source)
    same = target.task.class_names == source.task.class_names and target.task.kind == source.task.kind
    return target if same else align_to_source(target, source.task)
