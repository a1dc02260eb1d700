"""The predict phase of stage 2 on CheXpert-sized synthetic conditions, one code version per process.

``crs.evaluate.units.predict_condition`` on 38,117 float16 rows x 1,024 (8,192-row read blocks, as
a unit reads them), one probe with K outputs, one thread; prints CPU s per condition and which
``crs`` it imported as one JSON line (decision 0111). Run two versions A/B/B/A in one lock hold:

    PYTHONPATH=OLD python scripts/predict_replay.py sigmoid 5 8 [OUT.npz]
    PYTHONPATH=NEW python scripts/predict_replay.py sigmoid 5 8 [OUT.npz]

OUT.npz: the last condition's probabilities and rank keys, to compare the versions' values.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import crs
from crs.evaluate import units
from crs.probes.base import LinearProbeSet

N, D, P, BLOCK = 38117, 1024, 1, 8192


def main(link: str, K: int, n_conditions: int, out: str | None) -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    probe_set = LinearProbeSet(
        "multilabel" if link == "sigmoid" else "multiclass", K, "torch", "logistic", "logloss", (1.0,),
        np.ones(P), np.ones(P), np.ones((P, 1)), np.ones(P, bool), link=link,
        center=rng.standard_normal(D) * 0.3, weights=rng.standard_normal((P, D, K)) * 0.03, bias=rng.standard_normal((P, K)),
    )
    conditions = [(rng.standard_normal((N, D)) * (1 + 0.1 * c) + 0.2).astype(np.float16) for c in range(2)]

    def predict(X: np.ndarray) -> units.PredictedScores:
        condition = units.Condition("corrupt", "noise", 1, "", np.zeros(len(X), dtype=np.int64), X)
        blocks = iter([(lo, X[lo : lo + BLOCK]) for lo in range(0, len(X), BLOCK)])
        return units.predict_condition(probe_set, condition, K, units._Clock(), blocks)

    with threadpool_limits(limits=1):
        predict(conditions[0][:600])  # numba's compile or cache load, untimed
        start = time.process_time()
        for c in range(n_conditions):
            scores = predict(conditions[c % 2])
        cpu = (time.process_time() - start) / n_conditions
    if out:
        np.savez(out, probs=scores.probs, keys=scores.ovr_keys)
    print(json.dumps({"code": crs.__file__, "link": link, "K": K, "cpu_s_per_condition": round(cpu, 4)}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
