"""What the float64 polish (docs/decisions/0029) costs on one CheXpert-sized unit, side by side.

Planted float16 features of CheXpert's size (by default 114,793 training rows x 1,024 features, 5
labels, the paper's label fractions and seeds, 8 C values), fitted by the torch backend twice in one
process on one thread: with the polish, and with it replaced by the float32 solution (the code
before 0029). Prints CPU seconds of each and their ratio. About 1.5 GB of memory; a few minutes.

    python scripts/polish_cost.py [--rows N] [--dim D]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from crs.probes import fit_probes, torch_batched
from crs.probes import polish as polish_module


def planted(rows: int, dim: int, labels: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, dim), dtype=np.float32)
    W = rng.standard_normal((dim, labels)).astype(np.float32) / np.sqrt(dim) * 2
    y = (X @ W + rng.logistic(size=(rows, labels)) > 1.0).astype(np.float32)
    return X.astype(np.float16), y


def subsets_for(n: int, fractions=(0.01, 0.05, 0.1, 0.25), seeds=5, seed: int = 0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(seeds):
        order = rng.permutation(n)
        out += [np.sort(order[: int(f * n)]) for f in fractions]  # nested per seed
    out.append(np.arange(n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=114_793)
    parser.add_argument("--dim", type=int, default=1024)
    args = parser.parse_args()
    X, y = planted(args.rows + 10_000, args.dim, 5)
    X_train, y_train, X_val, y_val = X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :]
    subsets = subsets_for(args.rows)
    Cs = tuple(np.logspace(-4, 3, 8))
    original = polish_module.polish

    def unpolished(data, unique, C, weights, bias, *rest, **options):
        return weights, bias, True

    torch.set_num_threads(1)
    timings = {}
    with threadpool_limits(1):
        fit_probes(X_train[:2000], y_train[:2000], X_val[:500], y_val[:500], [np.arange(2000)], "multilabel",
                   backend="torch", Cs=Cs)  # warm-up
        for name, function in (("float32 (before 0029)", unpolished), ("polished", original)):
            torch_batched.polish = function
            start = time.process_time()
            probes = fit_probes(X_train, y_train, X_val, y_val, subsets, "multilabel", backend="torch", Cs=Cs)
            timings[name] = time.process_time() - start
            print(f"{name:22s} {timings[name]:7.1f} CPU s, converged {probes.converged.mean():.2f}", flush=True)
    torch_batched.polish = original
    before, after = timings["float32 (before 0029)"], timings["polished"]
    print(f"polish adds {after - before:.1f} CPU s to the unit's fit: {after / before:.2f}x")


if __name__ == "__main__":
    main()
