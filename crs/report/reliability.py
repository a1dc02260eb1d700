"""Reliability-diagram points from predicted probabilities (pure arrays, no I/O).

Multiclass and ordinal tasks use the top label: confidence = max probability, outcome = whether
the arg-max is the true class (as the ECE axis). Multilabel tasks pool every (image, label) pair:
confidence = predicted probability, outcome = the label; NaN (ignored) labels are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReliabilityCurve:
    confidence: np.ndarray  # mean confidence per non-empty bin
    observed: np.ndarray  # observed accuracy (multiclass) or label frequency (multilabel) per bin
    count: np.ndarray  # predictions per bin
    n_bins: int


def confidence_outcome(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flatten one or more seeds' predictions to (confidence, outcome) pairs.

    ``probs``: (N, K) or (seeds, N, K). ``labels``: (N,) integer classes or (N, K) multilabel 0/1/NaN.
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim == 2:
        probs = probs[None]
    if probs.ndim != 3 or probs.shape[1] != labels.shape[0]:
        raise ValueError(f"probs of shape {probs.shape} do not match labels of shape {labels.shape}")
    if labels.ndim == 1:
        confidence = probs.max(axis=-1)
        outcome = (probs.argmax(axis=-1) == labels[None].astype(np.int64)).astype(np.float64)
        return confidence.ravel(), outcome.ravel()
    stacked = np.broadcast_to(labels.astype(np.float64)[None], probs.shape)
    known = ~np.isnan(stacked)
    return probs[known], stacked[known]


def reliability_curve(probs: np.ndarray, labels: np.ndarray, n_bins: int = 10) -> ReliabilityCurve:
    """Equal-width confidence bins on [0, 1]; empty bins are left out."""
    confidence, outcome = confidence_outcome(probs, labels)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.digitize(confidence, edges[1:-1], right=True), 0, n_bins - 1)
    count = np.bincount(index, minlength=n_bins)
    total_confidence = np.bincount(index, weights=confidence, minlength=n_bins)
    total_outcome = np.bincount(index, weights=outcome, minlength=n_bins)
    filled = count > 0
    return ReliabilityCurve(
        confidence=total_confidence[filled] / count[filled],
        observed=total_outcome[filled] / count[filled],
        count=count[filled],
        n_bins=n_bins,
    )
