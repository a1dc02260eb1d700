"""The softmax link's probabilities and order-exact rank keys in one pass per row, compiled by numba.

:func:`crs.probes.base.rank_scores` turns a probe stack's float64 decision values into
probabilities and relative log-odds keys (:class:`crs.probes.base.PredictedScores`); its numpy
path makes about twenty passes over (probes x cases x classes) memory. This kernel makes one, with
each row's K values in registers: the same formulas (the top class's "others" summed without it),
so the two agree to rounding (tested to 1e-12 in the keys before their float32 rounding).

numba is optional (the ``fast`` extra); ``CRS_NO_NUMBA=1`` turns this kernel off with the others.
"""

from __future__ import annotations

import math

import numpy as np

from crs.axes.weighted_kernel import available, numba

__all__ = ["available", "softmax_rows"]


def _softmax_rows_python(decision, log_prior, log_prior_others, movable, log_prior_odds, exceed_movable,
                         probs, ovr, exceed):  # pragma: no cover - compiled; plain Python works, slowly
    """Fill ``probs`` (P, N, K), ``ovr`` (P, N, K) float32 and, when it has columns, ``exceed``
    (P, N, K - 1) float32 from ``decision`` (P, N, K) and the probe's log prior (P, K) (-inf:
    a class it cannot predict), log of the others' prior (P, K), which keys can move (P, K), the
    ordinal log prior odds (P, K - 1) and which ordinal keys can move (P, K - 1)."""
    P, N, K = decision.shape
    ordinal = exceed.shape[2] > 0
    t = np.empty(K)
    v = np.empty(K)  # the row's logits, each summed once (the same sums: the results are unchanged)
    for p in range(P):
        for i in range(N):
            m = -np.inf
            for k in range(K):
                v[k] = decision[p, i, k] + log_prior[p, k]
                if v[k] > m:
                    m = v[k]
            total = 0.0
            tops = 0
            for k in range(K):
                if v[k] == m:
                    tops += 1
                t[k] = math.exp(v[k] - m) if v[k] > -np.inf else 0.0
                total += t[k]
            non_top = 0.0
            for k in range(K):
                if v[k] != m:
                    non_top += t[k]
            for k in range(K):
                probs[p, i, k] = t[k] / total
                if movable[p, k]:
                    others = non_top + (tops - 1) if v[k] == m else total - t[k]
                    ovr[p, i, k] = decision[p, i, k] - m - math.log(others) + log_prior_others[p, k]
                else:
                    ovr[p, i, k] = 0.0
            if ordinal:
                below = 0.0
                for k in range(K - 1):
                    below += t[k]
                    above = 0.0
                    for j in range(k + 1, K):
                        above += t[j]
                    if exceed_movable[p, k]:
                        exceed[p, i, k] = math.log(above) - math.log(below) - log_prior_odds[p, k]
                    else:
                        exceed[p, i, k] = 0.0


softmax_rows = (
    numba.njit(nogil=True, cache=True, fastmath=False)(_softmax_rows_python) if numba is not None else None
)
