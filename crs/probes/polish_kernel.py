"""One fused pass of the polish's objective over a block of rows, compiled by numba.

:meth:`crs.probes.polish.ExactProblem.value_and_grad` needs, per block of the subset's rows, the
logits X W, the loss and its residual R, and R^T X. Its numpy path converts each float16 block to
float64 (64 MB at 8,192 x 1,024) and reads it twice through BLAS. This kernel reads a block once,
four rows at a time: it copies the four rows to float64 (a 32 KB tile in the L1 cache), computes
their K logits, loss and residuals there, and adds their residual-weighted rows into the gradient
before the next four. Every sum is accumulated in float64; the rows may be float32 (exact copies
of the cache's float16), so the block is half the bytes of a float64 one. Decision 0100 has the
measurements.

The products are compiled with reassociation allowed, so their sums are grouped as the host's
vector width lays them out: bit for bit the same on one machine, regrouped across machines, exactly
as BLAS kernels regroup them. The polish's stopping rule, not the order of the sums, is what makes
the probes agree across machines (docs/reproducibility.md).

Rows larger than the polish keeps converted (the 10, 25 and 100 % fractions at CheXpert size) are
read as the cache's float16 itself: their bits index a table of the 65,536 float16 values in float64
(:data:`HALF_TO_DOUBLE`, 512 KB), so the tile holds the same float64 numbers as from a float32 copy,
bit for bit, without converting each block into a buffer first at every evaluation (decision 0104).

numba is optional (the ``fast`` extra); ``CRS_NO_NUMBA=1`` turns this kernel off with the others.
"""

from __future__ import annotations

import math

import numpy as np

from crs.axes.weighted_kernel import available, numba

__all__ = ["HALF_TO_DOUBLE", "available", "fused_pass", "half_bits"]

HALF_TO_DOUBLE = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float64)
"""Every float16 value in float64, indexed by its bits (exact: float16 is a subset of float64)."""


def half_bits(rows: np.ndarray) -> np.ndarray:
    """float16 ``rows`` as their uint16 bits (a view), for :func:`fused_pass` with :data:`HALF_TO_DOUBLE`."""
    return rows.view(np.uint16)


def _fill_row(tile, r, rows, i, table):  # pragma: no cover - compiled by the overload below
    """tile[r] = row i of ``rows`` in float64: float rows as they are, uint16 rows (float16 bits)
    through ``table``."""
    tile[r] = table[rows[i]] if rows.dtype == np.uint16 else rows[i]


if numba is not None:
    from numba.core import types as _types
    from numba.extending import overload as _overload

    @_overload(_fill_row, jit_options={"nogil": True})
    def _fill_row_compiled(tile, r, rows, i, table):
        if isinstance(rows.dtype, _types.Integer):
            def from_bits(tile, r, rows, i, table):
                for d in range(rows.shape[1]):
                    tile[r, d] = table[rows[i, d]]
            return from_bits

        def as_is(tile, r, rows, i, table):
            for d in range(rows.shape[1]):
                tile[r, d] = rows[i, d]
        return as_is


def _fused_pass_python(rows, table, scaled_t, intercept, targets, row_weights, class_mask, sigmoid, inv_n,
                       grad, residual_sum, row_loss):  # pragma: no cover - compiled; plain Python works, slowly
    """Add one block's data term into ``grad`` (K, D) and ``residual_sum`` (K,), and write each
    row's loss into ``row_loss`` (n,) (the caller sums them pairwise, as numpy does: a running sum
    over 100k rows loses digits that the line search reads).

    ``rows`` (n, D) float32 or float64, or uint16: float16 bits, read through ``table``
    (:data:`HALF_TO_DOUBLE`; unused for float rows); ``scaled_t`` (K, D) float64: the weights on the raw rows;
    ``intercept`` (K,). Sigmoid link (``sigmoid`` True): loss sum_ik w_ik (log(1 + e^z) - y z)
    with ``row_weights`` (n, K), residual (p - y) w. Softmax link: loss (log sum_k e^z - z_y) / n
    with ``class_mask`` (K,) (0 or -inf) added to the logits and ``inv_n`` = 1 / n, residual
    (p - y) / n. The same formulas as the numpy path, so the two agree to rounding (tested)."""
    n, D = rows.shape
    K = scaled_t.shape[0]
    tile = np.zeros((4, D))
    logits = np.empty((4, K))
    residual = np.zeros((4, K))
    for t0 in range(0, n, 4):
        used = min(4, n - t0)
        for r in range(4):
            if r < used:
                _fill_row(tile, r, rows, t0 + r, table)
            else:
                for d in range(D):
                    tile[r, d] = 0.0
        x0 = tile[0]
        x1 = tile[1]
        x2 = tile[2]
        x3 = tile[3]
        for k in range(K):
            wk = scaled_t[k]
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for d in range(D):
                wd = wk[d]
                s0 += x0[d] * wd
                s1 += x1[d] * wd
                s2 += x2[d] * wd
                s3 += x3[d] * wd
            logits[0, k] = s0 + intercept[k]
            logits[1, k] = s1 + intercept[k]
            logits[2, k] = s2 + intercept[k]
            logits[3, k] = s3 + intercept[k]
        for r in range(4):
            if r >= used:
                for k in range(K):
                    residual[r, k] = 0.0
                continue
            i = t0 + r
            value = 0.0
            if sigmoid:
                for k in range(K):
                    z = logits[r, k]
                    w = row_weights[i, k]
                    e = math.exp(-abs(z))  # shared by log(1 + e^z) and the sigmoid
                    value += w * (max(z, 0.0) + math.log1p(e) - targets[i, k] * z)
                    p = 1.0 / (1.0 + e) if z >= 0 else e / (1.0 + e)
                    residual[r, k] = (p - targets[i, k]) * w
            else:
                top = -np.inf
                for k in range(K):
                    z = logits[r, k] + class_mask[k]
                    logits[r, k] = z
                    if z > top:
                        top = z
                total = 0.0
                picked = 0.0
                for k in range(K):
                    z = logits[r, k] - top
                    e = math.exp(z)
                    residual[r, k] = e
                    total += e
                    if targets[i, k] > 0:
                        picked += z
                value += (math.log(total) - picked) * inv_n
                for k in range(K):
                    residual[r, k] = (residual[r, k] / total - targets[i, k]) * inv_n
            row_loss[i] = value
        for k in range(K):
            r0 = residual[0, k]
            r1 = residual[1, k]
            r2 = residual[2, k]
            r3 = residual[3, k]
            residual_sum[k] += (r0 + r1) + (r2 + r3)
            g = grad[k]
            for d in range(D):
                g[d] += (r0 * x0[d] + r1 * x1[d]) + (r2 * x2[d] + r3 * x3[d])


fused_pass = (
    numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})(_fused_pass_python)
    if numba is not None else None
)
"""The compiled :func:`_fused_pass_python` (None without numba)."""
