"""A simultaneous confidence box over many estimates from one set of bootstrap replicates (issue 40 item 1).

:func:`simultaneous_box` takes K point estimates and B replicates of them (the patient-level draws
crs already makes) and returns, per coordinate, a lower and an upper bound that hold **all K true
values at once** with probability about 1 - alpha: the studentised max-|t| box (Romano and Wolf
2005; the construction behind Mogstad, Romano, Shaikh and Wilhelm's rank sets, and
:func:`crs.scoring.intervals.simultaneous_gap_interval`'s pairs). Per coordinate k on its working
scale g: z_k = g(point_k), s_k the bootstrap SD of g(replicate_k), and c the (1 - alpha) quantile
over replicates of max_k |g(replicate_bk) - z_k| / s_k; the box is g^-1(z_k -+ c s_k).

Working scales (:data:`SCALES`), chosen per coordinate so the spread does not depend on where the
estimate sits:

* ``"logit"``: a value in (0, 1) such as an AUROC error 1 - AUROC; its spread shrinks near 0 and 1
  on the raw scale, not on the logit scale (clipped to [1e-4, 1 - 1e-4], as the gap intervals);
* ``"square"``: a non-negative root of a debiased mean square (the calibration error, decision 0035):
  the replicates are centred on the squared scale (decision 0061), where the resampling noise is
  additive, so the box is made there and its root taken (a lower bound below 0 on that scale is 0);
* ``"identity"``: any other value.

A coordinate whose replicates do not move (seed-only bootstrap with identical seeds, an axis with a
constant value) has s_k = 0 and a box of zero width; it is left out of the maximum. A coordinate with
a NaN point estimate (an axis not measured) gets NaN bounds. Pure function on arrays, no pandas.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SCALES = ("identity", "logit", "square")
"""Working scales of :func:`simultaneous_box`."""
LOGIT_CLIP = 1e-4
"""Values are clipped to [1e-4, 1 - 1e-4] before the logit."""


@dataclass(frozen=True)
class Box:
    """Per coordinate (K,): ``low`` and ``high``; ``critical`` the max-|t| quantile c (NaN when no
    coordinate moves); ``standard_errors`` the bootstrap SD of each coordinate on its working scale."""

    low: np.ndarray
    high: np.ndarray
    critical: float
    standard_errors: np.ndarray


def _forward(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    out = values.copy()
    logit = scales == "logit"
    if logit.any():
        clipped = np.clip(values[..., logit], LOGIT_CLIP, 1.0 - LOGIT_CLIP)
        out[..., logit] = np.log(clipped) - np.log1p(-clipped)
    square = scales == "square"
    out[..., square] = np.square(values[..., square])
    return out


def _backward(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    out = values.copy()
    logit = scales == "logit"
    out[logit] = 1.0 / (1.0 + np.exp(-values[logit]))
    square = scales == "square"
    out[square] = np.sqrt(np.maximum(values[square], 0.0))
    return out


def simultaneous_box(
    point: np.ndarray, replicates: np.ndarray, alpha: float = 0.05, scales: Sequence[str] | str = "identity"
) -> Box:
    """The (1 - alpha) simultaneous studentised max-|t| box of ``point`` (K,) from ``replicates`` (B, K).

    ``scales``: one of :data:`SCALES` for every coordinate, or one per coordinate. A replicate row
    with a NaN coordinate counts over the coordinates it has. Needs at least two replicates; with
    fewer every bound is NaN.
    """
    point = np.asarray(point, dtype=np.float64)
    replicates = np.asarray(replicates, dtype=np.float64)
    if point.ndim != 1 or replicates.ndim != 2 or replicates.shape[1] != point.shape[0]:
        raise ValueError(f"point must be (K,) and replicates (B, K); got {point.shape} and {replicates.shape}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    kinds = np.full(point.shape, scales, dtype=object) if isinstance(scales, str) else np.asarray(scales, dtype=object)
    if kinds.shape != point.shape or not set(kinds.tolist()) <= set(SCALES):
        raise ValueError(f"scales must be one of {SCALES} or one per coordinate ({point.shape[0]}), got {scales!r}")
    nan = np.full(point.shape, np.nan)
    if len(replicates) < 2:
        return Box(nan, nan.copy(), float("nan"), nan.copy())
    centre = _forward(point, kinds)
    drawn = _forward(replicates, kinds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a coordinate never measured: all NaN
        spread = np.nanstd(drawn, axis=0, ddof=1)
        # float noise of a constant coordinate (its logit recomputed) is no spread
        moving = np.isfinite(spread) & (spread > 1e-12 * np.maximum(1.0, np.abs(centre))) & np.isfinite(centre)
        t = np.abs(drawn[:, moving] - centre[moving]) / spread[moving]
        largest = np.nanmax(t, axis=1) if moving.any() else np.zeros(0)
    largest = largest[np.isfinite(largest)]
    critical = float(np.quantile(largest, 1.0 - alpha)) if len(largest) else float("nan")
    half = np.where(moving, (critical if np.isfinite(critical) else 0.0) * np.nan_to_num(spread), 0.0)
    low = np.where(moving, _backward(centre - half, kinds), point)  # a coordinate that never moves: its point
    high = np.where(moving, _backward(centre + half, kinds), point)
    low[~np.isfinite(centre)] = np.nan
    high[~np.isfinite(centre)] = np.nan
    return Box(low, high, critical, spread)
