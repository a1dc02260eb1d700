"""AUROC and DeLong influences of sorted score keys, one pass per sorted row, compiled by numba.

:func:`crs.probes.selection.batched_auroc_influence` sorts each (probe, column) row of scores once,
as 64-bit keys: the score's order-preserving 32-bit key, then the label bit, then the case's
position. Its numpy path then makes about fifteen passes over (rows x cases) memory to turn the
sorted keys into AUROC and per-case influences: unpack the label and the case, a running count of
positives, the tie groups, the influence formulas, a scatter back into case order and a sum over the
columns. This kernel walks each sorted row twice instead, in the L1 cache: once to count the
(negative, positive) pairs (ties one half), once to add each case's influence into its per-case
total; both walks keep running counts, with no division per case. The AUROC is bit for bit the
numpy path's (both are an exact count of half pairs over the same product); the influences agree
to rounding (tested to 1e-12).

numba is optional (the ``fast`` extra), as for :mod:`crs.axes.weighted_kernel`, whose switch
(``CRS_NO_NUMBA=1``) turns this kernel off too.
"""

from __future__ import annotations

import numpy as np

from crs.axes.weighted_kernel import available, numba

__all__ = ["available", "sorted_rows"]


def _tie_run_python(low, high, r, start):  # pragma: no cover - compiled; plain Python works, slowly
    """The run of equal scores from ``start`` in row ``r``: its end (exclusive) and its positives."""
    n = high.shape[1]
    end = start + 1
    while end < n and high[r, end] == high[r, start]:
        end += 1
    positives = 0
    for q in range(start, end):
        positives += np.int64(low[r, q] >> 31)
    return end, positives


_tie_run = numba.njit(nogil=True, cache=True, inline="always")(_tie_run_python) if numba is not None else _tie_run_python


def _sorted_rows(low, high, columns, influence, auroc, totals):  # pragma: no cover - compiled; plain Python works, slowly
    """AUROC of each sorted row of keys into ``auroc`` (rows,), and with ``influence`` each case's
    DeLong influence added into ``totals[row // columns, case]``.

    ``high`` (rows, n) uint32: the scores' order-preserving keys, ascending per row; ``low``: the
    label bit (bit 31) and the case's position (bits 0-30) of the same keys. Row ``r`` is column
    ``r % columns`` of batch item ``r // columns``. A row with no positive or no negative case gets
    NaN and adds nothing. Influence at a positive: (share of negatives below it, ties one half, - A)
    / n_pos; at a negative: (share of positives above it, ties one half, - A) / n_neg. An untied
    case (the common one) takes a branch-free step; a run of equal scores is counted as a group.
    """
    rows, n = high.shape
    for r in range(rows):
        negatives = 0
        twice_pairs = 0  # twice the (negative below, positive) pairs, a tied pair counting one
        p = 0
        while p < n:
            if p + 1 < n and high[r, p + 1] == high[r, p]:  # a run of equal scores
                end, run_positive = _tie_run(low, high, r, p)
                run_negative = end - p - run_positive
                twice_pairs += run_positive * (2 * negatives + run_negative)
                negatives += run_negative
                p = end
            else:
                label = np.int64(low[r, p] >> 31)
                twice_pairs += 2 * label * negatives
                negatives += 1 - label
                p += 1
        positives = n - negatives
        if positives == 0 or negatives == 0:
            auroc[r] = np.nan
            continue
        area = (0.5 * twice_pairs) / (float(positives) * float(negatives))
        auroc[r] = area
        if not influence:
            continue
        item = r // columns
        inverse_positives = 1.0 / positives
        inverse_negatives = 1.0 / negatives
        below = 0.0  # negatives below the current case
        above = float(positives)  # positives at or above it
        p = 0
        while p < n:
            if p + 1 < n and high[r, p + 1] == high[r, p]:  # a run: its own cases count one half
                end, run_positive = _tie_run(low, high, r, p)
                run_negative = end - p - run_positive
                at_positive = ((below + 0.5 * run_negative) * inverse_negatives - area) * inverse_positives
                at_negative = ((above - 0.5 * run_positive) * inverse_positives - area) * inverse_negatives
                for q in range(p, end):
                    key = low[r, q]
                    totals[item, key & 0x7FFFFFFF] += at_positive if key >> 31 else at_negative
                below += run_negative
                above -= run_positive
                p = end
            else:
                key = low[r, p]
                label = np.int64(key >> 31)
                at_positive = (below * inverse_negatives - area) * inverse_positives
                at_negative = (above * inverse_positives - area) * inverse_negatives
                totals[item, key & 0x7FFFFFFF] += at_positive if label else at_negative
                below += 1 - label
                above -= label
                p += 1


sorted_rows = numba.njit(nogil=True, cache=True)(_sorted_rows) if numba is not None else None
"""The compiled :func:`_sorted_rows` (None without numba)."""
