"""Optional GPU backend: ``cuml.LogisticRegression`` (quasi-Newton, L2) per (subset, C).

Same loop, standardisation, class handling and C selection as the sklearn reference; only the
single-probe solver changes. Requires RAPIDS cuML (the ``gpu`` extra); without it fitting raises an
ImportError that says so.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from crs.probes import sklearn as reference
from crs.probes.base import ProblemData

MAX_ITER = reference.MAX_ITER
TOL = 1e-6


def available() -> bool:
    return importlib.util.find_spec("cuml") is not None


def _fit_cuml(X: np.ndarray, y: np.ndarray, C: float, random_state: int) -> tuple[np.ndarray, np.ndarray, bool]:
    from cuml.linear_model import LogisticRegression  # optional extra crs[gpu], RAPIDS on CUDA only

    model = LogisticRegression(penalty="l2", C=C, max_iter=MAX_ITER, tol=TOL, fit_intercept=True)
    model.fit(X.astype(np.float32), y.astype(np.float32))
    coef = np.asarray(model.coef_, dtype=np.float64).reshape(-1, X.shape[1])  # (outputs, D)
    intercept = np.asarray(model.intercept_, dtype=np.float64).reshape(-1)
    n_iter = int(np.max(np.asarray(getattr(model, "n_iter_", [0]))))
    return coef.T.copy(), intercept, n_iter < MAX_ITER


def fit(problem: ProblemData, selection: str, random_state: int = 0, n_jobs: int = 1, family: str = "logistic"):
    if not available():
        raise ImportError(
            "backend='cuml' needs RAPIDS cuml, which is not importable here; install the 'gpu' extra "
            "(pip install crs[gpu]) on a CUDA machine, or use backend='torch' with device='cuda'"
        )
    # cuML fits on the GPU one probe at a time; n_jobs > 1 would only contend for the device.
    return reference.fit(
        problem, selection, random_state=random_state, n_jobs=1, family=family, fit_one=_fit_cuml, backend="cuml"
    )
