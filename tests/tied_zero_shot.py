"""A zero-shot run folder of encoders identical in truth (for the tier's tests, decision 0185).

Each encoder's shipped probabilities are its own draw of :mod:`crs.bench.coverage_model`'s score on the same
test patients (one binary task, clustered patients, overconfident: slope 1.8), so the encoders tie exactly in
truth and differ only by chance in the test set, where the CRS's dominance term jumps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from crs.bench.coverage_model import draw_sample

OVERCONFIDENT = (1.8, 1.8, 0.0)
TASK = "tied"


def write_tied_run(folder: Path, seed: int, encoders: int = 4, patients: int = 400) -> list[str]:
    """Write ``folder/zero_shot`` (records, prompts, predictions) for ``encoders`` identical overconfident
    encoders on one binary task of ``patients`` patients; the encoders' names."""
    rng = np.random.default_rng([47, seed])
    names = [f"twin{k + 1}" for k in range(encoders)]
    sample = draw_sample(patients, 0.8, 1.0, rng, full=False, cohort=dict.fromkeys(names, OVERCONFIDENT))
    out = Path(folder) / "zero_shot"
    (out / "predictions").mkdir(parents=True, exist_ok=True)
    rows = []
    for e, name in enumerate(names):
        probs = np.stack([1 - sample.probs[:, e], sample.probs[:, e]], axis=1).astype(np.float64)
        np.savez(out / "predictions" / f"{name}__{TASK}__d0.npz", clean_labels=sample.y.astype(np.int64),
                 clean_probs=probs, clean_groups=np.asarray([f"p{g}" for g in sample.patient]),
                 clean_design=np.asarray(["official", "recorded"]))
        rows.append({"encoder": name, "task": TASK, "task_kind": "binary", "prompt_digest": "d0", "prompt_set": "set",
                     "condition": "clean", "calibration": "shipped", "label_fraction": np.nan, "auroc": np.nan,
                     "ece_debiased": np.nan, "temperature": np.nan})
    pd.DataFrame(rows).to_parquet(out / "records.parquet")
    pd.DataFrame(columns=["encoder", "task", "prompt_set", "prompt_digest", "auroc"]).to_parquet(out / "prompts.parquet")
    return names
