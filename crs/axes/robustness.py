"""Robustness as reported beside the CRS: retention, effective robustness and mean corruption error.

The scored robustness axis is absolute: the mean AUROC over every corruption x severity and over the
shift target (each half where both exist), combined in :mod:`crs.scoring.formula`. The ratios here
are reported, never scored: a ratio against the encoder's own clean AUROC falls when the clean
AUROC rises, so scoring it would rank an encoder lower for being better on clean data.
"""

from __future__ import annotations

import numpy as np

from crs.axes._inputs import AxisInputError

RETENTION_FLOOR = 0.05
"""Smallest clean-AUROC margin over chance used as a retention denominator (see docs/crs.md)."""


def retention(a_shifted, a_clean, floor: float = RETENTION_FLOOR):
    """Share of the clean above-chance AUROC kept: (a_shifted - 0.5) / max(a_clean - 0.5, floor).

    Clipped to [0, 1], and exactly 1 wherever ``a_shifted >= a_clean`` (no AUROC lost counts as full
    retention, also when the floor is the denominator: retention(0.53, 0.52) is 1, not 0.6). The
    floor keeps a probe near chance on clean data from producing a wild ratio; below chance counts
    as no retention. Elementwise on arrays; NaN in either input gives NaN.
    """
    if not floor > 0.0:
        raise AxisInputError(f"retention floor must be positive, got {floor}")
    a_shifted = np.asarray(a_shifted, dtype=np.float64)
    a_clean = np.asarray(a_clean, dtype=np.float64)
    denominator = np.maximum(a_clean - 0.5, floor)  # np.maximum propagates NaN
    value = np.clip((a_shifted - 0.5) / denominator, 0.0, 1.0)
    value = np.where(a_shifted >= a_clean, 1.0, value)  # NaN compares False: stays NaN
    return float(value) if value.ndim == 0 else value


def effective_robustness(clean, robust) -> np.ndarray:
    """Robust AUROC above what the cohort's clean-robust line predicts (Taori et al. 2020).

    ``clean`` and ``robust`` (n_encoders,): each encoder's clean AUROC and its robust AUROC (mean
    over corruptions and shift). A least-squares line robust ~ a + b clean is fitted over the
    cohort on the logit scale, and each encoder's effective robustness is
    robust - expit(a + b logit(clean)): positive means more robust than its clean AUROC predicts.
    Depends on the cohort, so it is reported, never scored. NaN for every encoder with fewer than
    three encoders with both values, or when every clean AUROC is the same.
    """
    clean = np.asarray(clean, dtype=np.float64)
    robust = np.asarray(robust, dtype=np.float64)
    if clean.shape != robust.shape or clean.ndim != 1:
        raise AxisInputError(f"clean and robust must both be (n_encoders,), got {clean.shape} and {robust.shape}")
    out = np.full(clean.shape, np.nan)
    known = np.isfinite(clean) & np.isfinite(robust)
    if known.sum() < 3:
        return out
    eps = 1e-6

    def logit(value):
        value = np.clip(value, eps, 1.0 - eps)
        return np.log(value / (1.0 - value))

    x, y = logit(clean[known]), logit(robust[known])
    if np.ptp(x) == 0:
        return out
    slope, intercept = np.polyfit(x, y, 1)
    predicted = 1.0 / (1.0 + np.exp(-(intercept + slope * logit(clean[known]))))
    out[known] = robust[known] - predicted
    return out


def mean_corruption_error(aurocs, reference_aurocs, epsilon: float = 1e-3) -> float:
    """ImageNet-C mCE with error = 1 - AUROC, relative to a reference encoder.

    Both inputs are (n_corruptions, n_severities) AUROC arrays in the same order. For each
    corruption c, CE_c = sum_s (1 - A[c, s]) / sum_s (1 - A_ref[c, s]); mCE is the mean over c.
    1 means as fragile as the reference, below 1 more robust. The reference sum is floored at
    ``epsilon`` so a perfect reference cannot divide by zero. Reported, never scored.
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
