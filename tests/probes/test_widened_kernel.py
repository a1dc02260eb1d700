"""One widening of each float16 row for the probes' logits and zero-shot's cosines (decision 0116):
``predict_kernel.widened_logits_half`` gives ``centered_logits_half``'s logits bit for bit, and its
dot products and sums of squares do not depend on how many logits or other columns ride with them."""

from __future__ import annotations

import numpy as np
import pytest

from crs.probes import predict_kernel

SHAPES = [  # (rows, D, J logits, M columns): J = 0 (zero-shot alone), M = 0 (probes alone), D not a multiple of 8
    (7, 13, 0, 3), (5, 1024, 5, 0), (33, 1000, 40, 10), (300, 1024, 5, 7), (64, 77, 8, 1), (9, 768, 3, 12),
    (3, 1, 2, 2), (0, 16, 3, 3),
]


def _inputs(rng, n, D, J, M):
    rows = (rng.standard_normal((n, D)) * rng.choice([1e-3, 1.0, 30.0], (n, 1))).astype(np.float16)
    if n > 2 and D > 3:
        rows[1, 2] = np.float16(3e-7)  # a subnormal float16
        rows[2, 3] = np.float16(-6e4)  # near the end of float16's range
    origin = rows[0].astype(np.float64) if n else rng.standard_normal(D)
    return rows, origin, rng.standard_normal((D, J)), np.ascontiguousarray(rng.standard_normal((M, D)))


@pytest.mark.parametrize(("n", "D", "J", "M"), SHAPES)
def test_one_widening_gives_the_probe_kernels_logits_bit_for_bit(n, D, J, M):
    if not predict_kernel.available():
        pytest.skip("numba is not installed or CRS_NO_NUMBA=1")
    rows, origin, stacked, columns_t = _inputs(np.random.default_rng(n * 7 + D + J + M), n, D, J, M)
    dots, squares = np.empty((n, M)), np.empty(n)
    logits = predict_kernel.widened_logits_half(rows, origin, stacked, columns_t, dots, squares)
    assert logits.tobytes() == predict_kernel.centered_logits_half(rows, origin, stacked).tobytes()

    alone_dots, alone_squares = np.empty((n, M)), np.empty(n)  # zero-shot's own pass: J = 0
    predict_kernel.dots_and_squares_half(rows, columns_t, alone_dots, alone_squares)
    assert dots.tobytes() == alone_dots.tobytes() and squares.tobytes() == alone_squares.tobytes()
    if M > 1:  # a column's dot products do not depend on the columns beside it
        part = np.empty((n, 1))
        predict_kernel.dots_and_squares_half(rows, np.ascontiguousarray(columns_t[1:2]), part, np.empty(n))
        assert part[:, 0].tobytes() == dots[:, 1].tobytes()

    x = rows.astype(np.float64)
    eps = np.finfo(np.float64).eps
    np.testing.assert_array_less(np.abs(dots - x @ columns_t.T), 4 * D * eps * (np.abs(x) @ np.abs(columns_t.T)) + 1e-300)
    np.testing.assert_array_less(np.abs(squares - (x * x).sum(axis=1)), 4 * D * eps * (x * x).sum(axis=1) + 1e-300)
