"""What every probe backend shares: input checks, the fitted probe set, standardisation.

A *probe set* is every probe of one (encoder, task) unit: one probe per training subset (label
fraction x seed), each at the C chosen on the validation split. Backends differ only in how they
fit; they all hand back a :class:`ProbeSet` whose ``predict_proba`` is the one way to evaluate.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from crs.probes import predict_kernel, softmax_kernel
from crs.spec import TASK_KINDS

STD_FLOOR = 1e-6
"""Smallest per-feature standard deviation used when standardising (a constant feature stays 0)."""

PREVALENCE_CLIP = 1e-6
"""A label with one value only in a training subset predicts its prevalence clipped to
[1e-6, 1 - 1e-6], so log-loss on an evaluation set that does contain the other value stays finite."""


STANDARDISER_ROWS = 2048
"""Rows per float64 block when standardising or centering (bounds its scratch memory at ~12 MB for D = 768)."""


class ProbeError(ValueError):
    """Bad probe inputs or options; the message names the input and the fix."""


@dataclass(frozen=True)
class ProbeSet:
    """Fitted probes of one unit: one per training subset, at the C chosen on validation.

    ``selected_C`` and ``val_score`` are ``(n_subsets,)``; ``val_scores`` is ``(n_subsets, n_Cs)``
    with NaN where the C path stopped early; ``converged`` says whether every fit of that subset met
    its solver's tolerance inside ``max_iter``.
    """

    kind: str
    n_classes: int
    backend: str
    family: str
    selection: str
    Cs: tuple[float, ...]
    selected_C: np.ndarray
    val_score: np.ndarray
    val_scores: np.ndarray
    converged: np.ndarray

    @property
    def n_subsets(self) -> int:
        return len(self.selected_C)

    def predict_proba(self, X: np.ndarray, scratch: bool = False) -> np.ndarray:  # pragma: no cover - abstract
        """Probabilities (n_subsets, N, K). ``scratch``: X is the caller's buffer and may be overwritten."""
        raise NotImplementedError

    def probe_key(self, s: int) -> bytes:  # pragma: no cover - abstract
        """Bytes equal for two subsets exactly when their probes predict the same (same fitted parameters)."""
        raise NotImplementedError

    def select(self, subsets: Sequence[int] | np.ndarray) -> ProbeSet:
        """The probes of ``subsets`` only, in that order (a smaller set to predict with)."""
        rows = np.asarray(subsets, dtype=np.int64)
        chosen: dict[str, Any] = {
            "selected_C": self.selected_C[rows], "val_score": self.val_score[rows],
            "val_scores": self.val_scores[rows], "converged": self.converged[rows],
        }  # fmt: skip
        return replace(self, **chosen, **self._selected_parameters(rows))

    def _selected_parameters(self, rows: np.ndarray) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def distinct_probes(probe_set: ProbeSet, subsets: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``subsets`` hold different probes: (the first subset of each distinct probe, and for
    each of ``subsets`` the position of its probe among those). At the full label fraction every seed
    trains on the same rows, so its probes are one probe: predicting it once is exact and 5x cheaper."""
    subsets = np.asarray(subsets, dtype=np.int64)
    first: dict[bytes, int] = {}
    representative: list[int] = []
    position = np.empty(len(subsets), dtype=np.int64)
    for i, s in enumerate(subsets):
        key = probe_set.probe_key(int(s))
        if key not in first:
            first[key] = len(representative)
            representative.append(int(s))
        position[i] = first[key]
    return np.array(representative, dtype=np.int64), position


@dataclass(frozen=True)
class LinearProbeSet(ProbeSet):
    """Linear probes with standardisation folded into the weights.

    For subset s the logits are ``(X - center) @ weights[s] + bias[s]``; ``center`` is shared by all
    subsets (the mean of the training rows) so the fold loses no float32 precision. ``link`` is
    ``softmax`` (multiclass, ordinal: rows sum to 1; a class absent from a subset has bias -inf and
    probability 0) or ``sigmoid`` (multilabel: independent per label).
    """

    link: str = "softmax"
    center: np.ndarray = field(default_factory=lambda: np.zeros(0))
    weights: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))
    bias: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def predict_scores(self, X: np.ndarray, ordinal: bool = False, reference: np.ndarray | None = None,
                       cosines: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> PredictedScores:
        """Probabilities and rank keys of every probe on ``X`` from float64 logits (see
        :class:`PredictedScores`): what stage 2 evaluates, the same to ~1e-15 on every machine.

        ``reference`` (D,): a row the decision values are taken relative to (default: the training
        center). Stage 2 passes a condition's first row, so that on a condition whose rows all sit
        far from the center in one direction (a strong corruption) the keys hold the rows'
        differences, computed exactly, instead of a large shared value plus last-bit noise.

        ``cosines`` (``columns_t`` (M, D), ``dots`` (N, M), ``squares`` (N,), float64, C order; only
        for float16 ``X`` with :func:`crs.probes.predict_kernel.available`): zero-shot's dot products
        and sums of squares of the same rows, written into ``dots`` and ``squares`` from the widening
        the logits use (decision 0116); the logits are the same bit for bit as without."""
        X = check_features(X, "X", dim=self.weights.shape[1], finite=False)
        n_subsets, dim, k = self.weights.shape
        origin = self.center if reference is None else np.asarray(reference, dtype=np.float64)
        stacked = self.weights.transpose(1, 0, 2).reshape(dim, n_subsets * k)
        with np.errstate(invalid="ignore", over="ignore"):
            if cosines is not None:  # one widening of each row for the logits and zero-shot's cosines
                if X.dtype != np.float16 or not predict_kernel.available():
                    raise ProbeError("cosines ride along only with float16 rows and the compiled kernel")
                decision = predict_kernel.widened_logits_half(X, origin, stacked, *cosines)
            elif X.dtype == np.float16 and predict_kernel.available():  # the cache's rows, read as their bits
                decision = predict_kernel.centered_logits_half(X, origin, stacked)
            else:
                centered = as_float(X, np.float64)
                centered -= origin
                decision = float64_product(centered, stacked)
        if not np.isfinite(decision).all():
            raise ProbeError("X contains NaN or inf features (its logits are not finite); re-extract or drop those rows")
        decision = decision.reshape(len(X), n_subsets, k).transpose(1, 0, 2)
        bias = self.bias
        if reference is not None:  # the logits at the reference row join the bias
            shift = ((origin - self.center) @ stacked).reshape(n_subsets, k)
            with np.errstate(invalid="ignore"):
                bias = np.where(np.isneginf(bias), -np.inf, bias + shift)
        return rank_scores(decision, bias, self.link, ordinal)

    def decision_function(self, X: np.ndarray, scratch: bool = False) -> np.ndarray:
        """Logits ``(n_subsets, N, K)``, one float32 matrix product for all subsets. ``scratch``: X is
        the caller's float32 buffer, centred in place (one pass over the rows fewer)."""
        X = check_features(X, "X", dim=self.weights.shape[1], finite=False)
        center = self.center.astype(np.float32)
        if scratch and X.dtype == np.float32 and X.flags.writeable and X.flags.c_contiguous:
            centered = np.subtract(X, center, out=X)
        else:
            centered = X - center
        n_subsets, dim, k = self.weights.shape
        stacked = self.weights.transpose(1, 0, 2).reshape(dim, n_subsets * k).astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN or inf rows: refused just below
            logits = centered @ stacked
        # NaN or inf in X reaches the logits (inf times a zero weight is NaN): checking the N x PK
        # logits replaces two passes over the N x D rows
        if not np.isfinite(logits).all():
            raise ProbeError("X contains NaN or inf features (its logits are not finite); re-extract or drop those rows")
        logits = logits.reshape(len(X), n_subsets, k).transpose(1, 0, 2)
        return logits + self.bias[:, None, :].astype(np.float32)

    def predict_proba(self, X: np.ndarray, scratch: bool = False) -> np.ndarray:
        return link_function(self.decision_function(X, scratch), self.link)

    def probe_key(self, s: int) -> bytes:
        return self.weights[s].tobytes() + self.bias[s].tobytes()

    def _selected_parameters(self, rows: np.ndarray) -> dict[str, Any]:
        return {"weights": self.weights[rows], "bias": self.bias[rows]}


def float64_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64, through torch's BLAS when the process has torch loaded (about 2x
    numpy's on these skinny products here), else numpy's."""
    torch = sys.modules.get("torch")
    if torch is None:
        return a @ b
    return (torch.from_numpy(np.ascontiguousarray(a)) @ torch.from_numpy(np.ascontiguousarray(b))).numpy()


@dataclass(frozen=True)
class PredictedScores:
    """What a stack of probes predicts on N cases, for the metrics.

    ``probs`` (P, N, K) float64. ``ovr_keys`` (P, N, K) float32: per column a score in the same
    order as the column's probability, computed so that last-bit noise cannot reorder cases:
    the log-odds of the column relative to its log-odds at the reference row (the sigmoid link's
    decision value without its bias; for softmax log(p_k / (1 - p_k)) minus its value there).
    Log-odds keep their precision at both ends (log p_k of a near-certain class is -1e-20 and
    rounds to 0), and relative to the reference a probe that barely moves keeps its order in
    float32 instead of collapsing into ties of 0.1250000. ``exceed_keys`` (P, N, K - 1), for
    ordinal tasks: the same for P(grade >= t), t = 1..K-1. A key of a column the probe cannot
    move (a class it cannot predict, or the only class it can) is 0."""

    probs: np.ndarray
    ovr_keys: np.ndarray
    exceed_keys: np.ndarray | None = None


def _softmax_scores(decision: np.ndarray, bias: np.ndarray, ordinal: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The softmax link's probabilities (P, N, K), relative log-odds keys (P, N, K) and, with
    ``ordinal``, P(grade >= t)'s keys (P, N, K - 1), from one exponential pass.

    With log pi = bias (up to a constant per probe) and t_j = pi_j e^{d_j - m} (m the row's largest
    d_j + log pi_j, so the largest t is 1), p = t / sum(t) and the key of class k is
    d_k - m - log(sum_{j != k} t_j) + log(sum_{j != k} pi_j). The sum over the others is S - t_k,
    exact to K ulps whenever k is not a top class of the row (then S - t_k >= 1); for the top
    class it is summed without it, so a near-certain class keeps its precision. Ordinal keys use
    prefix and suffix sums of t, which have no cancellation."""
    P, N, K = decision.shape
    finite = np.isfinite(bias)
    top = np.max(np.where(finite, bias, -np.inf), axis=-1, keepdims=True)
    log_prior = np.where(finite, bias - np.where(np.isfinite(top), top, 0.0), -np.inf)
    prior = np.exp(log_prior)
    prior_others = np.stack([np.delete(prior, k, axis=-1).sum(axis=-1) for k in range(K)], axis=-1)  # (P, K)
    movable = finite & (prior_others > 0)
    prior_above = np.cumsum(prior[:, ::-1], axis=-1)[:, ::-1][:, 1:]  # (P, K - 1): classes >= t
    prior_below = np.cumsum(prior, axis=-1)[:, :-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_prior_others = np.where(movable, np.log(prior_others), 0.0)
        exceed_movable = (prior_above > 0) & (prior_below > 0)
        prior_odds = np.where(exceed_movable, np.log(prior_above) - np.log(prior_below), 0.0)
    if softmax_kernel.available() and softmax_kernel.softmax_rows is not None:
        probs = np.empty(decision.shape)
        ovr = np.empty(decision.shape, dtype=np.float32)
        exceed32 = np.empty((P, N, K - 1 if ordinal and K > 1 else 0), dtype=np.float32)
        softmax_kernel.softmax_rows(np.ascontiguousarray(decision), log_prior, log_prior_others, movable,
                                    prior_odds, exceed_movable, probs, ovr, exceed32)  # fmt: skip
        return probs, ovr, exceed32 if exceed32.shape[2] else None
    logs = decision + log_prior[:, None, :]
    m = max_last(logs)[..., None]
    t = np.exp(logs - m)  # a class the probe cannot predict: e^-inf = 0; a top class: exactly 1
    total = sum_last(t)[..., None]
    probs = t / total
    is_top = logs == m
    others = total - t
    top_others = sum_last(np.where(is_top, 0.0, t))[..., None] + (sum_last(is_top.astype(np.float64))[..., None] - 1.0)
    others = np.where(is_top, top_others, others)
    with np.errstate(divide="ignore", invalid="ignore"):
        ovr = np.where(movable[:, None, :], decision - m - np.log(others) + log_prior_others[:, None, :], 0.0)
        exceed = None
        if ordinal and K > 1:
            above = np.cumsum(t[..., ::-1], axis=-1)[..., ::-1][..., 1:]  # sum_{j >= t}, t = 1..K-1
            below = np.cumsum(t, axis=-1)[..., :-1]  # sum_{j < t}
            exceed = np.where(exceed_movable[:, None, :], np.log(above) - np.log(below) - prior_odds[:, None, :], 0.0)
    return probs, ovr.astype(np.float32), None if exceed is None else exceed.astype(np.float32)


def rank_scores(decision: np.ndarray, bias: np.ndarray, link: str, ordinal: bool = False) -> PredictedScores:
    """:class:`PredictedScores` from decision values (P, N, K, float64, bias excluded) and the
    biases (P, K): the logits are ``decision + bias``."""
    if link == "sigmoid":
        probs = link_function(decision + bias[:, None, :], "sigmoid")
        return PredictedScores(probs, decision.astype(np.float32))
    if link != "softmax":
        raise ProbeError(f"rank keys are defined for the softmax and sigmoid links, not {link!r}")
    probs, ovr, exceed = _softmax_scores(decision, bias, ordinal)
    return PredictedScores(probs, ovr, exceed)


def max_last(values: np.ndarray) -> np.ndarray:
    """``values.max(axis=-1)`` as K elementwise passes (numpy reduces a short last axis one row at a
    time: 10x slower for K = 8). The maximum is exact, so the result is the same."""
    out = values[..., 0].copy()
    for k in range(1, values.shape[-1]):
        np.maximum(out, values[..., k], out=out)
    return out


def sum_last(values: np.ndarray) -> np.ndarray:
    """``values.sum(axis=-1)`` bit for bit, as elementwise passes in numpy's own order (a running sum
    below 8 terms, eight running sums combined pairwise from 8 to 128); numpy's own call for more.
    ``tests/probes/test_probes.py`` holds it equal to numpy's."""
    K = values.shape[-1]
    if K > 128 or K == 0:
        return values.sum(axis=-1)
    if K < 8:
        out = values[..., 0].copy()
        for k in range(1, K):
            out += values[..., k]
        return out
    partial = [values[..., j].copy() for j in range(8)]
    k = 8
    while k < K - K % 8:
        for j in range(8):
            partial[j] += values[..., k + j]
        k += 8
    out = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + ((partial[4] + partial[5]) + (partial[6] + partial[7]))
    for rest in range(k, K):
        out += values[..., rest]
    return out


def link_function(logits: np.ndarray, link: str) -> np.ndarray:
    """Softmax over the last axis or elementwise sigmoid; stable for -inf logits."""
    if link == "softmax":
        shifted = logits - max_last(logits)[..., None]
        expd = np.exp(shifted)
        return expd / sum_last(expd)[..., None]
    if link == "ovr":
        # scikit-learn's convention for one-vs-rest linear scores: sigmoid, normalised over classes.
        proba = link_function(logits, "sigmoid")
        return proba / np.maximum(proba.sum(axis=-1, keepdims=True), 1e-30)
    if link == "sigmoid":
        # 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, as one pass with e = e^-|x| (the same
        # operations element by element as with masks, 3x faster)
        e = np.exp(-np.abs(logits))
        return np.where(logits >= 0, np.ones((), dtype=e.dtype), e) / (1.0 + e)
    raise ProbeError(f"link {link!r} is not one of ('softmax', 'sigmoid', 'ovr')")


@dataclass(frozen=True)
class ProblemData:
    """Checked inputs of one unit, shared by the backends."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    subsets: list[np.ndarray]
    kind: str
    n_classes: int
    Cs: tuple[float, ...]
    unique_subsets: list[np.ndarray]
    subset_to_unique: np.ndarray
    center: np.ndarray
    unique_val_subsets: list[np.ndarray] | None = None

    def validation_rows(self, unique: int) -> np.ndarray | None:
        """Rows of the validation split that choose C for unique subset ``unique``; None: all rows."""
        if self.unique_val_subsets is None:
            return None
        rows = self.unique_val_subsets[unique]
        return None if len(rows) == len(self.X_val) else rows

    @property
    def link(self) -> str:
        return "sigmoid" if self.kind == "multilabel" else "softmax"

    def targets(self, y: np.ndarray) -> np.ndarray:
        """Labels as float targets ``(n, K)``: one-hot for multiclass, as given (NaN kept) for multilabel."""
        if self.kind == "multilabel":
            return y.astype(np.float64)
        return np.eye(self.n_classes)[y]


def check_features(X: np.ndarray, name: str, dim: int | None = None, finite: bool = True) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2:
        raise ProbeError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if dim is not None and X.shape[1] != dim:
        raise ProbeError(f"{name} has {X.shape[1]} features, the probes were fitted on {dim}")
    if not np.issubdtype(X.dtype, np.floating):
        raise ProbeError(f"{name} must be floating point, got {X.dtype}; cast features to float32")
    if finite and not all_finite(X):
        raise ProbeError(f"{name} contains NaN or inf features; re-extract or drop those rows")
    return X


def all_finite(X: np.ndarray, block: int = 4096) -> bool:
    """No NaN or inf in X, checked in row blocks (small temporaries, reused: a whole-matrix mask of
    the CheXpert training split is 117 MB of fresh pages). float16, the cache's dtype, by its
    exponent bits (all ones exactly for NaN and inf), an integer pass cheaper than ``np.isfinite``."""
    bits = X.view(np.uint16) if X.dtype == np.float16 and X.flags.c_contiguous else None
    for start in range(0, len(X), block):
        if bits is not None:
            exponent = np.bitwise_and(bits[start : start + block], np.uint16(0x7C00))
            if (exponent == 0x7C00).any():
                return False
        elif not np.isfinite(X[start : start + block]).all():
            return False
    return True


def check_labels(y: np.ndarray, n_rows: int, kind: str, name: str) -> np.ndarray:
    y = np.asarray(y)
    if len(y) != n_rows:
        raise ProbeError(f"{name} has {len(y)} rows but its features have {n_rows}")
    if kind == "multilabel":
        if y.ndim != 2:
            raise ProbeError(f"{name} must be (n, L) float with NaN = ignore for a multilabel task, got shape {y.shape}")
        observed = y[~np.isnan(y)]
        if not np.isin(observed, (0.0, 1.0)).all():
            raise ProbeError(f"{name} must hold 0, 1 or NaN for a multilabel task")
        return y.astype(np.float32)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ProbeError(f"{name} must be int (n,) class indices for a {kind} task, got {y.dtype} {y.shape}")
    return y.astype(np.int64)


def prepare(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_val: np.ndarray,
    y_val: np.ndarray,
    subsets: Sequence[np.ndarray],
    kind: str,
    Cs: Sequence[float],
    n_classes: int | None,
    val_subsets: Sequence[np.ndarray] | None = None,
) -> ProblemData:
    """Check every input once and find identical subsets (the 100 % fraction repeats per seed).

    ``val_subsets``: per training subset, the rows of the validation split that choose its C (the
    validation set drawn at the subset's label fraction); None: every subset uses all of them. Two
    subsets are fitted once only when their training and their validation rows are both equal.
    """
    if kind not in TASK_KINDS:
        raise ProbeError(f"task kind {kind!r} is not one of {TASK_KINDS}")
    X_train = check_features(X_train, "X_train")
    X_val = check_features(X_val, "X_val", dim=X_train.shape[1])
    y_train = check_labels(y_train, len(X_train), kind, "y_train")
    y_val = check_labels(y_val, len(X_val), kind, "y_val")
    if kind == "multilabel":
        if y_val.shape[1] != y_train.shape[1]:
            raise ProbeError(f"y_val has {y_val.shape[1]} labels, y_train has {y_train.shape[1]}")
        if n_classes is not None and n_classes != y_train.shape[1]:
            raise ProbeError(f"n_classes={n_classes} but y_train has {y_train.shape[1]} labels")
        n_classes = y_train.shape[1]
    else:
        seen = int(max(y_train.max(initial=0), y_val.max(initial=0))) + 1
        n_classes = seen if n_classes is None else int(n_classes)
        if min(y_train.min(initial=0), y_val.min(initial=0)) < 0 or seen > n_classes:
            raise ProbeError(f"class indices must lie in 0..{n_classes - 1} (n_classes={n_classes})")
        if n_classes < 2:
            raise ProbeError(f"a {kind} task needs n_classes >= 2, got {n_classes}")
    Cs = tuple(sorted(float(c) for c in Cs))
    if not Cs or min(Cs) <= 0 or not np.isfinite(Cs).all():
        raise ProbeError(f"Cs must be positive finite numbers, got {Cs}")
    if len(subsets) == 0:
        raise ProbeError("subsets is empty; pass one index array per (label fraction, seed)")
    checked = [_check_subset(subset, f"subsets[{i}]", "X_train", len(X_train)) for i, subset in enumerate(subsets)]
    checked_val: list[np.ndarray] | None = None
    if val_subsets is not None:
        if len(val_subsets) != len(checked):
            raise ProbeError(f"val_subsets has {len(val_subsets)} entries, subsets has {len(checked)}; pass one per subset")
        checked_val = [np.sort(_check_subset(rows, f"val_subsets[{i}]", "X_val", len(X_val)))
                       for i, rows in enumerate(val_subsets)]
    unique: dict[tuple[bytes, bytes], int] = {}
    mapping = np.empty(len(checked), dtype=np.int64)
    first: list[int] = []
    for i, subset in enumerate(checked):
        key = (np.sort(subset).tobytes(), b"" if checked_val is None else checked_val[i].tobytes())
        if key not in unique:
            unique[key] = len(unique)
            first.append(i)
        mapping[i] = unique[key]
    unique_subsets = [np.sort(checked[i]) for i in first]
    unique_val = None if checked_val is None else [checked_val[i] for i in first]
    used = np.unique(np.concatenate(checked))
    center = sum(
        X_train[used[start : start + STANDARDISER_ROWS]].astype(np.float64).sum(axis=0)
        for start in range(0, len(used), STANDARDISER_ROWS)
    ) / len(used)  # in blocks: no float64 copy of the training matrix
    return ProblemData(
        X_train, y_train, X_val, y_val, checked, kind, n_classes, Cs, unique_subsets, mapping, center, unique_val
    )


def _check_subset(subset: np.ndarray, name: str, of: str, n_rows: int) -> np.ndarray:
    subset = np.asarray(subset)
    if subset.ndim != 1 or len(subset) < 2 or not np.issubdtype(subset.dtype, np.integer):
        raise ProbeError(f"{name} must be a 1-D integer index array with at least 2 rows")
    if subset.min() < 0 or subset.max() >= n_rows:
        raise ProbeError(f"{name} indexes outside {of} (0..{n_rows - 1})")
    return subset.astype(np.int64)


def subset_standardiser(
    X: np.ndarray, center: np.ndarray, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and floored std of a training subset, in float64, the mean taken relative to ``center``.

    The subset is ``X`` itself, or ``X[rows]`` when ``rows`` is given (then it is never copied whole).
    Two passes over blocks of rows, so a float32 subset is never copied whole into float64.
    """
    n = len(X) if rows is None else len(rows)

    def block(start: int) -> np.ndarray:
        stop = start + STANDARDISER_ROWS
        return (X[start:stop] if rows is None else X[rows[start:stop]]).astype(np.float64)

    blocks = range(0, n, STANDARDISER_ROWS)
    total = np.zeros(X.shape[1])
    for start in blocks:
        total += (block(start) - center).sum(axis=0)
    mean = total / n
    squares = np.zeros(X.shape[1])
    for start in blocks:
        squares += np.square(block(start) - center - mean).sum(axis=0)
    return mean, np.maximum(np.sqrt(squares / n), STD_FLOOR)


def as_float(rows: np.ndarray, dtype: np.dtype | type, buffer: np.ndarray | None = None) -> np.ndarray:
    """``rows`` converted to ``dtype``, written into the first rows of ``buffer`` when it is given
    (a block buffer reused across blocks: fresh 30-60 MB blocks are mmapped and faulted in anew
    each time, which cost more than the conversion). float16 rows (the cache's dtype) go through
    torch's vectorised conversion when the process has torch loaded (the torch backend's does):
    2.3 ms per 8,192 x 1,024 block to float32 against numpy's 20 ms here."""
    shape = rows.shape
    usable = buffer is not None and buffer.dtype == dtype and buffer.shape[1:] == shape[1:] and len(buffer) >= len(rows)
    out = buffer[: len(rows)] if usable else np.empty(shape, dtype=dtype)  # type: ignore[index]
    torch = sys.modules.get("torch")  # only if already imported: no 0.5 GiB import for other backends
    if rows.dtype == np.float16 and torch is not None and rows.flags.c_contiguous and rows.flags.writeable:
        torch.from_numpy(out).copy_(torch.from_numpy(rows))
    else:
        np.copyto(out, rows, casting="unsafe")
    return out


def subset_moments(
    X: np.ndarray, center: np.ndarray, subsets: Sequence[np.ndarray], block: int = 4 * STANDARDISER_ROWS
) -> tuple[np.ndarray, np.ndarray]:
    """Mean (relative to ``center``) and floored std of every subset, (U, D) float64 each, in one
    pass over the rows any subset uses: per block of rows, the sums and sums of squares of all
    subsets are one product with the block's membership matrix (rows x U). Same values as
    :func:`subset_standardiser` per subset up to float64 rounding; one pass instead of two per
    subset (the torch backend's nested label fractions read the training rows about six times).
    The variance is E[(x - center)^2] - mean^2: ``center`` (the training mean) keeps every subset's
    mean small next to its spread, so the difference loses nothing that matters in float64."""
    U, dim = len(subsets), X.shape[1]
    used = np.unique(np.concatenate([np.asarray(s) for s in subsets])) if U else np.zeros(0, dtype=np.int64)
    membership = np.zeros((len(used), U))
    for u, subset in enumerate(subsets):
        membership[np.searchsorted(used, subset), u] = 1.0
    sums, squares = np.zeros((U, dim)), np.zeros((U, dim))
    single = np.empty((min(block, len(used)), dim), dtype=np.float32)  # float16 -> float32 is exact
    double = np.empty((min(block, len(used)), dim))
    for start in range(0, len(used), block):
        converted = as_float(X[used[start : start + block]], np.float32, single) if X.dtype == np.float16 else X[used[start : start + block]]
        rows = np.subtract(converted, center, out=double[: len(converted)])
        part = membership[start : start + block]
        sums += part.T @ rows
        np.square(rows, out=rows)
        squares += part.T @ rows
    counts = np.array([len(s) for s in subsets], dtype=np.float64)[:, None]
    mean = sums / counts
    variance = np.maximum(squares / counts - np.square(mean), 0.0)
    return mean, np.maximum(np.sqrt(variance), STD_FLOOR)


def fold_standardisation(
    weights: np.ndarray, bias: np.ndarray, mean: np.ndarray, std: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Turn a probe on standardised features into one on ``X - center``.

    ``weights`` (D, K) act on ``(X - center - mean) / std``; the folded pair acts on ``X - center``.
    """
    folded = weights / std[:, None]
    with np.errstate(invalid="ignore"):
        folded_bias = bias - mean @ folded
    return folded, np.where(np.isneginf(bias), -np.inf, folded_bias)


def constant_label_bias(prevalence: float) -> float:
    """Logit of a clipped prevalence: the probe of a label with one value only in its subset."""
    p = float(np.clip(prevalence, PREVALENCE_CLIP, 1 - PREVALENCE_CLIP))
    return float(np.log(p / (1 - p)))
