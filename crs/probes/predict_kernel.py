"""The float64 logits of float16 rows relative to a reference row, compiled by numba.

:meth:`crs.probes.base.LinearProbeSet.predict_scores` computes ``(X - origin) @ W`` in float64
for every condition stage 2 evaluates (decision 0029): at CheXpert size 65 conditions of 38,117
float16 rows x 1,024 for a handful of outputs. Its numpy path converts each piece of rows to a
float64 copy, subtracts the origin and multiplies through BLAS; the product is a few FLOPs per
byte, so the conversion and the writes are the cost. This kernel reads the cache's float16 rows
as their bits through a table of every float16 value in float64 (:data:`HALF_TO_DOUBLE`, as the
polish does, decision 0104), centres each row once into a float64 row in the L1 cache and takes all the outputs' dot
products from it before the next: no converted copy of the rows.

Every sum is accumulated in float64. The dot products are compiled with reassociation allowed, so
their sums are grouped as the host's vector width lays them out: bit for bit the same on one
machine, regrouped across machines, exactly as BLAS kernels regroup them (and as the polish's
kernel does). They differ from the BLAS product's by the rounding of a float64 sum (~1e-16
relative, tested). A version summing in a written-out order (four lanes, compiled without
reassociation) was not vectorised by the compiler and was slower than the numpy path; decision
0111 has the measurements.

:func:`widened_logits` widens each row once for the probes' logits AND zero-shot's dot products
and sums of squares (decision 0116): the unit's zero-shot columns ride along in the probes' call;
its logits are :func:`centered_logits`' bit for bit. Zero-shot's own pass calls it with no logits
(:func:`dots_and_squares_half`), so both passes share one compiled arithmetic.

numba is optional (the ``fast`` extra); ``CRS_NO_NUMBA=1`` turns these kernels off with the others.
"""

from __future__ import annotations

import numpy as np

from crs.axes.weighted_kernel import available, numba
from crs.probes.polish_kernel import HALF_TO_DOUBLE

__all__ = [
    "HALF_TO_DOUBLE", "available", "centered_logits", "centered_logits_half", "dots_and_squares_half", "widened_logits",
    "widened_logits_half",
]


def _centered_logits_python(bits, table, origin, weights_t, out):  # pragma: no cover - compiled; plain Python works, slowly
    """out[i, j] = sum_d (table[bits[i, d]] - origin[d]) * weights_t[j, d], in float64: row i
    centred once into a float64 row in the L1 cache, then all J dot products from it.

    ``bits`` (n, D) uint16: float16 rows as their bits; ``table`` (65,536,) float64
    (:data:`HALF_TO_DOUBLE`); ``origin`` (D,) float64; ``weights_t`` (J, D) float64 (C order);
    ``out`` (n, J) float64."""
    n, D = bits.shape
    J = weights_t.shape[0]
    x = np.zeros(D)
    for i in range(n):
        row = bits[i]
        for d in range(D):
            x[d] = table[row[d]] - origin[d]
        for j in range(J):
            w = weights_t[j]
            s = 0.0
            for d in range(D):
                s += x[d] * w[d]
            out[i, j] = s

centered_logits = (
    numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})(_centered_logits_python) if numba is not None else None
)
"""The compiled :func:`_centered_logits_python` (None without numba)."""


def centered_logits_half(rows: np.ndarray, origin: np.ndarray, stacked: np.ndarray) -> np.ndarray:
    """``(rows - origin) @ stacked`` (n, J) float64 for float16 ``rows`` (n, D), through the
    compiled kernel (call only when :func:`available`). ``origin`` (D,) and ``stacked`` (D, J)
    are converted to float64 once here."""
    assert centered_logits is not None
    rows = np.ascontiguousarray(rows)
    out = np.empty((len(rows), stacked.shape[1]))
    centered_logits(
        rows.view(np.uint16), HALF_TO_DOUBLE, np.ascontiguousarray(origin, dtype=np.float64),
        np.ascontiguousarray(stacked.T, dtype=np.float64), out,
    )
    return out


def _widened_logits_python(bits, table, origin, weights_t, out, columns_t, dots, squares):  # pragma: no cover - compiled
    """Zero-shot's dot products and sums of squares and :func:`_centered_logits_python`'s logits from
    ONE widening of each row (decision 0116): row i widened once into a float64 row in the L1 cache,
    its sum of squares and its M dot products with ``columns_t`` taken from the raw row (zero-shot's
    cosines before the division by the rows' norms), then the row centred in place and its J dot
    products with ``weights_t`` taken (the probes' logits).

    The probes' loops are :func:`_centered_logits_python`'s as written, so the logits are its logits
    bit for bit (tested): ``table[b] - origin[d]`` is one float64 subtraction whether the widened
    value is kept first or not. J = 0 (zero-shot's own pass, :func:`dots_and_squares_half`) skips
    the centring; the dot products of a row do not depend on J or on the other columns, so the
    fused probe pass and zero-shot's own pass give the same cosines bit for bit. M = 0 takes no
    dot product.
    Arguments as the two kernels': ``bits`` (n, D) uint16; ``table`` :data:`HALF_TO_DOUBLE`;
    ``origin`` (D,); ``weights_t`` (J, D); ``out`` (n, J); ``columns_t`` (M, D); ``dots`` (n, M);
    ``squares`` (n,); all float64, C order."""
    n, D = bits.shape
    J = weights_t.shape[0]
    M = columns_t.shape[0]
    x = np.zeros(D)
    for i in range(n):
        row = bits[i]
        for d in range(D):
            x[d] = table[row[d]]
        s = 0.0
        for d in range(D):  # its own loop: summed in the gather's loop, the sum was one serial chain
            s += x[d] * x[d]
        squares[i] = s
        for j in range(M):
            w = columns_t[j]
            t = 0.0
            for d in range(D):
                t += x[d] * w[d]
            dots[i, j] = t
        if J:
            for d in range(D):
                x[d] = x[d] - origin[d]
            for j in range(J):
                w = weights_t[j]
                s = 0.0
                for d in range(D):
                    s += x[d] * w[d]
                out[i, j] = s


widened_logits = (
    numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})(_widened_logits_python) if numba is not None else None
)
"""The compiled :func:`_widened_logits_python` (None without numba)."""


def widened_logits_half(rows: np.ndarray, origin: np.ndarray, stacked: np.ndarray, columns_t: np.ndarray,
                        dots: np.ndarray, squares: np.ndarray) -> np.ndarray:
    """:func:`centered_logits_half`'s ``(rows - origin) @ stacked`` (n, J), returned, and
    :func:`dots_and_squares_half`'s ``rows @ columns_t.T`` into ``dots`` (n, M) and each row's sum of
    squares into ``squares`` (n,), from one widening of the float16 ``rows`` (call only when
    :func:`available`). ``stacked`` (D, J) may have J = 0 (zero-shot alone); ``columns_t`` (M, D),
    ``dots`` and ``squares`` float64, C order."""
    assert widened_logits is not None
    rows = np.ascontiguousarray(rows)
    out = np.empty((len(rows), stacked.shape[1]))
    widened_logits(
        rows.view(np.uint16), HALF_TO_DOUBLE, np.ascontiguousarray(origin, dtype=np.float64),
        np.ascontiguousarray(stacked.T, dtype=np.float64), out, columns_t, dots, squares,
    )
    return out


def dots_and_squares_half(rows: np.ndarray, columns_t: np.ndarray, dots: np.ndarray, squares: np.ndarray) -> None:
    """``rows @ columns_t.T`` into ``dots`` (n, M) and each row's sum of squares into ``squares`` (n,),
    float64, for float16 ``rows`` (n, D), through the compiled kernel (call only when :func:`available`):
    :func:`widened_logits_half` with no probe (J = 0), the same arithmetic as when the cosines ride
    along with the probes' logits. ``columns_t`` (M, D) float64, C order. No float64 copy of the rows."""
    D = columns_t.shape[1]
    widened_logits_half(rows, np.zeros(D), np.empty((D, 0)), columns_t, dots, squares)
