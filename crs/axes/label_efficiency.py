"""Label efficiency: how much of its full-label discrimination a probe keeps with fewer labels."""

from __future__ import annotations

import numpy as np

from crs.axes._inputs import AxisInputError


def label_efficiency(fractions: np.ndarray, aurocs: np.ndarray) -> float:
    """Normalised area under the chance-corrected AUROC curve over log10(label fraction).

    With a(f) = (AUROC(f) - 0.5) / 0.5 and x = log10(f), the result is the trapezoid area of a
    over x divided by the span max(x) - min(x). It lies in [0, 1] for better-than-chance probes,
    equals 1 only for a perfect probe at every fraction, and is not clipped (a worse-than-chance
    curve gives a negative value). NaN when fewer than two fractions are given or any AUROC is
    NaN (a curve with a hole is not comparable with a complete one).
    """
    fractions = np.asarray(fractions, dtype=np.float64).ravel()
    aurocs = np.asarray(aurocs, dtype=np.float64).ravel()
    if fractions.shape != aurocs.shape:
        raise AxisInputError(
            f"fractions ({fractions.size}) and aurocs ({aurocs.size}) must have the same length"
        )
    if np.any(~(fractions > 0.0) | (fractions > 1.0)):
        raise AxisInputError(f"label fractions must lie in (0, 1], got {fractions.tolist()}")
    if len(np.unique(fractions)) != len(fractions):
        raise AxisInputError(
            f"label fractions must be distinct (average seeds first), got {fractions.tolist()}"
        )
    if len(fractions) < 2 or np.isnan(aurocs).any():
        return float("nan")
    order = np.argsort(fractions)
    x = np.log10(fractions[order])
    chance_corrected = (aurocs[order] - 0.5) / 0.5
    return float(np.trapezoid(chance_corrected, x) / (x[-1] - x[0]))
