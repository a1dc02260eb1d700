"""The float64 polish's pieces (crs.probes.polish), each against an independent computation: the
curvature against the exact Hessian built term by term, the objective in the row space's own
coordinates against the same objective through the basis and against finite differences, and the
block preconditioner against the diagonal one (same optimum, no more steps)."""

from __future__ import annotations

import numpy as np
import pytest

from crs.probes.polish import ExactProblem, Whitening, data_curvature, minimise, row_space_basis


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def _problem(kind: str, n: int = 60, D: int = 90, K: int = 4, seed: int = 0, C: float = 0.5):
    """A small subset (n <= D) in the row space of its standardised rows, with coupled classes."""
    rng = np.random.default_rng(seed)
    rows = (rng.standard_normal((n, D)) + rng.standard_normal(D)).astype(np.float32)
    offset = rows.astype(np.float64).mean(axis=0)
    std = rows.astype(np.float64).std(axis=0)
    basis, variance, projected = row_space_basis(rows, offset, std)
    signal = projected[:, :K] * 2.0
    if kind == "multilabel":
        targets = (signal + rng.logistic(size=signal.shape) > 0).astype(np.float64)
        row_weights, class_mask = np.full((n, K), 1.0 / n), None
    else:
        labels = np.argmax(signal + rng.gumbel(size=signal.shape), axis=1)
        targets, row_weights, class_mask = np.eye(K)[labels], None, np.zeros(K)
    lam = np.full(K, 1.0 / (C * n))
    return rows, offset, std, basis, variance, projected, targets, row_weights, class_mask, lam


def _exact_problem(parts, in_basis: bool, curvature: np.ndarray | None = None) -> ExactProblem:
    rows, offset, std, basis, _, projected, targets, row_weights, class_mask, lam = parts
    r, K = basis.shape[1], targets.shape[1]
    curvature = np.ones((r + 1, K)) if curvature is None else curvature
    if in_basis:
        return ExactProblem(projected, None, None, None, curvature, targets, row_weights, class_mask, lam)
    return ExactProblem(rows, offset, std, basis, curvature, targets, row_weights, class_mask, lam)


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_projected_rows_give_the_objective_through_the_basis_and_its_finite_differences(kind):
    parts = _problem(kind)
    r, K = parts[3].shape[1], parts[6].shape[1]
    u = np.random.default_rng(1).standard_normal((r + 1, K)) * 0.1
    f_basis, g_basis = _exact_problem(parts, in_basis=False).value_and_grad(u)
    problem = _exact_problem(parts, in_basis=True)
    f, g = problem.value_and_grad(u)
    assert abs(f - f_basis) <= 1e-12 * abs(f)
    assert np.abs(g - g_basis).max() <= 1e-12 * np.abs(g).max()
    direction = np.random.default_rng(2).standard_normal(u.shape)
    h = 1e-5
    numeric = (problem.value_and_grad(u + h * direction)[0] - problem.value_and_grad(u - h * direction)[0]) / (2 * h)
    assert numeric == pytest.approx(float((g * direction).sum()), rel=1e-6)


def _hessian_blocks(projected, u, kind, row_weights, lam_unused=None):
    """The data term's Hessian blocks per coordinate, term by term (the reference)."""
    n, r = projected.shape
    K = u.shape[1]
    Z = np.hstack([projected, np.ones((n, 1))])
    logits = Z @ u
    out = np.zeros((r + 1, K, K))
    for i in range(n):
        if kind == "multilabel":
            p = 1.0 / (1.0 + np.exp(-logits[i]))
            coupling = np.diag(p * (1 - p) * row_weights[i])
        else:
            p = _softmax(logits[i : i + 1])[0]
            coupling = (np.diag(p) - np.outer(p, p)) / n
        out += Z[i][:, None, None] ** 2 * coupling[None]
    return out


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_curvature_is_the_exact_hessian_per_coordinate(kind):
    parts = _problem(kind, n=40, D=50, K=3)
    projected, row_weights, class_mask = parts[5], parts[7], parts[8]
    r, K = projected.shape[1], parts[6].shape[1]
    u = np.random.default_rng(3).standard_normal((r + 1, K)) * 0.3
    reference = _hessian_blocks(projected, u, kind, row_weights)
    curvature = data_curvature(projected, u, row_weights, class_mask)
    if kind == "multilabel":  # independent labels: the blocks are diagonal, stored as their diagonal
        assert curvature.shape == (r + 1, K)
        np.testing.assert_allclose(curvature, np.einsum("jkk->jk", reference), rtol=1e-12, atol=1e-15)
    else:
        assert curvature.shape == (r + 1, K, K)
        np.testing.assert_allclose(curvature, reference, rtol=1e-12, atol=1e-15)


def test_whitening_is_a_change_of_variables_with_the_chain_rule_gradient():
    rng = np.random.default_rng(4)
    R, K = 7, 3
    square = rng.standard_normal((R, K, K))
    blocks = square @ square.transpose(0, 2, 1) + 0.1 * np.eye(K)
    for curvature in (blocks, np.einsum("jkk->jk", blocks)):
        whitening = Whitening(curvature)
        u = rng.standard_normal((R, K))
        np.testing.assert_allclose(whitening.to_u(whitening.to_x(u)), u, rtol=1e-12, atol=1e-12)
        # f(u) = <c, u>: d f / d x = A^T c, checked against the directional derivative along d
        c, x, d = rng.standard_normal((3, R, K))
        along = ((c * whitening.to_u(x + d)).sum() - (c * whitening.to_u(x)).sum())
        assert along == pytest.approx(float((whitening.gradient(c) * d).sum()), rel=1e-10)
        if curvature.ndim == 3:  # whitened, the block's curvature is the identity: A^T M A = I
            A = np.stack([np.stack([whitening.to_u(np.eye(R * K)[i].reshape(R, K))[j] for i in range(j * K, j * K + K)], axis=1) for j in range(R)])
            np.testing.assert_allclose(A.transpose(0, 2, 1) @ curvature @ A, np.broadcast_to(np.eye(K), (R, K, K)), atol=1e-10)


class _Counting:
    """An ExactProblem wrapper that counts objective evaluations."""

    def __init__(self, problem: ExactProblem) -> None:
        self.problem, self.calls = problem, 0
        self.curvature = problem.curvature

    def value_and_grad(self, u):
        self.calls += 1
        return self.problem.value_and_grad(u)


def test_block_preconditioner_reaches_the_diagonal_ones_optimum_in_fewer_steps():
    # As in stage 2: the start is a backend's solution near the optimum (here: a loose solve) and
    # the curvature is taken there; both preconditioners must end at one optimum.
    parts = _problem("multiclass", n=80, D=120, K=5, seed=5, C=1.0)
    projected, class_mask, lam = parts[5], parts[8], parts[9]
    r, K = projected.shape[1], parts[6].shape[1]
    bound = np.ones((r + 1, K))
    loose, _ = minimise(_exact_problem(parts, in_basis=True, curvature=bound), np.zeros((r + 1, K)), tol=1e-5)
    blocks = data_curvature(projected, loose, None, class_mask)
    on_diagonal = np.einsum("jkk->jk", blocks)  # a view: the penalty's share and a floor, as polish() adds
    on_diagonal[:-1] += lam
    on_diagonal += 1e-9
    diagonal = on_diagonal.copy()
    results = {}
    for name, curvature in (("blocks", blocks), ("diagonal", diagonal)):
        counting = _Counting(_exact_problem(parts, in_basis=True, curvature=curvature))
        _, converged = minimise(counting, loose)  # type: ignore[arg-type]
        assert converged, name
        # the optimum itself, far below the default tolerance (whose stopping points differ by up
        # to tol / the smallest curvature, ~1e-8 of the spread here)
        u, converged = minimise(_exact_problem(parts, in_basis=True, curvature=curvature), loose, tol=1e-13)
        assert converged, name
        results[name] = (u, counting.calls)
    ones = np.ones((len(projected), 1))
    log_p = {name: np.log(_softmax(np.hstack([projected, ones]) @ u)) for name, (u, _) in results.items()}
    spread = np.ptp(log_p["diagonal"], axis=0).max()
    assert np.abs(log_p["blocks"] - log_p["diagonal"]).max() <= 1e-10 * spread
    assert results["blocks"][1] < results["diagonal"][1]


def test_block_conversion_reuses_one_buffer_and_counts_each_pass(monkeypatch):
    # A subset too large to convert once goes block by block through one reused float64 buffer
    # (its last block shorter than the buffer); the objective must equal the float64 rows' bit for
    # bit, and every evaluation counts as one pass over the subset's rows. (The numpy path: with numba,
    # float16 rows go to the compiled pass as their bits, test_float16_bits_give_the_float32_copy_bit_for_bit.)
    from crs.probes import polish as polish_module

    monkeypatch.setenv("CRS_NO_NUMBA", "1")
    parts = _problem("multilabel", n=70, D=40, K=3, seed=6)
    rows, offset, std, basis, _, _, targets, row_weights, class_mask, lam = parts
    rows16 = rows.astype(np.float16)
    monkeypatch.setattr(polish_module, "BLOCK_ROWS", 16)
    monkeypatch.setattr(polish_module, "CACHED_BYTES", 0)
    curvature = np.ones((basis.shape[1] + 1, targets.shape[1]))
    blocked = ExactProblem(rows16, offset, std, basis, curvature, targets, row_weights, class_mask, lam)
    whole = ExactProblem(rows16.astype(np.float64), offset, std, basis, curvature, targets, row_weights, class_mask, lam)
    assert blocked._converted is None
    u = np.random.default_rng(7).standard_normal((basis.shape[1] + 1, targets.shape[1])) * 0.1
    polish_module.PASSES.reset()
    for _ in range(3):
        f_blocked, g_blocked = blocked.value_and_grad(u)
        f_whole, g_whole = whole.value_and_grad(u)
        assert f_blocked == f_whole
        np.testing.assert_array_equal(g_blocked, g_whole)
    assert blocked._buffer is not None and blocked._buffer.shape == (16, rows.shape[1])
    assert (polish_module.PASSES.evaluations, polish_module.PASSES.rows) == (6, 6 * len(rows))


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
@pytest.mark.parametrize("in_basis", [False, True])
def test_compiled_pass_gives_the_numpy_objective(kind, in_basis, monkeypatch):
    # The fused numba pass (float32 rows, float64 sums, four rows at a time) against the numpy path
    # (float64 rows through BLAS): the same objective and gradient to rounding, with a row count
    # that is no multiple of four, blocks that split it, and (softmax) a class the subset lacks.
    from crs.probes import polish as polish_module
    from crs.probes import polish_kernel

    if polish_kernel.fused_pass is None:
        pytest.skip("numba is not installed")
    parts = list(_problem(kind, n=67, D=90, K=4, seed=8))
    parts[0] = parts[0].astype(np.float16)  # the cache's dtype
    if kind == "multiclass":
        parts[6][:, 2] = 0.0  # no row of class 2
        parts[8] = np.where(np.arange(4) == 2, -np.inf, 0.0)
    monkeypatch.setattr(polish_module, "BLOCK_ROWS", 24)
    monkeypatch.setattr(polish_module, "CACHED_BYTES", 0)
    u = np.random.default_rng(9).standard_normal((parts[3].shape[1] + 1, 4)) * 0.2
    monkeypatch.delenv("CRS_NO_NUMBA", raising=False)
    fused = _exact_problem(parts, in_basis)
    monkeypatch.setenv("CRS_NO_NUMBA", "1")
    plain = _exact_problem(parts, in_basis)
    assert fused._fused and not plain._fused
    f_fused, g_fused = fused.value_and_grad(u)
    f_plain, g_plain = plain.value_and_grad(u)
    assert f_fused == pytest.approx(f_plain, rel=1e-13)
    assert np.abs(g_fused - g_plain).max() <= 1e-12 * np.abs(g_plain).max()
    assert np.isfinite(g_fused).all()
    if not in_basis:  # float16 rows too large to keep converted: read as their bits, no block buffer
        assert fused._half and fused._buffer is None


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_float16_bits_give_the_float32_copy_bit_for_bit(kind, monkeypatch):
    # Rows too large to keep converted go to the compiled pass as their float16 bits, looked up in a
    # table of every float16 value; a float32 copy of the same rows (what was converted block by block
    # before) must give the same objective and gradient exactly, with zeros, subnormals and extremes
    # among the values and blocks that split the rows.
    from crs.probes import polish as polish_module
    from crs.probes import polish_kernel

    if polish_kernel.fused_pass is None:
        pytest.skip("numba is not installed")
    bits = np.arange(2**16, dtype=np.uint16).view(np.float16)
    assert np.array_equal(polish_kernel.HALF_TO_DOUBLE[np.isfinite(bits)], bits[np.isfinite(bits)].astype(np.float64))
    parts = list(_problem(kind, n=67, D=90, K=4, seed=11))
    rows = parts[0].astype(np.float16)
    rows[:, 0] = 0.0
    rows[3, :4] = np.array([6e-8, -3e-5, 65504.0, -0.0], dtype=np.float16)  # subnormal, near-subnormal, max
    parts[0] = rows
    monkeypatch.setattr(polish_module, "BLOCK_ROWS", 24)
    monkeypatch.setattr(polish_module, "CACHED_BYTES", 0)
    monkeypatch.delenv("CRS_NO_NUMBA", raising=False)
    half = _exact_problem(parts, in_basis=False)
    parts[0] = rows.astype(np.float32)
    copy = _exact_problem(parts, in_basis=False)
    assert half._half and not copy._half
    u = np.random.default_rng(12).standard_normal((parts[3].shape[1] + 1, 4)) * 1e-3
    f_half, g_half = half.value_and_grad(u)
    f_copy, g_copy = copy.value_and_grad(u)
    assert f_half == f_copy
    np.testing.assert_array_equal(g_half, g_copy)
