"""Label efficiency: discrimination with fewer labels, as an absolute level and as a share kept.

* :func:`label_efficiency` is the CRS axis: the mean macro AUROC over the label fractions below the
  full one. It is absolute, so a probe that gains AUROC at any fraction gains label efficiency,
  whatever its full-label AUROC (DESIGN section 7: every scored axis is monotone in every AUROC).
* :func:`relative_label_retention` is reported beside it, never scored: the share of the full-label
  above-chance AUROC kept at the smaller fractions. A ratio falls when the full-label AUROC rises,
  which is why it is not scored.
"""

from __future__ import annotations

import numpy as np

from crs.axes._inputs import AxisInputError
from crs.axes.robustness import RETENTION_FLOOR, retention


def _curve(fractions, aurocs, full_fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fractions, AUROCs) sorted, and the mask of fractions below ``full_fraction``."""
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
    order = np.argsort(fractions)
    fractions, aurocs = fractions[order], aurocs[order]
    below = fractions < full_fraction - 1e-12
    return fractions, aurocs, below


def label_efficiency(fractions, aurocs, full_fraction: float = 1.0) -> float:
    """Mean AUROC over the label fractions below ``full_fraction`` (each fraction counts once).

    The scored label-efficiency axis (its error is 1 minus this). NaN when no fraction lies below
    the full one or any of those AUROCs is NaN (a curve with a hole is not comparable with a whole
    one). Example: AUROC 0.7 at 1 %, 0.8 at 10 %, 0.9 at 100 % gives (0.7 + 0.8) / 2 = 0.75.
    """
    _, aurocs, below = _curve(fractions, aurocs, full_fraction)
    if not below.any() or np.isnan(aurocs[below]).any():
        return float("nan")
    return float(aurocs[below].mean())


def relative_label_retention(
    fractions, aurocs, full_fraction: float = 1.0, floor: float = RETENTION_FLOOR
) -> float:
    """Mean over the fractions below the full one of :func:`crs.axes.retention` (A(f), A(full)).

    (A(f) - 0.5) / max(A(full) - 0.5, floor), clipped to [0, 1], 1 where A(f) >= A(full): the share of
    the full-label above-chance AUROC kept with fewer labels. Reported, never scored. NaN without a
    full-fraction AUROC, without a smaller fraction, or with a NaN AUROC.
    """
    fractions, aurocs, below = _curve(fractions, aurocs, full_fraction)
    full = np.isclose(fractions, full_fraction)
    if not below.any() or not full.any() or np.isnan(aurocs[below | full]).any():
        return float("nan")
    return float(np.mean(retention(aurocs[below], aurocs[full][0], floor)))
