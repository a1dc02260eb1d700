"""One polish evaluation at CheXpert's full training size, the compiled pass against the numpy path.

114,793 x 1,024 float16 rows through a full D x D basis (the polish of the full label fraction),
5 labels and 8 classes; the paths side by side in one process, one thread, three evaluations each,
interleaved: ``numpy`` (float64 blocks through BLAS), ``fused-copy`` (the compiled pass on each block
converted to float32 first, decision 0100) and ``fused`` (the compiled pass reading the float16 bits
through a table, decision 0104). About 0.5 GB and half a minute of CPU:

    PYTHONPATH=$PWD python scripts/polish_pass.py
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from crs.probes.polish import ExactProblem

ROWS, DIM = 114_793, 1024


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((ROWS, DIM), dtype=np.float32).astype(np.float16)
    offset, std = np.zeros(DIM), np.ones(DIM)
    basis = np.linalg.qr(rng.standard_normal((DIM, DIM)))[0]
    for K, kind in ((5, "multilabel"), (8, "multiclass")):
        if kind == "multilabel":
            targets = (rng.random((ROWS, K)) < 0.3).astype(float)
            row_weights, class_mask = np.full((ROWS, K), 1.0 / ROWS), None
        else:
            targets, row_weights, class_mask = np.eye(K)[rng.integers(0, K, ROWS)], None, np.zeros(K)
        u = rng.standard_normal((DIM + 1, K)) * 0.03
        problems = {}
        for name, switch in (("numpy", "1"), ("fused-copy", "0"), ("fused", "0")):
            os.environ["CRS_NO_NUMBA"] = switch  # read when the problem is built
            problems[name] = ExactProblem(rows, offset, std, basis, np.ones((DIM + 1, K)), targets, row_weights,
                                          class_mask, np.full(K, 1e-3))
        problems["fused-copy"]._half = False  # each block converted into a float32 buffer, as before 0104
        with threadpool_limits(1):
            out = {name: problem.value_and_grad(u) for name, problem in problems.items()}  # compile, buffers
            times: dict[str, list[float]] = {name: [] for name in problems}
            for _ in range(3):
                for name, problem in problems.items():
                    started = time.process_time()
                    problem.value_and_grad(u)
                    times[name].append(time.process_time() - started)
        difference = np.abs(out["fused"][1] - out["numpy"][1]).max() / np.abs(out["numpy"][1]).max()
        assert out["fused"][0] == out["fused-copy"][0] and np.array_equal(out["fused"][1], out["fused-copy"][1])
        ratio = np.median(times["fused"]) / np.median(times["numpy"])
        copy_ratio = np.median(times["fused"]) / np.median(times["fused-copy"])
        print(f"{kind} K={K}: CPU s per evaluation numpy {[round(t, 3) for t in times['numpy']]}, "
              f"fused-copy {[round(t, 3) for t in times['fused-copy']]}, "
              f"fused {[round(t, 3) for t in times['fused']]}; fused / numpy {ratio:.2f}, "
              f"fused / fused-copy {copy_ratio:.2f} (bit-identical); "
              f"value difference {abs(out['fused'][0] - out['numpy'][0]) / abs(out['numpy'][0]):.1e}, "
              f"gradient {difference:.1e} relative", flush=True)


if __name__ == "__main__":
    main()
