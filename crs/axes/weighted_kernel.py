"""The weighted AUROC of one sorted score column in one pass per replicate block, and weighted sums per
cell (:func:`cell_sums`, the binned calibration errors of many groups at once), compiled by numba.

:mod:`crs.axes.weighted` sums replicate weights with whole-array numpy steps: a gather, a running
sum, look-ups and a product, each a pass over (cases x replicates) memory. This kernel fuses them:
it walks the cases once in score order and, per case, adds the case's row of replicate weights
(contiguous in the case-major block) into per-replicate accumulators that stay in the L1 cache.
Ties are walked as runs: a run's positive weight meets the negative weight below it in full and the
run's own negative weight by half (the ROC trapezoid), exactly as the numpy path counts them.

numba is optional (the ``fast`` extra): without it :mod:`crs.axes.weighted` keeps its numpy path,
which gives the same numbers (tested). ``available()`` says which one runs.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

numba: ModuleType | None
try:  # optional: numba compiles the fused loop; without it the numpy path runs
    import numba as _numba

    numba = _numba
except ImportError:  # pragma: no cover - exercised where numba is not installed
    numba = None

DISABLE_ENV = "CRS_NO_NUMBA"
"""Set to 1 to run the numpy path although numba is installed (for comparing the two)."""


def available() -> bool:
    """True when numba is importable and not switched off by ``CRS_NO_NUMBA=1``."""
    return numba is not None and os.environ.get(DISABLE_ENV, "") not in ("1", "true", "yes")


def _sorted_pass(block, order, positive, run_ends, below, run_positive, run_negative, twice_pairs, total_positive):  # pragma: no cover
    """Per replicate column of ``block``: twice the weighted count of (positive, negative) pairs with
    the negative lower, ties one half (``twice_pairs``), the positive total and (left in ``below``)
    the negative total.

    ``order``: the scorable cases in score order; ``positive``: their side; ``run_ends``: the end
    (exclusive) of each run of equal scores. ``below``, ``run_positive``, ``run_negative`` and
    ``total_positive`` are scratch of the accumulation dtype (int32 for uint16 weights: exact, and
    integer adds vectorise best; float64 otherwise), ``twice_pairs`` int64 or float64; all are
    zeroed here. Compiled by numba; plain Python gives the same result, slowly.
    """
    n_rep = block.shape[1]
    below[:] = 0
    twice_pairs[:] = 0
    total_positive[:] = 0
    start = 0
    for run in range(run_ends.shape[0]):
        end = run_ends[run]
        if end - start == 1:  # no tie: a positive meets all negative weight below it
            case = order[start]
            if positive[start]:
                for r in range(n_rep):
                    weight = block[case, r]
                    twice_pairs[r] += 2 * weight * below[r]
                    total_positive[r] += weight
            else:
                for r in range(n_rep):
                    below[r] += block[case, r]
        else:  # a run of equal scores: its negatives count one half against its positives
            run_positive[:] = 0
            run_negative[:] = 0
            for p in range(start, end):
                case = order[p]
                if positive[p]:
                    for r in range(n_rep):
                        run_positive[r] += block[case, r]
                else:
                    for r in range(n_rep):
                        run_negative[r] += block[case, r]
            for r in range(n_rep):
                twice_pairs[r] += run_positive[r] * (2 * below[r] + run_negative[r])
                total_positive[r] += run_positive[r]
                below[r] += run_negative[r]
        start = end


sorted_pass = numba.njit(nogil=True, cache=True)(_sorted_pass) if numba is not None else None
"""The compiled :func:`_sorted_pass` (None without numba); releases the GIL, so threads share columns."""


def _grouped_sorted_pass(  # pragma: no cover
    block, order, positive, run_ends, groups, below, run_positive, run_negative, twice_pairs, total_positive, touched,
    is_touched,
):
    """:func:`_sorted_pass` for many groups of cases in one walk: per group g and replicate column, the
    same sums as :func:`_sorted_pass` on the group's cases alone.

    ``groups`` (len(order), A): each ordered case's group under each of A groupings (numbered over all
    groupings, 0..G-1), -1 for none. The accumulators are (G, b) arrays; ``touched`` (G,) int64 and
    ``is_touched`` (G,) bool are scratch for the groups met in a run of ties. A case's weight row is
    read once, whatever the number of groupings, and the sort is shared by all of them.
    """
    n_rep = block.shape[1]
    n_groupings = groups.shape[1]
    below[:] = 0
    twice_pairs[:] = 0
    total_positive[:] = 0
    run_positive[:] = 0
    run_negative[:] = 0
    is_touched[:] = False
    start = 0
    for run in range(run_ends.shape[0]):
        end = run_ends[run]
        if end - start == 1:  # no tie: a positive meets all negative weight of its groups below it
            case = order[start]
            for a in range(n_groupings):
                g = groups[start, a]
                if g < 0:
                    continue
                if positive[start]:
                    for r in range(n_rep):
                        weight = block[case, r]
                        twice_pairs[g, r] += 2 * weight * below[g, r]
                        total_positive[g, r] += weight
                else:
                    for r in range(n_rep):
                        below[g, r] += block[case, r]
        else:  # a run of equal scores: within each group, its negatives count one half against its positives
            n_touched = 0
            for p in range(start, end):
                case = order[p]
                for a in range(n_groupings):
                    g = groups[p, a]
                    if g < 0:
                        continue
                    if not is_touched[g]:
                        is_touched[g] = True
                        touched[n_touched] = g
                        n_touched += 1
                    if positive[p]:
                        for r in range(n_rep):
                            run_positive[g, r] += block[case, r]
                    else:
                        for r in range(n_rep):
                            run_negative[g, r] += block[case, r]
            for t in range(n_touched):
                g = touched[t]
                for r in range(n_rep):
                    twice_pairs[g, r] += run_positive[g, r] * (2 * below[g, r] + run_negative[g, r])
                    total_positive[g, r] += run_positive[g, r]
                    below[g, r] += run_negative[g, r]
                    run_positive[g, r] = 0
                    run_negative[g, r] = 0
                is_touched[g] = False
        start = end


grouped_sorted_pass = numba.njit(nogil=True, cache=True)(_grouped_sorted_pass) if numba is not None else None
"""The compiled :func:`_grouped_sorted_pass` (None without numba); releases the GIL."""


def _cell_sums(block, cells, values, out):  # pragma: no cover
    """Add, per replicate column of ``block``, each case's ``values`` into its cells: ``out[c, v, r] +=
    block[case, r] * values[case, k, v]`` for ``c = cells[case, k]`` (``-1``: no cell).

    ``block`` (N + 1, b) case-major replicate weights; ``cells`` (N, K) int64; ``values`` (N, K, V)
    float64; ``out`` (n_cells, V, b) float64, added to (zero it first). One pass over the cases: each
    case's weight row is read once and converted once, then added into at most K x V rows of ``out``
    (contiguous over the replicates, so the adds vectorise). Cases are added in order, so the sums do
    not depend on the thread count.
    """
    n_rep = block.shape[1]
    weight = np.empty(n_rep)
    for case in range(cells.shape[0]):
        for r in range(n_rep):
            weight[r] = block[case, r]
        for k in range(cells.shape[1]):
            cell = cells[case, k]
            if cell < 0:
                continue
            for v in range(values.shape[2]):
                value = values[case, k, v]
                for r in range(n_rep):
                    out[cell, v, r] += weight[r] * value


cell_sums = numba.njit(nogil=True, cache=True)(_cell_sums) if numba is not None else None
"""The compiled :func:`_cell_sums` (None without numba); releases the GIL."""
