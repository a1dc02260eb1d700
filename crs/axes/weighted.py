"""AUROC and binned ECE under many replicate weight vectors at once: the bootstrap's metrics.

A bootstrap replicate is a vector of case weights (how often each test case was drawn), so every
metric here is a weighted statistic and no resampled array is ever built. With whole-number
weights a value equals the unweighted metric of :mod:`crs.axes` on the data set in which case i
appears ``weights[b, i]`` times; at unit weights it equals :mod:`crs.axes` (oracle-tested against
scikit-learn, heavy ties included).

AUROC is the weighted Mann-Whitney statistic, ties counting one half (the ROC trapezoid):
``sum_{i pos, j neg} w_i w_j ([s_i > s_j] + [s_i = s_j] / 2) / (W_pos W_neg)``. Each score column
is sorted once, whatever the number of replicates; per replicate the cost is a few passes over
the cases: gather the larger class side's weights in score order, a running sum over them (in
chunks, so numpy adds whole replicate rows at once), and for each case of the smaller side the
running sum just below its score and just above it (their mean is the tie's half). Replicates are
processed in blocks, so the working memory is O(block x cases), the block sized from a byte
budget; nothing of size cases x tie runs is ever built. Whole-number weights whose replicate
totals fit 16 bits run in uint16 (exact); any other weights in float64.

Many groups of cases at once (patient subgroups): :func:`weighted_auroc_by_group` and
:func:`weighted_debiased_ece_by_group` score every group of several groupings in one pass over the
cases, equal to the one-group metrics on each group's own cases.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from crs.axes import weighted_kernel
from crs.axes._inputs import AxisInputError, binary_pair, check_kind, multiclass_pair, multilabel_pair
from crs.axes.calibration import calibrated_ece_moments, calibration_error, calibration_error_moments

DEFAULT_BLOCK_BYTES = 32 * 2**20
"""Working memory of one replicate block of one score column (a few cache-sized arrays)."""

N_BINS = 15
"""ECE bins, as :func:`crs.axes.ece` by default (equal width over [0, 1])."""

_MAX_BLOCK = 256
"""Replicates per block at most: wider blocks gained nothing in the benchmark (a case's row already spans cache lines)."""

_SCAN_CHUNK = 64
"""Rows added per running-sum step: the running sum is m - 1 whole-array adds plus a short carry."""

_UINT16_TOTAL = np.iinfo(np.uint16).max


@dataclass(frozen=True)
class ReplicateWeights:
    """Replicate case weights laid out for the weighted metrics, prepared once and shared by every column.

    ``blocks``: case-major (N + 1, b) arrays of consecutive replicates, C-contiguous, so one case's
    weights in a block are one contiguous row; the last row is zeros (the sorts point padding at
    it). ``exact_uint16``: whole-number weights whose every replicate total fits 16 bits, stored
    as uint16 (running sums stay exact integers); otherwise float64.
    """

    blocks: tuple[np.ndarray, ...]
    n_replicates: int
    n_cases: int
    exact_uint16: bool

    def rows(self) -> list[slice]:
        """The replicate rows each block holds, in block order."""
        out, start = [], 0
        for block in self.blocks:
            out.append(slice(start, start + block.shape[1]))
            start += block.shape[1]
        return out

    def as_float(self) -> np.ndarray:
        """The weights as a (B, N) float64 array."""
        if not self.blocks:
            return np.zeros((0, self.n_cases))
        return np.concatenate([block[:-1].T for block in self.blocks], axis=0).astype(np.float64)


def prepare_weights(
    weights: np.ndarray | ReplicateWeights, block_bytes: int = DEFAULT_BLOCK_BYTES, columns: np.ndarray | None = None
) -> ReplicateWeights:
    """Check (B, N) non-negative finite weights and lay them out in replicate blocks.

    A block holds as many replicates as keep its (cases x block) working arrays (three on the numpy
    path, the block alone with the compiled kernel) within ``block_bytes`` (and at most 256); an already prepared :class:`ReplicateWeights` is returned as it is.
    ``columns`` (N,): the case weights are ``weights[:, columns]`` (a cluster bootstrap's (B, groups)
    counts and each case's group), laid out block by block without the (B, N) array: the same result.
    """
    if isinstance(weights, ReplicateWeights):
        return weights
    weights = np.asarray(weights)
    if weights.ndim == 1:
        weights = weights[None, :]
    if weights.ndim != 2:
        raise AxisInputError(f"weights must be (replicates, cases), got shape {weights.shape}")
    if columns is not None:
        columns = np.asarray(columns)
        if columns.ndim != 1 or columns.dtype.kind not in "iu" or (
            len(columns) and (columns.min() < 0 or columns.max() >= weights.shape[1])
        ):
            raise AxisInputError(f"columns must be (N,) positions among the weights' {weights.shape[1]} columns")
    if weights.dtype.kind not in "biuf":
        raise AxisInputError(f"weights must be numbers, got dtype {weights.dtype}")
    if weights.dtype.kind == "f" and not np.isfinite(weights).all():
        raise AxisInputError("weights contain NaN or infinity; pass finite non-negative case weights")
    if weights.size and weights.min() < 0:
        raise AxisInputError("weights must be non-negative (how often, or how much, each case counts)")
    n_boot, n_cases = weights.shape if columns is None else (len(weights), len(columns))
    whole = weights.dtype.kind in "biu" or bool(np.all(weights == np.round(weights)))
    if columns is None:
        totals = weights.sum(axis=1, dtype=np.float64)
    else:  # each column's weight times how many cases carry it
        totals = weights.astype(np.float64) @ np.bincount(columns, minlength=weights.shape[1]).astype(np.float64)
    exact_uint16 = whole and (n_boot == 0 or float(totals.max()) <= _UINT16_TOTAL)
    dtype = np.dtype(np.uint16) if exact_uint16 else np.dtype(np.float64)
    arrays = 1 if weighted_kernel.available() else 3  # the compiled kernel's only working array is the block
    block = int(
        max(1, min(max(n_boot, 1), _MAX_BLOCK, block_bytes // max(arrays * (n_cases + 1) * dtype.itemsize, 1)))
    )
    blocks = []
    for start in range(0, n_boot, block):
        part = weights[start : start + block]
        laid_out = np.zeros((n_cases + 1, len(part)), dtype=dtype)
        laid_out[:n_cases] = part.T if columns is None else np.ascontiguousarray(part.T)[columns]
        blocks.append(laid_out)
    return ReplicateWeights(tuple(blocks), n_boot, n_cases, exact_uint16)


# --- AUROC ----------------------------------------------------------------------------------------


def _places(prefix_lengths: np.ndarray, n_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the prefix sum over the first k sorted cases lies: (row in the chunk-major running sums, chunk)."""
    chunk = prefix_lengths // _SCAN_CHUNK
    return (prefix_lengths % _SCAN_CHUNK) * n_chunks + chunk, chunk


@dataclass(frozen=True)
class _ClassSides:
    """The two class sides of one label column: the larger is summed in score order, the smaller looked up.

    Shared by every score column with the same labels, so its weights are gathered once per block.
    """

    scan_rows: np.ndarray
    other_rows: np.ndarray
    scan_is_negative: bool
    covers_all: bool  # every case is on one side (no ignored case), so side totals come from block totals


def _class_sides_of(positive: np.ndarray, negative: np.ndarray) -> _ClassSides | None:
    positives, negatives = np.flatnonzero(positive), np.flatnonzero(negative)
    if len(positives) == 0 or len(negatives) == 0:
        return None
    scan_is_negative = len(negatives) >= len(positives)
    scan, other = (negatives, positives) if scan_is_negative else (positives, negatives)
    index = np.int32 if len(positive) < 2**31 - 1 else np.int64
    return _ClassSides(
        scan.astype(index), other.astype(index), scan_is_negative, len(scan) + len(other) == len(positive)
    )


@dataclass(frozen=True)
class _SortedColumn:
    """One score column's sort, made once and used by every replicate.

    The summed side's case at position p = 1..n in score order (0 is the empty prefix) is laid out
    chunk-major, at row (p % m) * n_chunks + p // m, so the running sum within chunks is m - 1 adds
    of whole contiguous rows. ``gather`` names the case feeding each laid-out row (N, the zero row,
    for position 0 and the padding). For each case of the looked-up side, ``below`` places the
    prefix over summed cases scoring strictly lower; for the cases whose score ties a summed one
    (``tied``), the prefix over cases scoring lower or equal is added too: the two prefixes, added,
    count each tie one half, twice over.
    """

    gather: np.ndarray
    n_chunks: int
    total: tuple[np.ndarray, np.ndarray]
    below: tuple[np.ndarray, np.ndarray]
    tied: np.ndarray
    tied_below: tuple[np.ndarray, np.ndarray]
    tied_not_above: tuple[np.ndarray, np.ndarray]


def _sort_column(scores: np.ndarray, sides: _ClassSides) -> _SortedColumn:
    n_cases = len(scores)
    order = np.argsort(scores[sides.scan_rows])
    scan_sorted = scores[sides.scan_rows][order]
    other_scores = scores[sides.other_rows]
    index = sides.scan_rows.dtype
    below = np.searchsorted(scan_sorted, other_scores, side="left").astype(index)
    not_above = np.searchsorted(scan_sorted, other_scores, side="right").astype(index)
    n_positions = len(order) + 1
    n_chunks = -(-n_positions // _SCAN_CHUNK)
    by_position = np.full(n_chunks * _SCAN_CHUNK, n_cases, dtype=index)
    by_position[1:n_positions] = sides.scan_rows[order]
    tied = np.flatnonzero(not_above != below).astype(index)
    return _SortedColumn(
        gather=by_position.reshape(n_chunks, _SCAN_CHUNK).T.ravel(),
        n_chunks=n_chunks,
        total=_places(np.array([len(order)]), n_chunks),
        below=_places(below, n_chunks),
        tied=tied,
        tied_below=_places(below[tied], n_chunks),
        tied_not_above=_places(not_above[tied], n_chunks),
    )


def _running_sums(block: np.ndarray, column: _SortedColumn) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums of the summed side's weights: (within-chunk sums, chunk-major rows; carry per chunk)."""
    within = np.take(block, column.gather, axis=0)
    by_step = within.reshape(_SCAN_CHUNK, -1)
    for step in range(1, _SCAN_CHUNK):
        np.add(by_step[step], by_step[step - 1], out=by_step[step])
    carry = np.zeros((column.n_chunks, block.shape[1]), dtype=block.dtype)
    np.cumsum(by_step[-1].reshape(column.n_chunks, -1)[:-1], axis=0, out=carry[1:])
    return within, carry


def _prefix_at(within: np.ndarray, carry: np.ndarray, place: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    found = np.take(within, place[0], axis=0)
    found += np.take(carry, place[1], axis=0)
    return found


def _block_auroc(
    column: _SortedColumn,
    sides: _ClassSides,
    block: np.ndarray,
    other_weights: np.ndarray,
    total_other: np.ndarray,
    block_total: np.ndarray,
) -> np.ndarray:
    """(b,) AUROC of one sorted column under one block of replicates; NaN where a side weighs 0."""
    within, carry = _running_sums(block, column)
    total_scan = (
        block_total - total_other
        if sides.covers_all
        else _prefix_at(within, carry, column.total)[0].astype(np.float64)
    )
    # twice the weighted count of (looked-up, summed) pairs with the summed case lower, ties one half
    twice = 2.0 * np.einsum(
        "ob,ob->b", _prefix_at(within, carry, column.below), other_weights, dtype=np.float64
    )
    if len(column.tied):
        tied_span = _prefix_at(within, carry, column.tied_not_above) - _prefix_at(
            within, carry, column.tied_below
        )
        twice += np.einsum("ob,ob->b", tied_span, other_weights[column.tied], dtype=np.float64)
    pairs = total_scan * total_other
    numerator = 0.5 * twice if sides.scan_is_negative else pairs - 0.5 * twice
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, numerator / np.where(pairs > 0, pairs, 1.0), np.nan)


@dataclass(frozen=True)
class _ScoreOrder:
    """One column's scorable cases in score order, their side, and where each run of equal scores ends."""

    order: np.ndarray
    positive: np.ndarray
    run_ends: np.ndarray


def _score_order(scores: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> _ScoreOrder:
    """The order the kernel walks. Where positives outnumber negatives the sides swap and the order
    reverses (AUROC is unchanged: P(s+ > s-) is P(-s- > -s+)), so the many cases take the kernel's
    cheaper add-only path."""
    rows = np.flatnonzero(positive | negative)
    ranked = np.argsort(scores[rows])  # ties are walked as runs, so the order within a run does not matter
    order = rows[ranked]
    flip = positive.sum() > negative.sum()
    if flip:
        order = order[::-1]
    ordered = scores[order]
    run_ends = np.append(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, len(order)).astype(np.int64)
    return _ScoreOrder(np.ascontiguousarray(order, dtype=np.int64), (negative if flip else positive)[order], run_ends)


def _fused_block_auroc(found: _ScoreOrder, block: np.ndarray) -> np.ndarray:
    """(b,) AUROC of one ordered column under one replicate block, by the compiled kernel; NaN where a side weighs 0."""
    kernel = weighted_kernel.sorted_pass
    assert kernel is not None
    n_rep = block.shape[1]
    exact = block.dtype == np.uint16  # replicate totals fit 16 bits: int32 sums are exact
    accumulate = np.dtype(np.int32) if exact else np.dtype(np.float64)
    below, run_positive, run_negative, total_positive = (np.empty(n_rep, dtype=accumulate) for _ in range(4))
    twice = np.empty(n_rep, dtype=np.int64 if exact else np.float64)
    kernel(block, found.order, found.positive, found.run_ends, below, run_positive, run_negative, twice, total_positive)
    pairs = total_positive.astype(np.float64) * below.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, 0.5 * twice / np.where(pairs > 0, pairs, 1.0), np.nan)


def _auroc_columns_fused(
    columns: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], weights: ReplicateWeights, workers: int
) -> np.ndarray:
    """:func:`_auroc_columns` by the compiled one-pass kernel (:mod:`crs.axes.weighted_kernel`): the same values.

    Each column is sorted once; per replicate block, ``workers`` threads share the columns (the kernel
    releases the GIL).
    """
    out = np.full((weights.n_replicates, len(columns)), np.nan)
    scorable = [c for c, (_, positive, negative) in enumerate(columns) if positive.any() and negative.any()]
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 and len(scorable) > 1 else None
    try:
        mapper = pool.map if pool is not None else map
        def order_of(c: int) -> _ScoreOrder:
            return _score_order(*columns[c])

        orders = dict(zip(scorable, mapper(order_of, scorable), strict=True))
        for rows, block in zip(weights.rows(), weights.blocks, strict=True):

            def one(c: int, block: np.ndarray = block) -> np.ndarray:
                return _fused_block_auroc(orders[c], block)

            for c, values in zip(scorable, mapper(one, scorable), strict=True):
                out[rows, c] = values
    finally:
        if pool is not None:
            pool.shutdown()
    return out


def _auroc_columns(
    columns: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], weights: ReplicateWeights, workers: int
) -> np.ndarray:
    """(B, C) AUROC of (scores, positive, negative) columns.

    With numba installed (and not switched off), :func:`_auroc_columns_fused` computes the same values
    in one pass per column and block; the numpy path below is the fallback.

    Every column is sorted once; then, block by block, the looked-up side's weights are gathered
    once per distinct label column and each score column is summed. ``workers`` threads share the
    columns (numpy releases the GIL in its loops).
    """
    if weighted_kernel.available():
        return _auroc_columns_fused(columns, weights, workers)
    out = np.full((weights.n_replicates, len(columns)), np.nan)
    label_keys: dict[bytes, int] = {}
    side_of_column: list[int] = []
    for _, positive, negative in columns:
        key = np.packbits(positive).tobytes() + np.packbits(negative).tobytes()
        side_of_column.append(label_keys.setdefault(key, len(label_keys)))
    distinct = {index: columns[c] for c, index in reversed(list(enumerate(side_of_column)))}
    sides = {
        index: _class_sides_of(positive, negative) for index, (_, positive, negative) in distinct.items()
    }
    scorable = [c for c in range(len(columns)) if sides[side_of_column[c]] is not None]

    def sort(c: int) -> _SortedColumn:
        side = sides[side_of_column[c]]
        assert side is not None
        return _sort_column(columns[c][0], side)

    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 and len(scorable) > 1 else None
    try:
        mapper = pool.map if pool is not None else map
        sorted_columns = dict(zip(scorable, mapper(sort, scorable), strict=True))
        for rows, block in zip(weights.rows(), weights.blocks, strict=True):
            block_total = block.sum(axis=0, dtype=np.float64)
            shared = {}
            for index, side in sides.items():
                if side is not None and any(side_of_column[c] == index for c in scorable):
                    other_weights = np.take(block, side.other_rows, axis=0)
                    shared[index] = (other_weights, other_weights.sum(axis=0, dtype=np.float64))

            def one(
                c: int,
                block: np.ndarray = block,
                block_total: np.ndarray = block_total,
                shared: dict = shared,
            ) -> np.ndarray:
                side = sides[side_of_column[c]]
                assert side is not None
                other_weights, total_other = shared[side_of_column[c]]
                return _block_auroc(sorted_columns[c], side, block, other_weights, total_other, block_total)

            for c, values in zip(scorable, mapper(one, scorable), strict=True):
                out[rows, c] = values
    finally:
        if pool is not None:
            pool.shutdown()
    return out


def _check_scores(scores: np.ndarray, n_cases: int) -> np.ndarray:
    scores = np.asarray(scores)
    if scores.dtype.kind not in "biuf":
        raise AxisInputError(f"scores must be numbers, got dtype {scores.dtype}")
    if scores.shape[0] != n_cases:
        raise AxisInputError(f"scores have {scores.shape[0]} cases but the weights {n_cases}")
    if scores.dtype.kind == "f" and np.isnan(scores).any():
        raise AxisInputError("scores contain NaN; every case needs a score")
    return scores


def weighted_auroc(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | ReplicateWeights,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    workers: int = 1,
) -> np.ndarray:
    """Binary AUROC of every score column under every replicate's case weights.

    ``scores`` (N,) or (N, K), one AUROC per column; ``labels`` 0/1 (N,) shared by every column or
    (N, K) one per column, NaN marking a case that counts on neither side; ``weights`` (B, N) (or
    prepared by :func:`prepare_weights`). Returns (B,) or (B, K); NaN where a replicate gives one
    side no weight. Scores are compared in their own dtype (float32 keys are fine).
    """
    prepared = prepare_weights(weights, block_bytes)
    scores = _check_scores(scores, prepared.n_cases)
    labels = np.asarray(labels, dtype=np.float64)
    columns_2d = scores.ndim == 2
    score_columns = scores if columns_2d else scores[:, None]
    if labels.shape not in (score_columns.shape, (len(score_columns),)):
        raise AxisInputError(
            f"labels {labels.shape} do not fit scores {scores.shape}: give (N,) or one column per score"
        )
    known = labels[~np.isnan(labels)]
    if not np.isin(known, (0.0, 1.0)).all():
        raise AxisInputError("labels must hold 0, 1 or NaN (ignored)")
    if labels.ndim == 1:  # one label vector shared by every column: its sides are found once
        sides = (labels == 1.0, labels == 0.0)
        columns = [(score_columns[:, k], *sides) for k in range(score_columns.shape[1])]
    else:
        columns = [
            (score_columns[:, k], labels[:, k] == 1.0, labels[:, k] == 0.0) for k in range(score_columns.shape[1])
        ]
    out = _auroc_columns(columns, prepared, workers)
    return out if columns_2d else out[:, 0]


def _groupings(groupings: Sequence[np.ndarray], n_cases: int) -> tuple[np.ndarray, list[int]]:
    """(N, A) group codes numbered over all groupings (-1: none) and each grouping's group count."""
    sizes, columns, offset = [], [], 0
    for codes in groupings:
        codes = np.asarray(codes, dtype=np.int64)
        if codes.shape != (n_cases,) or (codes.size and codes.min() < -1):
            raise AxisInputError(f"each grouping must be (N,) = ({n_cases},) group codes 0..G-1, or -1 for none")
        sizes.append(int(codes.max(initial=-1)) + 1)
        columns.append(np.where(codes >= 0, codes + offset, -1))
        offset += sizes[-1]
    return np.stack(columns, axis=1) if columns else np.zeros((n_cases, 0), dtype=np.int64), sizes


def weighted_auroc_by_group(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | ReplicateWeights,
    groupings: Sequence[np.ndarray],
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> list[np.ndarray]:
    """:func:`weighted_auroc` of every score column on every group of every grouping: (B, M, G) per grouping.

    ``scores`` (N, M); ``labels`` (N,) 0, 1 or NaN (no side); ``groupings``: (N,) codes 0..G-1 or -1
    for a case in no group. Group g's AUROC is :func:`weighted_auroc` with every case outside g on no
    side, which is the AUROC on the group's own cases. With numba, each column is sorted once and one
    compiled walk per replicate block scores every group of every grouping
    (:func:`crs.axes.weighted_kernel.grouped_sorted_pass`: a case's weights are read once); the pair
    counts are the same whole numbers, so the values equal the one-group-at-a-time path below, which
    runs without numba.
    """
    prepared = prepare_weights(weights, block_bytes)
    scores = _check_scores(scores, prepared.n_cases)
    if scores.ndim != 2:
        raise AxisInputError(f"scores must be (N, M) columns, got shape {scores.shape}")
    labels = np.asarray(labels, dtype=np.float64)
    if labels.shape != (prepared.n_cases,):
        raise AxisInputError(f"labels must be (N,) = ({prepared.n_cases},), got {labels.shape}")
    if not np.isin(labels[~np.isnan(labels)], (0.0, 1.0)).all():
        raise AxisInputError("labels must hold 0, 1 or NaN (ignored)")
    codes, sizes = _groupings(groupings, prepared.n_cases)
    n_columns = scores.shape[1]
    kernel = weighted_kernel.grouped_sorted_pass if weighted_kernel.available() else None
    if kernel is None:
        return [
            np.stack(
                [weighted_auroc(scores, np.where(codes[:, a] == offset + g, labels, np.nan), prepared)
                 for g in range(size)] or [np.zeros((prepared.n_replicates, n_columns))], axis=-1,
            )[:, :, :size]
            for a, (offset, size) in enumerate(zip(np.cumsum([0, *sizes[:-1]]), sizes, strict=True))
        ]
    n_groups = sum(sizes)
    out = np.full((prepared.n_replicates, n_columns, n_groups), np.nan)
    grouped = (codes >= 0).any(axis=1)
    positive, negative = (labels == 1.0) & grouped, (labels == 0.0) & grouped
    touched, is_touched = np.empty(n_groups, dtype=np.int64), np.empty(n_groups, dtype=bool)
    for m in range(n_columns):
        found = _score_order(scores[:, m], positive, negative)
        ordered_groups = np.ascontiguousarray(codes[found.order])
        for rows, block in zip(prepared.rows(), prepared.blocks, strict=True):
            exact = block.dtype == np.uint16  # replicate totals fit 16 bits: int32 sums are exact
            accumulate = np.dtype(np.int32) if exact else np.dtype(np.float64)
            shape = (n_groups, block.shape[1])
            below, run_positive, run_negative, total_positive = (np.empty(shape, dtype=accumulate) for _ in range(4))
            twice = np.empty(shape, dtype=np.int64 if exact else np.float64)
            kernel(block, found.order, found.positive, found.run_ends, ordered_groups, below, run_positive,
                   run_negative, twice, total_positive, touched, is_touched)
            pairs = total_positive.astype(np.float64) * below.astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[rows, m] = np.where(pairs > 0, 0.5 * twice / np.where(pairs > 0, pairs, 1.0), np.nan).T
    bounds = np.cumsum([0, *sizes])
    return [out[:, :, bounds[a]:bounds[a + 1]] for a in range(len(sizes))]


def _class_sides(
    y: np.ndarray, scores: np.ndarray, kind: str
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(scores, positive, negative) per class as :func:`crs.axes.per_class_auroc` defines them."""
    check_kind(kind)
    if kind == "binary":
        y_b, s_b = binary_pair(y, scores)
        return [(s_b, y_b == 1.0, y_b == 0.0)]
    if kind == "multilabel":
        y_m, s_m = multilabel_pair(y, scores)
        return [(s_m[:, k], y_m[:, k] == 1.0, y_m[:, k] == 0.0) for k in range(y_m.shape[1])]
    y_c, s_c = multiclass_pair(y, scores)
    return [(s_c[:, k], y_c == k, y_c != k) for k in range(s_c.shape[1])]


def weighted_per_class_auroc(
    y: np.ndarray,
    scores: np.ndarray,
    kind: str,
    weights: np.ndarray | ReplicateWeights,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    workers: int = 1,
) -> np.ndarray:
    """One-vs-rest AUROC per class (label) under every replicate, shape (B, K), as :func:`crs.axes.per_class_auroc`.

    A class with no positive or no negative weight in a replicate is NaN there (absent, not 0).
    Scores keep their dtype (the axes' float64 casts are not needed to sort them).
    """
    prepared = prepare_weights(weights, block_bytes)
    _check_scores(scores, prepared.n_cases)
    sides = _class_sides(y, scores, kind)
    raw = np.asarray(scores)
    if kind == "binary":
        raw = raw[:, 1] if raw.ndim == 2 else raw
        columns = [(raw, sides[0][1], sides[0][2])]
    else:
        columns = [(raw[:, k], positive, negative) for k, (_, positive, negative) in enumerate(sides)]
    return _auroc_columns(columns, prepared, workers)


def nanmean_classes(per_class: np.ndarray) -> np.ndarray:
    """Macro mean over the last axis of the classes that can be scored; NaN where none can."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate where no class can be scored -> NaN
        return np.nanmean(per_class, axis=-1)


def weighted_macro_auroc(
    y: np.ndarray,
    scores: np.ndarray,
    kind: str,
    weights: np.ndarray | ReplicateWeights,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    workers: int = 1,
) -> np.ndarray:
    """Macro one-vs-rest AUROC (B,) over the classes each replicate can score, as :func:`crs.axes.auroc`."""
    return nanmean_classes(
        weighted_per_class_auroc(y, scores, kind, weights, block_bytes=block_bytes, workers=workers)
    )


# --- ECE ------------------------------------------------------------------------------------------


def _bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-width bins exactly as :func:`crs.axes.ece`: b_i <= c < b_(i+1), c = 1 in the last bin."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)


def _known_columns(known: np.ndarray | None, confidence_2d: np.ndarray) -> np.ndarray:
    """Which (case, column) entries count: all, or ``known`` broadcast to the columns."""
    if known is None:
        return np.ones(confidence_2d.shape, dtype=bool)
    return np.broadcast_to(np.asarray(known, dtype=bool).reshape(confidence_2d.shape[0], -1), confidence_2d.shape)


def _per_bin_sums(
    confidence_2d: np.ndarray, known_2d: np.ndarray, values: np.ndarray, n_bins: int, prepared: ReplicateWeights
):
    """Per replicate block: (rows, weighted sum of ``values`` per confidence bin (b, C, bins), weighted
    count of the known cases (b, C)). One (N x C bins) design, one matrix product per block."""
    n_cases, n_columns = confidence_2d.shape
    bins = _bin_index(np.where(known_2d, confidence_2d, 0.0), n_bins)
    design = np.zeros((n_cases, n_columns * n_bins))
    design[np.arange(n_cases)[:, None], np.arange(n_columns)[None, :] * n_bins + bins] = values
    known_float = known_2d.astype(np.float64)
    for rows, block in zip(prepared.rows(), prepared.blocks, strict=True):
        block_float = block[:-1].T.astype(np.float64)  # (b, N)
        yield rows, (block_float @ design).reshape(-1, n_columns, n_bins), block_float @ known_float


def _binned_inputs(confidence, correct, weights, n_bins: int, block_bytes: int):
    """The binned calibration errors' checked inputs: the prepared weights, ``confidence`` and
    ``correct`` as (N, K) float64 columns, and whether they came as columns."""
    if n_bins < 1:
        raise AxisInputError(f"n_bins must be a positive integer, got {n_bins}")
    prepared = prepare_weights(weights, block_bytes)
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    columns_2d = confidence.ndim == 2
    confidence_2d = confidence if columns_2d else confidence[:, None]
    correct_2d = correct if columns_2d else correct[:, None]
    if confidence_2d.shape != correct_2d.shape or confidence_2d.shape[0] != prepared.n_cases:
        raise AxisInputError(
            f"confidence {confidence.shape} and correct {correct.shape} must match and have {prepared.n_cases} cases"
        )
    return prepared, confidence_2d, correct_2d, columns_2d


def weighted_binned_ece(
    confidence: np.ndarray,
    correct: np.ndarray,
    weights: np.ndarray | ReplicateWeights,
    known: np.ndarray | None = None,
    n_bins: int = N_BINS,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> np.ndarray:
    """Equal-width binned ECE of every column under every replicate's weights.

    ``confidence`` and ``correct`` (N,) or (N, K); ``known`` (same shape, optional) marks the cases
    that count. ECE = sum over bins |sum_i w_i (correct_i - confidence_i)| / sum_i w_i, which at
    unit weights is crs.axes' sum of share x |accuracy - confidence|. Returns (B,) or (B, K);
    NaN where a replicate gives the known cases no weight. One matrix product per replicate block:
    (block x N) weights times an (N x bins) residual design per column.
    """
    prepared, confidence_2d, correct_2d, columns_2d = _binned_inputs(confidence, correct, weights, n_bins, block_bytes)
    out = np.empty((prepared.n_replicates, confidence_2d.shape[1]))
    known_2d = _known_columns(known, confidence_2d)
    residual = np.where(known_2d, correct_2d - confidence_2d, 0.0)
    for rows, gaps, total in _per_bin_sums(confidence_2d, known_2d, residual, n_bins, prepared):
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(
                total > 0, np.abs(gaps).sum(axis=-1) / np.where(total > 0, total, 1.0), np.nan
            )
    return out if columns_2d else out[:, 0]


def weighted_ece(
    y: np.ndarray,
    probs: np.ndarray,
    kind: str,
    weights: np.ndarray | ReplicateWeights,
    n_bins: int = N_BINS,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> np.ndarray:
    """ECE (B,) under every replicate, as :func:`crs.axes.ece` with equal-width bins.

    multiclass/ordinal: top label; binary: positive-class probability against the label;
    multilabel: each label over its known cases, then the mean over the labels a replicate can score.
    """
    check_kind(kind)
    if kind == "binary":
        y_b, p_b = binary_pair(y, probs)
        return weighted_binned_ece(p_b, y_b, weights, None, n_bins, block_bytes=block_bytes)
    if kind == "multilabel":
        y_m, p_m = multilabel_pair(y, probs)
        known = ~np.isnan(y_m)
        per_label = weighted_binned_ece(
            p_m, np.nan_to_num(y_m), weights, known, n_bins, block_bytes=block_bytes
        )
        return nanmean_classes(per_label)
    y_c, p_c = multiclass_pair(y, probs)
    correct = (p_c.argmax(axis=1) == y_c).astype(np.float64)
    return weighted_binned_ece(p_c.max(axis=1), correct, weights, None, n_bins, block_bytes=block_bytes)


def weighted_calibrated_ece(
    confidence: np.ndarray,
    weights: np.ndarray | ReplicateWeights,
    known: np.ndarray | None = None,
    n_bins: int = N_BINS,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> np.ndarray:
    """Expected binned ECE of a calibrated probe with these confidences, under every replicate's weights.

    The bias :func:`crs.axes.debiased_ece` removes, on the resampled test set: per bin the weighted
    sum of c (1 - c), then :func:`crs.axes.calibrated_ece_moments`. Same layout and memory as
    :func:`weighted_binned_ece` (one (N x bins) design per column, one matrix product per block).
    With whole-number weights it equals the unweighted value on the repeated arrays.
    """
    if n_bins < 1:
        raise AxisInputError(f"n_bins must be a positive integer, got {n_bins}")
    prepared = prepare_weights(weights, block_bytes)
    confidence = np.asarray(confidence, dtype=np.float64)
    columns_2d = confidence.ndim == 2
    confidence_2d = confidence if columns_2d else confidence[:, None]
    if confidence_2d.shape[0] != prepared.n_cases:
        raise AxisInputError(f"confidence {confidence.shape} must have {prepared.n_cases} cases")
    out = np.empty((prepared.n_replicates, confidence_2d.shape[1]))
    known_2d = _known_columns(known, confidence_2d)
    variance = np.where(known_2d, confidence_2d * (1.0 - confidence_2d), 0.0)
    for rows, per_bin, total in _per_bin_sums(confidence_2d, known_2d, variance, n_bins, prepared):
        out[rows] = calibrated_ece_moments(per_bin, total)[0]
    return out if columns_2d else out[:, 0]


def weighted_calibration_error(
    confidence: np.ndarray,
    correct: np.ndarray,
    weights: np.ndarray | ReplicateWeights,
    known: np.ndarray | None = None,
    n_bins: int = N_BINS,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """The debiased calibration error of every column under every replicate's weights: (B,) or (B, K).

    Per bin the weighted count, residual sum and residual square sum (one matrix product per
    block over a design holding all three), then
    :func:`crs.axes.calibration_error_moments`. Frequency weights: with whole-number weights it
    equals the unweighted value on the repeated arrays (the bins are equal-width, so a repeated case
    stays in its bin). Returns (error, standard error).
    """
    prepared, confidence_2d, correct_2d, columns_2d = _binned_inputs(confidence, correct, weights, n_bins, block_bytes)
    n_columns = confidence_2d.shape[1]
    error = np.empty((prepared.n_replicates, n_columns))
    standard_error = np.empty((prepared.n_replicates, n_columns))
    known_2d = _known_columns(known, confidence_2d)
    residual = np.where(known_2d, correct_2d - confidence_2d, 0.0)
    # residual, its square and the known cases side by side: one (N x 3C bins) design, one product a block
    tripled = np.concatenate([confidence_2d] * 3, axis=1)
    tripled_known = np.concatenate([known_2d] * 3, axis=1)
    values = np.concatenate([residual, residual * residual, known_2d.astype(np.float64)], axis=1)
    for rows, sums, _ in _per_bin_sums(tripled, tripled_known, values, n_bins, prepared):
        error[rows], standard_error[rows] = calibration_error_moments(
            sums[:, 2 * n_columns :], sums[:, :n_columns], sums[:, n_columns : 2 * n_columns]
        )
    if columns_2d:
        return error, standard_error
    return error[:, 0], standard_error[:, 0]


def _calibration_columns(
    y: np.ndarray, probs: np.ndarray, kind: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """What the calibration errors compare, as (N, K) float64 columns: (confidence, correct, known).

    multiclass/ordinal: the top label (one column); binary: the positive-class probability (one
    column); multilabel: each label, ``known`` marking its labelled cases (None: every case counts).
    """
    check_kind(kind)
    if kind == "binary":
        y_b, p_b = binary_pair(y, probs)
        return np.asarray(p_b, dtype=np.float64)[:, None], np.asarray(y_b, dtype=np.float64)[:, None], None
    if kind == "multilabel":
        y_m, p_m = multilabel_pair(y, probs)
        return np.asarray(p_m, dtype=np.float64), np.nan_to_num(np.asarray(y_m, dtype=np.float64)), ~np.isnan(y_m)
    y_c, p_c = multiclass_pair(y, probs)
    correct = (p_c.argmax(axis=1) == y_c).astype(np.float64)
    return np.asarray(p_c.max(axis=1), dtype=np.float64)[:, None], correct[:, None], None


def weighted_debiased_ece(
    y: np.ndarray,
    probs: np.ndarray,
    kind: str,
    weights: np.ndarray | ReplicateWeights,
    n_bins: int = N_BINS,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> np.ndarray:
    """:func:`crs.axes.debiased_ece` (B,) under every replicate: the per-bin debiased root-mean-square error.

    multiclass/ordinal: top label; binary: positive-class probability; multilabel: per label over its
    known cases, then the mean over the labels a replicate can score.
    """
    prepared = prepare_weights(weights, block_bytes)
    confidence, correct, known = _calibration_columns(y, probs, kind)
    per_column = weighted_calibration_error(confidence, correct, prepared, known, n_bins)[0]
    return nanmean_classes(per_column) if kind == "multilabel" else per_column[:, 0]


# --- many groups of cases at once ----------------------------------------------------------------


def weighted_cell_sums(
    cells: np.ndarray,
    values: np.ndarray,
    n_cells: int,
    weights: np.ndarray | ReplicateWeights,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> np.ndarray:
    """(B, n_cells, V) weighted sum of the values in each cell under every replicate.

    ``cells`` (N, K) integers in [0, n_cells), -1 where an entry belongs to no cell; ``values``
    (N, K, V): cell c of replicate b sums ``weights[b, case] * values[case, k, v]`` over the entries
    with ``cells[case, k] == c``. One pass over the cases per replicate block: the compiled
    :func:`crs.axes.weighted_kernel.cell_sums` with numba, otherwise one sparse (cells x cases)
    product per block (scipy). Whole-number values with whole-number weights give exact sums.
    """
    prepared = prepare_weights(weights, block_bytes)
    cells = np.ascontiguousarray(cells, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if cells.ndim != 2 or values.shape[:2] != cells.shape or values.ndim != 3 or len(cells) != prepared.n_cases:
        raise AxisInputError(
            f"cells {cells.shape} and values {values.shape} must be (N, K) and (N, K, V) with N = {prepared.n_cases}"
        )
    if cells.size and (cells.max() >= n_cells or cells.min() < -1):
        raise AxisInputError(f"cells must lie in [0, {n_cells}) or be -1 (no cell)")
    n_values = values.shape[2]
    out = np.empty((prepared.n_replicates, n_cells, n_values))
    kernel = weighted_kernel.cell_sums if weighted_kernel.available() else None
    design = None
    if kernel is None:
        from scipy import sparse

        case, column = np.nonzero(cells >= 0)
        rows = (cells[case, column][:, None] * n_values + np.arange(n_values)).ravel()
        design = sparse.csr_matrix(
            (values[case, column].ravel(), (rows, np.repeat(case, n_values))), shape=(n_cells * n_values, len(cells))
        )
    for rows_of_block, block in zip(prepared.rows(), prepared.blocks, strict=True):
        if kernel is not None:
            sums = np.zeros((n_cells, n_values, block.shape[1]))
            kernel(block, cells, values, sums)
        else:
            assert design is not None
            sums = (design @ block[:-1].astype(np.float64)).reshape(n_cells, n_values, -1)
        out[rows_of_block] = sums.transpose(2, 0, 1)
    return out


MAX_JOINT_GROUPS = 256
"""Joint groups (distinct combinations of the groupings) summed in one pass at most; beyond, one pass per grouping."""


def weighted_debiased_ece_by_group(
    y: np.ndarray,
    probs: np.ndarray,
    kind: str,
    weights: np.ndarray | ReplicateWeights,
    groupings: Sequence[np.ndarray],
    n_bins: int = N_BINS,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> list[np.ndarray]:
    """:func:`weighted_debiased_ece` of every group of every grouping, (B, G) per grouping.

    ``groupings``: (N,) integer codes, the case's group 0..G-1 (G = the largest code + 1), or -1 for
    a case in none. Group g's column equals :func:`weighted_debiased_ece` on its own cases (the other
    cases weigh 0 there) up to the order of summation. The bins' weighted count, residual sum and
    residual square sum are taken once for the joint groups (each distinct combination of the
    groupings' codes) in one pass over the cases, then added up per group: a case costs one weight
    read and K x 3 adds whatever the number of groupings and groups.
    """
    prepared = prepare_weights(weights, block_bytes)
    codes = np.stack([np.asarray(g, dtype=np.int64) for g in groupings], axis=1) if groupings else np.zeros((0, 0))
    if len(groupings) == 0:
        return []
    if len(codes) != prepared.n_cases:
        raise AxisInputError(f"groupings have {len(codes)} cases but the weights {prepared.n_cases}")
    joint_codes, joint = np.unique(codes, axis=0, return_inverse=True)
    joint = joint.ravel()
    if len(joint_codes) > MAX_JOINT_GROUPS and len(groupings) > 1:
        return [
            weighted_debiased_ece_by_group(y, probs, kind, prepared, [g], n_bins)[0] for g in groupings
        ]
    confidence, correct, known = _calibration_columns(y, probs, kind)
    known_2d = _known_columns(known, confidence)
    # exactly the single-group estimator's inputs (weighted_calibration_error): residual, its square, known
    residual = np.where(known_2d, correct - confidence, 0.0)
    bins = _bin_index(np.where(known_2d, confidence, 0.0), n_bins)
    values = np.stack([residual, residual * residual, known_2d.astype(np.float64)], axis=-1)
    n_columns = confidence.shape[1]
    cells = (joint[:, None] * n_columns + np.arange(n_columns)) * n_bins + bins
    cells[(codes < 0).all(axis=1)] = -1  # in no group of any grouping
    sums = weighted_cell_sums(cells, values, len(joint_codes) * n_columns * n_bins, prepared)
    sums = sums.reshape(prepared.n_replicates, len(joint_codes), n_columns, n_bins, 3)
    out = []
    for a in range(codes.shape[1]):
        n_groups = int(codes[:, a].max(initial=-1)) + 1
        found = np.full((prepared.n_replicates, n_groups), np.nan)
        for g in range(n_groups):
            group = sums[:, joint_codes[:, a] == g].sum(axis=1)  # (B, K, bins, 3)
            per_column = calibration_error(group[..., 2], group[..., 0], group[..., 1])
            found[:, g] = nanmean_classes(per_column) if kind == "multilabel" else per_column[:, 0]
        out.append(found)
    return out
