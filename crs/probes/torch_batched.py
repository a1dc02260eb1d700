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
  on GPU) solves every C at once from zero.
* Identical subsets (the 100 % fraction drawn by every seed) are fitted once (see ``prepare``).

Convergence: a problem stops when the infinity norm of the gradient of the mean-form objective
(mean loss + ||w||^2 / (2 C n)) in the rotated coordinates is below ``tol`` (1e-5, ten times
tighter than scikit-learn's default on the same objective); ``ProbeSet.converged`` records it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from crs.probes.base import ProbeError, ProblemData, constant_label_bias, fold_standardisation
from crs.probes.selection import assemble_linear, select_C, validation_scores

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


def batched_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` batched; on the CPU through numpy's BLAS, which runs these skinny products (n x r
    times r x K with K ~ 8) 2-5x faster than ``torch.bmm`` here (measured on the 2-core dev machine:
    5 x 1250 x 769 times 769 x 8, 4.7 ms vs 10 ms; the transposed product 5.5 ms vs 26 ms)."""
    if a.device.type != "cpu":
        return torch.bmm(a, b)
    return torch.from_numpy(np.matmul(a.numpy(), b.contiguous().numpy()))


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

    def penalty(self, Cs: torch.Tensor) -> torch.Tensor:
        """1 / (C n) per (subset, C, output): (S, Cb, 1, K). ``Cs`` is (Cb,) shared by the subsets,
        or (S, Cb) per subset (the refit of each subset's selected C)."""
        per_subset = Cs if Cs.dim() == 2 else Cs[None, :]
        return 1.0 / (per_subset[:, :, None, None] * self.label_rows.clamp(min=1)[:, None, None, :])

    def preconditioner(self, Cs: torch.Tensor) -> torch.Tensor:
        """1 / sqrt(diagonal curvature) per (subset, C, coordinate, output): (S, Cb, r+1, K)."""
        lam = self.penalty(Cs)
        is_weight = torch.ones_like(self.variance)
        is_weight[:, -1] = 0
        curvature = CURVATURE * self.variance[:, None, :, None] + lam * is_weight[:, None, :, None]
        return curvature.rsqrt()

    def value_and_grad(self, W: torch.Tensor, lam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean-form objective and its gradient for W (S, Cb, r+1, K); returns f (S, Cb)."""
        S, Cb, R, K = W.shape
        n = self.Z.shape[1]
        logits = batched_matmul(self.Z, W.permute(0, 2, 1, 3).reshape(S, R, Cb * K)).view(S, n, Cb, K)
        if self.multilabel:
            y = self.targets[:, :, None, :]
            weights = self.row_weights[:, :, None, :]
            loss = torch.nn.functional.softplus(logits) - y * logits
            f = (loss * weights).sum(dim=(1, 3))
            residual = (torch.sigmoid(logits) - y) * weights
        else:
            logits = logits + self.class_mask[:, None, None, :]
            log_norm = torch.logsumexp(logits, dim=3, keepdim=True)
            y = self.targets[:, :, None, :]
            picked = (torch.where(y > 0, logits, torch.zeros_like(logits)) * y).sum(dim=3, keepdim=True)
            f = (log_norm - picked).sum(dim=(1, 3)) / n
            residual = (torch.exp(logits - log_norm) - y) / n
        grad = batched_matmul(self.Z.transpose(1, 2), residual.reshape(S, n, Cb * K)).view(S, R, Cb, K)
        grad = grad.permute(0, 2, 1, 3).contiguous()
        weights_part = W[:, :, :-1, :]
        f = f + 0.5 * (lam * weights_part.square()).sum(dim=(2, 3))
        grad[:, :, :-1, :] += lam * weights_part
        return f, grad


def lbfgs(problem: GroupProblem, Cs: torch.Tensor, W0: torch.Tensor, options: SolverOptions):
    """Batched L-BFGS with per-problem history and Armijo backtracking, in preconditioned coordinates.

    Returns the solution W (S, Cb, r+1, K) and a converged flag (S, Cb).
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


def cpu_eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition by LAPACK's divide and conquer in A's own dtype (scipy):
    2x faster than ``numpy.linalg.eigh`` on a float32 768 x 768 Gram here (46 vs 93 ms, one thread)."""
    return scipy.linalg.eigh(A, driver="evd", overwrite_a=True, check_finite=False)


def rotate_subset(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eigenbasis of a standardised subset X (n, D): returns Z = X V (n, r), V (D, r), variance (r,).

    Computed in X's dtype (float32 by default: the rotation only has to be orthonormal to ~1e-6
    for the L2 penalty to be unchanged, and float32 halves the cost, which is ~40 % of a fit);
    on the CPU through numpy's LAPACK.
    """
    n, dim = X.shape
    on_cpu = X.device.type == "cpu"
    A = X.numpy() if on_cpu else X
    eigh = cpu_eigh if on_cpu else torch.linalg.eigh
    if n > dim:
        variance, V = eigh(A.T @ A / n)
        keep = variance > RANK_TOL * variance.max()
        V, variance = V[:, keep], variance[keep]
    else:
        variance, U = eigh(A @ A.T / n)
        keep = variance > RANK_TOL * variance.max()
        U, variance = U[:, keep], variance[keep]
        V = A.T @ U / (variance * n) ** 0.5
    Z = A @ V
    if on_cpu:
        return torch.from_numpy(np.ascontiguousarray(Z)), torch.from_numpy(np.ascontiguousarray(V)), torch.from_numpy(variance)
    return Z, V, variance


@dataclass
class GroupBases:
    problem: GroupProblem
    V: torch.Tensor  # (S, D, r)
    mean: np.ndarray  # (S, D) relative to center
    std: np.ndarray  # (S, D)
    constant_bias: np.ndarray  # (S, K): NaN, or the logit of a constant label's prevalence


def build_group(data: ProblemData, members: list[int], device: torch.device, dtype: torch.dtype) -> GroupBases:
    """Standardise, rotate and pad the subsets ``members`` (all the same size) into one problem."""
    K = data.n_classes
    Zs, Vs, variances, means, stds, targets, row_weights, label_rows, class_masks, const = ([] for _ in range(10))
    for index in members:
        subset = data.unique_subsets[index]
        X = data.X_train[subset].astype(np.float64) - data.center
        mean = X.mean(axis=0)
        std = np.maximum(X.std(axis=0), 1e-6)
        Xs = torch.as_tensor((X - mean) / std, dtype=dtype, device=device)
        Z, V, variance = rotate_subset(Xs)
        Zs.append(Z), Vs.append(V), variances.append(variance), means.append(mean), stds.append(std)
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
            targets.append(np.where(valid, y, 0.0))
            row_weights.append(valid / np.maximum(rows, 1))
            label_rows.append(rows)
        else:
            targets.append(np.eye(K)[y])
            present = np.bincount(y, minlength=K) > 0
            class_masks.append(np.where(present, 0.0, -np.inf))
            label_rows.append(np.full(K, len(y)))
        const.append(constant)
    r = max(Z.shape[1] for Z in Zs)
    n = Zs[0].shape[0]
    S = len(members)
    Z_all = torch.zeros(S, n, r + 1, dtype=dtype, device=device)
    V_all = torch.zeros(S, Vs[0].shape[0], r, dtype=dtype, device=device)
    var_all = torch.ones(S, r + 1, dtype=dtype, device=device)
    for i, (Z, V, variance) in enumerate(zip(Zs, Vs, variances, strict=True)):
        Z_all[i, :, : Z.shape[1]] = Z
        V_all[i, :, : V.shape[1]] = V
        var_all[i, : len(variance)] = variance
    Z_all[:, :, r] = 1.0
    as_tensor = lambda a: torch.as_tensor(np.stack(a), dtype=dtype, device=device)  # noqa: E731
    problem = GroupProblem(
        Z=Z_all,
        targets=as_tensor(targets),
        row_weights=as_tensor(row_weights) if data.kind == "multilabel" else None,
        class_mask=as_tensor(class_masks) if data.kind != "multilabel" else None,
        variance=var_all,
        label_rows=as_tensor(label_rows),
        multilabel=data.kind == "multilabel",
    )
    return GroupBases(problem, V_all, np.stack(means), np.stack(stds), np.stack(const))


def fold(bases: GroupBases, W: torch.Tensor, data: ProblemData) -> tuple[np.ndarray, np.ndarray]:
    """Rotated solutions (S, Cb, r+1, K) -> folded weights (S, Cb, D, K) and bias (S, Cb, K) on X - center."""
    W_std = torch.einsum("sdr,scrk->scdk", bases.V, W[:, :, :-1, :]).double().cpu().numpy()
    bias = W[:, :, -1, :].double().cpu().numpy()
    S, Cb = bias.shape[:2]
    weights = np.empty_like(W_std)
    folded_bias = np.empty_like(bias)
    for s in range(S):
        if bases.problem.class_mask is not None:
            bias[s] += bases.problem.class_mask[s].double().cpu().numpy()
        constant = ~np.isnan(bases.constant_bias[s])
        for c in range(Cb):
            b = np.where(constant, bases.constant_bias[s], bias[s, c])
            w = np.where(constant[None, :], 0.0, W_std[s, c])
            weights[s, c], folded_bias[s, c] = fold_standardisation(w, b, bases.mean[s], bases.std[s])
    return weights, folded_bias


def _val_scores(data: ProblemData, weights: np.ndarray, bias: np.ndarray, selection: str) -> np.ndarray:
    """Validation criterion (larger is better) for folded weights (S, Cb, D, K): (S, Cb)."""
    from crs.probes.base import link_function

    S, Cb, D, K = weights.shape
    centered = (data.X_val - data.center).astype(np.float32)
    logits = centered @ weights.transpose(2, 0, 1, 3).reshape(D, S * Cb * K).astype(np.float32)
    logits = logits.reshape(len(centered), S, Cb, K).transpose(1, 2, 0, 3) + bias[:, :, None, :]
    return validation_scores(data.y_val, link_function(logits, data.link), selection)


def fit(
    problem: ProblemData,
    selection: str,
    random_state: int = 0,
    n_jobs: int = 1,
    device: str = "cpu",
    dtype: str = "float32",
    path: str | None = None,
    patience: int = 2,
    tol: float = 1e-5,
    path_tol: float = 1e-4,
    max_iter: int = 2000,
    family: str = "logistic",
):
    """Fit every (unique subset, C) as batched problems grouped by subset size; choose C per subset.

    ``path``: ``warm`` (C ascending, warm starts, early stop after ``patience`` falls of the
    validation score; default on CPU) or ``batched`` (every C at once; default on GPU). The path is
    solved to ``path_tol`` (scikit-learn's default tolerance: these fits only choose C), then each
    subset's selected C is refined to ``tol`` from its path solution, so the probes kept meet the
    tight tolerance and the others cost what the reference pays for them.
    ``random_state`` and ``n_jobs`` are accepted for interface parity (the solver is deterministic;
    threads are the caller's torch setting).
    """
    torch_device = resolve_device(device)
    if dtype not in ("float32", "float64"):
        raise ProbeError(f"dtype {dtype!r} is not one of ('float32', 'float64')")
    torch_dtype = getattr(torch, dtype)
    path = path or ("batched" if torch_device.type == "cuda" else "warm")
    if path not in ("warm", "batched"):
        raise ProbeError(f"path {path!r} is not one of ('warm', 'batched')")
    final_options = SolverOptions(tol=tol, max_iter=max_iter)
    path_options = SolverOptions(tol=max(tol, path_tol), max_iter=max_iter)
    U, nC, D, K = len(problem.unique_subsets), len(problem.Cs), problem.X_train.shape[1], problem.n_classes
    weights = np.zeros((U, nC, D, K))
    bias = np.zeros((U, nC, K))
    scores = np.full((U, nC), np.nan)
    converged = np.ones(U, dtype=bool)
    selected = np.zeros(U, dtype=np.int64)
    sizes = np.array([len(s) for s in problem.unique_subsets])
    Cs = torch.as_tensor(problem.Cs, dtype=torch_dtype, device=torch_device)
    with torch.no_grad():
        for size in np.unique(sizes):
            members = np.flatnonzero(sizes == size).tolist()
            bases = build_group(problem, members, torch_device, torch_dtype)
            S, R = len(members), bases.problem.Z.shape[2]
            if path == "batched":
                W0 = torch.zeros(S, nC, R, K, dtype=torch_dtype, device=torch_device)
                W_path, _ = lbfgs(bases.problem, Cs, W0, path_options)
                w, b = fold(bases, W_path, problem)
                weights[members], bias[members] = w, b
                scores[members] = _val_scores(problem, w, b, selection)
            else:
                W_path = _warm_path(problem, bases, members, Cs, path_options, selection, patience, weights, bias, scores)
            # Refine each subset's selected C to the final tolerance, warm from its path solution.
            best = selected[members] = select_C(scores[members])
            rows = torch.as_tensor(best, device=torch_device)
            W0 = W_path[torch.arange(S, device=torch_device), rows][:, None]
            W, ok = lbfgs(bases.problem, Cs[rows][:, None], W0, final_options)
            w, b = fold(bases, W, problem)
            weights[members, best], bias[members, best] = w[:, 0], b[:, 0]
            scores[members, best] = _val_scores(problem, w, b, selection)[:, 0]
            converged[members] = ok[:, 0].cpu().numpy()
    return assemble_linear(problem, "torch", family, selection, scores, weights, bias, converged, best=selected)


def _warm_path(problem, bases, members, Cs, options, selection, patience, weights, bias, scores) -> torch.Tensor:
    """C ascending, each fit warm-started from the previous C; a subset stops after ``patience``
    falls of its validation score. Fills weights/bias/scores of the C reached; returns the rotated
    path solutions (S, nC, R, K) (zeros where not reached)."""
    S, R, K = len(members), bases.problem.Z.shape[2], problem.n_classes
    W_path = torch.zeros(S, len(Cs), R, K, dtype=bases.problem.Z.dtype, device=bases.problem.Z.device)
    W = torch.zeros(S, 1, R, K, dtype=W_path.dtype, device=W_path.device)
    best = np.full(S, -np.inf)
    falls = np.zeros(S, dtype=int)
    running = np.arange(S)
    for c in range(len(Cs)):
        sub = bases.problem if len(running) == S else _select(bases.problem, running)
        W[running], _ = lbfgs(sub, Cs[c : c + 1], W[running], options)
        W_path[running, c] = W[running, 0]
        w, b = fold(_select_bases(bases, running), W[running], problem)
        rows = np.asarray(members)[running]
        weights[rows, c], bias[rows, c] = w[:, 0], b[:, 0]
        score = _val_scores(problem, w, b, selection)[:, 0]
        scores[rows, c] = score
        falls[running] = np.where(score < best[running], falls[running] + 1, 0)
        best[running] = np.maximum(best[running], score)
        running = running[falls[running] < patience]
        if len(running) == 0:
            break
    return W_path


def _select(problem: GroupProblem, rows: np.ndarray) -> GroupProblem:
    index = torch.as_tensor(rows, device=problem.Z.device)
    pick = lambda t: None if t is None else t[index]  # noqa: E731
    return GroupProblem(
        Z=pick(problem.Z),
        targets=pick(problem.targets),
        row_weights=pick(problem.row_weights),
        class_mask=pick(problem.class_mask),
        variance=pick(problem.variance),
        label_rows=pick(problem.label_rows),
        multilabel=problem.multilabel,
    )


def _select_bases(bases: GroupBases, rows: np.ndarray) -> GroupBases:
    index = torch.as_tensor(rows, device=bases.V.device)
    return GroupBases(
        _select(bases.problem, rows), bases.V[index], bases.mean[rows], bases.std[rows], bases.constant_bias[rows]
    )
