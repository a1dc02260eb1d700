"""Simulation of calibration-error estimators against their population values (issue 23, decision 0035).

A probe's predicted confidences are drawn from a fixed distribution and its outcomes as
Bernoulli(sigmoid(a logit(c) + b)): a = 1, b = 0 is a calibrated probe, a = 0.8 mildly
over-confident, a = 0.6 with b = 0.3 strongly miscalibrated. Three problem shapes, as stage 2
scores them:

* ``binary``: c = sigmoid(s), s ~ N(-0.5, 1.5^2), against the positive label;
* ``top_label``: 8 classes, logits ~ N(0, 1.5^2) each, c = the largest softmax probability, the
  outcome "arg-max is right" (the estimators only ever see this (confidence, correct) pair);
* ``multilabel``: 5 labels with prevalence-like means s ~ N(mu_l, 1.2^2), mu = -2.5 .. 0.5; the
  value is the mean over labels of each label's value.

Each estimator's truth is its own population target: the binned error with population bins (equal
width, or the population quantiles for equal mass) and the population gap E[q - c | bin], where q
is the true outcome probability; computed on a large sample of confidences with q known exactly,
so no label noise enters the truth. Repetitions are vectorised: every estimator takes
(repetitions, n) arrays and returns (repetitions,) values.

Candidates (all 15 bins):

* ``ece``: plain L1 binned ECE, equal width (what stage 2 reports as ``ece``);
* ``ece_null_debiased``: ECE minus a calibrated probe's expected ECE (the scored error before 0035);
* ``ece_gap_corrected``: L1, equal width, the bias evaluated at the observed per-bin gap,
  2 ECE - sum_b share_b E|N(d_b, s_b^2)| (uncertainty-calibration's ``normal_debiased_ce``, in
  closed form instead of 1,000 normal resamples);
* ``l2_width`` / ``l2_mass``: the per-bin debiased squared error (Kumar, Liang and Ma 2019),
  T = sum_b share_b (d_b^2 - s_b^2 / n_b), s_b^2 the bin's sample variance of the residual
  outcome - confidence, and its root sqrt(max(T, 0)); equal-width or equal-mass bins;
* ``l2_mass_kumar``: as ``l2_mass`` with uncertainty-calibration's variance term
  ybar (1 - ybar) / (n_b - 1) (the outcomes' sample variance, ignoring the confidences' spread).

Run ``python -m crs.bench.calibration_error`` (``--repetitions``, ``--sizes``); it prints the
table of decision 0035 (bias, RMSE, SD, and for ``l2_width`` the mean standard error over SD).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

from crs.axes.calibration import calibration_error_moments

N_BINS = 15
SHAPES = ("binary", "top_label", "multilabel")
LEVELS = {"calibrated": (1.0, 0.0), "mild": (0.8, 0.0), "strong": (0.6, 0.3)}
SIZES = (200, 732, 5000)
MULTILABEL_MEANS = (-2.5, -1.5, -1.0, -0.5, 0.5)
ESTIMATORS = ("ece", "ece_null_debiased", "ece_gap_corrected", "l2_width", "l2_mass", "l2_mass_kumar")


def draw_confidences(shape: str, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Confidences (problems, *size): one problem for binary and top label, five for multilabel."""
    if shape == "binary":
        return expit(rng.normal(-0.5, 1.5, size=(1, *size)))
    if shape == "top_label":
        logits = rng.normal(0.0, 1.5, size=(*size, 8))
        logits -= logits.max(axis=-1, keepdims=True)
        return (1.0 / np.exp(logits).sum(axis=-1))[None]
    if shape == "multilabel":
        return expit(np.stack([rng.normal(mu, 1.2, size=size) for mu in MULTILABEL_MEANS]))
    raise ValueError(f"shape {shape!r} is not one of {SHAPES}")


def true_probability(confidence: np.ndarray, level: str) -> np.ndarray:
    """P(outcome = 1 | confidence) = sigmoid(a logit(c) + b) for the level's (a, b)."""
    a, b = LEVELS[level]
    return expit(a * logit(np.clip(confidence, 1e-12, 1 - 1e-12)) + b)


# --- binning and per-bin sums, vectorised over repetitions ---------------------------------------


def bin_index(confidence: np.ndarray, binning: str, n_bins: int = N_BINS) -> np.ndarray:
    """Bin of each confidence along the last axis: equal width (crs.axes' edges) or equal mass
    (``np.array_split`` of the sorted confidences, as crs.axes and uncertainty-calibration)."""
    if binning == "width":
        return np.clip(np.floor(confidence * n_bins).astype(np.int64), 0, n_bins - 1)
    n = confidence.shape[-1]
    rank = np.argsort(np.argsort(confidence, axis=-1, kind="stable"), axis=-1, kind="stable")
    sizes = np.full(n_bins, n // n_bins)
    sizes[: n % n_bins] += 1
    return np.searchsorted(np.cumsum(sizes), rank, side="right")


def bin_sums(confidence: np.ndarray, outcome: np.ndarray, binning: str, n_bins: int = N_BINS) -> dict:
    """Per (row, bin) sums over the last axis: count, c, y, c^2, y c, c (1 - c)."""
    rows = int(np.prod(confidence.shape[:-1]))
    c = confidence.reshape(rows, -1)
    y = outcome.reshape(rows, -1)
    index = (bin_index(c, binning, n_bins) + np.arange(rows)[:, None] * n_bins).ravel()

    def total(values):
        return np.bincount(index, weights=values.ravel(), minlength=rows * n_bins).reshape(
            *confidence.shape[:-1], n_bins
        )

    return {"count": total(np.ones_like(c)), "c": total(c), "y": total(y), "cc": total(c * c),
            "yc": total(y * c), "var": total(c * (1 - c))}


# --- the candidates ------------------------------------------------------------------------------


def _safe_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros_like(a), where=b > 0)


def plain_ece(sums: dict) -> np.ndarray:
    return np.abs(sums["y"] - sums["c"]).sum(-1) / sums["count"].sum(-1)


def null_debiased_ece(sums: dict) -> np.ndarray:
    n = sums["count"].sum(-1)
    return plain_ece(sums) - np.sqrt(2 * sums["var"] / np.pi).sum(-1) / n


def gap_corrected_ece(sums: dict) -> np.ndarray:
    count = sums["count"]
    share = count / count.sum(-1, keepdims=True)
    gap = _safe_divide(sums["y"] - sums["c"], count)
    accuracy = _safe_divide(sums["y"], count)
    sd = np.sqrt(_safe_divide(accuracy * (1 - accuracy), count))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(sd > 0, np.abs(gap) / np.where(sd > 0, sd, 1), np.inf)
        folded = np.where(sd > 0, np.abs(gap) * (1 - 2 * norm.cdf(-z)) + 2 * sd * norm.pdf(z), np.abs(gap))
    return 2 * plain_ece(sums) - (share * folded).sum(-1)


def l2_root(sums: dict, variance: str = "residual") -> np.ndarray:
    """sqrt(max(T, 0)) of the per-bin debiased squared error (the scored estimator is this with
    ``variance="residual"``; ``"outcome"`` is uncertainty-calibration's variance term)."""
    count = sums["count"]
    if variance == "outcome":
        accuracy = _safe_divide(sums["y"], count)
        debias = _safe_divide(accuracy * (1 - accuracy), count - 1)
        gap = _safe_divide(sums["y"] - sums["c"], count)
        per_bin = np.where(count >= 2, gap**2 - debias, 0.0)
        squared = (count / count.sum(-1, keepdims=True) * per_bin).sum(-1)
        return np.sqrt(np.maximum(squared, 0.0))
    return calibration_error_moments(count, sums["y"] - sums["c"], sums["y"] - 2 * sums["yc"] + sums["cc"])[0]


def estimate(name: str, confidence: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """One candidate on (problems, repetitions, n) arrays: (repetitions,), the mean over problems."""
    binning = "mass" if name.startswith("l2_mass") else "width"
    sums = bin_sums(confidence, outcome, binning)
    value = {
        "ece": plain_ece, "ece_null_debiased": null_debiased_ece, "ece_gap_corrected": gap_corrected_ece,
        "l2_width": l2_root, "l2_mass": l2_root, "l2_mass_kumar": lambda s: l2_root(s, "outcome"),
    }[name](sums)
    return value.mean(axis=0)


def standard_error(confidence: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """The scored estimator's standard error (repetitions,): labels independent, sqrt(sum var) / L."""
    sums = bin_sums(confidence, outcome, "width")
    _, sd = calibration_error_moments(sums["count"], sums["y"] - sums["c"], sums["y"] - 2 * sums["yc"] + sums["cc"])
    return np.sqrt((sd**2).sum(axis=0)) / sd.shape[0]


# --- population values -----------------------------------------------------------------------------


def population_value(name: str, shape: str, level: str, size: int = 2_000_000, seed: int = 0) -> float:
    """The candidate's population target: population bins, population gap E[q - c | bin], L1 or L2."""
    confidence = draw_confidences(shape, (size,), np.random.default_rng(seed))
    binning = "mass" if name.startswith("l2_mass") else "width"
    sums = bin_sums(confidence, true_probability(confidence, level), binning)
    share = sums["count"] / size
    gap = _safe_divide(sums["y"] - sums["c"], sums["count"])
    per_problem = (share * np.abs(gap)).sum(-1) if name.startswith("ece") else np.sqrt((share * gap**2).sum(-1))
    return float(per_problem.mean())


@dataclass(frozen=True)
class Cell:
    """One (shape, level, n, estimator) cell of the simulation."""

    shape: str
    level: str
    n: int
    estimator: str
    truth: float
    mean: float
    sd: float
    rmse: float
    se_over_sd: float  # mean standard error / SD (scored estimator only; NaN otherwise)

    @property
    def bias(self) -> float:
        return self.mean - self.truth


def simulate(
    shapes=SHAPES, levels=tuple(LEVELS), sizes=SIZES, estimators=ESTIMATORS, repetitions: int = 300,
    seed: int = 23, truth_size: int = 2_000_000, chunk: int = 100,
) -> list[Cell]:
    """Every (shape, level, n, estimator) cell; repetitions in chunks of ``chunk`` test sets."""
    cells = []
    for shape in shapes:
        for level in levels:
            truths = {name: population_value(name, shape, level, truth_size) for name in estimators}
            for n in sizes:
                rng = np.random.default_rng([seed, SHAPES.index(shape), list(LEVELS).index(level), n])
                values: dict[str, list] = {name: [] for name in estimators}
                errors = []
                for start in range(0, repetitions, chunk):
                    rows = min(chunk, repetitions - start)
                    confidence = draw_confidences(shape, (rows, n), rng)
                    outcome = (rng.uniform(size=confidence.shape) < true_probability(confidence, level)).astype(float)
                    for name in estimators:
                        values[name].append(estimate(name, confidence, outcome))
                    errors.append(standard_error(confidence, outcome))
                error = np.concatenate(errors)
                for name in estimators:
                    value = np.concatenate(values[name])
                    sd = float(value.std(ddof=1))
                    cells.append(Cell(
                        shape, level, n, name, truths[name], float(value.mean()), sd,
                        float(np.sqrt(np.mean((value - truths[name]) ** 2))),
                        float(error.mean() / sd) if name == "l2_width" else float("nan"),
                    ))
    return cells


def table(cells: list[Cell]) -> str:
    """Markdown: one row per (shape, level, n), bias and RMSE of every estimator."""
    estimators = list(dict.fromkeys(cell.estimator for cell in cells))
    head = "| shape | level | n | " + " | ".join(f"{e} truth / bias / RMSE" for e in estimators) + " | SE/SD |"
    lines = [head, "|" + "---|" * (len(estimators) + 4)]
    keys = list(dict.fromkeys((c.shape, c.level, c.n) for c in cells))
    for key in keys:
        row = {c.estimator: c for c in cells if (c.shape, c.level, c.n) == key}
        parts = [f"{row[e].truth:.4f} / {row[e].bias:+.4f} / {row[e].rmse:.4f}" for e in estimators]
        ratio = row["l2_width"].se_over_sd if "l2_width" in row else float("nan")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(parts) + f" | {ratio:.2f} |")
    return "\n".join(lines)


def worst(cells: list[Cell]) -> str:
    """Per estimator and n: the largest |bias| and RMSE over shapes and levels."""
    lines = ["| estimator | n | worst abs bias | worst RMSE |", "|---|---|---|---|"]
    for name in dict.fromkeys(c.estimator for c in cells):
        for n in sorted({c.n for c in cells}):
            mine = [c for c in cells if c.estimator == name and c.n == n]
            lines.append(f"| {name} | {n} | {max(abs(c.bias) for c in mine):.4f} | {max(c.rmse for c in mine):.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=300)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--truth-size", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    cells = simulate(sizes=tuple(args.sizes), repetitions=args.repetitions, truth_size=args.truth_size)
    print(table(cells))
    print()
    print(worst(cells))


if __name__ == "__main__":
    main()
