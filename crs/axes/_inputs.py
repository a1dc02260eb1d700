"""Shared input checks for the axis functions: shapes, kinds and the error they raise."""

from __future__ import annotations

import numpy as np

KINDS = ("binary", "multiclass", "ordinal", "multilabel")


class AxisInputError(ValueError):
    """Arrays handed to an axis function do not fit its conventions; the message says how to fix them."""


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise AxisInputError(f"kind {kind!r} is not one of {KINDS}")
    return kind


def as_class_labels(y: np.ndarray, n_classes: int) -> np.ndarray:
    """Integer class labels (N,) in [0, n_classes)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise AxisInputError(f"class labels must be 1-D (N,), got shape {y.shape}")
    if y.size and not np.all(np.equal(np.mod(y, 1), 0)):
        raise AxisInputError("class labels must be whole numbers 0..K-1")
    y = y.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise AxisInputError(
            f"class labels must lie in 0..{n_classes - 1} to match probs with {n_classes} columns"
        )
    return y


def binary_pair(y: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Binary labels (N,) in {0, 1} and positive-class scores (N,); (N, 2) scores use column 1."""
    y = np.asarray(y, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 2 and scores.shape[1] == 2:
        scores = scores[:, 1]
    if y.ndim != 1 or scores.ndim != 1 or len(y) != len(scores):
        raise AxisInputError(
            f"binary: y must be (N,) and scores (N,) or (N, 2); got {y.shape} and {scores.shape}"
        )
    if np.isnan(y).any() or not np.isin(y, (0.0, 1.0)).all():
        raise AxisInputError("binary: y must hold only 0 and 1")
    return y, scores


def multiclass_pair(y: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer labels (N,) and class scores (N, K)."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] < 2:
        raise AxisInputError(f"multiclass/ordinal: probs must be (N, K) with K >= 2, got shape {probs.shape}")
    y = as_class_labels(y, probs.shape[1])
    if len(y) != len(probs):
        raise AxisInputError(f"y has {len(y)} rows but probs has {len(probs)}")
    return y, probs


def multilabel_pair(y: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float labels (N, L) with NaN = ignore, and independent label probabilities (N, L)."""
    y = np.asarray(y, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    if y.ndim != 2 or y.shape != probs.shape:
        raise AxisInputError(f"multilabel: y and probs must both be (N, L); got {y.shape} and {probs.shape}")
    known = y[~np.isnan(y)]
    if not np.isin(known, (0.0, 1.0)).all():
        raise AxisInputError("multilabel: y must hold 0, 1 or NaN (ignored)")
    return y, probs
