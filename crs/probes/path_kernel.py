"""One fused pass of the torch backend's float32 objective over a subset's rotated rows, by numba.

:meth:`crs.probes.torch_batched.GroupProblem.value_and_grad` needs, per subset, the logits Z W of
its rows for every (C, output) column, the loss and its residual R, and R^T Z. Through torch these
are two skinny products (5 to 40 columns) that each stream the rows, plus the elementwise work on
the logits in memory between them. This kernel reads four rows at a time once: their logits, loss
and residuals, then their residual-weighted rows into the gradient, while the rows are in the L1
cache. The logits are float32 sums, as torch's are; the gradient's running sum over the rows and
the loss are float64 (a float32 running sum over 100k rows loses more than torch's blocked sums,
and the path's L-BFGS then needs more steps near its tolerance).

These fits only choose C and start the float64 polish (decision 0029), which is what the records
report, so their last bits may differ from torch's (and from machine to machine, as BLAS kernels
regroup their sums): the polish's stopping rule and the C tie rule carry the contract
(docs/reproducibility.md). Decision 0104 has the measurements.

numba is optional (the ``fast`` extra); ``CRS_NO_NUMBA=1`` turns this kernel off with the others,
and torch's products run instead.
"""

from __future__ import annotations

import math

import numpy as np

from crs.axes.weighted_kernel import available, numba

__all__ = ["available", "group_pass"]


def _group_pass_python(Z, columns, targets, row_weights, class_mask, sigmoid, inv_n, grad, loss):  # pragma: no cover - compiled
    """Add one subset's data term over its rows ``Z`` (n, R) float32 to ``grad`` (Cb K, R) float64
    and ``loss`` (Cb,) float64, for the weight columns ``columns`` (Cb K, R) float32, one row per
    (C, output), output fastest.

    Sigmoid link (``sigmoid`` True): loss sum_ik w_ik (softplus(z) - y z) with ``row_weights``
    (n, K), residual (sigmoid(z) - y) w. Softmax link: loss (logsumexp(z + mask) - sum_k y_k z_k) / n
    with ``class_mask`` (K,) (0 or -inf), ``inv_n`` = 1 / n, residual (softmax - y) / n. The same
    formulas as :meth:`GroupProblem._data_block` (tested against it)."""
    n, R = Z.shape
    CbK = columns.shape[0]
    K = targets.shape[1]
    Cb = CbK // K
    work = np.zeros((4, CbK), dtype=np.float32)
    for t0 in range(0, n, 4):
        used = min(4, n - t0)
        x0 = Z[t0]
        x1 = Z[min(t0 + 1, n - 1)]  # a short last tile repeats the last row; its residuals are 0
        x2 = Z[min(t0 + 2, n - 1)]
        x3 = Z[min(t0 + 3, n - 1)]
        for j in range(CbK):
            c = columns[j]
            s0 = np.float32(0.0)
            s1 = np.float32(0.0)
            s2 = np.float32(0.0)
            s3 = np.float32(0.0)
            for d in range(R):
                cd = c[d]
                s0 += x0[d] * cd
                s1 += x1[d] * cd
                s2 += x2[d] * cd
                s3 += x3[d] * cd
            work[0, j] = s0
            work[1, j] = s1
            work[2, j] = s2
            work[3, j] = s3
        for r in range(4):
            if r >= used:
                for j in range(CbK):
                    work[r, j] = 0.0
                continue
            i = t0 + r
            if sigmoid:
                for j in range(CbK):
                    k = j % K
                    z = np.float64(work[r, j])
                    w = np.float64(row_weights[i, k])
                    y = np.float64(targets[i, k])
                    e = math.exp(-abs(z))  # shared by softplus and the sigmoid
                    loss[j // K] += w * (max(z, 0.0) + math.log1p(e) - y * z)
                    p = 1.0 / (1.0 + e) if z >= 0 else e / (1.0 + e)
                    work[r, j] = (p - y) * w
            else:
                for cb in range(Cb):
                    top = -np.inf
                    for k in range(K):
                        z = np.float64(work[r, cb * K + k]) + class_mask[k]
                        if z > top:
                            top = z
                    total = 0.0
                    picked = 0.0
                    for k in range(K):
                        z = np.float64(work[r, cb * K + k]) + class_mask[k]
                        total += math.exp(z - top)
                        if targets[i, k] > 0:
                            picked += z * targets[i, k]
                    log_norm = top + math.log(total)
                    loss[cb] += (log_norm - picked) * inv_n
                    for k in range(K):
                        z = np.float64(work[r, cb * K + k]) + class_mask[k]
                        work[r, cb * K + k] = (math.exp(z - log_norm) - targets[i, k]) * inv_n
        for j in range(CbK):
            r0 = work[0, j]
            r1 = work[1, j]
            r2 = work[2, j]
            r3 = work[3, j]
            g = grad[j]
            for d in range(R):  # four rows' share in float32, their running sum in float64
                g[d] += np.float64((r0 * x0[d] + r1 * x1[d]) + (r2 * x2[d] + r3 * x3[d]))


group_pass = (
    numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})(_group_pass_python)
    if numba is not None else None
)
"""The compiled :func:`_group_pass_python` (None without numba)."""
