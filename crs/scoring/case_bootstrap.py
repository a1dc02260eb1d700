"""Second bootstrap level: resample test cases, stratified by class, on top of the seed draw.

The paired-seed bootstrap (:func:`crs.scoring.bootstrap.paired_seed_bootstrap`) sees only seed-to-seed
variation. At the full label fraction every seed trains on the same rows, so discrimination,
calibration and robustness barely move between seeds and the CRS intervals come out far too
narrow. The test set is a sample too: this module adds its sampling variance.

Each replicate draws

* one seed multiset (exactly the draw :func:`crs.scoring.bootstrap.paired_seed_bootstrap` makes for the same
  ``seed``), shared by every encoder and task;
* per task, one resample of its test cases, stratified by class, shared by every encoder and by
  the clean and corrupted conditions (they are the same cases); the shift target's cases are
  resampled separately, also shared by every encoder;

and recomputes every measurement the CRS is made of per (encoder, task, seed): clean AUROC at each
label fraction, AUROC under each corruption x severity and on the shift target, and the debiased
calibration error (:func:`task_metrics`). The axis errors then come from the one mapping,
:func:`crs.scoring.formula.axis_errors_from_metrics`, and the whole CRS (dominance included) from
:meth:`crs.scoring.formula.PointEstimate.score`, with the point estimate's reference and floor.

A resample is a vector of counts (how often each case is drawn), so the metrics are computed as
weighted statistics and no resampled array is ever built: AUROC as a weighted Mann-Whitney
statistic (one sort per score column, cumulative weights), ECE as count-weighted bin sums.
With integer counts both equal the unweighted metric on the materialised resample (oracle-tested).

Strata: the class for multiclass and ordinal tasks (class counts are then the same in every
replicate, so the macro AUROC always averages the same classes); for multilabel tasks the first
label known to be positive, in class order, with one more stratum for cases with no known positive.
The full label pattern was rejected: with five labels and about a hundred cases many patterns are
singletons, and a singleton stratum is never resampled (no variance). See
docs/decisions/0004-case-level-bootstrap.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from crs.axes.calibration import calibrated_ece_moments
from crs.scoring import bootstrap
from crs.scoring.formula import PointEstimate, ScoreInputError, TaskMetrics, axis_errors_from_metrics
from crs.scoring.measurements import Measurements

N_BINS = 15
"""ECE bins, as :func:`crs.axes.ece` uses by default (equal width)."""

PREDICTION_TOLERANCE = 0.005
"""Largest |CRS from stored predictions - CRS from run records| accepted without a warning."""

_CHUNK_ELEMENTS = 2_000_000
"""Largest (replicates x columns x cases) block the weighted AUROC holds at once (16 MB per array)."""


class CaseBootstrapError(ScoreInputError):
    """Per-case predictions are missing or do not fit the run records; the message says the fix."""


# --- weighted metrics (pure functions on arrays) --------------------------------------------------


def _exact_in_float32(weights: np.ndarray) -> bool:
    """Whole-number weights small enough that every Mann-Whitney sum stays an exact float32 integer."""
    return bool(np.all(weights == np.round(weights)) and weights.sum(axis=1).max(initial=0.0) <= 4096)


def _mixed_tie_groups(sorted_scores: np.ndarray, positive_sorted: np.ndarray, negative_sorted: np.ndarray):
    """(column, first, last) position of every run of tied scores holding a positive and a negative."""
    n_columns, n_cases = sorted_scores.shape
    tied_next = sorted_scores[:, 1:] == sorted_scores[:, :-1]
    if not tied_next.any():
        return np.zeros((0, 3), dtype=np.int64)
    starts = np.ones((n_columns, n_cases), dtype=bool)
    starts[:, 1:] = ~tied_next
    first = np.flatnonzero(starts.ravel())
    last = np.append(first[1:], starts.size) - 1
    has_positive = np.add.reduceat(positive_sorted.ravel(), first) > 0
    has_negative = np.add.reduceat(negative_sorted.ravel(), first) > 0
    mixed = has_positive & has_negative & (last > first)
    column = first[mixed] // n_cases
    return np.stack([column, first[mixed] % n_cases, last[mixed] % n_cases], axis=1)


def weighted_auroc(
    scores: np.ndarray, positive: np.ndarray, negative: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """AUROC of every score column under every replicate's case weights, shape (B, C).

    ``scores`` (C, N); ``positive`` and ``negative`` (C, N) or (N,) booleans (a case that is
    neither, e.g. a NaN multilabel entry, is ignored); ``weights`` (B, N) non-negative. The value
    is the Mann-Whitney statistic with ties counted 1/2 on the data set in which case i appears
    ``weights[b, i]`` times: sum over (positive, negative) pairs of w_i w_j ([s_i > s_j] +
    [s_i = s_j] / 2) / (W_pos W_neg). NaN where a replicate has no positive or no negative weight.

    How: sort each column once, negatives before positives among tied scores; a positive's
    cumulative negative weight then counts every tied negative as fully below it, so half of
    sum over tie runs of (positive weight x negative weight) is subtracted. Cost O(B N) per column.
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    n_columns, n_cases = scores.shape
    positive = np.broadcast_to(np.asarray(positive, dtype=bool), (n_columns, n_cases))
    negative = np.broadcast_to(np.asarray(negative, dtype=bool), (n_columns, n_cases))
    weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if weights.shape[1] != n_cases:
        raise CaseBootstrapError(f"weights have {weights.shape[1]} cases but scores have {n_cases}")

    # Seeds that train on the same rows (every seed at the full fraction) give identical columns:
    # score each distinct (scores, positive, negative) column once.
    keys = np.concatenate([scores, positive, negative], axis=1)
    distinct, first_seen, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    if len(distinct) < n_columns:
        return _weighted_auroc_distinct(
            scores[first_seen], positive[first_seen], negative[first_seen], weights
        )[:, inverse.ravel()]
    return _weighted_auroc_distinct(scores, positive, negative, weights)


def _weighted_auroc_distinct(
    scores: np.ndarray, positive: np.ndarray, negative: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    n_columns, n_cases = scores.shape
    n_boot = weights.shape[0]
    order = np.lexsort((positive, scores), axis=-1)  # by score; negatives (and ignored) first on ties
    sorted_scores = np.take_along_axis(scores, order, axis=1)
    dtype = np.float32 if _exact_in_float32(weights) else np.float64
    positive_sorted = np.take_along_axis(positive, order, axis=1).astype(dtype)
    negative_sorted = np.take_along_axis(negative, order, axis=1).astype(dtype)
    cases_first = np.ascontiguousarray(weights.T.astype(dtype))  # (N, B)

    numerator = np.empty((n_boot, n_columns))
    step = max(1, _CHUNK_ELEMENTS // max(n_boot * n_cases, 1))
    for low in range(0, n_columns, step):
        block = slice(low, low + step)
        # (N, c, B): each column's weights in its score order; cases lead so the running sum over
        # cases adds contiguous (c, B) slabs, which numpy vectorises
        drawn = cases_first[order[block].T]
        negatives_below = drawn * negative_sorted[block].T[:, :, None]
        np.cumsum(negatives_below, axis=0, out=negatives_below)
        drawn *= positive_sorted[block].T[:, :, None]
        drawn *= negatives_below
        numerator[:, block] = drawn.sum(axis=0, dtype=np.float64).T

    runs = _mixed_tie_groups(sorted_scores, positive_sorted, negative_sorted)
    if len(runs):
        # tied (positive, negative) pairs were counted 1, they count 1/2: subtract half of P_run x N_run
        member_run = np.concatenate([np.full(last - first + 1, r) for r, (_, first, last) in enumerate(runs)])
        member_column = runs[member_run, 0]
        member_case = order[
            member_column, np.concatenate([np.arange(first, last + 1) for _, first, last in runs])
        ]
        member_positive = positive[member_column, member_case]
        member_negative = negative[member_column, member_case]
        run_positive = np.zeros((n_cases, len(runs)))
        run_negative = np.zeros((n_cases, len(runs)))
        np.add.at(run_positive, (member_case, member_run), member_positive)
        np.add.at(run_negative, (member_case, member_run), member_negative)
        tied_pairs = (weights @ run_positive) * (weights @ run_negative)  # (B, runs)
        correction = np.zeros((n_boot, n_columns))
        np.add.at(correction.T, runs[:, 0], tied_pairs.T)
        numerator -= 0.5 * correction
    positive_total = weights @ positive.T.astype(np.float64)
    negative_total = weights @ negative.T.astype(np.float64)
    pairs = positive_total * negative_total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, numerator / np.where(pairs > 0, pairs, 1.0), np.nan)


def weighted_binned_ece(
    confidence: np.ndarray,
    correct: np.ndarray,
    known: np.ndarray | None,
    weights: np.ndarray,
    n_bins: int = N_BINS,
) -> np.ndarray:
    """Equal-width binned ECE of every column under every replicate's case weights, shape (B, C).

    ``confidence`` and ``correct`` (C, N); ``known`` (C, N) or None marks the cases that count.
    Bins as :func:`crs.axes.ece`: edges linspace(0, 1, n_bins + 1), c in bin i when
    b_i <= c < b_{i+1}, c = 1 in the last bin. ECE = sum over bins |sum_i w_i (correct_i - c_i)|
    / sum_i w_i, which is sum of share x |accuracy - confidence|. NaN where no known weight.
    """
    confidence = np.atleast_2d(np.asarray(confidence, dtype=np.float64))
    correct = np.atleast_2d(np.asarray(correct, dtype=np.float64))
    n_columns, n_cases = confidence.shape
    known = (
        np.ones_like(confidence, dtype=bool) if known is None else np.broadcast_to(known, confidence.shape)
    )
    weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.searchsorted(edges, np.where(known, confidence, 0.0), side="right") - 1, 0, n_bins - 1)
    residual = np.where(known, correct - confidence, 0.0)
    design = np.zeros((n_cases, n_columns, n_bins))
    case_index, column_index = np.meshgrid(np.arange(n_cases), np.arange(n_columns), indexing="ij")
    design[case_index, column_index, bins.T] = residual.T
    gaps = (weights @ design.reshape(n_cases, -1)).reshape(len(weights), n_columns, n_bins)
    total = weights @ known.T.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, np.abs(gaps).sum(axis=-1) / np.where(total > 0, total, 1.0), np.nan)


def weighted_calibrated_ece(
    confidence: np.ndarray, known: np.ndarray | None, weights: np.ndarray, n_bins: int = N_BINS
) -> np.ndarray:
    """Expected ECE of a calibrated probe with these confidences, under every replicate's weights: (B, C).

    The bias :func:`crs.axes.debiased_ece` removes, on the resampled test set: per bin the
    weighted sum of c (1 - c), then :func:`crs.axes.calibrated_ece_moments`. With integer weights it
    equals the unweighted value on the repeated arrays.
    """
    confidence = np.atleast_2d(np.asarray(confidence, dtype=np.float64))
    n_columns, n_cases = confidence.shape
    known = (
        np.ones_like(confidence, dtype=bool) if known is None else np.broadcast_to(known, confidence.shape)
    )
    weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.clip(np.searchsorted(edges, np.where(known, confidence, 0.0), side="right") - 1, 0, n_bins - 1)
    variance = np.where(known, confidence * (1.0 - confidence), 0.0)
    design = np.zeros((n_cases, n_columns, n_bins))
    case_index, column_index = np.meshgrid(np.arange(n_cases), np.arange(n_columns), indexing="ij")
    design[case_index, column_index, bins.T] = variance.T
    per_bin = (weights @ design.reshape(n_cases, -1)).reshape(len(weights), n_columns, n_bins)
    total = weights @ known.T.astype(np.float64)
    return calibrated_ece_moments(per_bin, total)[0]


def weighted_debiased_ece(
    confidence: np.ndarray, correct: np.ndarray, known: np.ndarray | None, weights: np.ndarray
) -> np.ndarray:
    """:func:`crs.axes.debiased_ece` per column under every replicate's case weights, shape (B, C)."""
    return weighted_binned_ece(confidence, correct, known, weights) - weighted_calibrated_ece(
        confidence, known, weights
    )


# --- strata and resamples -------------------------------------------------------------------------


def case_strata(labels: np.ndarray, kind: str) -> np.ndarray:
    """Stratum of each test case: its class, or for multilabel the first known-positive label (L if none)."""
    labels = np.asarray(labels)
    if kind == "multilabel":
        if labels.ndim != 2:
            raise CaseBootstrapError(f"multilabel labels must be (N, L), got shape {labels.shape}")
        is_positive = np.nan_to_num(labels.astype(np.float64), nan=0.0) == 1.0
        return np.where(is_positive.any(axis=1), is_positive.argmax(axis=1), labels.shape[1]).astype(np.int64)
    if labels.ndim != 1:
        raise CaseBootstrapError(f"{kind} labels must be (N,), got shape {labels.shape}")
    return labels.astype(np.int64)


def stratified_case_counts(strata: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, N) integer counts: each stratum of n cases is resampled n times with replacement."""
    strata = np.asarray(strata)
    counts = np.zeros((n_boot, len(strata)), dtype=np.int64)
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        counts[:, members] = rng.multinomial(
            len(members), np.full(len(members), 1.0 / len(members)), size=n_boot
        )
    return counts


# --- per-case predictions of one task -------------------------------------------------------------


@dataclass(frozen=True)
class TaskCases:
    """Every encoder's per-case predictions on one task, aligned case by case.

    ``probs_by_fraction`` (E, F, S, N, K): clean test predictions at every label fraction
    (ascending; the last is the full fraction, taken from the float32 ``clean_probs``);
    ``corrupt_probs`` (E, C, S, N, K) at the full fraction, conditions named
    ``"<corruption>/<severity>"``; ``shift_probs`` (E, S, M, K) on the shift target's own cases.
    Seeds are in ascending order.
    """

    task: str
    kind: str
    encoders: tuple[str, ...]
    seeds: tuple[int, ...]
    fractions: tuple[float, ...]
    labels: np.ndarray
    probs_by_fraction: np.ndarray
    corruptions: tuple[str, ...]
    corrupt_probs: np.ndarray
    shift_labels: np.ndarray | None = None
    shift_probs: np.ndarray | None = None


def _labels_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(
        np.all((a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b)
    )


def _read_unit(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise CaseBootstrapError(
            f"no per-case predictions at {path}; rerun `crs probe` (stage 2 writes them) or score without the case level"
        )
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    needed = [
        "clean_probs",
        "clean_labels",
        "clean_all_probs",
        "subset_fraction",
        "subset_seed",
        "full_seeds",
    ]
    missing = [key for key in needed if key not in arrays]
    if missing:
        raise CaseBootstrapError(
            f"{path} lacks {missing} (written by an older crs); rerun `crs probe` to rewrite the predictions"
        )
    return arrays


def load_task_cases(
    predictions_dir: Path, task: str, kind: str, encoders: Sequence[str], full_fraction: float = 1.0
) -> TaskCases:
    """Read ``<predictions_dir>/<encoder>__<task>.npz`` for every encoder and check they align."""
    units = {encoder: _read_unit(Path(predictions_dir) / f"{encoder}__{task}.npz") for encoder in encoders}
    first_encoder = encoders[0]
    first = units[first_encoder]
    corrupt_keys = sorted(
        key[: -len("_probs")] for key in first if key.startswith("corrupt__") and key.endswith("_probs")
    )
    for encoder, unit in units.items():
        keys = sorted(
            key[: -len("_probs")] for key in unit if key.startswith("corrupt__") and key.endswith("_probs")
        )
        if keys != corrupt_keys or ("shift_probs" in unit) != ("shift_probs" in first):
            raise CaseBootstrapError(
                f"task {task!r}: encoders {first_encoder!r} and {encoder!r} were evaluated on different conditions; "
                "rerun `crs probe` for every encoder"
            )
        for key in ["clean_labels", "shift_labels"]:
            if key in unit and not _labels_equal(unit[key], first[key]):
                raise CaseBootstrapError(
                    f"task {task!r}: {key} of {encoder!r} differ from those of {first_encoder!r}; the test cases must be "
                    "the same for every encoder (rerun `crs probe`)"
                )

    seeds = tuple(int(s) for s in sorted(first["full_seeds"]))
    fractions = tuple(float(f) for f in sorted(set(first["subset_fraction"].tolist())))
    if not np.isclose(fractions[-1], full_fraction):
        raise CaseBootstrapError(
            f"task {task!r}: the largest label fraction is {fractions[-1]}, but axes are read at {full_fraction}"
        )

    def per_encoder(unit: dict[str, np.ndarray]):
        full_rows = [int(np.flatnonzero(unit["full_seeds"] == seed)[0]) for seed in seeds]
        by_fraction = []
        for fraction in fractions[:-1]:
            rows = []
            for seed in seeds:
                found = np.flatnonzero(
                    np.isclose(unit["subset_fraction"], fraction) & (unit["subset_seed"] == seed)
                )
                if len(found) != 1:
                    raise CaseBootstrapError(
                        f"task {task!r}: predictions have {len(found)} probes for label fraction {fraction}, seed {seed}; "
                        "expected one (rerun `crs probe`)"
                    )
                rows.append(unit["clean_all_probs"][found[0]].astype(np.float32))
            by_fraction.append(np.stack(rows))
        by_fraction.append(unit["clean_probs"][full_rows].astype(np.float32))
        corrupt = [unit[f"{key}_probs"][full_rows] for key in corrupt_keys]
        shift = unit["shift_probs"][full_rows].astype(np.float32) if "shift_probs" in unit else None
        return np.stack(by_fraction), corrupt, shift

    parts = [per_encoder(units[encoder]) for encoder in encoders]
    n_cases, n_outputs = parts[0][0].shape[-2:]
    corrupt_probs = (
        np.stack([np.stack(corrupt) for _, corrupt, _ in parts])
        if corrupt_keys
        else np.zeros((len(encoders), 0, len(seeds), n_cases, n_outputs), dtype=np.float16)
    )
    return TaskCases(
        task=task,
        kind=kind,
        encoders=tuple(encoders),
        seeds=seeds,
        fractions=fractions,
        labels=first["clean_labels"],
        probs_by_fraction=np.stack([by_fraction for by_fraction, _, _ in parts]),
        corruptions=tuple("/".join(key.split("__")[1:]) for key in corrupt_keys),
        corrupt_probs=corrupt_probs,
        shift_labels=first.get("shift_labels"),
        shift_probs=np.stack([shift for _, _, shift in parts]) if "shift_probs" in first else None,
    )


def load_cases(
    predictions_dir: Path, records: pd.DataFrame, full_fraction: float = 1.0
) -> dict[str, TaskCases]:
    """Per-case predictions of every (encoder, task) in ``records``, one :class:`TaskCases` per task."""
    encoders = sorted(records["encoder"].astype(str).unique())
    kinds = records.groupby(records["task"].astype(str))["task_kind"].first()
    return {
        task: load_task_cases(Path(predictions_dir), task, str(kinds[task]), encoders, full_fraction)
        for task in sorted(kinds.index)
    }


# --- replicate axes ---------------------------------------------------------------------------------


def _class_sides(labels: np.ndarray, kind: str, n_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """(K, N) positive and negative masks of the one-vs-rest problems (multilabel: NaN is neither)."""
    if kind == "multilabel":
        values = np.asarray(labels, dtype=np.float64).T
        return values == 1.0, values == 0.0
    positive = np.asarray(labels)[None, :] == np.arange(n_outputs)[:, None]
    return positive, ~positive


def _macro_auroc(probs: np.ndarray, labels: np.ndarray, kind: str, weights: np.ndarray) -> np.ndarray:
    """Macro one-vs-rest AUROC of probs (..., N, K) under weights (B, N): shape (B, ...)."""
    lead, (n_cases, n_outputs) = probs.shape[:-2], probs.shape[-2:]
    positive, negative = _class_sides(labels, kind, n_outputs)
    columns = np.moveaxis(probs.reshape(-1, n_cases, n_outputs), -1, 1).reshape(-1, n_cases)  # (..., K) x N
    n_repeat = columns.shape[0] // n_outputs
    per_class = weighted_auroc(
        columns, np.tile(positive, (n_repeat, 1)), np.tile(negative, (n_repeat, 1)), weights
    )
    per_class = per_class.reshape(len(weights), *lead, n_outputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate where no class can be scored -> NaN
        return np.nanmean(per_class, axis=-1)


def _debiased_ece(probs: np.ndarray, labels: np.ndarray, kind: str, weights: np.ndarray) -> np.ndarray:
    """crs.axes.debiased_ece (top label; multilabel: mean over labels) of probs (..., N, K): (B, ...)."""
    lead, (n_cases, n_outputs) = probs.shape[:-2], probs.shape[-2:]
    flat = probs.reshape(-1, n_cases, n_outputs).astype(np.float64)
    if kind == "multilabel":
        values = np.asarray(labels, dtype=np.float64).T  # (L, N)
        confidence = np.moveaxis(flat, -1, 1).reshape(-1, n_cases)
        n_repeat = confidence.shape[0] // n_outputs
        known = np.tile(~np.isnan(values), (n_repeat, 1))
        correct = np.tile(np.nan_to_num(values), (n_repeat, 1))
        per_label = weighted_debiased_ece(confidence, correct, known, weights).reshape(
            len(weights), *lead, n_outputs
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(per_label, axis=-1)
    correct = (flat.argmax(axis=-1) == np.asarray(labels)[None, :]).astype(np.float64)
    return weighted_debiased_ece(flat.max(axis=-1), correct, None, weights).reshape(len(weights), *lead)


def task_metrics(
    cases: TaskCases, case_weights: np.ndarray, shift_weights: np.ndarray | None = None
) -> TaskMetrics:
    """Every measurement of one task under case weights (B, N): a :class:`TaskMetrics` with leading dims (B,).

    Clean AUROC at the full fraction (B, E, S) and at each lower fraction (B, E, F - 1, S), AUROC
    under each corruption x severity (B, E, C, S) and on the shift target (B, E, 1, S), and the
    debiased calibration error (B, E, S), each as :mod:`crs.axes` defines it on the resample.
    """
    by_fraction = _macro_auroc(cases.probs_by_fraction, cases.labels, cases.kind, case_weights)  # (B, E, F, S)
    n_boot, n_encoders, _, n_seeds = by_fraction.shape
    corrupt = (
        _macro_auroc(cases.corrupt_probs, cases.labels, cases.kind, case_weights)  # (B, E, C, S)
        if cases.corrupt_probs.shape[1]
        else np.zeros((n_boot, n_encoders, 0, n_seeds))
    )
    shift = np.zeros((n_boot, n_encoders, 0, n_seeds))
    if cases.shift_probs is not None and cases.shift_labels is not None:
        if shift_weights is None:
            raise CaseBootstrapError(f"task {cases.task!r} has a shift target: pass its case weights")
        shift = _macro_auroc(cases.shift_probs, cases.shift_labels, cases.kind, shift_weights)[:, :, None]
    return TaskMetrics(
        clean_auroc=by_fraction[:, :, -1],
        fraction_auroc=by_fraction[:, :, :-1],
        corrupt_auroc=corrupt,
        shift_auroc=shift,
        calibration_error=_debiased_ece(cases.probs_by_fraction[:, -1], cases.labels, cases.kind, case_weights),
    )


def centre_calibration(replicates: TaskMetrics, identity: TaskMetrics) -> TaskMetrics:
    """Shift each (encoder, seed)'s replicate calibration errors so their mean is the every-case-once value.

    Binned ECE is an absolute value of a sum, so a resample (which adds its own noise to each bin's
    residual sum) scores higher on average than the data: on the demo the replicate mean sat 0.016-0.028
    above the point estimate, about one replicate SD, and the percentile interval of a well calibrated
    encoder could miss its own point estimate. Centring keeps the spread and removes that bootstrap bias
    (a bias-corrected bootstrap of a non-smooth statistic). AUROC is smooth: its replicates centre on
    the point estimate without help (gaps under 0.002 on the demo), so it is left as drawn.
    """
    bias = replicates.calibration_error.mean(axis=0) - identity.calibration_error[0]  # (E, S)
    return TaskMetrics(
        clean_auroc=replicates.clean_auroc,
        fraction_auroc=replicates.fraction_auroc,
        corrupt_auroc=replicates.corrupt_auroc,
        shift_auroc=replicates.shift_auroc,
        calibration_error=replicates.calibration_error - bias,
    )


def replicate_axis_errors(
    cases: Mapping[str, TaskCases],
    case_draws: Mapping[str, np.ndarray],
    shift_draws: Mapping[str, np.ndarray],
    seed_counts: np.ndarray,
    centre: bool = True,
) -> np.ndarray:
    """(B, E, 4) axis errors in :data:`crs.scoring.formula.AXES` order, by the one mapping
    :func:`crs.scoring.formula.axis_errors_from_metrics` under the replicates' seed counts (B, S).

    ``centre``: centre the calibration replicates on the every-case-once value
    (:func:`centre_calibration`); off for the every-case-once evaluation itself.
    """
    metrics = []
    for task in sorted(cases):
        replicates = task_metrics(cases[task], case_draws[task], shift_draws.get(task))
        if centre:
            task_cases = cases[task]
            identity_shift = None if task_cases.shift_labels is None else np.ones((1, len(task_cases.shift_labels)))
            identity = task_metrics(task_cases, np.ones((1, len(task_cases.labels))), identity_shift)
            replicates = centre_calibration(replicates, identity)
        metrics.append(replicates)
    return axis_errors_from_metrics(metrics, np.asarray(seed_counts, dtype=np.float64))


# --- the two-level bootstrap --------------------------------------------------------------------------


def _check_alignment(
    cases: Mapping[str, TaskCases], encoders: list[str], tasks: list[str], seeds: list
) -> None:
    if sorted(cases) != tasks:
        raise CaseBootstrapError(
            f"per-case predictions cover tasks {sorted(cases)} but the run records {tasks}"
        )
    for task, task_cases in cases.items():
        if list(task_cases.encoders) != encoders:
            raise CaseBootstrapError(
                f"task {task!r}: predictions for encoders {list(task_cases.encoders)}, run records for {encoders}"
            )
        if [int(s) for s in task_cases.seeds] != [int(s) for s in seeds]:
            raise CaseBootstrapError(
                f"task {task!r}: predictions have seeds {list(task_cases.seeds)} but the run records {list(seeds)}"
            )


def draw_cases(
    cases: Mapping[str, TaskCases], n_boot: int, rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Stratified case counts per task (and per shift target), tasks in name order."""
    case_draws, shift_draws = {}, {}
    for task in sorted(cases):
        task_cases = cases[task]
        case_draws[task] = stratified_case_counts(
            case_strata(task_cases.labels, task_cases.kind), n_boot, rng
        )
        if task_cases.shift_labels is not None:
            shift_draws[task] = stratified_case_counts(
                case_strata(task_cases.shift_labels, task_cases.kind), n_boot, rng
            )
    return case_draws, shift_draws


def paired_seed_case_bootstrap(
    measurements: Measurements, cases: Mapping[str, TaskCases], point: PointEstimate
) -> bootstrap.BootstrapResult:
    """Two-level paired bootstrap: seed multiset x stratified test-case resample per replicate.

    ``point`` is the run records' point estimate (made once, :func:`crs.scoring.formula.point_estimate`):
    its table, reference rule, error floor and settings are reused, never recomputed. The leader,
    tier rule and columns are those of :func:`crs.scoring.bootstrap.paired_seed_bootstrap`; the seed
    draws are identical to its draws for the same ``seed`` (case draws come from a second stream),
    so the two can be compared replicate by replicate. Adds ``crs_from_predictions``: the CRS
    recomputed from the stored per-case predictions with every seed and case once (differs from
    ``crs`` only by their float16/float32 storage). Returns a
    :class:`crs.scoring.bootstrap.BootstrapResult` with ``level="seed+case"`` and
    ``axis_error_replicates``: every axis's error in every replicate.
    """
    settings = point.settings
    encoders = point.encoders
    seeds = list(measurements.seeds)
    _check_alignment(cases, encoders, list(measurements.tasks), seeds)

    seed_counts = bootstrap.draw_seed_counts(len(seeds), settings.n_boot, settings.seed)
    case_draws, shift_draws = draw_cases(cases, settings.n_boot, np.random.default_rng([1, settings.seed]))
    every_axis = replicate_axis_errors(cases, case_draws, shift_draws, seed_counts)
    crs = point.score(every_axis)["crs"]

    identity_cases = {task: np.ones((1, len(c.labels))) for task, c in cases.items()}
    identity_shift = {
        task: np.ones((1, len(c.shift_labels))) for task, c in cases.items() if c.shift_labels is not None
    }
    identity = replicate_axis_errors(cases, identity_cases, identity_shift, np.ones((1, len(seeds))), centre=False)
    from_predictions = point.score(identity)["crs"][0]

    result = bootstrap.summarise_bootstrap(
        point.table, crs, seed_counts, seeds, n_boot=settings.n_boot, alpha=settings.alpha, seed=settings.seed,
        level="seed+case", case_draws=case_draws, shift_case_draws=shift_draws,
        axis_error_replicates=bootstrap.axis_error_frames(every_axis, encoders),
    )  # fmt: skip
    result.table["crs_from_predictions"] = from_predictions
    gap = float(np.nanmax(np.abs(result.table["crs_from_predictions"] - result.table["crs"])))
    if gap > PREDICTION_TOLERANCE:
        warnings.warn(
            f"the CRS recomputed from the stored per-case predictions differs from the run records' by up to "
            f"{gap:.3f} (column crs_from_predictions): predictions stored at low precision (float16 probabilities "
            "tie near 0 and 1) shift the case-level intervals; store them as float32 or log-probabilities",
            stacklevel=2,
        )
    return result
