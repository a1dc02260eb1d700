"""Second bootstrap level: each task's measurements under every replicate's patient (or lesion) counts.

The seed level (:func:`crs.scoring.replicates.seed_replicates`) sees only seed-to-seed variation. At the
full label fraction every seed trains on the same rows, so discrimination, calibration and robustness
barely move between seeds and the CRS intervals come out far too narrow. The test set is a sample
too: this module adds its sampling variance. It takes each task's rows, labels, groups and conditions
as :mod:`crs.scoring.layouts` read them from the first encoder's predictions, with the task's draws
(:mod:`crs.scoring.draws`: per task one group-level resample of its test rows, keyed on the task's name,
whole patients or lesions within the split's label strata where crs drew the split, without strata
where it was an official or imported one, decision 0085, shared by every encoder and by the clean and
corrupted conditions (corrupted conditions evaluated on a corruption subsample, ``[extract]
corruption_rows``, take the subsample rows' counts from the same draw, so a patient drawn twice counts
twice in every condition); each shift target's rows resampled apart, also shared by every encoder.
Prediction files without group ids fall back to the image level, with a logged warning), and
recomputes every measurement the CRS is made of per (encoder, task, seed) under every replicate
(:func:`task_metrics`): clean AUROC at each label fraction, AUROC under each corruption x severity and
on each shift target, and the debiased calibration error. :mod:`crs.scoring.replicates` turns them into
axis errors through the one mapping, :func:`crs.scoring.formula.axis_errors_from_metrics`.

Memory: a resample is a vector of counts, so the metrics are weighted statistics
(:mod:`crs.axes.weighted`: one sort per score column reused by every replicate, replicate blocks
streamed through an O(block x cases) working set) and no resampled array is built. Predictions are
read one (encoder, task) file at a time and dropped after use; what is kept is (replicates x
encoders x conditions x seeds) metrics, never cases x runs. At the full label fraction every seed
gives the same predictions: such seed rows are scored once.

Row 0 of every weight matrix is the unit weights (every case once): the CRS it gives is
``crs_from_predictions``, checked against the run records' point estimate, and the calibration
replicates are centred on it on the squared scale (:func:`centre_calibration`; decisions 0017, 0061).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from crs.axes.weighted import (
    ReplicateWeights,
    nanmean_classes,
    prepare_weights,
    weighted_auroc,
    weighted_debiased_ece,
)
from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder
from crs.scoring.formula import TaskMetrics
from crs.scoring.intervals import centre_on_squares
from crs.scoring.layouts import CaseBootstrapError, TaskLayout, read_unit, unit_shift_keys
from crs.scoring.resample import GroupBootstrap

log = logging.getLogger(__name__)


DEFAULT_WORKERS = 2
"""Threads for the weighted AUROC unless asked (never more than the cores). Measured side by side on the
paper-size synthetic run (15 encoders x 3 tasks, 1,000 replicates, compiled kernel;
``python -m crs.bench.scoring --run-folder DIR --reuse --workers N``) on the 2-core development machine,
load average about 2: 1 thread 174 s wall / 183 s CPU, 2 threads sharing each encoder's columns 122 s
wall / 188 s CPU, 2 threads taking one encoder each 105 s wall / 186 s CPU. (Under a load average of 5,
with the numpy path, 2 threads had been slower than 1.)"""


def default_workers() -> int:
    """Threads for the weighted AUROC when none is given: :data:`DEFAULT_WORKERS`, never more than the cores."""
    return max(1, min(DEFAULT_WORKERS, os.cpu_count() or 1))


def _labels_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return bool(np.all(a == b))


def _check_unit(
    layout: TaskLayout, arrays: Mapping[str, np.ndarray], encoder: str, first_encoder: str,
    shift_keys: Sequence[artifacts.ShiftKeys],
) -> None:
    task = layout.task
    same_conditions = tuple(sorted(artifacts.corrupt_stems(arrays))) == layout.corrupt_stems and tuple(
        k.target for k in shift_keys
    ) == layout.targets
    if not same_conditions:
        raise CaseBootstrapError(
            f"task {task!r}: encoders {first_encoder!r} and {encoder!r} were evaluated on different conditions; "
            "rerun `crs probe` for every encoder"
        )
    expected_labels = [(artifacts.labels_key(artifacts.CLEAN), layout.labels)]
    expected_labels += [(k.labels, shift.labels) for k, shift in zip(shift_keys, layout.shifts, strict=True)]
    for key, expected in expected_labels:
        if not _labels_equal(arrays[key], expected):
            raise CaseBootstrapError(
                f"task {task!r}: {key} of {encoder!r} differ from those of {first_encoder!r}; the test cases must be "
                "the same for every encoder (rerun `crs probe`)"
            )
    rows = arrays.get(artifacts.CORRUPT_ROWS)
    expected_rows = layout.corrupt_rows
    same_rows = rows is None if expected_rows is None else rows is not None and np.array_equal(rows, expected_rows)
    if not same_rows:
        raise CaseBootstrapError(
            f"task {task!r}: encoders {first_encoder!r} and {encoder!r} evaluated corruptions on different test rows "
            "(another [extract] corruption_rows); extract and probe every encoder with the same setting"
        )
    if tuple(int(s) for s in sorted(arrays[artifacts.FULL_SEEDS])) != layout.seeds:
        raise CaseBootstrapError(
            f"task {task!r}: predictions of {encoder!r} have seeds {sorted(arrays[artifacts.FULL_SEEDS])}, "
            f"those of {first_encoder!r} {list(layout.seeds)}; rerun `crs probe` for every encoder"
        )


# --- one encoder on one task under every replicate ------------------------------------------------


def _distinct_rows(stack: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct (N, K) rows of a per-seed stack and, per seed, which distinct row it is (identical seeds scored once)."""
    distinct: list[np.ndarray] = []
    index = np.empty(len(stack), dtype=np.int64)
    for s, row in enumerate(stack):
        for d, seen in enumerate(distinct):
            if np.array_equal(row, seen):
                index[s] = d
                break
        else:
            index[s] = len(distinct)
            distinct.append(row)
    return distinct, index


def _class_labels(labels: np.ndarray, kind: str, n_outputs: int) -> list[tuple[int, np.ndarray]]:
    """(score column, 0/1/NaN labels) of each one-vs-rest problem, as :func:`crs.axes.per_class_auroc` defines them."""
    if kind == "multilabel":
        values = np.asarray(labels, dtype=np.float64)
        return [(k, values[:, k]) for k in range(n_outputs)]
    classes = np.asarray(labels).astype(np.int64)
    if kind == "binary":
        return [(n_outputs - 1, (classes == 1).astype(np.float64))]
    return [(k, (classes == k).astype(np.float64)) for k in range(n_outputs)]


def macro_auroc_columns(
    columns: Sequence[np.ndarray], labels: np.ndarray, kind: str, weights: ReplicateWeights, workers: int = 1
) -> np.ndarray:
    """(B, M) macro one-vs-rest AUROC of M (N, K) probability arrays under every replicate's weights.

    Per class one :func:`crs.axes.weighted.weighted_auroc` call with all M columns at once (they
    share the class's labels, so its weights are gathered once per block).
    """
    if not columns:
        return np.zeros((weights.n_replicates, 0))
    n_outputs = columns[0].shape[1]
    per_class = []
    for k, class_labels in _class_labels(labels, kind, n_outputs):
        scores = np.stack([np.asarray(column[:, k], dtype=np.float32) for column in columns], axis=1)
        per_class.append(weighted_auroc(scores, class_labels, weights, workers=workers))
    return nanmean_classes(np.stack(per_class, axis=-1))


@dataclass(frozen=True)
class UnitMetrics:
    """One encoder's measurements on one task under every replicate (row 0: every case once)."""

    clean: np.ndarray  # (B, S)
    fraction: np.ndarray  # (B, F - 1, S)
    corrupt: np.ndarray  # (B, C, S)
    shift: np.ndarray  # (B, G, S), G shift targets sorted by name
    calibration: np.ndarray  # (B, S)


def unit_metrics(
    layout: TaskLayout,
    arrays: Mapping[str, np.ndarray],
    weights: ReplicateWeights,
    shift_weights: Sequence[ReplicateWeights],
    workers: int = 1,
    shift_keys: Sequence[artifacts.ShiftKeys] | None = None,
    corrupt_weights: ReplicateWeights | None = None,
) -> UnitMetrics:
    """Every measurement of one (encoder, task) under the task's replicate weights.

    ``shift_weights``: one per shift target of ``layout``, each under its own draws; ``shift_keys``
    where this unit holds them (default: read from ``arrays`` with the layout's target names);
    ``corrupt_weights``: the same replicates restricted to a corruption subsample's rows (needed
    when ``layout.corrupt_rows`` is set; :func:`replicate_weights`).
    """
    task, seeds = layout.task, layout.seeds
    full_seeds = np.asarray(arrays[artifacts.FULL_SEEDS])
    full_rows = [int(np.flatnonzero(full_seeds == seed)[0]) for seed in seeds]
    columns: list[np.ndarray] = []

    def add(stack: np.ndarray, into: list[np.ndarray] = columns) -> np.ndarray:
        distinct, index = _distinct_rows(stack)
        start = len(into)
        into.extend(distinct)
        return start + index

    # AUROCs rank the stored rank keys (order-exact) where the folder has them; calibration reads probabilities
    clean_full = np.asarray(arrays[artifacts.probs_key(artifacts.CLEAN)])[full_rows]
    clean_at = add(artifacts.auroc_scores(arrays, artifacts.probs_key(artifacts.CLEAN))[full_rows])
    all_probs = artifacts.auroc_scores(arrays, artifacts.ALL_CLEAN_PROBS)
    fraction_at = []
    for fraction in layout.fractions[:-1]:
        rows = []
        for seed in seeds:
            found = np.flatnonzero(
                np.isclose(arrays[artifacts.SUBSET_FRACTION], fraction) & (arrays[artifacts.SUBSET_SEED] == seed)
            )
            if len(found) != 1:
                raise CaseBootstrapError(
                    f"task {task!r}: predictions have {len(found)} probes for label fraction {fraction}, seed {seed}; "
                    "expected one (rerun `crs probe`)"
                )
            rows.append(len(columns))
            columns.append(np.asarray(all_probs[found[0]], dtype=np.float32))
        fraction_at.append(rows)
    corrupt_stacks = [artifacts.auroc_scores(arrays, artifacts.probs_key(stem))[full_rows] for stem in layout.corrupt_stems]
    if layout.corrupt_rows is None:  # the clean test rows: scored in one call with the clean columns
        corrupt_at = [add(stack) for stack in corrupt_stacks]
    aurocs = macro_auroc_columns(columns, layout.labels, layout.kind, weights, workers)  # (B, M)
    if layout.corrupt_rows is not None:  # a corruption subsample: its own rows, labels and weights
        if corrupt_weights is None:
            raise ValueError("corrupt_weights are needed when the corruptions were evaluated on a subsample")
        subsample_columns: list[np.ndarray] = []
        corrupt_at = [aurocs.shape[1] + add(stack, subsample_columns) for stack in corrupt_stacks]
        aurocs = np.concatenate([aurocs, macro_auroc_columns(
            subsample_columns, layout.corrupt_labels, layout.kind, corrupt_weights, workers)], axis=1)
    n_boot = weights.n_replicates
    distinct_clean, clean_index = _distinct_rows(clean_full)
    calibration = np.stack(
        [weighted_debiased_ece(layout.labels, probs, layout.kind, weights) for probs in distinct_clean], axis=1
    )[:, clean_index]
    if shift_keys is None:
        shift_keys = unit_shift_keys(arrays, layout.targets, f"task {task!r}")
    per_target = []
    for keys, target, target_weights in zip(shift_keys, layout.shifts, shift_weights, strict=True):
        shift_distinct, shift_index = _distinct_rows(artifacts.auroc_scores(arrays, keys.probs)[full_rows])
        per_target.append(
            macro_auroc_columns(shift_distinct, target.labels, layout.kind, target_weights, workers)[:, shift_index]
        )
    shift = np.stack(per_target, axis=1) if per_target else np.zeros((n_boot, 0, len(seeds)))
    return UnitMetrics(
        clean=aurocs[:, clean_at],
        fraction=aurocs[:, np.array(fraction_at, dtype=np.int64).reshape(-1, len(seeds))]
        if fraction_at
        else np.zeros((n_boot, 0, len(seeds))),
        corrupt=aurocs[:, np.array(corrupt_at, dtype=np.int64).reshape(-1, len(seeds))]
        if corrupt_at
        else np.zeros((n_boot, 0, len(seeds))),
        shift=shift,
        calibration=calibration,
    )


def replicate_weights(draws: GroupBootstrap, n_boot: int, rows: np.ndarray | None = None) -> ReplicateWeights:
    """Unit weights (row 0, every case once) then ``n_boot`` replicate row counts, laid out for the weighted metrics.

    ``rows``: only those test rows (a corruption subsample), with the counts the same patient draws give them.
    """
    counts = draws.counts(range(n_boot))
    matrix = np.vstack([np.ones((1, draws.n_rows), dtype=counts.dtype), counts])
    return prepare_weights(matrix if rows is None else matrix[:, rows])


def task_metrics(
    folder: RunFolder, layout: TaskLayout, encoders: Sequence[str], n_boot: int, workers: int = 1
) -> TaskMetrics:
    """One task's :class:`TaskMetrics` with leading dims (n_boot + 1,): row 0 every case once, then the replicates.

    ``workers`` threads take one encoder each (reading its file, its AUROC columns and its ECE: the
    heavy parts release the GIL), so at most ``workers`` prediction files are in memory at once and
    each is dropped once its metrics are taken. One encoder at a time left the reading and the ECE
    serial (measured at paper size: 122 s wall with 2 threads sharing one encoder's columns).
    """
    weights = replicate_weights(layout.draws, n_boot)
    corrupt_weights = None if layout.corrupt_rows is None else replicate_weights(layout.draws, n_boot, layout.corrupt_rows)
    shift_weights = [replicate_weights(shift.draws, n_boot) for shift in layout.shifts]

    def one(encoder: str) -> UnitMetrics:
        arrays = read_unit(folder, encoder, layout.task)
        where = str(folder.predictions_path(encoder, layout.task))
        keys = unit_shift_keys(arrays, layout.targets if layout.shifts else None, where)
        _check_unit(layout, arrays, encoder, encoders[0], keys)
        column_threads = workers if len(encoders) == 1 else 1  # one encoder: its columns share the threads
        return unit_metrics(layout, arrays, weights, shift_weights, column_threads, keys, corrupt_weights)

    if workers > 1 and len(encoders) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            units = list(pool.map(one, encoders))
    else:
        units = [one(encoder) for encoder in encoders]

    def stack(name: str) -> np.ndarray:
        return np.stack([getattr(unit, name) for unit in units], axis=1)

    return TaskMetrics(
        clean_auroc=stack("clean"),
        fraction_auroc=stack("fraction"),
        corrupt_auroc=stack("corrupt"),
        shift_auroc=stack("shift"),
        calibration_error=stack("calibration"),
    )


def centre_calibration(metrics: TaskMetrics) -> TaskMetrics:
    """Move each (encoder, seed)'s replicate calibration errors (rows 1..) so their mean square is row 0's square.

    The scored error is the root of a debiased mean squared gap (decision 0035); a resample adds its
    own noise to each bin's gap, so the replicates' squares sit above the data's by that noise, an
    additive bias on the squared scale (on the demo the replicate mean sat 0.016-0.028 above the
    point estimate, about one replicate SD, and an uncentred percentile interval of a well
    calibrated encoder could miss its own point estimate). Centring the squares
    (:func:`crs.scoring.intervals.centre_on_squares`, decision 0061) removes that bias and keeps
    every replicate at or above 0; the additive shift of the roots it replaces (decision 0017) gave
    negative lower bounds. AUROC is smooth: its replicates centre on the point estimate without
    help, so it is left as drawn.
    """
    calibration = centre_on_squares(metrics.calibration_error)
    return TaskMetrics(
        clean_auroc=metrics.clean_auroc,
        fraction_auroc=metrics.fraction_auroc,
        corrupt_auroc=metrics.corrupt_auroc,
        shift_auroc=metrics.shift_auroc,
        calibration_error=calibration,
    )


# --- the two-level bootstrap --------------------------------------------------------------------------
