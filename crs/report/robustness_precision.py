"""How precise the robustness axis is, and what a corruption subsample saved (the report's robustness notes).

The robustness axis's standard error is the bootstrap SD of its replicates (patients resampled with
the seeds), or the run records' own standard error when the score kept no replicates. Where stage 1
made the corrupted variants for a patient-level subsample of the test split (``[extract]
corruption_rows``, decision 0032), the note says how many test images it held and how many
forward passes per encoder it saved against the whole split.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from crs.evaluate import artifacts


def standard_error_note(score, encoders: list[str]) -> str | None:
    """One sentence: the robustness axis's standard error per encoder (as AUROC), or None when unknown."""
    replicates = (score.bootstrap.axis_error_replicates or {}).get("robustness")
    if replicates is not None and len(replicates) > 1:
        values = {e: float(np.std(replicates[e].to_numpy(dtype=np.float64), ddof=1)) for e in encoders
                  if e in replicates.columns}
        source = f"SD of its {len(replicates)} bootstrap replicates"
    elif score.point.standard_errors is not None and "robustness" in score.point.standard_errors.columns:
        column = score.point.standard_errors["robustness"]
        values = {e: float(column[e]) for e in encoders if e in column.index}
        source = "from the run records' standard errors"
    else:
        return None
    values = {e: v for e, v in values.items() if np.isfinite(v)}
    if not values:
        return None
    return ("Robustness axis standard error (mean AUROC under corruption and shift; " + source + "): "
            + ", ".join(f"{e} {v:.4f}" for e, v in values.items()) + ".")


def subsample_notes(predictions: Mapping[tuple[str, str], Mapping[str, np.ndarray]]) -> list[str]:
    """Per task evaluated on a corruption subsample: its size against the test split and the passes saved."""
    notes = []
    seen: set[str] = set()
    for (_, task), arrays in sorted(predictions.items()):
        if task in seen or artifacts.CORRUPT_ROWS not in arrays:
            continue
        seen.add(task)
        rows = len(arrays[artifacts.CORRUPT_ROWS])
        test = len(arrays[artifacts.labels_key(artifacts.CLEAN)])
        conditions = len(artifacts.corrupt_stems(arrays))
        notes.append(f"{task}: corrupted conditions evaluated on a patient-level subsample of {rows:,} of {test:,} test "
                     f"images ([extract] corruption_rows): {(test - rows) * conditions:,} forward passes per encoder "
                     f"saved in stage 1 ({conditions} conditions); patients are resampled together with the clean "
                     "test rows.")
    return notes
