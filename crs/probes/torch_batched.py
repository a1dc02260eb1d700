"""Batched backend: all probes of one (encoder, task) unit solved together in torch, CPU or GPU.

The problem per (subset, C) is exactly the reference one (L2 logistic regression on the subset's
standardised features, intercept unpenalised); what changes is how it is solved:

* Rotation: the standardised subset is rotated into the eigenbasis of its covariance (when the
  subset has fewer rows than features, into its row space, which holds the L2 optimum anyway, so
  the problem shrinks to rank x K unknowns). The L2 penalty is rotation-invariant, so the optimum is
  the same; in that basis a diagonal preconditioner (curvature ~ 0.25 * variance + 1 / (C n)) makes
  the problem well conditioned and L-BFGS needs a few dozen iterations.
* Batching: subsets of one label fraction share a row count, so (seeds x C values) are solved as
  one batched L-BFGS with per-problem histories and step lengths, logits as one ``bmm``.
* C path (``path="warm"``, default on CPU): C values in ascending order, each warm-started from the
  previous solution, and a subset's path stops once validation score has fallen ``patience`` times
  in a row (the large-C fits are the slowest and are rarely selected). ``path="batched"`` (default
  on GPU) solves every C at once from zero. With a shared basis, a label fraction's path starts
  from the next smaller (nested) fraction's solution at the first C (``warm_groups``).
* Identical subsets (the 100 % fraction drawn by every seed) are fitted once (see ``prepare``).

Convergence: a problem stops when the infinity norm of the gradient of the mean-form objective
(mean loss + ||w||^2 / (2 C n)) in the rotated coordinates is below ``tol`` (1e-5, ten times
tighter than scikit-learn's default on the same objective); ``ProbeSet.converged`` records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import torch

from crs.probes import path_kernel
from crs.probes.base import (
    ProbeError,
    ProblemData,
    as_float,
    fold_standardisation,
    link_function,
    subset_moments,
    subset_standardiser,
)
from crs.probes.polish import (
    Preconditioner,
    data_curvature,
    polish,
    row_space_basis,
    subset_rows,
    subset_targets,
    validation_score,
)
from crs.probes.selection import (
    assemble_linear,
    lower_is_better,
    select_C,
    subset_validation_scores,
    validation_scores,
)

CURVATURE = 0.25
"""Upper bound of the logistic loss curvature, used for the diagonal preconditioner."""
RANK_TOL = 1e-6
"""Eigen-directions with variance below RANK_TOL x the largest are dropped (null space of a small subset)."""


@dataclass(frozen=True)
class SolverOptions:
    tol: float = 1e-5
    max_iter: int = 2000
    history: int = 10
    max_backtracks: int = 30


EVALUATION_ROWS = 8192
"""Rows per block of an objective evaluation on the CPU (see :meth:`GroupProblem.value_and_grad`).
Two CheXpert-sized fits at once, as two workers run them: 31.4-35.4 CPU s each with blocks of 8,192
rows against 33.2-40.0 s in one pass (two pairs each, noisy); alone no difference was measurable."""


FUSED_ROWS = 8192
"""Groups with at least this many rows per subset run their float32 objective through the compiled
pass (:mod:`crs.probes.path_kernel`, with numba): 0.65-0.7x torch's time at 28,700 and 114,705 rows x
1,025, about even at 7,600, slower for small groups (decision 0104)."""


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise ProbeError(f"device {device!r} is not a torch device; use 'cpu', 'cuda' or 'auto'") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ProbeError(f"device {device!r} requested but CUDA is not available; use device='cpu'")
    return resolved


# --- the objective ---------------------------------------------------------------------------


def batched_logits(columns: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """``Z @ columns^T`` for rows Z (S, b, R) and weight columns stored as rows, ``columns`` (S, M, R):
    (S, b, M). Computed as ``columns @ Z^T`` (then transposed, a small copy): MKL runs that skinny
    product about 2x faster on the CPU than ``Z @ columns`` (5 x 8,192 x 1,025 rows times 5 outputs:
    30 against 59 ms here, one thread), since it streams each row of Z once against the few columns.
    The same sums, grouped as the kernel groups them (decision 0104)."""
    return torch.bmm(columns, Z.transpose(1, 2)).transpose(1, 2)


@dataclass
class GroupProblem:
    """Subsets of one size, rotated: Z (S, n, r+1) with a ones column for the intercept."""

    Z: torch.Tensor
    targets: torch.Tensor  # (S, n, K): one-hot, or multilabel 0/1 with ignored entries 0
    row_weights: torch.Tensor | None  # multilabel (S, n, K): 1/n_label on valid rows, else None
    class_mask: torch.Tensor | None  # multiclass (S, K): 0 for present classes, -inf for absent
    variance: torch.Tensor  # (S, r+1): variance along each rotated direction, 1 for the intercept
    label_rows: torch.Tensor  # (S, K): rows per label (n for multiclass)
    multilabel: bool
    penalty_basis: torch.Tensor | None = None  # (D, D) the shared basis V, or None: the penalty is ||W||^2
    penalty_scale: torch.Tensor | None = None  # (S, D): (std_s / std_shared)^2 per subset, with penalty_basis

    def penalty_product(self, W: torch.Tensor) -> torch.Tensor:
        """A W for the weight rows W (S, Cb, r, K): the identity, or in the shared basis
        A_s = V^T diag(q_s) V (see :class:`SharedBasis`), as two D x D products."""
        if self.penalty_basis is None:
            return W
        assert self.penalty_scale is not None
        V = self.penalty_basis
        S, Cb, D, K = W.shape
        columns = W.permute(2, 0, 1, 3).reshape(D, S * Cb * K)  # every subset's columns: one GEMM each way
        scaled = (V @ columns).view(D, S, Cb, K) * self.penalty_scale.T[:, :, None, None]
        return (V.T @ scaled.reshape(D, S * Cb * K)).view(D, S, Cb, K).permute(1, 2, 0, 3)

    def penalty_diagonal(self) -> torch.Tensor:
        """diag(A_s) per subset and weight coordinate: (S, r) (ones without a shared basis)."""
        if self.penalty_basis is None:
            return torch.ones_like(self.variance[:, :-1])
        assert self.penalty_scale is not None
        return self.penalty_scale @ self.penalty_basis.square()

    def penalty(self, Cs: torch.Tensor) -> torch.Tensor:
        """1 / (C n) per (subset, C, output): (S, Cb, 1, K). ``Cs`` is (Cb,) shared by the subsets,
        or (S, Cb) per subset (the refit of each subset's selected C)."""
        per_subset = Cs if Cs.dim() == 2 else Cs[None, :]
        return 1.0 / (per_subset[:, :, None, None] * self.label_rows.clamp(min=1)[:, None, None, :])

    def preconditioner(self, Cs: torch.Tensor) -> torch.Tensor:
        """1 / sqrt(diagonal curvature) per (subset, C, coordinate, output): (S, Cb, r+1, K)."""
        lam = self.penalty(Cs)
        penalised = torch.zeros_like(self.variance)
        penalised[:, :-1] = self.penalty_diagonal()
        curvature = CURVATURE * self.variance[:, None, :, None] + lam * penalised[:, None, :, None]
        return curvature.rsqrt()

    def value_and_grad(self, W: torch.Tensor, lam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean-form objective and its gradient for W (S, Cb, r+1, K); returns f (S, Cb).

        The data term runs over blocks of ``EVALUATION_ROWS`` rows, each block's logits and its
        share of the gradient back to back, so each block of Z is read from memory once and then
        from cache (the products are skinny: memory traffic, shared by the workers, bounds them)."""
        S, Cb, R, K = W.shape
        n = self.Z.shape[1]
        columns = W.permute(0, 1, 3, 2).reshape(S, Cb * K, R)  # one row per (C, output)
        f = torch.zeros(S, Cb, dtype=W.dtype, device=W.device)
        grad_t = torch.zeros(S, Cb * K, R, dtype=W.dtype, device=W.device)
        if n >= FUSED_ROWS and W.device.type == "cpu" and W.dtype == torch.float32 and path_kernel.available():
            self._fused_data_term(columns, n, f, grad_t)  # each row read once (decision 0104)
        else:
            step = EVALUATION_ROWS if EVALUATION_ROWS and W.device.type == "cpu" else n
            for start in range(0, n, step):
                rows = slice(start, min(start + step, n))
                f += self._data_block(rows, columns, n, grad_t)
        grad = grad_t.view(S, Cb, K, R).permute(0, 1, 3, 2).contiguous()
        weights_part = W[:, :, :-1, :]
        penalised = self.penalty_product(weights_part)
        f = f + 0.5 * (lam * weights_part * penalised).sum(dim=(2, 3))
        grad[:, :, :-1, :] += lam * penalised
        return f, grad

    def _fused_data_term(self, columns: torch.Tensor, n: int, f: torch.Tensor, grad_t: torch.Tensor) -> None:
        """The data term of every subset through :func:`crs.probes.path_kernel.group_pass`: loss into
        ``f`` (S, Cb), gradient into ``grad_t`` (S, Cb K, R), as :meth:`_data_block` over all rows."""
        assert path_kernel.group_pass is not None
        S, CbK, _ = columns.shape
        K = self.targets.shape[2]
        sigmoid = self.row_weights is not None
        loss = np.zeros(CbK // K)
        grad = np.zeros(grad_t.shape)  # float64 sums over the rows
        for s in range(S):
            weights = self.targets[s] if self.row_weights is None else self.row_weights[s]  # softmax: unused
            mask = np.zeros(K) if self.class_mask is None else self.class_mask[s].double().numpy()
            loss[:] = 0.0
            path_kernel.group_pass(
                self.Z[s].numpy(), np.ascontiguousarray(columns[s].numpy()), self.targets[s].numpy(),
                weights.numpy(), mask, sigmoid, 1.0 / n, grad[s], loss,
            )
            f[s] += torch.from_numpy(loss).to(f.dtype)
        grad_t += torch.from_numpy(grad).to(grad_t.dtype)

    def _data_block(self, rows: slice, columns: torch.Tensor, n: int, grad_t: torch.Tensor) -> torch.Tensor:
        """The loss of rows ``rows`` (S, Cb), its gradient added to ``grad_t`` (S, Cb K, R);
        ``columns`` (S, Cb K, R): the weights, one row per (C, output)."""
        S, CbK, R = columns.shape
        K = self.targets.shape[2]
        Cb = CbK // K
        Z = self.Z[:, rows]
        b = Z.shape[1]
        logits = batched_logits(columns, Z).reshape(S, b, Cb, K)
        if self.row_weights is not None:  # multilabel
            y = self.targets[:, rows, None, :]
            weights = self.row_weights[:, rows, None, :]
            loss = torch.nn.functional.softplus(logits) - y * logits
            f = (loss * weights).sum(dim=(1, 3))
            residual = (torch.sigmoid(logits) - y) * weights
        else:
            assert self.class_mask is not None  # multiclass and ordinal groups carry one
            logits = logits + self.class_mask[:, None, None, :]
            log_norm = torch.logsumexp(logits, dim=3, keepdim=True)
            y = self.targets[:, rows, None, :]
            picked = (torch.where(y > 0, logits, torch.zeros_like(logits)) * y).sum(dim=3, keepdim=True)
            f = (log_norm - picked).sum(dim=(1, 3)) / n
            residual = (torch.exp(logits - log_norm) - y) / n
        # residual^T Z rather than Z^T residual: the long axis stays contiguous (20-25 % faster here).
        grad_t.baddbmm_(residual.reshape(S, b, CbK).transpose(1, 2), Z)
        return f


def lbfgs(
    problem: GroupProblem, Cs: torch.Tensor, W0: torch.Tensor, options: SolverOptions, frozen: torch.Tensor | None = None
):
    """Batched L-BFGS with per-problem history and Armijo backtracking, in preconditioned coordinates.

    Returns the solution W (S, Cb, r+1, K) and a converged flag (S, Cb). ``frozen`` (S, Cb) marks
    problems that keep W0 (each problem's iterates are independent of the others', so freezing some
    changes nothing for the rest, and no copy of the group tensor is made to leave them out).
    """
    lam = problem.penalty(Cs)
    P = problem.preconditioner(Cs)
    batch = W0.shape[:2]

    def evaluate(u):
        f, g = problem.value_and_grad(u * P, lam)
        return f, g * P

    u = W0 / P
    f, g = evaluate(u)
    flat = lambda t: t.reshape(*batch, -1)  # noqa: E731
    s_hist: list[torch.Tensor] = []
    y_hist: list[torch.Tensor] = []
    rho_hist: list[torch.Tensor] = []
    converged = flat(g / P).abs().amax(dim=2) <= options.tol
    if frozen is not None:
        converged = converged | frozen
    stalled = torch.zeros_like(converged)
    for _ in range(options.max_iter):
        active = ~(converged | stalled)
        if not bool(active.any()):
            break
        q = flat(g).clone()
        alphas = []
        for s_k, y_k, rho_k in zip(reversed(s_hist), reversed(y_hist), reversed(rho_hist), strict=True):
            alpha = rho_k * (s_k * q).sum(dim=2)
            q -= alpha[..., None] * y_k
            alphas.append(alpha)
        if s_hist:
            sy = (s_hist[-1] * y_hist[-1]).sum(dim=2)
            yy = (y_hist[-1] * y_hist[-1]).sum(dim=2)
            q *= torch.where(yy > 0, sy / yy, torch.ones_like(yy))[..., None]
        for s_k, y_k, rho_k, alpha in zip(s_hist, y_hist, rho_hist, reversed(alphas), strict=True):
            beta = rho_k * (y_k * q).sum(dim=2)
            q += s_k * (alpha - beta)[..., None]
        direction = -q.view_as(u) * active[..., None, None]
        slope = (flat(g) * flat(direction)).sum(dim=2)
        bad = slope >= 0  # not a descent direction: restart from the gradient
        if bool(bad.any()):
            direction = torch.where(bad[..., None, None], -g * active[..., None, None], direction)
            slope = (flat(g) * flat(direction)).sum(dim=2)
        step = torch.ones_like(f)
        if not s_hist:
            step = torch.clamp(1.0 / flat(g).abs().sum(dim=2).clamp(min=1e-12), max=1.0)
        accepted = ~active
        u_new, f_new, g_new = u, f, g
        for _ in range(options.max_backtracks):
            trial = u + step[..., None, None] * direction
            f_trial, g_trial = evaluate(trial)
            # Armijo, or (the objective is convex along the line) a still non-positive slope at the
            # trial point: the latter is immune to float32 rounding of f near the optimum.
            still_descending = (flat(g_trial) * flat(direction)).sum(dim=2) <= 0
            ok = ((f_trial <= f + 1e-4 * step * slope) | still_descending) & ~accepted
            u_new = torch.where(ok[..., None, None], trial, u_new)
            f_new = torch.where(ok, f_trial, f_new)
            g_new = torch.where(ok[..., None, None], g_trial, g_new)
            accepted = accepted | ok
            if bool(accepted.all()):
                break
            step = torch.where(accepted, step, step * 0.5)
        stalled = stalled | ~accepted
        s_k, y_k = flat(u_new - u), flat(g_new - g)
        sy = (s_k * y_k).sum(dim=2)
        usable = sy > 1e-20
        s_hist.append(s_k * usable[..., None])
        y_hist.append(y_k * usable[..., None])
        rho_hist.append(torch.where(usable, 1.0 / sy.clamp(min=1e-20), torch.zeros_like(sy)))
        if len(s_hist) > options.history:
            s_hist.pop(0), y_hist.pop(0), rho_hist.pop(0)
        u, f, g = u_new, f_new, g_new
        converged = converged | (flat(g / P).abs().amax(dim=2) <= options.tol)
    return u * P, converged


# --- building the rotated problems -----------------------------------------------------------


def cpu_eigh(A: Any) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition by LAPACK's divide and conquer in A's own dtype (scipy):
    2x faster than ``numpy.linalg.eigh`` on a float32 768 x 768 Gram here (46 vs 93 ms, one thread)."""
    return scipy.linalg.eigh(A, driver="evd", overwrite_a=True, check_finite=False)


@dataclass(frozen=True)
class SubsetBasis:
    """A subset's standardiser and rotation: Z = ((X - center - mean) / std) @ V."""

    mean: np.ndarray  # (D,) float64, relative to the unit's center
    std: np.ndarray  # (D,) float64
    V: torch.Tensor  # (D, r)
    variance: torch.Tensor | None  # (r,) variance of Z's columns; None: measured from Z once projected
    Z: torch.Tensor | None  # (n, r) when it came free with the basis (row-space case), else None
    exact: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the float64 row space, for the polish


PROJECTION_ROWS = 8192
"""Rows per block when a subset is centered, its Gram accumulated or it is projected into the group
tensor: no full-size centered copy of a subset is ever made (at CheXpert size that copy was as large
as the group tensor itself)."""


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return np.dtype(np.float64 if dtype == torch.float64 else np.float32)


def centered_blocks(data: ProblemData, subset: np.ndarray, dtype: torch.dtype, block: int = PROJECTION_ROWS):
    """(start, rows minus the unit's center) over blocks of the subset, in ``dtype`` (numpy)."""
    np_dtype = _numpy_dtype(dtype)
    center = data.center.astype(np_dtype)
    buffer = np.empty((min(block, len(subset)), data.X_train.shape[1]), dtype=np_dtype)  # reused: consumers use each block at once
    for start in range(0, len(subset), block):
        rows = as_float(data.X_train[subset[start : start + block]], np_dtype, buffer)
        rows -= center
        yield start, rows


def centered_rows(data: ProblemData, subset: np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The subset's rows minus the unit's center, one (n, D) tensor in ``dtype`` (for n <= D only:
    larger subsets are handled in blocks)."""
    rows = as_float(data.X_train[subset], _numpy_dtype(dtype))
    rows -= data.center.astype(rows.dtype)
    return torch.from_numpy(rows).to(device)


def centered_gram(data: ProblemData, subset: np.ndarray, device: torch.device, dtype: torch.dtype) -> np.ndarray:
    """Xc^T Xc / n of the subset's centered rows, accumulated over row blocks in float64 (each block's
    product in ``dtype``)."""
    dim = data.X_train.shape[1]
    total = np.zeros((dim, dim))
    for _, rows in centered_blocks(data, subset, dtype):
        if device.type == "cpu":
            total += rows.T @ rows
        else:
            block = torch.from_numpy(rows).to(device)
            total += (block.T @ block).double().cpu().numpy()
    return total / len(subset)


def subset_basis(
    data: ProblemData, subset: np.ndarray, mean: np.ndarray, std: np.ndarray, device: torch.device, dtype: torch.dtype
) -> SubsetBasis:
    """Eigenbasis of the standardised subset.

    n > D: the eigenbasis of the standardised Gram matrix, which is the Gram of the centered rows
    (float products over row blocks, summed in float64) corrected in float64 for the subset's mean
    and std, so no standardised or full centered copy is made.
    n <= D: the row space (it holds the L2 optimum), from the n x n Gram of the standardised rows;
    there Z = U sqrt(n variance) comes free. On the CPU that basis is the polish's exact float64 one
    (:func:`crs.probes.polish.row_space_basis`, kept in ``exact``) in ``dtype``: one
    eigendecomposition per small subset, not two. Elsewhere the eigendecomposition runs in
    ``dtype`` (the rotation only has to be orthonormal to ~1e-6 for the L2 penalty to be unchanged).
    """
    n, dim = len(subset), data.X_train.shape[1]
    on_cpu = device.type == "cpu"
    np_dtype = _numpy_dtype(dtype)
    eigh = cpu_eigh if on_cpu else torch.linalg.eigh
    like = lambda a: a.astype(np_dtype) if on_cpu else torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
    exact = None
    if n > dim:
        gram = centered_gram(data, subset, device, dtype)
        standardised_gram = (gram - np.outer(mean, mean)) / np.outer(std, std)
        variance, V = eigh(like(standardised_gram))
        keep = variance > RANK_TOL * variance.max()
        Z = None
        V, variance = V[:, keep], variance[keep]
    elif on_cpu:  # the polish's exact float64 row space, computed once: this basis is its float copy
        exact = row_space_basis(subset_rows(data.X_train, subset), data.center + mean, std)
        V64, variance64, Z64 = exact
        keep = variance64 > RANK_TOL * variance64.max()
        V, variance, Z = V64[:, keep].astype(np_dtype), variance64[keep].astype(np_dtype), Z64[:, keep].astype(np_dtype)
    else:
        Xs = (centered_rows(data, subset, device, dtype) - like(mean)) / like(std)
        variance, U = eigh(Xs @ Xs.T / n)
        keep = variance > RANK_TOL * variance.max()
        U, variance = U[:, keep], variance[keep]
        scale = (variance * n) ** 0.5
        V = Xs.T @ U / scale
        Z = U * scale
    as_torch = (lambda a: torch.from_numpy(np.ascontiguousarray(a))) if on_cpu else (lambda a: a)  # noqa: E731
    return SubsetBasis(mean, std, as_torch(V), as_torch(variance), None if Z is None else as_torch(Z), exact)


def project_into(
    out: torch.Tensor, data: ProblemData, subset: np.ndarray, basis: SubsetBasis, device: torch.device, dtype: torch.dtype
) -> None:
    """Write Z = ((Xc - mean) / std) V into ``out`` (n, r) as Xc (V / std) - (mean / std) V, one
    block of rows at a time straight into the padded group tensor: no standardised or centered copy
    of the subset."""
    V = basis.V
    scaled = V / torch.as_tensor(basis.std, dtype=dtype, device=device)[:, None]
    offset = torch.as_tensor(basis.mean / basis.std, dtype=dtype, device=device) @ V
    if device.type == "cpu":
        target, scaled_np, offset_np = out.numpy(), scaled.numpy(), offset.numpy()
        for start, rows in centered_blocks(data, subset, dtype):
            block = target[start : start + len(rows)]
            np.matmul(rows, scaled_np, out=block)
            block -= offset_np
    else:
        for start, rows in centered_blocks(data, subset, dtype):
            out[start : start + len(rows)].copy_(torch.from_numpy(rows).to(device) @ scaled - offset)


def column_variance(Z: torch.Tensor) -> torch.Tensor:
    """Mean square of each column of Z (n, r), summed over row blocks in float64 (no n x r temporary)."""
    total = torch.zeros(Z.shape[1], dtype=torch.float64, device=Z.device)
    for start in range(0, Z.shape[0], PROJECTION_ROWS // 4):
        total += Z[start : start + PROJECTION_ROWS // 4].square().sum(dim=0, dtype=torch.float64)
    return (total / max(Z.shape[0], 1)).to(Z.dtype)


@dataclass
class GroupBases:
    problem: GroupProblem
    V: torch.Tensor  # (S, D, r)
    mean: np.ndarray  # (S, D) the standardisation Z refers to (relative to center): the subset's own, or the shared one
    std: np.ndarray  # (S, D)
    constant_bias: np.ndarray  # (S, K): NaN, or the logit of a constant label's prevalence
    exact: list | None = None  # per member: its float64 row space (SubsetBasis.exact), for the polish


@dataclass
class SharedBasis:
    """Every training row any large subset uses, standardised with the largest subset's mean and std
    and rotated into that subset's eigenbasis V once: ``Z = ((X - center - mean) / std) V`` with a
    ones column, rows ``rows`` (sorted).

    A subset s with its own mean m_s and std s_s has standardised rows ((X - center) - m_s) / s_s =
    (Z V^T) * (std / s_s) + (mean - m_s) / s_s, so its problem in these coordinates is its own
    exactly: logits Z u + b' with u = V^T diag(std / s_s) w (the shift goes into the unpenalised
    intercept) and penalty ||w||^2 = u^T A_s u, A_s = V^T diag((s_s / std)^2) V. The group tensor of
    a subset is then a gather of rows of Z instead of an n x D x D projection per subset.
    """

    V: torch.Tensor  # (D, D)
    mean: np.ndarray  # (D,) relative to the unit's center
    std: np.ndarray  # (D,)
    rows: np.ndarray  # (M,) training rows projected, sorted
    Z: torch.Tensor  # (M, D + 1): projected rows and a ones column

    def positions(self, subset: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.searchsorted(self.rows, subset), device=self.Z.device)


def shared_basis(
    data: ProblemData, device: torch.device, dtype: torch.dtype, means: np.ndarray | None = None,
    stds: np.ndarray | None = None,
) -> SharedBasis | None:
    """The eigenbasis (D, D) of the unit's largest standardised subset, if it has more rows than
    features and full rank, with the rows of every subset larger than D projected into it; else None
    (then a subset's own basis may hold directions this one dropped, so each subset keeps its own).
    ``means``, ``stds``: every unique subset's moments (:func:`subset_moments`), if already known."""
    dim = data.X_train.shape[1]
    largest_index = max(range(len(data.unique_subsets)), key=lambda u: len(data.unique_subsets[u]))
    largest = data.unique_subsets[largest_index]
    if len(largest) <= dim:
        return None
    if means is None or stds is None:
        mean, std = subset_standardiser(data.X_train, data.center, largest)
    else:
        mean, std = means[largest_index], stds[largest_index]
    basis = subset_basis(data, largest, mean, std, device, dtype)
    if basis.V.shape[1] != dim:
        return None
    rows = np.unique(np.concatenate([s for s in data.unique_subsets if len(s) > dim]))
    Z = torch.empty(len(rows), dim + 1, dtype=dtype, device=device)
    project_into(Z[:, :dim], data, rows, basis, device, dtype)
    Z[:, dim] = 1.0
    return SharedBasis(basis.V, mean, std, rows, Z)


def build_group(
    data: ProblemData, members: list[int], device: torch.device, dtype: torch.dtype,
    moments: tuple[np.ndarray, np.ndarray], shared: SharedBasis | None = None,
) -> GroupBases:
    """Standardise, rotate and pad the subsets ``members`` (all the same size) into one problem.

    ``moments``: every unique subset's (means, stds) (:func:`subset_moments`). ``shared``
    (:func:`shared_basis`): subsets with more rows than features take their rows of the shared
    projection (:func:`_shared_group`). Otherwise two passes keep memory at the group tensor plus a
    block of rows: the bases first (each needs only a D x D or n x n Gram), then each subset's Z
    projected block by block into its slice.
    """
    S, n, D = len(members), len(data.unique_subsets[members[0]]), data.X_train.shape[1]
    means, stds = moments[0][members], moments[1][members]
    if shared is not None and n > D:
        return _shared_group(data, members, device, dtype, means, stds, shared)
    bases = [subset_basis(data, data.unique_subsets[i], means[k], stds[k], device, dtype) for k, i in enumerate(members)]
    r = max(basis.V.shape[1] for basis in bases)
    exact = [basis.exact for basis in bases]
    Z_all = torch.zeros(S, n, r + 1, dtype=dtype, device=device)
    V_all = torch.zeros(S, D, r, dtype=dtype, device=device)
    var_all = torch.ones(S, r + 1, dtype=dtype, device=device)
    for i, (index, basis) in enumerate(zip(members, bases, strict=True)):
        rank = basis.V.shape[1]
        if basis.Z is not None:
            Z_all[i, :, :rank] = basis.Z
        else:
            project_into(Z_all[i, :, :rank], data, data.unique_subsets[index], basis, device, dtype)
        V_all[i, :, :rank] = basis.V
        var_all[i, :rank] = column_variance(Z_all[i, :, :rank]) if basis.variance is None else basis.variance
        bases[i] = None  # type: ignore[call-overload]  # its V now lives in V_all
    Z_all[:, :, r] = 1.0
    group = _group_bases(data, members, Z_all, V_all, var_all, means, stds, dtype, device)
    group.exact = exact
    return group


def _shared_group(
    data: ProblemData, members: list[int], device: torch.device, dtype: torch.dtype,
    means: np.ndarray, stds: np.ndarray, shared: SharedBasis,
) -> GroupBases:
    """The group's rows gathered from the shared projection, each subset centred on its own mean
    ((m_s - mean) / std) V, so the intercept stays decoupled from the weights as in the subset's own
    basis, with the penalty A_s that keeps each subset's own problem (see :class:`SharedBasis`). The
    optimum is the same; the diagonal preconditioner (each column's variance, measured, and
    diag(A_s)) nearly as good. The full fraction's one subset is every projected row: it uses the
    shared tensor itself (its own mean is the shared one, so nothing is centred)."""
    S, n, D = len(members), len(data.unique_subsets[members[0]]), data.X_train.shape[1]
    if S == 1 and n == len(shared.rows):
        Z = shared.Z[None]
    else:
        Z = torch.empty(S, n, D + 1, dtype=dtype, device=device)
        for i, index in enumerate(members):
            torch.index_select(shared.Z, 0, shared.positions(data.unique_subsets[index]), out=Z[i])
            offset = torch.as_tensor((means[i] - shared.mean) / shared.std, dtype=dtype, device=device) @ shared.V
            Z[i, :, :D] -= offset
    scale = torch.as_tensor(np.square(stds / shared.std), dtype=dtype, device=device)
    variance = torch.ones(S, D + 1, dtype=dtype, device=device)
    for i in range(S):
        variance[i, :D] = column_variance(Z[i, :, :D])
    V = shared.V[None].expand(S, D, D)
    return _group_bases(data, members, Z, V, variance, means, np.repeat(shared.std[None], S, axis=0), dtype, device,
                        shared.V, scale)


def _group_bases(
    data: ProblemData, members: list[int], Z: torch.Tensor, V: torch.Tensor, variance: torch.Tensor,
    means: np.ndarray, stds: np.ndarray, dtype: torch.dtype, device: torch.device,
    penalty_basis: torch.Tensor | None = None, penalty_scale: torch.Tensor | None = None,
) -> GroupBases:
    """The group's problem (targets, weights, masks from its subsets' labels) around its tensors."""
    parts = [subset_targets(data, data.unique_subsets[index]) for index in members]
    stack = lambda key: torch.as_tensor(np.stack([p[key] for p in parts]), dtype=dtype, device=device)  # noqa: E731
    multilabel = data.kind == "multilabel"
    problem = GroupProblem(
        Z=Z,
        targets=stack("targets"),
        row_weights=stack("row_weights") if multilabel else None,
        class_mask=stack("class_mask") if not multilabel else None,
        variance=variance,
        label_rows=stack("label_rows"),
        multilabel=multilabel,
        penalty_basis=penalty_basis,
        penalty_scale=penalty_scale,
    )
    return GroupBases(problem, V, means, stds, np.stack([p["constant"] for p in parts]))


def fold(
    bases: GroupBases, W: torch.Tensor, data: ProblemData, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rotated solutions (S', Cb, r+1, K) of the group's subsets ``rows`` (default: all) -> folded
    weights (S', Cb, D, K) and bias (S', Cb, K) on X - center. One V[s] @ W[s] product per subset
    (no batched copy of the group's D x r bases)."""
    rows = np.arange(len(bases.mean)) if rows is None else np.asarray(rows)
    S, Cb, R, K = W.shape
    flat = W[:, :, :-1, :].permute(0, 2, 1, 3).reshape(S, R - 1, Cb * K)
    W_std = np.stack([
        (bases.V[s] @ flat[i]).double().cpu().numpy().reshape(-1, Cb, K).transpose(1, 0, 2)
        for i, s in enumerate(rows)
    ])
    bias = W[:, :, -1, :].double().cpu().numpy()
    weights = np.empty_like(W_std)
    folded_bias = np.empty_like(bias)
    for i, s in enumerate(rows):
        if bases.problem.class_mask is not None:
            bias[i] += bases.problem.class_mask[s].double().cpu().numpy()
        constant = ~np.isnan(bases.constant_bias[s])
        for c in range(Cb):
            b = np.where(constant, bases.constant_bias[s], bias[i, c])
            w = np.where(constant[None, :], 0.0, W_std[i, c])
            weights[i, c], folded_bias[i, c] = fold_standardisation(w, b, bases.mean[s], bases.std[s])
    return weights, folded_bias


def _val_scores(
    data: ProblemData, centered: np.ndarray, weights: np.ndarray, bias: np.ndarray, selection: str,
    unique_ids: np.ndarray | list[int],
) -> np.ndarray:
    """Validation criterion (larger is better) for folded weights (S, Cb, D, K) of the unique subsets
    ``unique_ids``: (S, Cb). ``centered``: the validation features minus the unit's center, float32
    (computed once per fit). With a validation set per subset, each is scored on its own rows."""
    S, Cb, D, K = weights.shape
    if data.unique_val_subsets is None:
        logits = centered @ weights.transpose(2, 0, 1, 3).reshape(D, S * Cb * K).astype(np.float32)
        logits = logits.reshape(len(centered), S, Cb, K).transpose(1, 2, 0, 3) + bias[:, :, None, :]
        return validation_scores(data.y_val, link_function(logits, data.link), selection)

    def proba_of(i: int, rows: np.ndarray | None) -> np.ndarray:
        X = centered if rows is None else centered[rows]
        logits = X @ weights[i].transpose(1, 0, 2).reshape(D, Cb * K).astype(np.float32)
        return link_function(logits.reshape(len(X), Cb, K).transpose(1, 0, 2) + bias[i][:, None, :], data.link)

    return subset_validation_scores(data, proba_of, unique_ids, selection)


def fit(
    problem: ProblemData,
    selection: str,
    random_state: int = 0,
    n_jobs: int = 1,
    device: str = "cpu",
    dtype: str = "float32",
    path: str | None = None,
    patience: int | None = None,
    tol: float = 1e-5,
    path_tol: float = 1e-3,
    max_iter: int = 2000,
    share_basis: bool = True,
    family: str = "logistic",
    warm_groups: bool = True,
):
    """Fit every (unique subset, C) as batched problems grouped by subset size; choose C per subset.

    ``path``: ``warm`` (C ascending, warm starts, early stop after ``patience`` falls of the
    validation score in a row; default on CPU) or ``batched`` (every C at once; default on GPU).
    ``patience`` defaults to 1 for log-loss selection (validation log-loss is smooth and, over a C
    grid, falls then rises: its first rise marks the turn) and 2 for AUROC (flat and noisy near its
    top). The path is solved to ``path_tol`` (1e-3: these fits only choose C; on the bench units no
    selected C changed from 1e-4), then each subset's selected C is refined to ``tol`` from its path
    solution, so the probes kept meet the tight tolerance and the others cost little.
    ``share_basis``: subsets with more rows than features are rotated into the eigenbasis of the
    unit's largest subset (one D x D eigendecomposition per unit instead of one per subset).
    ``warm_groups``: with a shared basis, each label fraction's path starts from the previous (smaller,
    nested) fraction's solution at the first C instead of zero (:func:`warm_start`; same optimum,
    fewer L-BFGS steps).
    ``random_state`` and ``n_jobs`` are accepted for interface parity (the solver is deterministic;
    threads are the caller's torch setting).
    """
    torch_device = resolve_device(device)
    if dtype not in ("float32", "float64"):
        raise ProbeError(f"dtype {dtype!r} is not one of ('float32', 'float64')")
    torch_dtype = getattr(torch, dtype)
    path = path or ("batched" if torch_device.type == "cuda" else "warm")
    if patience is None:
        patience = 1 if lower_is_better(selection) else 2
    if path not in ("warm", "batched"):
        raise ProbeError(f"path {path!r} is not one of ('warm', 'batched')")
    final_options = SolverOptions(tol=tol, max_iter=max_iter)
    path_options = SolverOptions(tol=max(tol, path_tol), max_iter=max_iter)
    U, nC, D, K = len(problem.unique_subsets), len(problem.Cs), problem.X_train.shape[1], problem.n_classes
    weights = np.zeros((U, D, K))  # only the chosen fit of each subset is kept
    bias = np.zeros((U, K))
    val_centered = np.empty(problem.X_val.shape, dtype=np.float32)  # in blocks: no float64 copy
    center32 = problem.center.astype(np.float32)
    for start in range(0, len(val_centered), PROJECTION_ROWS):
        block = as_float(problem.X_val[start : start + PROJECTION_ROWS], np.float32)
        np.subtract(block, center32, out=val_centered[start : start + PROJECTION_ROWS])
    scores = np.full((U, nC), np.nan)
    converged = np.ones(U, dtype=bool)
    selected = np.zeros(U, dtype=np.int64)
    sizes = np.array([len(s) for s in problem.unique_subsets])
    Cs = torch.as_tensor(problem.Cs, dtype=torch_dtype, device=torch_device)
    with torch.no_grad():
        moments = subset_moments(problem.X_train, problem.center, problem.unique_subsets)
        shared = shared_basis(problem, torch_device, torch_dtype, *moments) if share_basis else None
        previous_first_C = None  # the previous group's path solutions at the first C, in the shared basis
        for size in np.unique(sizes):
            members = np.flatnonzero(sizes == size).tolist()
            bases = build_group(problem, members, torch_device, torch_dtype, moments, shared)
            S, R = len(members), bases.problem.Z.shape[2]
            in_shared_basis = warm_groups and shared is not None and size > D
            if path == "batched":
                W0 = torch.zeros(S, nC, R, K, dtype=torch_dtype, device=torch_device)
                W_path, _ = lbfgs(bases.problem, Cs, W0, path_options)
                w, b = fold(bases, W_path, problem)
                scores[members] = _val_scores(problem, val_centered, w, b, selection, members)
            else:
                first_C_start = warm_start(previous_first_C, bases.problem) if in_shared_basis else None
                W_path = _warm_path(
                    problem, bases, members, Cs, path_options, selection, patience, val_centered, scores, first_C_start
                )
                previous_first_C = W_path[:, 0].clone() if in_shared_basis else None
            # Refine each subset's selected C to the final tolerance, warm from its path solution.
            best = selected[members] = select_C(scores[members])
            rows = torch.as_tensor(best, device=torch_device)
            W0 = W_path[torch.arange(S, device=torch_device), rows][:, None]
            W, ok = lbfgs(bases.problem, Cs[rows][:, None], W0, final_options)
            w, b = fold(bases, W, problem)
            for k, index in enumerate(members):  # the records' probes: float64 on the exact problem
                weights[index], bias[index], converged[index] = polish(
                    problem, index, float(problem.Cs[best[k]]), w[k, 0], b[k, 0], moments[0][index],
                    moments[1][index], *_full_rank_start(bases, W, k, moments[1][index]),
                    row_space=None if bases.exact is None else bases.exact[k],
                )
                scores[index, best[k]] = validation_score(problem, index, weights[index], bias[index], selection)
            del bases, W_path, W0, W  # free this group's tensors before the next group is built
        del shared
    return assemble_linear(problem, "torch", family, selection, scores, weights, bias, converged, best=selected)


def _full_rank_start(bases: GroupBases, W: torch.Tensor, k: int, std: np.ndarray) -> tuple[Preconditioner | None, np.ndarray | None]:
    """Member k's basis and solution as the polish's preconditioner and start, when the basis spans
    every direction (then its float32 rounding cannot move the optimum); else (None, None) and the
    polish builds its own float64 basis. In the basis's coordinates the standardised weights are
    diag(std / basis std) V u (the shared basis's subsets carry the shared std; the others their own)."""
    V = bases.V[k]
    if V.shape[1] != V.shape[0] or not bool((V.abs().amax(dim=0) > 0).all()):  # padded: lower rank
        return None, None
    basis = (std / bases.std[k])[:, None] * V.double().cpu().numpy()
    variance = bases.problem.variance[k, :-1].double().cpu().numpy()
    start = W[k, 0].double().cpu().numpy()
    problem = bases.problem
    Z = problem.Z[k, :, :-1].cpu().numpy()  # float32 rows in the basis: enough for a preconditioner
    curvature = data_curvature(
        Z, start, None if problem.row_weights is None else problem.row_weights[k].double().cpu().numpy(),
        None if problem.class_mask is None else problem.class_mask[k].double().cpu().numpy(),
    )
    preconditioner = Preconditioner(basis, variance, np.square(basis).sum(axis=0), curvature)
    return preconditioner, start


def warm_start(previous: torch.Tensor | None, problem: GroupProblem) -> torch.Tensor | None:
    """A start (S, 1, R, K) for a group's first C: the previous (smaller, nested) label fraction's
    solutions at that C, when both groups live in the shared basis (same R). Member s takes the
    previous group's member s (the same seed) or, when the counts differ (the full fraction's one
    subset), their mean; outputs the group cannot fit (an absent class, a constant label) start at 0.
    The optimum is the problem's own; only the number of L-BFGS steps to reach it changes."""
    if previous is None or previous.shape[1] != problem.Z.shape[2]:
        return None
    S = problem.Z.shape[0]
    start = previous if previous.shape[0] == S else previous.mean(dim=0, keepdim=True).expand(S, -1, -1)
    if problem.multilabel:
        live = problem.label_rows > 0
    else:
        assert problem.class_mask is not None
        live = torch.isfinite(problem.class_mask)
    return (start * live[:, None, :].to(start.dtype))[:, None].clone()


def _warm_path(
    problem, bases, members, Cs, options, selection, patience, val_centered, scores, start: torch.Tensor | None = None
) -> torch.Tensor:
    """C ascending, each fit warm-started from the previous C (the first from ``start``, else 0); a
    subset stops after ``patience`` falls of its validation score. Fills the validation scores of
    the C reached; returns the rotated path solutions (S, nC, R, K) (zeros where not reached)."""
    S, R, K = len(members), bases.problem.Z.shape[2], problem.n_classes
    W_path = torch.zeros(S, len(Cs), R, K, dtype=bases.problem.Z.dtype, device=bases.problem.Z.device)
    W = start if start is not None else torch.zeros(S, 1, R, K, dtype=W_path.dtype, device=W_path.device)
    best = np.full(S, -np.inf)
    falls = np.zeros(S, dtype=int)
    running = np.arange(S)
    for c in range(len(Cs)):
        stopped = torch.ones(S, 1, dtype=torch.bool, device=W.device)
        stopped[torch.as_tensor(running, device=W.device)] = False
        W, _ = lbfgs(bases.problem, Cs[c : c + 1], W, options, frozen=stopped)
        W_path[running, c] = W[running, 0]
        w, b = fold(bases, W[running], problem, running)
        rows = np.asarray(members)[running]
        score = _val_scores(problem, val_centered, w, b, selection, rows)[:, 0]
        scores[rows, c] = score
        falls[running] = np.where(score < best[running], falls[running] + 1, 0)
        best[running] = np.maximum(best[running], score)
        running = running[falls[running] < patience]
        if len(running) == 0:
            break
    return W_path
