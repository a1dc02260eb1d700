"""Probes on cached features: one interface, several backends and probe families.

``fit_probes`` fits every probe of one (encoder, task) unit, chooses C per training subset on the
validation split and returns a :class:`ProbeSet` whose ``predict_proba`` evaluates all of them on
any feature matrix (clean test, each corruption, shift target) without refitting.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crs.probes import knn, ridge
from crs.probes.base import TASK_KINDS, LinearProbeSet, ProbeError, ProbeSet, distinct_probes, prepare
from crs.probes.selection import SELECTIONS, batched_auroc, batched_nll, macro_auroc
from crs.spec import DEFAULT_CS, DEFAULT_KS, probe_grid
from crs.spec import PROBE_BACKENDS as BACKENDS
from crs.spec import PROBE_FAMILIES as FAMILIES

__all__ = [
    "BACKENDS",
    "DEFAULT_CS",
    "DEFAULT_KS",
    "FAMILIES",
    "SELECTIONS",
    "TASK_KINDS",
    "LinearProbeSet",
    "ProbeError",
    "ProbeSet",
    "distinct_probes",
    "batched_auroc",
    "batched_nll",
    "fit_probes",
    "macro_auroc",
]


def fit_probes(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_val: np.ndarray,
    y_val: np.ndarray,
    subsets: Sequence[np.ndarray],
    kind: str,
    backend: str = "sklearn",
    family: str = "logistic",
    Cs: Sequence[float] | None = None,
    selection: str = "logloss",
    random_state: int = 0,
    n_jobs: int = 1,
    n_classes: int | None = None,
    val_subsets: Sequence[np.ndarray] | None = None,
    **backend_options,
) -> ProbeSet:
    """Fit one probe per training subset and C; keep, per subset, the C best on validation.

    ``X_*`` float (n, D); ``y_*`` int (n,) class indices for multiclass/ordinal, float (n, L) with
    NaN = ignore for multilabel. ``subsets`` are index arrays into ``X_train`` (one per label
    fraction x seed); identical subsets are fitted once. ``n_classes`` fixes K for
    multiclass/ordinal when a subset may miss a class. ``selection`` is ``logloss`` (validation
    log-loss, a proper scoring rule; ``nll`` is the same) or ``auroc`` (macro one-vs-rest); ties go
    to the smaller C. ``val_subsets``: per subset, index arrays into ``X_val`` (the validation rows
    drawn at that subset's label fraction) that choose its C; default: all of ``X_val``.
    ``Cs=None`` tries the family's default grid (:func:`crs.spec.probe_grid`: ``DEFAULT_CS``, or
    ``DEFAULT_KS`` for knn). Families ``ridge`` (``Cs`` are inverse penalties, alpha = 1 / C) and
    ``knn`` (``Cs`` are neighbour counts) run in numpy whatever the backend. Backend options (torch:
    ``device``, ``dtype``, ``path``,
    ``patience``, ``tol``) pass through ``backend_options``.
    """
    if backend not in BACKENDS:
        raise ProbeError(f"backend {backend!r} is not one of {BACKENDS}")
    if family not in FAMILIES:
        raise ProbeError(f"probe family {family!r} is not one of {FAMILIES}")
    if selection not in SELECTIONS:
        raise ProbeError(f"selection {selection!r} is not one of {SELECTIONS}")
    grid = probe_grid(family, None if Cs is None else tuple(Cs))
    problem = prepare(X_train, y_train, X_val, y_val, subsets, kind, grid, n_classes, val_subsets)
    if family == "ridge":
        return ridge.fit(problem, selection)
    if family == "knn":
        return knn.fit(problem, selection)
    options = {"random_state": random_state, "n_jobs": n_jobs, **backend_options}
    if backend == "torch":
        from crs.probes import torch_batched  # heavy: torch adds ~0.5 GB and ~1 s to every worker process

        return torch_batched.fit(problem, selection, **options)
    # The sklearn and cuml backends import scikit-learn (about a second of CPU per process): only when used,
    # so a torch-backend worker does not pay for it.
    if backend == "cuml":
        from crs.probes import cuml

        return cuml.fit(problem, selection, **options)
    from crs.probes import sklearn as sklearn_engine

    return sklearn_engine.fit(problem, selection, **options)
