"""Calibration: binned ECE and MCE (top-label, class-wise, per label), smooth ECE, Brier and NLL.

Binning follows torchmetrics (``BinaryCalibrationError`` / ``MulticlassCalibrationError``):
``n_bins`` equal-width bins over [0, 1] with edges b_0 = 0 < ... < b_n = 1, a confidence c falls
in bin i when b_i <= c < b_{i+1}, and c = 1 falls in the last bin. ECE = sum over bins of
(share of cases in the bin) x |accuracy - mean confidence|; MCE = the largest such gap over
non-empty bins. ``binning="mass"`` instead sorts the confidences and splits them into ``n_bins``
groups of (nearly) equal size, ties broken by position in the input.

What counts as "confidence" and "accuracy" depends on the kind:

* multiclass, ordinal: top label, confidence = max probability, accuracy = [arg-max == y];
* binary: the positive-class probability against the label (torchmetrics' binary form);
* multilabel: each label as a binary problem over its known rows, then the mean over labels.

Every function returns NaN (never 0) when nothing can be scored.

Binned ECE is biased upward (a perfectly calibrated probe scores about 0.04 on 732 cases and 0.016
on 5,000). The scored calibration error, :func:`debiased_ece`, is the root-mean-square binned error
with each bin's squared gap debiased by its own noise (decision 0035): unbiased in the square at any
miscalibration, not only at zero. :func:`ece_standard_error` is its standard error.
:func:`calibrated_ece_moments` keeps the closed-form mean and SD of a calibrated probe's L1 ECE
(the scored error before decision 0035; the simulation in :mod:`crs.bench.calibration_error` uses it).
"""

from __future__ import annotations

import numpy as np

from crs.axes._inputs import AxisInputError, binary_pair, check_kind, multiclass_pair, multilabel_pair

BINNINGS = ("width", "mass")


def _bin_index(confidence: np.ndarray, n_bins: int, binning: str) -> np.ndarray:
    if binning == "width":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
        return np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    if binning == "mass":
        index = np.empty(len(confidence), dtype=np.int64)
        for bin_number, members in enumerate(np.array_split(np.argsort(confidence, kind="stable"), n_bins)):
            index[members] = bin_number
        return index
    raise AxisInputError(f"binning {binning!r} is not one of {BINNINGS}")


def _bin_gaps(
    confidence: np.ndarray, correct: np.ndarray, n_bins: int, binning: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin |accuracy - confidence| and share of cases (empty bins have share 0)."""
    if n_bins < 1:
        raise AxisInputError(f"n_bins must be a positive integer, got {n_bins}")
    index = _bin_index(confidence, n_bins, binning)
    count = np.bincount(index, minlength=n_bins).astype(np.float64)
    confidence_sum = np.bincount(index, weights=confidence, minlength=n_bins)
    correct_sum = np.bincount(index, weights=correct.astype(np.float64), minlength=n_bins)
    filled = count > 0
    gap = np.zeros(n_bins)
    gap[filled] = np.abs(correct_sum[filled] - confidence_sum[filled]) / count[filled]
    return gap, count / count.sum()


def _binned_ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int, binning: str) -> float:
    if len(confidence) == 0:
        return float("nan")
    gap, share = _bin_gaps(confidence, correct, n_bins, binning)
    return float((gap * share).sum())


def _binned_mce(confidence: np.ndarray, correct: np.ndarray, n_bins: int, binning: str) -> float:
    if len(confidence) == 0:
        return float("nan")
    gap, share = _bin_gaps(confidence, correct, n_bins, binning)
    return float(gap[share > 0].max())


def _mean_or_nan(values: list[float]) -> float:
    values_array = np.asarray(values, dtype=np.float64)
    if values_array.size == 0 or np.isnan(values_array).all():
        return float("nan")
    return float(np.nanmean(values_array))


def _per_problem(y: np.ndarray, probs: np.ndarray, kind: str, statistic, classwise: bool = False) -> float:
    """Apply a (confidence, correct) statistic as the kind prescribes."""
    check_kind(kind)
    if kind == "binary":
        y_b, p_b = binary_pair(y, probs)
        return statistic(p_b, y_b)
    if kind == "multilabel":
        y_m, p_m = multilabel_pair(y, probs)
        values = []
        for label in range(y_m.shape[1]):
            known = ~np.isnan(y_m[:, label])
            values.append(statistic(p_m[known, label], y_m[known, label]) if known.any() else np.nan)
        return _mean_or_nan(values)
    y_c, p_c = multiclass_pair(y, probs)
    if classwise:
        return _mean_or_nan(
            [statistic(p_c[:, k], (y_c == k).astype(np.float64)) for k in range(p_c.shape[1])]
        )
    return statistic(p_c.max(axis=1), (p_c.argmax(axis=1) == y_c).astype(np.float64))


def ece(y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int = 15, binning: str = "width") -> float:
    """Expected calibration error (top-label; per-label mean for multilabel)."""
    return _per_problem(y, probs, kind, lambda c, a: _binned_ece(c, a, n_bins, binning))


def mce(y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int = 15, binning: str = "width") -> float:
    """Maximum calibration error over non-empty bins (per-label mean for multilabel)."""
    return _per_problem(y, probs, kind, lambda c, a: _binned_mce(c, a, n_bins, binning))


def classwise_ece(
    y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int = 15, binning: str = "width"
) -> float:
    """Mean over classes of the binary ECE of P(class k) against [y == k] (per label for multilabel)."""
    return _per_problem(y, probs, kind, lambda c, a: _binned_ece(c, a, n_bins, binning), classwise=True)


# --- the ECE a calibrated probe would score: bias and noise level ----------------------------------


def calibrated_ece_moments(bin_variance: np.ndarray, total: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of binned ECE when every outcome is drawn from its own confidence.

    ``bin_variance`` (..., n_bins): per bin, sum over its cases of c (1 - c) (case-weighted if the
    cases carry weights); ``total`` (...): the number (or total weight) of cases. In bin b the sum of
    residuals S_b = sum (outcome - c) then has mean 0 and variance V_b; with S_b close to normal,
    E|S_b| = sqrt(2 V_b / pi) and Var|S_b| = (1 - 2 / pi) V_b, and ECE = sum_b |S_b| / total, so

        mean = sum_b sqrt(2 V_b / pi) / total,    sd = sqrt((1 - 2 / pi) sum_b V_b) / total.

    Checked against the mean and spread of the ECE of 400 label resamples (tests/axes): within
    0.001 at 732 cases, within 0.005 at 50. Pure arithmetic, so the weighted bootstrap uses it too.
    """
    bin_variance = np.asarray(bin_variance, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.sqrt(2.0 * bin_variance / np.pi).sum(axis=-1) / total
        sd = np.sqrt((1.0 - 2.0 / np.pi) * bin_variance.sum(axis=-1)) / total
    empty = ~(total > 0)
    return np.where(empty, np.nan, mean), np.where(empty, np.nan, sd)


_QUADRATURE_Z = np.linspace(-7.0, 7.0, 281)
_QUADRATURE_WEIGHT = np.exp(-0.5 * _QUADRATURE_Z**2) / np.exp(-0.5 * _QUADRATURE_Z**2).sum()


def _debiased_bins(
    count: np.ndarray, residual_sum: np.ndarray, residual_square_sum: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(total, share, debiased squared gap and noise per bin, T): the parts of :func:`calibration_error_moments`."""
    count = np.asarray(count, dtype=np.float64)
    residual_sum = np.asarray(residual_sum, dtype=np.float64)
    residual_square_sum = np.asarray(residual_square_sum, dtype=np.float64)
    total = count.sum(axis=-1)
    usable = count >= 2.0
    safe_count = np.where(usable, count, 2.0)
    gap = residual_sum / safe_count
    variance = np.maximum(residual_square_sum - safe_count * gap**2, 0.0) / (safe_count - 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = count / total[..., None]
        squared_gap = np.where(usable, gap**2 - variance / safe_count, 0.0)
        squared = (share * squared_gap).sum(axis=-1)
        noise = np.where(usable, variance / safe_count, 0.0)
    return total, share, squared_gap, noise, squared


def calibration_error(count: np.ndarray, residual_sum: np.ndarray, residual_square_sum: np.ndarray) -> np.ndarray:
    """The debiased calibration error of :func:`calibration_error_moments` alone (the same arithmetic), without
    its standard error's quadrature: what the bootstrap replicates need."""
    total, _, _, _, squared = _debiased_bins(count, residual_sum, residual_square_sum)
    return np.where(~(total > 0), np.nan, np.sqrt(np.maximum(squared, 0.0)))


def calibration_error_moments(
    count: np.ndarray, residual_sum: np.ndarray, residual_square_sum: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The debiased calibration error and its standard error from per-bin sums (decision 0035).

    Arguments are (..., n_bins): per bin the number (or total weight) of cases W_b, the sum of the
    residuals r = outcome - confidence, and the sum of their squares. With d_b = the bin's mean
    residual and s_b^2 its sample variance (n - 1), d_b^2 - s_b^2 / W_b is unbiased for the
    squared population gap g_b^2 at any gap (Kumar, Liang and Ma 2019); bins with W_b < 2 add 0.

        T = sum_b (W_b / n) (d_b^2 - s_b^2 / W_b),    error = sqrt(max(T, 0))

    (the L2, root-mean-square, binned calibration error; 0 is "within noise of calibrated").
    Var T = sum_b (W_b / n)^2 (4 g_b^2 s_b^2 / W_b + 2 s_b^4 / W_b^2) (at least its zero-gap part)
    plus the bin shares' multinomial term (sum_b share_b g_b^4 - T^2) / n (the delta method on the
    per-case influence 2 g_b r - g_b^2 - T), with g_b^2, g_b^4 and T^2 estimated without their noise
    bias; the standard error is the SD of sqrt(max(X, 0)) for X ~ N(max(T, 0), Var T), by quadrature,
    so it holds near zero (where the root's delta method fails) and under miscalibration alike. Pure
    arithmetic: stage 2's stacked metrics and the weighted bootstrap use it too. Returns
    (error, standard error), NaN where n = 0.
    """
    total, share, squared_gap, noise, squared = _debiased_bins(count, residual_sum, residual_square_sum)
    with np.errstate(invalid="ignore", divide="ignore"):
        # g_b^2 enters unbiased (it may be negative), so a bin without a gap adds no phantom 4 g^2 s^2;
        # the sum is kept at least the zero-gap variance 2 sum share^2 s^4 / W^2
        floor = (share**2 * 2.0 * noise**2).sum(axis=-1)
        spread = np.maximum((share**2 * (4.0 * squared_gap * noise + 2.0 * noise**2)).sum(axis=-1), floor)
        # the bins' shares: (sum share g^4 - T^2) / n, with g^4 and T^2 estimated without their noise
        fourth_power = squared_gap**2 - 4.0 * squared_gap * noise - 2.0 * noise**2
        shares_term = (share * fourth_power).sum(axis=-1) - (squared**2 - spread)
        spread += np.maximum(shares_term, 0.0) / total
    centre = np.maximum(squared, 0.0)[..., None]
    draws = np.sqrt(np.maximum(centre + np.sqrt(spread)[..., None] * _QUADRATURE_Z, 0.0))
    first = (draws * _QUADRATURE_WEIGHT).sum(axis=-1)
    second = (draws**2 * _QUADRATURE_WEIGHT).sum(axis=-1)
    error = np.sqrt(np.maximum(squared, 0.0))
    standard_error = np.sqrt(np.maximum(second - first**2, 0.0))
    empty = ~(total > 0)
    return np.where(empty, np.nan, error), np.where(empty, np.nan, standard_error)


def _calibration_sums(
    confidence: np.ndarray, correct: np.ndarray, n_bins: int, binning: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bin: number of cases, sum of residuals (correct - confidence), sum of their squares."""
    if n_bins < 1:
        raise AxisInputError(f"n_bins must be a positive integer, got {n_bins}")
    index = _bin_index(confidence, n_bins, binning)
    residual = correct.astype(np.float64) - confidence
    return (
        np.bincount(index, minlength=n_bins).astype(np.float64),
        np.bincount(index, weights=residual, minlength=n_bins),
        np.bincount(index, weights=residual * residual, minlength=n_bins),
    )


def _calibration_error(
    y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int, binning: str
) -> tuple[float, float]:
    """(debiased calibration error, its standard error) of one probe, as the kind prescribes.

    Multilabel: the mean of the labels' errors, and sqrt(sum of their variances) / number of
    labels (labels taken as independent).
    """
    check_kind(kind)

    def one(confidence: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
        if len(confidence) == 0:
            return float("nan"), float("nan")
        error, standard_error = calibration_error_moments(*_calibration_sums(confidence, correct, n_bins, binning))
        return float(error), float(standard_error)

    if kind == "binary":
        y_b, p_b = binary_pair(y, probs)
        return one(p_b, y_b)
    if kind == "multilabel":
        y_m, p_m = multilabel_pair(y, probs)
        known = [~np.isnan(y_m[:, label]) for label in range(y_m.shape[1])]
        moments = [one(p_m[rows, label], y_m[rows, label]) for label, rows in enumerate(known) if rows.any()]
        if not moments:
            return float("nan"), float("nan")
        errors, standard_errors = np.array(moments).T
        return float(errors.mean()), float(np.sqrt((standard_errors**2).sum()) / len(moments))
    y_c, p_c = multiclass_pair(y, probs)
    return one(p_c.max(axis=1), (p_c.argmax(axis=1) == y_c).astype(np.float64))


def debiased_ece(y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int = 15, binning: str = "width") -> float:
    """The scored calibration error: the root-mean-square binned error, debiased per bin (decision 0035).

    Per bin the squared gap (accuracy - mean confidence)^2 minus its noise (the bin's sample
    variance of the residuals over its size), which is unbiased for the squared population gap at
    any miscalibration (Kumar, Liang and Ma 2019); the share-weighted sum T, and sqrt(max(T, 0)).
    Bias against the population value, measured over calibrated, mildly and strongly miscalibrated
    probes (binary, 8-class top label, 5 labels): at most 0.007 at 5,000 cases and 0.018 at 732,
    largest for a calibrated probe, where the noise floor (0012) covers it (tests/axes). Same bins
    as :func:`ece` (top label; binary positive class; per-label mean for multilabel). Costs one pass
    over the cases; deterministic. 0 means "within noise of calibrated".
    """
    return _calibration_error(y, probs, kind, n_bins, binning)[0]


def ece_standard_error(
    y: np.ndarray, probs: np.ndarray, kind: str, n_bins: int = 15, binning: str = "width"
) -> float:
    """Standard error of :func:`debiased_ece`, calibrated or not (:func:`calibration_error_moments`).

    Within 20 % of the estimator's spread over fresh test sets in every simulated cell (decision
    0035); the CRS floors each calibration error at the reference's (decision 0012).
    """
    return _calibration_error(y, probs, kind, n_bins, binning)[1]


def brier(y: np.ndarray, probs: np.ndarray, kind: str) -> float:
    """Brier score.

    multiclass/ordinal: mean over cases of sum over classes of (p_k - [y == k])^2 (range 0..2,
    scikit-learn's multiclass ``brier_score_loss`` without its scaling option); binary: mean of
    (p - y)^2; multilabel: mean over labels of each label's binary Brier on its known rows.
    """
    check_kind(kind)
    if kind == "binary":
        y_b, p_b = binary_pair(y, probs)
        return float(np.mean((p_b - y_b) ** 2)) if len(y_b) else float("nan")
    if kind == "multilabel":
        y_m, p_m = multilabel_pair(y, probs)
        values = []
        for label in range(y_m.shape[1]):
            known = ~np.isnan(y_m[:, label])
            values.append(np.mean((p_m[known, label] - y_m[known, label]) ** 2) if known.any() else np.nan)
        return _mean_or_nan(values)
    y_c, p_c = multiclass_pair(y, probs)
    if len(y_c) == 0:
        return float("nan")
    one_hot = np.eye(p_c.shape[1])[y_c]
    return float(np.mean(np.sum((p_c - one_hot) ** 2, axis=1)))


def _clip(probs: np.ndarray) -> np.ndarray:
    # scikit-learn's log_loss clips at the float64 machine epsilon; we do the same so a hard 0 or 1
    # gives a large finite loss rather than infinity.
    eps = np.finfo(np.float64).eps
    return np.clip(probs, eps, 1.0 - eps)


def _binary_nll(y: np.ndarray, p: np.ndarray) -> float:
    p = _clip(p)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))


def nll(y: np.ndarray, probs: np.ndarray, kind: str) -> float:
    """Negative log-likelihood (natural log), probabilities clipped to [eps, 1 - eps].

    multiclass/ordinal: mean of -log p_y; binary: binary cross-entropy; multilabel: mean over
    labels of each label's binary cross-entropy on its known rows.
    """
    check_kind(kind)
    if kind == "binary":
        y_b, p_b = binary_pair(y, probs)
        return _binary_nll(y_b, p_b) if len(y_b) else float("nan")
    if kind == "multilabel":
        y_m, p_m = multilabel_pair(y, probs)
        values = []
        for label in range(y_m.shape[1]):
            known = ~np.isnan(y_m[:, label])
            values.append(_binary_nll(y_m[known, label], p_m[known, label]) if known.any() else np.nan)
        return _mean_or_nan(values)
    y_c, p_c = multiclass_pair(y, probs)
    if len(y_c) == 0:
        return float("nan")
    return float(-np.mean(np.log(_clip(p_c[np.arange(len(y_c)), y_c]))))


# --- smooth ECE -----------------------------------------------------------------------------------

_SMOOTH_GRID = 1001


def _reflected_smooth(mass: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing (width sigma) of grid masses, reflected at 0 and 1, evaluated on the grid.

    Reflection puts a mirror copy of each mass at -x and at 2 - x, so no mass leaks out of [0, 1].
    """
    size = len(mass)
    extended = np.zeros(3 * size - 2)  # grid positions -(G-1) .. 2(G-1)
    extended[size - 1 :] += np.concatenate([mass, np.zeros(size - 1)])
    extended[:size] += mass[::-1]  # mirror about 0: position -j
    extended[2 * size - 2 :] += mass[::-1]  # mirror about 1: position 2(G-1) - j
    step = size - 1
    offsets = np.arange(-2 * step, 2 * step + 1) / step  # every distance between [0, 1] and [-1, 2]
    kernel = np.exp(-0.5 * (offsets / sigma) ** 2) / (sigma * np.sqrt(2.0 * np.pi))
    # imported here: scipy.signal costs every process that imports crs.axes ~0.8 CPU s (stage-2 workers)
    from scipy.signal import fftconvolve

    return fftconvolve(extended, kernel, mode="full")[3 * step : 3 * step + size]


def _round_to_grid(confidence: np.ndarray, values: np.ndarray, grid_size: int) -> np.ndarray:
    """Spread each value onto its two neighbouring grid points by linear interpolation.

    This makes the cost independent of the number of cases; the smoothing kernel is far wider
    than the grid step, so the change is negligible (checked against relplot and the exact sum).
    """
    position = np.clip(confidence, 0.0, 1.0) * (grid_size - 1)
    low = np.clip(np.floor(position).astype(np.int64), 0, grid_size - 2)
    upper_share = position - low
    return np.bincount(low, (1.0 - upper_share) * values, grid_size) + np.bincount(
        low + 1, upper_share * values, grid_size
    )


def _smooth_ece_at(residual_mass: np.ndarray, sigma: float, grid: np.ndarray) -> float:
    """Integral over [0, 1] of |kernel-smoothed residual (correct - confidence)| x density."""
    weighted_residual = _reflected_smooth(residual_mass, sigma)
    return float(np.trapezoid(np.abs(weighted_residual), grid))


def _smooth_ece_binary(confidence: np.ndarray, correct: np.ndarray) -> float:
    """Smooth ECE with the self-consistent bandwidth sigma* where smECE(sigma*) = sigma*.

    smECE(sigma) falls as sigma grows, so the fixed point is found by bisection on [1e-3, 1].
    """
    if len(confidence) == 0:
        return float("nan")
    grid = np.linspace(0.0, 1.0, _SMOOTH_GRID)
    residual_mass = _round_to_grid(confidence, correct - confidence, _SMOOTH_GRID) / len(confidence)
    low, high = 1e-3, 1.0
    if _smooth_ece_at(residual_mass, low, grid) <= low:
        return _smooth_ece_at(residual_mass, low, grid)
    for _ in range(30):
        middle = 0.5 * (low + high)
        if _smooth_ece_at(residual_mass, middle, grid) > middle:
            low = middle
        else:
            high = middle
    return _smooth_ece_at(residual_mass, 0.5 * (low + high), grid)


def smooth_ece(y: np.ndarray, probs: np.ndarray, kind: str) -> float:
    """Smooth ECE (Blasiok and Nakkiran, 2023): a binning-free calibration error.

    Our own implementation: Gaussian kernel reflected at 0 and 1, bandwidth chosen as the fixed
    point sigma* = smECE(sigma*) (bisection), cases spread linearly onto a 1001-point grid. Top-label for multiclass and
    ordinal, positive class for binary, per-label mean for multilabel.
    """
    return _per_problem(y, probs, kind, _smooth_ece_binary)
