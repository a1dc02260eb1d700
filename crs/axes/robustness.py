"""Robustness: chance-corrected AUROC retention and the ImageNet-C-style mean corruption error."""

from __future__ import annotations

import numpy as np

from crs.axes._inputs import AxisInputError

RETENTION_FLOOR = 0.05
"""Smallest clean-AUROC margin over chance used as a retention denominator (see docs/crs.md)."""


def retention(a_shifted, a_clean, floor: float = RETENTION_FLOOR):
    """(a_shifted - 0.5) / max(a_clean - 0.5, floor), clipped to [0, 1].

    The floor keeps a probe near chance on clean data from producing a wild ratio; the clip makes
    "better under corruption than clean" count as full retention and "worse than chance" as none.
    Works elementwise on arrays; NaN in either input gives NaN.
    """
    if not floor > 0.0:
        raise AxisInputError(f"retention floor must be positive, got {floor}")
    a_shifted = np.asarray(a_shifted, dtype=np.float64)
    a_clean = np.asarray(a_clean, dtype=np.float64)
    denominator = np.maximum(a_clean - 0.5, floor)  # np.maximum propagates NaN
    value = np.clip((a_shifted - 0.5) / denominator, 0.0, 1.0)
    return float(value) if value.ndim == 0 else value


def mean_corruption_error(aurocs, reference_aurocs, epsilon: float = 1e-3) -> float:
    """ImageNet-C mCE with error = 1 - AUROC, relative to a reference encoder.

    Both inputs are (n_corruptions, n_severities) AUROC arrays in the same order. For each
    corruption c, CE_c = sum_s (1 - A[c, s]) / sum_s (1 - A_ref[c, s]); mCE is the mean over c.
    1 means as fragile as the reference, below 1 more robust. The reference sum is floored at
    ``epsilon`` so a perfect reference cannot divide by zero.
    """
    aurocs = np.asarray(aurocs, dtype=np.float64)
    reference_aurocs = np.asarray(reference_aurocs, dtype=np.float64)
    if aurocs.ndim != 2 or aurocs.shape != reference_aurocs.shape:
        raise AxisInputError(
            f"aurocs and reference_aurocs must both be (n_corruptions, n_severities); got {aurocs.shape} and {reference_aurocs.shape}"
        )
    if aurocs.size == 0 or np.isnan(aurocs).any() or np.isnan(reference_aurocs).any():
        return float("nan")
    errors = (1.0 - aurocs).sum(axis=1)
    reference_errors = np.maximum((1.0 - reference_aurocs).sum(axis=1), epsilon)
    return float(np.mean(errors / reference_errors))
