"""Pre-extraction check: refuse a data set that stage 2 could not use, before encoder time is spent."""

from __future__ import annotations

import logging

import numpy as np

from crs.data.base import DataError, Dataset

log = logging.getLogger("crs.data")


def validate_for_extraction(dataset: Dataset) -> None:
    """Refuse a data set stage 2 could not use, before any encoder time is spent on it.

    A data set with a training split needs train, val and test rows, and every class (every
    label's positives, for multilabel) in its training split: a probe cannot learn a class it never
    sees. A shift target (test only) needs test rows. Labels must be finite class indices. Every test
    split must let AUROC be computed: two classes present (one label with both values, for multilabel);
    otherwise every score of the data set would be NaN and the ranking could not be made.
    """
    names = list(dataset.task.class_names)
    labels = np.asarray(dataset.labels)
    counts = {split: int((dataset.splits == split).sum()) for split in ("train", "val", "test")}
    if counts["test"] == 0:
        raise DataError(f"data set {dataset.name!r} has no test images; check its split column or proportions")
    if dataset.task.kind == "multilabel":
        known = labels[~np.isnan(labels)] if labels.dtype.kind == "f" else labels
        if labels.ndim != 2 or labels.shape[1] != len(names) or not np.isin(known, (0, 1)).all():
            raise DataError(
                f"data set {dataset.name!r}: multilabel labels must be an (N, {len(names)}) array of 0, 1 or NaN; "
                "fix the label columns"
            )
    else:
        if labels.ndim != 1 or labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() >= len(names):
            values = sorted(set(np.asarray(labels).ravel().tolist()))[:6]
            raise DataError(
                f"data set {dataset.name!r}: labels {values} are not class indices 0..{len(names) - 1} "
                f"for classes {names}; fix the label column or class_names"
            )
    _refuse_unscorable_test(dataset, names, labels)
    if counts["train"] == 0:
        return  # a shift target: evaluated only
    if counts["val"] == 0:
        raise DataError(f"data set {dataset.name!r} has no validation images; C is chosen on them; fix the split proportions")
    train = labels[dataset.splits == "train"]
    if dataset.task.kind == "multilabel":
        positives = np.nansum(train, axis=0)
        absent = [names[j] for j in np.flatnonzero(positives == 0)]
    else:
        absent = [names[k] for k in np.flatnonzero(np.bincount(train, minlength=len(names)) == 0)]
    if absent:
        raise DataError(
            f"data set {dataset.name!r}: class(es) {absent} have no examples in the train split; "
            "add images, merge or drop those classes, or change the split"
        )
    for split in ("val", "test"):
        rows = labels[dataset.splits == split]
        present = np.nansum(rows, axis=0) > 0 if dataset.task.kind == "multilabel" else np.bincount(rows, minlength=len(names)) > 0
        missing = [names[k] for k in np.flatnonzero(~present)]
        if missing:
            log.warning("%s: class(es) %s have no examples in the %s split; they are reported, not scored",
                        dataset.name, missing, split)




def _refuse_unscorable_test(dataset: Dataset, names: list[str], labels: np.ndarray) -> None:
    """Refuse a test split on which no AUROC exists: one class only (binary, multiclass), or no label with
    both a positive and a negative (multilabel). Stage 2 would score it NaN on every axis, and the
    ranking would stop at the end with a message about NaN scores instead of the split's cause."""
    rows = labels[dataset.splits == "test"]
    if dataset.task.kind == "multilabel":
        known = ~np.isnan(rows) if rows.dtype.kind == "f" else np.ones(rows.shape, dtype=bool)
        positives = ((rows == 1) & known).sum(axis=0)
        negatives = ((rows == 0) & known).sum(axis=0)
        if ((positives > 0) & (negatives > 0)).any():
            return
        detail = ", ".join(f"{name}: {int(p)} positive / {int(n)} negative"
                           for name, p, n in zip(names, positives, negatives, strict=False))
        raise DataError(
            f"data set {dataset.name!r}: no label has both positives and negatives in the test split ({detail}); "
            "AUROC is undefined on every label: change the split or add test images"
        )
    present = np.flatnonzero(np.bincount(rows, minlength=len(names)) > 0)
    if len(present) >= 2:
        return
    only = f"only class {names[int(present[0])]!r}" if len(present) else "no labelled image"
    raise DataError(
        f"data set {dataset.name!r}: the test split ({len(rows)} image(s)) holds {only}; AUROC needs two classes, "
        "so every score would be NaN: change the split (e.g. its proportions or seed) or add test images"
    )
