"""How many full float64 passes the polish (docs/decisions/0029) makes on one paper-sized unit.

Counts do not depend on the machine's load (on this workplace's shared 2-core machines, times do):
each objective evaluation of the polish is one pass over its subset's rows (two float64 products
with every row), counted by :data:`crs.probes.polish.PASSES`. The unit is `crs bench paper-scale`'s
own generated task (CheXpert's 5 labels or ISIC's 8 classes, planted signal) at ``--scale`` of the
paper's size, with the paper's label fractions, seeds and C grid, fitted by the torch backend on one
thread. Each variant is fitted in turn in one process, so the CPU seconds are side by side:

    python scripts/polish_counts.py [--task chexpert] [--scale 0.15] [--variant NAME ...] [--validation fraction]

Variants: ``before`` (the evaluation before decision 0075: a new float64 array for each block of
each evaluation instead of one reused buffer, and the products with the rows through torch),
``numpy`` (this code with ``CRS_NO_NUMBA=1``: each block converted to float64 and read twice through
BLAS, the evaluation of decision 0075), ``default`` (this code: with numba, the fused float32-read pass
of decision 0100), ``tol=X`` (the float32 refinement's tolerance before the polish; the default is the
backend's), ``polish=X`` (the polish's gradient tolerance). Prints, per variant, the polish's
evaluations per probe by label fraction, its full passes in units of the training rows, and the
fit's CPU seconds; the first variant's probes are the reference for the logits' largest difference
relative to their spread on the test rows.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from crs.bench import paper_scale
from crs.data.base import VALIDATION_STREAM, nested_label_fractions
from crs.probes import fit_probes, torch_batched
from crs.probes import polish as polish_module
from crs.probes.base import as_float

FRACTIONS = (0.01, 0.05, 0.1, 0.25, 1.0)
CS = (0.001, 0.01, 0.1, 1.0, 10.0)


def unit(task_name: str, scale: float, dim: int):
    task = next(t for t in paper_scale.TASKS if t.name == task_name)
    config = paper_scale.PaperScaleConfig(scale=scale, dim=dim)
    table = paper_scale.task_table(task, paper_scale.task_size(task, config), 0)
    X = np.concatenate(list(paper_scale.feature_blocks(task, table, 0, dim, 0))).astype(np.float16)
    split = {name: table.splits == name for name in ("train", "val", "test")}
    train_labels = table.labels[split["train"]]
    subsets, fractions = [], []
    for seed in range(5):
        drawn = nested_label_fractions(train_labels, FRACTIONS, seed, 3)
        subsets += [drawn[f] for f in sorted(drawn)]
        fractions += sorted(drawn)
    return task.kind, X[split["train"]], train_labels, X[split["val"]], table.labels[split["val"]], X[split["test"]], subsets, fractions


def fraction_validation_rows(val_labels: np.ndarray) -> list[np.ndarray]:
    """Per probe (in :func:`unit`'s order), the validation rows drawn at its label fraction, as a
    stage-2 unit draws them (``validation = "fraction"``, the default)."""
    rows: list[np.ndarray] = []
    for seed in range(5):
        drawn = nested_label_fractions(val_labels, FRACTIONS, seed, 3, stream=VALIDATION_STREAM)
        rows += [drawn[f] for f in sorted(drawn)]
    return rows


def relative_logits(probes, X: np.ndarray) -> np.ndarray:
    logits = np.einsum("nd,udk->unk", X.astype(np.float64) - probes.center, probes.weights) + probes.bias[:, None, :]
    logits -= logits[:, :1, :]  # relative to the first row, as the rank keys
    return np.where(np.isfinite(logits), logits, 0.0)


def _fresh_blocks(self):
    """ExactProblem._blocks before 0075: every block of every evaluation converted into a new array."""
    if self._converted is not None or self.rows.dtype == np.float64:
        rows = self.rows if self._converted is None else self._converted
        for start in range(0, len(rows), polish_module.BLOCK_ROWS):
            yield start, rows[start : start + polish_module.BLOCK_ROWS]
        return
    for start in range(0, len(self.rows), polish_module.BLOCK_ROWS):
        yield start, as_float(self.rows[start : start + polish_module.BLOCK_ROWS], np.float64)


def _torch_value_and_grad(self, u: np.ndarray) -> tuple[float, np.ndarray]:
    """ExactProblem.value_and_grad before 0075: the rows' two products through torch (same function)."""
    polish_module.PASSES.evaluations += 1
    polish_module.PASSES.rows += len(self.rows)
    weights = self.weights(u)
    if self._basis is None:
        scaled, intercept = weights, u[-1]
    else:
        assert self.std is not None and self.offset is not None
        scaled = weights / self.std[:, None]  # on raw features
        intercept = u[-1] - self.offset @ scaled
    n = len(self.rows)
    value = 0.0
    raw_grad = torch.zeros(u.shape[1], scaled.shape[0], dtype=torch.float64)
    residual_sum = np.zeros(u.shape[1])
    scaled_t = torch.from_numpy(np.ascontiguousarray(scaled))
    for start, block in self._blocks():
        block_t = torch.from_numpy(block)
        logits = (block_t @ scaled_t).numpy()
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
        # residual^T X rather than X^T residual: the long axis stays contiguous (torch: ~2x numpy here)
        raw_grad += torch.from_numpy(np.ascontiguousarray(residual.T)) @ block_t
        residual_sum += residual.sum(axis=0)
    grad = np.empty_like(u)
    grad[-1] = residual_sum
    if self._basis is None:
        grad[:-1] = raw_grad.numpy().T + self.lam * weights
    else:  # d/d(weights) of the data term, (X - offset)^T R / std, from the raw products; all (K, D)
        assert self.std is not None and self.offset is not None
        data_grad = raw_grad.numpy()
        data_grad -= residual_sum[:, None] * self.offset[None, :]
        data_grad /= self.std[None, :]
        data_grad += self.lam[:, None] * weights.T
        grad[:-1] = (torch.from_numpy(data_grad) @ self._basis).numpy().T
    value += 0.5 * float((self.lam * weights * weights).sum())
    return value, grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="chexpert", choices=[t.name for t in paper_scale.TASKS])
    parser.add_argument("--scale", type=float, default=0.15)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--variant", action="append", default=None)
    parser.add_argument("--validation", choices=("full", "fraction"), default="full",
                        help="C chosen on all validation rows (as before) or on rows drawn per fraction (as a unit does)")
    args = parser.parse_args()
    kind, X_train, y_train, X_val, y_val, X_test, subsets, fractions = unit(args.task, args.scale, args.dim)
    val_subsets = fraction_validation_rows(y_val) if args.validation == "fraction" else None
    print(f"{args.task} at scale {args.scale}: {len(X_train)} training rows, {len(subsets)} probes", flush=True)
    original = polish_module.polish
    sizes = np.array([len(s) for s in subsets])
    torch.set_num_threads(1)
    reference = None
    buffered_blocks = polish_module.ExactProblem._blocks
    current_value_and_grad = polish_module.ExactProblem.value_and_grad
    for variant in args.variant or ["default"]:
        options: dict = {}
        torch_batched.polish = original
        os.environ.pop("CRS_NO_NUMBA", None)
        polish_module.ExactProblem._blocks = buffered_blocks  # type: ignore[method-assign]
        polish_module.ExactProblem.value_and_grad = current_value_and_grad  # type: ignore[method-assign]
        if variant == "before":
            polish_module.ExactProblem._blocks = _fresh_blocks  # type: ignore[method-assign]
            polish_module.ExactProblem.value_and_grad = _torch_value_and_grad  # type: ignore[method-assign]
        elif variant == "numpy":
            os.environ["CRS_NO_NUMBA"] = "1"
        elif variant.startswith("tol="):
            options["tol"] = float(variant[4:])
        elif variant.startswith("polish="):
            torch_batched.polish = functools.partial(original, tol=float(variant[7:]))
        per_probe: list[tuple[int, int]] = []

        polish_seconds = [0.0]

        def counted(data, unique, *rest, inner=torch_batched.polish, log=per_probe, clock=polish_seconds, **kw):
            before, started = polish_module.PASSES.evaluations, time.process_time()
            out = inner(data, unique, *rest, **kw)
            clock[0] += time.process_time() - started
            log.append((len(data.unique_subsets[unique]), polish_module.PASSES.evaluations - before))
            return out

        torch_batched.polish = counted
        polish_module.PASSES.reset()
        with threadpool_limits(1):
            start = time.process_time()
            probes = fit_probes(X_train, y_train, X_val, y_val, subsets, kind, backend="torch", Cs=CS,
                                val_subsets=val_subsets, **options)
            seconds = time.process_time() - start
        torch_batched.polish = original
        counts = np.array(per_probe)  # (size, evaluations) per polished subset; a fraction's subsets share a size
        line = ", ".join(
            f"{f:g}: {counts[np.isin(counts[:, 0], sizes[np.asarray(fractions) == f]), 1].mean():.1f}" for f in FRACTIONS
        )
        passes = polish_module.PASSES.rows / len(X_train)
        logits = relative_logits(probes, X_test)
        if reference is None:
            reference, difference = logits, 0.0
        else:
            spread = np.ptp(reference, axis=1).max(axis=1)
            difference = float((np.abs(logits - reference).max(axis=(1, 2)) / np.maximum(spread, 1e-300)).max())
        print(f"{variant:14s} polish evaluations per probe by fraction {{{line}}}; "
              f"{polish_module.PASSES.evaluations} evaluations, {passes:.1f} full passes; fit {seconds:.1f} CPU s "
              f"(polish {polish_seconds[0]:.1f}); "
              f"logits vs the first variant {difference:.1e} of their spread; C {sorted(set(probes.selected_C))}",
              flush=True)


if __name__ == "__main__":
    main()
