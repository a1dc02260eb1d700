"""Polish each selected probe in float64 on the exact problem, so rounding no longer moves it.

Every backend solves its C path in its own precision (the torch backend in float32, on a basis
from a float32 eigendecomposition) and stops at a tolerance where the last bits of the machine's
arithmetic (BLAS kernel, thread count) still move the solution: one worker against two changed
records by up to 2.7e-3 in AUROC with the same C (docs/reproducibility.md). The probe a record
reports is therefore polished here, after C is chosen:

* the objective is the backend's own (mean log-loss + ||w||^2 / (2 C n) on the subset's
  standardised features, intercept free), evaluated in float64 from the stored features (float16
  in the cache, exact in float64), so it is the same function to ~1e-16 on every machine;
* any invertible change of variables leaves its optimum where it is, so the solver may be
  preconditioned by a machine-dependent basis (the backend's float32 eigenbasis) without moving
  the answer: only the path to it differs;
* L-BFGS stops when the gradient's infinity norm is below ``POLISH_TOL`` (1e-10, 1e5 times tighter
  than the path), where the solution is fixed to far below what any record column resolves.

When the subset has no more rows than features the optimum lies in the row space of the
standardised subset; that space is spanned exactly by a float64 basis computed here (a float32
basis spans it only to ~1e-7, which would move the optimum by as much).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from crs.probes import polish_kernel
from crs.probes.base import ProblemData, as_float, constant_label_bias, fold_standardisation

POLISH_TOL = 1e-10
"""Infinity norm of the objective's gradient (in the basis coordinates) at which a polished probe
stops. The float64 gradient itself is accurate to ~1e-14 here; at 1e-10 the probe's logits agree
across machines to ~1e-9 of their spread (tests/probes/test_polish.py measures it)."""
POLISH_MAX_ITER = 500
BLOCK_ROWS = 8192
"""Rows per block when the objective runs over the subset (bounds the float64 scratch memory)."""
NULL_TOL = 1e-12
"""Row-space directions with variance below NULL_TOL x the largest are dropped (exactly null ones
have variance ~1e-16 x the largest in float64)."""
HISTORY = 10
CACHED_BYTES = 64 * 2**20
"""A subset whose float64 rows fit in this many bytes is converted once, not at every evaluation
(larger ones, such as a CheXpert label fraction of 25 % and up, block by block: memory stays flat)."""


@dataclass
class PassCounter:
    """Full float64 passes of the polish over its subsets' rows, counted as they happen: each
    objective evaluation is one pass (two products with every row of the subset). A measure of the
    polish's work that does not depend on the machine's load (``scripts/polish_counts.py``)."""

    probes: int = 0
    evaluations: int = 0
    rows: int = 0  # rows touched, summed over evaluations (divide by the training rows: full passes)

    def reset(self) -> None:
        self.probes = self.evaluations = self.rows = 0


PASSES = PassCounter()


@dataclass
class ExactProblem:
    """One subset's L2 logistic problem in float64, in coordinates w = basis @ u (plus intercept).

    ``rows`` are the subset's stored features; the objective standardises them on the fly as
    ``(rows - offset) / std`` folded into the weights, so no standardised copy is made. With
    ``basis`` None the rows are already standardised and in the basis's coordinates (the row-space
    case, where they come free with the basis: n x r products instead of n x D and two D x r)."""

    rows: np.ndarray  # (n, D) stored features (any float dtype), or (n, r) projected float64 rows
    offset: np.ndarray | None  # (D,) center + the subset's mean, float64 (None: projected rows)
    std: np.ndarray | None  # (D,) float64 (None: projected rows)
    basis: np.ndarray | None  # (D, r) float64 (None: projected rows)
    curvature: np.ndarray  # (r + 1, K): diagonal curvature estimate, for the preconditioner only
    targets: np.ndarray  # (n, K) one-hot or 0/1 (ignored entries 0)
    row_weights: np.ndarray | None  # multilabel (n, K): 1 / rows per label on valid entries
    class_mask: np.ndarray | None  # multiclass (K,): 0 present, -inf absent
    lam: np.ndarray  # (K,) 1 / (C n_k)

    def __post_init__(self) -> None:
        # Small subsets are converted to float64 once; large ones block by block at each evaluation.
        small = self.rows.size * 8 <= CACHED_BYTES
        # the compiled pass reads float32 rows (float16 is exact in float32): half the bytes of float64
        self._fused = polish_kernel.available()
        self._dtype = np.float32 if self._fused and self.rows.dtype in (np.float16, np.float32) else np.float64
        self._converted = as_float(self.rows, self._dtype) if small and self.rows.dtype != self._dtype else None
        self._buffer: np.ndarray | None = None
        # larger float16 rows go to the compiled pass as their bits, read through a table of the 65,536
        # float16 values: the same float64 tile, without a conversion of every block at every evaluation
        self._half = self._fused and self._converted is None and self.rows.dtype == np.float16
        # the basis products run through torch's BLAS: about 3x numpy's on these D x r x K products
        self._basis = None if self.basis is None else torch.from_numpy(np.ascontiguousarray(self.basis))

    def _blocks(self):
        if self._converted is not None or self.rows.dtype == self._dtype or self._half:
            rows = polish_kernel.half_bits(self.rows) if self._half else self.rows if self._converted is None else self._converted
            for start in range(0, len(rows), BLOCK_ROWS):
                yield start, rows[start : start + BLOCK_ROWS]
            return
        if self._buffer is None:  # one block buffer for every evaluation: fresh 64 MB blocks are faulted in anew
            self._buffer = np.empty((min(BLOCK_ROWS, len(self.rows)), self.rows.shape[1]), dtype=self._dtype)
        for start in range(0, len(self.rows), BLOCK_ROWS):
            yield start, as_float(self.rows[start : start + BLOCK_ROWS], self._dtype, self._buffer)

    def weights(self, u: np.ndarray) -> np.ndarray:
        """The standardised weights (D, K) of coordinates u (r + 1, K)."""
        return u[:-1] if self._basis is None else (self._basis @ torch.from_numpy(u[:-1])).numpy()

    def value_and_grad(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Objective and gradient at u (r + 1, K) (last row: the intercept)."""
        PASSES.evaluations += 1
        PASSES.rows += len(self.rows)
        weights = self.weights(u)
        if self._basis is None:
            scaled, intercept = weights, u[-1]
        else:
            assert self.std is not None and self.offset is not None
            scaled = weights / self.std[:, None]  # on raw features
            intercept = u[-1] - self.offset @ scaled
        n = len(self.rows)
        value = 0.0
        # With numba one compiled pass per block (crs.probes.polish_kernel, decision 0100). Without it
        # the two products with the rows run through numpy's BLAS: with K outputs they read the block
        # and do little else, and there OpenBLAS took 14 + 12 ms per 8,192 x 1,024 block against
        # torch's 17 + 22 (both kernels, decision 0075).
        raw_grad = np.zeros((u.shape[1], scaled.shape[0]))
        residual_sum = np.zeros(u.shape[1])
        scaled = np.ascontiguousarray(scaled)
        if self._fused:  # one compiled pass per block: X W, the loss and R^T X with the rows read once
            assert polish_kernel.fused_pass is not None
            scaled_t = np.ascontiguousarray(scaled.T)
            intercept = np.ascontiguousarray(intercept, dtype=np.float64)
            sigmoid = self.row_weights is not None
            row_weights = self.targets if self.row_weights is None else self.row_weights  # softmax: unused
            mask = self.class_mask if self.class_mask is not None else np.zeros(u.shape[1])
            row_loss = np.empty(min(BLOCK_ROWS, n))
            for start, block in self._blocks():
                stop = start + len(block)
                polish_kernel.fused_pass(
                    block, polish_kernel.HALF_TO_DOUBLE, scaled_t, intercept, self.targets[start:stop], row_weights[start:stop], mask,
                    sigmoid, 1.0 / n, raw_grad, residual_sum, row_loss,
                )
                value += float(row_loss[: len(block)].sum())
        for start, block in ([] if self._fused else self._blocks()):
            logits = block @ scaled
            logits += intercept
            stop = start + len(block)
            y = self.targets[start:stop]
            if self.row_weights is not None:
                weight = self.row_weights[start:stop]
                e = np.exp(-np.abs(logits))  # shared by log(1 + e^x) and the sigmoid
                value += float((weight * (np.maximum(logits, 0.0) + np.log1p(e) - y * logits)).sum())
                residual = (np.where(logits >= 0, 1.0, e) / (1.0 + e) - y) * weight
            else:
                assert self.class_mask is not None
                logits += self.class_mask
                logits -= logits.max(axis=1, keepdims=True)
                exp = np.exp(logits)
                total = exp.sum(axis=1, keepdims=True)
                # log-loss: log sum exp - the picked logit (logits shifted by the row's top)
                value += float(np.log(total).sum() - np.where(y > 0, logits, 0.0).sum()) / n
                residual = exp / total
                residual -= y
                residual /= n
            # residual^T X rather than X^T residual: the long axis stays contiguous
            raw_grad += np.ascontiguousarray(residual.T) @ block
            residual_sum += residual.sum(axis=0)
        grad = np.empty_like(u)
        grad[-1] = residual_sum
        if self._basis is None:
            grad[:-1] = raw_grad.T + self.lam * weights
        else:  # d/d(weights) of the data term, (X - offset)^T R / std, from the raw products; all (K, D)
            assert self.std is not None and self.offset is not None
            data_grad = raw_grad
            data_grad -= residual_sum[:, None] * self.offset[None, :]
            data_grad /= self.std[None, :]
            data_grad += self.lam[:, None] * weights.T
            grad[:-1] = (torch.from_numpy(data_grad) @ self._basis).numpy().T
        value += 0.5 * float((self.lam * weights * weights).sum())
        return value, grad


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


class Whitening:
    """The change of variables u = A x that preconditions the polish: per coordinate of u (r + 1
    rows) either a scale per output (``curvature`` (r + 1, K): A = diag(curvature)^-1/2) or, for the
    softmax link, a K x K block (``curvature`` (r + 1, K, K): A = L^-T with L L^T the block), which
    also undoes the coupling between classes (p p^T in the softmax's curvature): a third fewer
    L-BFGS steps on the bench's 8-class unit. It moves the path to the optimum, not the optimum."""

    def __init__(self, curvature: np.ndarray) -> None:
        self.blocks = curvature.ndim == 3
        if self.blocks:
            lower = np.linalg.cholesky(curvature)
            self.A = np.ascontiguousarray(np.linalg.inv(lower).transpose(0, 2, 1))  # (R, K, K)
            self.A_t = np.ascontiguousarray(lower.transpose(0, 2, 1))  # A^-1 = L^T
        else:
            self.scale = 1.0 / np.sqrt(curvature)

    def to_u(self, x: np.ndarray) -> np.ndarray:
        return np.matmul(self.A, x[..., None])[..., 0] if self.blocks else x * self.scale

    def to_x(self, u: np.ndarray) -> np.ndarray:
        return np.matmul(self.A_t, u[..., None])[..., 0] if self.blocks else u / self.scale

    def gradient(self, g_u: np.ndarray) -> np.ndarray:
        """d f / d x = A^T d f / d u."""
        return np.matmul(g_u[:, None, :], self.A)[:, 0] if self.blocks else g_u * self.scale


def minimise(problem: ExactProblem, u0: np.ndarray, tol: float = POLISH_TOL, max_iter: int = POLISH_MAX_ITER):
    """L-BFGS in preconditioned coordinates (:class:`Whitening` of ``problem.curvature``); returns
    (u, converged).

    The step is accepted on Armijo's condition or, as the objective is convex along the line, on a
    still non-positive slope at the trial point (near the optimum f no longer resolves the step)."""
    whitening = Whitening(problem.curvature)
    x = whitening.to_x(u0)
    f, g_u = problem.value_and_grad(whitening.to_u(x))
    g = whitening.gradient(g_u)
    s_hist: list[np.ndarray] = []
    y_hist: list[np.ndarray] = []
    for _ in range(max_iter):
        if np.abs(g_u).max() <= tol:
            return whitening.to_u(x), True
        q = g.copy()
        alphas = []
        for s_k, y_k in zip(reversed(s_hist), reversed(y_hist), strict=True):
            alpha = (s_k * q).sum() / (s_k * y_k).sum()
            q -= alpha * y_k
            alphas.append(alpha)
        if s_hist:
            q *= (s_hist[-1] * y_hist[-1]).sum() / (y_hist[-1] * y_hist[-1]).sum()
        for s_k, y_k, alpha in zip(s_hist, y_hist, reversed(alphas), strict=True):
            beta = (y_k * q).sum() / (s_k * y_k).sum()
            q += s_k * (alpha - beta)
        direction = -q
        slope = float((g * direction).sum())
        if slope >= 0:  # not a descent direction: restart from the gradient
            s_hist.clear()
            y_hist.clear()
            direction, slope = -g, -float((g * g).sum())
        step = 1.0 if s_hist else min(1.0, 1.0 / max(np.abs(g).sum(), 1e-300))
        for _ in range(40):
            trial = x + step * direction
            f_trial, g_trial_u = problem.value_and_grad(whitening.to_u(trial))
            g_trial = whitening.gradient(g_trial_u)
            if f_trial <= f + 1e-4 * step * slope or float((g_trial * direction).sum()) <= 0:
                break
            step *= 0.5
        else:
            return whitening.to_u(x), False
        s_k, y_k = trial - x, g_trial - g
        if (s_k * y_k).sum() > 1e-300:
            s_hist.append(s_k)
            y_hist.append(y_k)
            if len(s_hist) > HISTORY:
                del s_hist[0], y_hist[0]
        x, f, g, g_u = trial, f_trial, g_trial, g_trial_u
    return whitening.to_u(x), bool(np.abs(g_u).max() <= tol)


def subset_rows(X: np.ndarray, subset: np.ndarray) -> np.ndarray:
    """The subset's rows of ``X``: a view when the subset is a contiguous run (the full label
    fraction is every training row: no 235 MB float16 copy at CheXpert size), else a gathered copy."""
    if len(subset) and subset[-1] - subset[0] == len(subset) - 1 and np.all(np.diff(subset) == 1):
        return X[subset[0] : subset[-1] + 1]
    return X[subset]


def subset_targets(data: ProblemData, subset: np.ndarray) -> dict:
    """Targets, row weights (multilabel: 1 / rows per label on known entries, else None), class mask
    (multiclass: 0 present, -inf absent, else None), rows per output and constant-label biases of
    one subset: the conventions every backend shares (the torch backend builds its groups from it)."""
    K = data.n_classes
    y = data.y_train[subset]
    constant = np.full(K, np.nan)
    if data.kind == "multilabel":
        valid = ~np.isnan(y)
        for label in range(K):
            values = y[valid[:, label], label]
            if len(values) == 0 or values.min() == values.max():
                valid[:, label] = False
                constant[label] = constant_label_bias(values.mean() if len(values) else 0.5)
        rows = valid.sum(axis=0)
        return {"targets": np.where(valid, y, 0.0), "row_weights": valid / np.maximum(rows, 1),
                "class_mask": None, "label_rows": rows, "constant": constant}
    present = np.bincount(y, minlength=K) > 0
    return {"targets": np.eye(K)[y], "row_weights": None, "class_mask": np.where(present, 0.0, -np.inf),
            "label_rows": np.full(K, len(y)), "constant": constant}


def _eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition by LAPACK's divide and conquer (scipy): ~20 % faster than
    numpy's on a float64 500 x 500 Gram here."""
    return scipy.linalg.eigh(A, driver="evd", overwrite_a=True, check_finite=False)


def row_space_basis(rows: np.ndarray, offset: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An orthonormal float64 basis (D, r) of the standardised rows' span, the variance of the
    standardised rows along each of its columns (r,), and the rows in it (n, r) (free: U sqrt(n
    variance)): from the n x n Gram (n <= D)."""
    standardised = (as_float(rows, np.float64) - offset) / std
    n = len(standardised)
    variance, U = _eigh(standardised @ standardised.T / n)
    keep = variance > NULL_TOL * max(variance.max(), 1e-300)
    variance, U = variance[keep], U[:, keep]
    scale = np.sqrt(n * variance)
    return standardised.T @ U / scale, variance, U * scale


def feature_basis(rows: np.ndarray, offset: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The eigenbasis (D, D) of the standardised rows' covariance in float64, its eigenvalues, and
    the rows in it (n, D)."""
    standardised = (as_float(rows, np.float64) - offset) / std
    variance, V = _eigh(standardised.T @ standardised / len(standardised))
    return V, np.maximum(variance, 0.0), standardised @ V


def data_curvature(
    projected: np.ndarray, u: np.ndarray, row_weights: np.ndarray | None, class_mask: np.ndarray | None
) -> np.ndarray:
    """The data term's curvature at u (r + 1, K) in the coordinates of the rows ``projected`` (n, r)
    (any precision: it only preconditions), per coordinate j (the last: the intercept).

    Sigmoid link (``row_weights`` given): the diagonal (r + 1, K), sum_i z_ij^2 p_ik (1 - p_ik)
    times the row weights. Softmax link: the K x K blocks (r + 1, K, K), sum_i z_ij^2 (diag(p_i) -
    p_i p_i^T) / n, which hold the coupling between classes. Computed in the rows' precision (at
    least float32) block by block, summed in float64: a CheXpert-sized float32 projection is never
    copied whole."""
    n = len(projected)
    K = u.shape[1]
    out = np.zeros((u.shape[0], K) if row_weights is not None else (u.shape[0], K, K))
    dtype = np.result_type(projected.dtype, np.float32)  # float32 rows stay float32: half the traffic
    u = u.astype(dtype)
    for start in range(0, n, BLOCK_ROWS):
        Z = np.asarray(projected[start : start + BLOCK_ROWS], dtype=dtype)
        logits = Z @ u[:-1] + u[-1]
        if row_weights is not None:
            p = _sigmoid(logits)
            weight = p * (1.0 - p) * row_weights[start : start + BLOCK_ROWS].astype(dtype)
        else:
            assert class_mask is not None
            logits = logits + class_mask.astype(dtype)
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            weight = (p[:, :, None] * (np.eye(K, dtype=dtype) - p[:, None, :])).reshape(len(p), K * K) / dtype.type(n)
        out[:-1] += (np.square(Z).T @ weight).reshape(out[:-1].shape)
        out[-1] += weight.sum(axis=0).reshape(out[-1].shape)
    return out


def _preconditioner_curvature(data_term: np.ndarray | None, bound: np.ndarray, lam: np.ndarray,
                              penalty_diagonal: np.ndarray) -> np.ndarray:
    """The objective's curvature for :class:`Whitening`: the data term's at the start plus the
    penalty's diagonal, kept away from 0 by a small share of the logistic bound (``bound`` (r + 1,
    K): 0.25 x the variance plus the penalty), or the bound itself without a data term."""
    if data_term is None:
        return np.maximum(bound, 1e-12 * bound.max())
    curvature = data_term.copy()
    if curvature.ndim == 2:
        curvature[:-1] += lam[None, :] * penalty_diagonal[:, None]
        curvature = np.maximum(curvature, 1e-6 * bound)
        return np.maximum(curvature, 1e-12 * curvature.max())
    diagonal = np.einsum("jkk->jk", curvature)  # a writeable view of the blocks' diagonals
    diagonal[:-1] += lam[None, :] * penalty_diagonal[:, None]
    diagonal += 1e-6 * bound + 1e-12 * bound.max()  # positive definite: the intercept block is singular
    return curvature


@dataclass(frozen=True)
class Preconditioner:
    """A backend's own basis for one subset (to reuse its eigendecomposition): w_std = basis @ u,
    with the training variance along each column and diag(basis^T basis) (the penalty's diagonal).
    Used only when it spans every direction (basis of full rank D); its rounding does not matter."""

    basis: np.ndarray  # (D, D)
    variance: np.ndarray  # (D,)
    penalty_diagonal: np.ndarray  # (D,)
    data_curvature: np.ndarray | None = None  # the data term's curvature at the start (:func:`data_curvature`)


def polish(
    data: ProblemData, unique: int, C: float, weights: np.ndarray, bias: np.ndarray,
    mean: np.ndarray, std: np.ndarray, preconditioner: Preconditioner | None = None,
    start: np.ndarray | None = None, tol: float = POLISH_TOL, row_space: tuple | None = None,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The float64 optimum near a backend's probe of unique subset ``unique`` at ``C``.

    ``weights`` (D, K), ``bias`` (K,): the backend's probe folded onto ``X - center`` (the start);
    ``mean``, ``std``: the subset's standardiser (relative to the center). ``preconditioner``: a
    full-rank basis of the backend's (subsets with more rows than features only), with ``start``
    the backend's solution in its coordinates ((D + 1, K), intercept last). ``row_space``: the
    subset's :func:`row_space_basis` when the backend already computed it (n <= D). Returns the
    polished probe folded onto ``X - center`` (float64) and whether it met ``tol``.
    """
    subset = data.unique_subsets[unique]
    rows = subset_rows(data.X_train, subset)
    offset = data.center + mean
    parts = subset_targets(data, subset)
    D, K = weights.shape
    live = np.isfinite(bias) & np.isnan(parts["constant"])  # outputs the data determines
    standardised_weights = np.where(live[None, :], weights * std[:, None], 0.0)
    standardised_bias = np.where(live, bias + mean @ np.where(live[None, :], weights, 0.0), 0.0)
    start_curvature = None
    projected = None
    if preconditioner is not None and start is not None:
        basis, variance, penalty_diagonal = preconditioner.basis, preconditioner.variance, preconditioner.penalty_diagonal
        u0 = np.where(live[None, :], start, 0.0)
        start_curvature = preconditioner.data_curvature
    else:
        if row_space is None:
            row_space = (row_space_basis if len(subset) <= D else feature_basis)(rows, offset, std)
        basis, variance, projected = row_space
        penalty_diagonal = np.ones(basis.shape[1])
        u0 = np.vstack([basis.T @ standardised_weights, standardised_bias[None, :]])
        start_curvature = data_curvature(projected, u0, parts["row_weights"], parts["class_mask"])
    lam = 1.0 / (C * np.maximum(parts["label_rows"], 1))
    bound = np.empty((basis.shape[1] + 1, K))  # 0.25 bounds the logistic curvature
    bound[:-1] = 0.25 * variance[:, None] + lam[None, :] * penalty_diagonal[:, None]
    bound[-1] = 0.25
    # the curvature at the start: far better than the bound where probabilities are near 0 or 1
    curvature = _preconditioner_curvature(start_curvature, bound, lam, penalty_diagonal)
    targets = {"targets": parts["targets"], "row_weights": parts["row_weights"], "class_mask": parts["class_mask"]}
    if projected is not None and projected.size * 8 <= CACHED_BYTES:  # the rows in the basis, exact
        problem = ExactProblem(rows=projected, offset=None, std=None, basis=None, curvature=curvature, lam=lam, **targets)
    else:
        problem = ExactProblem(rows=rows, offset=offset, std=std, basis=basis, curvature=curvature, lam=lam, **targets)
    PASSES.probes += 1
    u, converged = minimise(problem, u0, tol)
    polished_weights = basis @ u[:-1]
    polished_bias = u[-1].copy()
    if parts["class_mask"] is not None:
        polished_bias = polished_bias + parts["class_mask"]
    constant = ~np.isnan(parts["constant"])
    polished_bias = np.where(constant, parts["constant"], polished_bias)
    polished_weights[:, constant] = 0.0
    folded, folded_bias = fold_standardisation(polished_weights, polished_bias, mean, std)
    return folded, folded_bias, converged


def validation_score(data: ProblemData, unique: int, weights: np.ndarray, bias: np.ndarray, selection: str) -> float:
    """The selection criterion (larger is better) of a polished probe on its validation rows, with
    float64 logits (the path's scores only choose C; the record reports this one)."""
    from crs.probes.base import link_function
    from crs.probes.selection import validation_scores

    rows = data.validation_rows(unique)
    X = data.X_val if rows is None else data.X_val[rows]
    labels = data.y_val if rows is None else data.y_val[rows]
    logits = np.empty((len(X), weights.shape[1]))
    # block by block into one reused float64 buffer: the whole split as float64, then minus the center,
    # was two fresh 300 MB arrays per probe at CheXpert size (page faults: 0.55 CPU s a probe)
    buffer = np.empty((min(BLOCK_ROWS, len(X)), X.shape[1]))
    for start in range(0, len(X), BLOCK_ROWS):
        block = as_float(X[start : start + BLOCK_ROWS], np.float64, buffer)
        block -= data.center
        np.matmul(block, weights, out=logits[start : start + len(block)])
    logits += bias
    return float(validation_scores(labels, link_function(logits[None], data.link), selection)[0])
