"""Synthetic run records for scoring tests: a cohort of encoders with every column stage 2 writes.

Each encoder has a latent quality; every AUROC, calibration error and standard error is drawn
around it, so cohorts have realistic spreads, ties are rare and every (encoder, task, fraction,
seed, condition) cell exists once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TASKS = ("derm", "fundus", "chest")
FRACTIONS = (0.05, 0.25, 1.0)
SEEDS = (0, 1)
CORRUPTIONS = (("blur", 1), ("blur", 3), ("noise", 2))
SHIFT = {"chest": "chest-b"}


def cohort_records(
    n_encoders: int = 10,
    seed: int = 0,
    tasks=TASKS,
    fractions=FRACTIONS,
    seeds=SEEDS,
    corruptions=CORRUPTIONS,
    shift=None,
) -> pd.DataFrame:
    """Run records of ``n_encoders`` encoders named e00, e01, ... on ``tasks``."""
    shift = SHIFT if shift is None else shift
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_encoders):
        quality = rng.uniform(0.65, 0.95)
        fragility = rng.uniform(0.0, 0.25)
        miscalibration = rng.uniform(0.0, 0.1)
        for task in tasks:
            for s in seeds:
                base = {"encoder": f"e{e:02d}", "task": task, "task_kind": "multiclass", "seed": s,
                        "corruption": "", "severity": 0, "target": ""}  # fmt: skip

                def row(fraction, condition, auroc, base=base, miscalibration=miscalibration, **extra):
                    ece = miscalibration + rng.uniform(0.0, 0.03)
                    return {**base, "label_fraction": fraction, "condition": condition,
                            "auroc": float(np.clip(auroc, 0.5, 0.999)), "auroc_se": rng.uniform(0.005, 0.02),
                            "ece": ece + 0.03, "ece_debiased": ece, "ece_se": rng.uniform(0.004, 0.01),
                            "brier": 0.3, "nll": 0.6, **extra}  # fmt: skip

                clean = quality + rng.normal(0, 0.01)
                for fraction in fractions:
                    rows.append(row(fraction, "clean", clean - 0.05 * np.log10(1.0 / fraction) + rng.normal(0, 0.01)))
                for corruption, severity in corruptions:
                    value = clean - fragility * severity / 3 + rng.normal(0, 0.01)
                    rows.append(row(1.0, "corrupt", value, corruption=corruption, severity=severity))
                if task in shift:
                    rows.append(row(1.0, "shift", clean - fragility + rng.normal(0, 0.02), target=shift[task]))
    return pd.DataFrame(rows)
