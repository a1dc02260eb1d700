"""The simulated cohort of the interval-coverage bench: five encoders, one binary task, every printed quantity.

A patient has a label (prevalence 0.3), a severity effect u ~ N(0, tau^2) shared by its images and by
every encoder, an attribute group (three groups, shares 0.45 / 0.35 / 0.20, the smallest with 0.8 of
the signal) and 1 + Poisson(extra) images. Encoder e's full-label probe scores an image
x = mu_e m_g y + u + noise and reports p = sigmoid(a_e (Bayes logit of x) + b_e). The other printed
quantities, each with a closed-form population value:

* label efficiency: at each fraction below 1 and each of five seeds a probe of direction
  (cos t, sin t) on (x, nuisance), t ~ N(0, (c_e s_f)^2): fewer labels, a noisier direction; the
  estimand is the mean over fractions of E_t[AUROC] (Gauss-Hermite), as the seed bootstrap aims at;
* robustness: three severities of one corruption add noise of sd r_e k / 2 to x (same images, same
  patients), and a shifted site (half as many patients, 0.8 of the signal, drawn apart) counts half;
* per group: AUROC, calibration error (population value from the large sample), positive rate 0.3.

AUROC of a mixture over groups: the negatives carry no signal, so A = sum_g w_g Phi(d_g / sqrt(2 v)),
w_g the group's share of positive images, d_g the signal and v the score variance given the label.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

ENCODERS = {  # name: (signal mu, calibration slope a, calibration intercept b)
    "A": (1.8, 1.0, 0.0),
    "B": (2.1, 1.8, 0.0),
    "C": (1.6, 0.8, 0.3),
    "D": (1.1, 1.0, 0.0),
    "E": (2.0, 0.6, -0.4),
}
NEAR_TIES = {  # issue 40: A, B and C within 0.003 of each other's AUROC, apart on calibration
    "A": (1.8, 1.0, 0.0),
    "B": (1.82, 1.3, 0.0),
    "C": (1.79, 0.85, 0.15),
    "D": (1.1, 1.0, 0.0),
    "E": (2.0, 0.6, -0.4),
}
"""A cohort with near-ties on the discrimination axis (same names, so the same fragility and probe noise)."""
FRAGILITY = {"A": 1.0, "B": 1.4, "C": 0.6, "D": 0.8, "E": 1.2}
"""r_e: the sd of the corruption noise at severity k is r_e k / 2."""
PROBE_NOISE = {"A": 1.0, "B": 1.2, "C": 0.8, "D": 1.0, "E": 0.9}
"""c_e: the sd of a small-fraction probe's direction is c_e s_f (radians)."""
PREVALENCE = 0.3
GROUP_SHARES = (0.45, 0.35, 0.20)
GROUP_SIGNAL = (1.0, 1.0, 0.8)
FRACTION_ANGLE = {0.01: 0.6, 0.05: 0.35, 0.1: 0.25, 0.25: 0.15}
"""s_f per label fraction below 1."""
SEEDS = 5
SEVERITIES = (1, 2, 3)
SHIFT_SIGNAL = 0.8


@dataclass(frozen=True)
class Sample:
    """One simulated test set (images of several patients) and its shifted site."""

    y: np.ndarray  # (N,) 0/1
    patient: np.ndarray  # (N,)
    group: np.ndarray  # (N,) 0..G-1
    probs: np.ndarray  # (N, E) full-label probabilities
    corrupted: np.ndarray  # (N, K * E) scores, severity-major
    fractions: np.ndarray  # (N, F * S * E) scores, fraction-major then seed
    shift_y: np.ndarray
    shift_patient: np.ndarray
    shift_scores: np.ndarray  # (M, E)


def _labels(n_patients: int, rng: np.random.Generator, stratified: bool) -> np.ndarray:
    if stratified:
        return rng.permutation(n_patients) < round(PREVALENCE * n_patients)
    return rng.uniform(size=n_patients) < PREVALENCE


def _patients(n_patients: int, tau: float, extra: float, rng: np.random.Generator, stratified: bool):
    label = _labels(n_patients, rng, stratified)
    severity = rng.normal(0.0, tau, n_patients) if tau > 0 else np.zeros(n_patients)
    images = 1 + (rng.poisson(extra, n_patients) if extra > 0 else np.zeros(n_patients, int))
    group = rng.choice(len(GROUP_SHARES), size=n_patients, p=GROUP_SHARES)
    patient = np.repeat(np.arange(n_patients), images)
    return patient, label[patient].astype(np.float64), severity[patient], group[patient]


def draw_sample(n_patients: int, tau: float, extra: float, rng: np.random.Generator,
                stratified: bool = False, full: bool = True, cohort: dict | None = None) -> Sample:
    """One test set of ``n_patients`` patients (labels at random, or ``stratified``: exactly 30 %
    positive patients). ``full`` = False draws only the full-label probabilities (the large sample
    that gives the population calibration errors). ``cohort``: the encoders (default :data:`ENCODERS`)."""
    cohort = ENCODERS if cohort is None else cohort
    patient, y, severity, group = _patients(n_patients, tau, extra, rng, stratified)
    n, n_enc = len(patient), len(cohort)
    signal = np.asarray(GROUP_SIGNAL)[group]
    probs = np.empty((n, n_enc))
    corrupted = np.empty((n, len(SEVERITIES) * n_enc))
    fractions = np.empty((n, len(FRACTION_ANGLE) * SEEDS * n_enc))
    for e, (name, (mu, slope, intercept)) in enumerate(cohort.items()):
        score = mu * signal * y + severity + rng.normal(size=n)
        bayes_logit = mu * (score - mu / 2) / (1 + tau**2) + logit(PREVALENCE)
        probs[:, e] = expit(slope * bayes_logit + intercept)
        if not full:
            continue
        for k, level in enumerate(SEVERITIES):
            corrupted[:, k * n_enc + e] = score + FRAGILITY[name] * level / 2 * rng.normal(size=n)
        nuisance = rng.normal(size=n)
        for f, angle_sd in enumerate(FRACTION_ANGLE.values()):
            for s in range(SEEDS):
                angle = rng.normal(0.0, PROBE_NOISE[name] * angle_sd)
                fractions[:, (f * SEEDS + s) * n_enc + e] = np.cos(angle) * score + np.sin(angle) * nuisance
    if not full:
        empty = np.zeros(0)
        return Sample(y, patient, group, probs, corrupted[:, :0], fractions[:, :0], empty, empty.astype(int), empty)
    shift_patient, shift_y, shift_severity, shift_group = _patients(max(n_patients // 2, 2), tau, extra, rng, stratified)
    shift_signal = SHIFT_SIGNAL * np.asarray(GROUP_SIGNAL)[shift_group]
    shift_scores = np.stack([mu * shift_signal * shift_y + shift_severity + rng.normal(size=len(shift_y))
                             for mu, _, _ in cohort.values()], axis=1)
    return Sample(y, patient, group, probs, corrupted, fractions, shift_y, shift_patient, shift_scores)


def mixture_auroc(signal: np.ndarray | float, variance: np.ndarray | float,
                  groups: tuple[int, ...] = (0, 1, 2)) -> np.ndarray:
    """Population AUROC of scores (signal m_g d, variance v given the label) over ``groups``."""
    shares = np.array([GROUP_SHARES[g] for g in groups])
    shares = shares / shares.sum()
    d = np.asarray(signal, dtype=np.float64)[..., None] * np.array([GROUP_SIGNAL[g] for g in groups])
    return np.sum(shares * norm.cdf(d / np.sqrt(2 * np.asarray(variance, dtype=np.float64))[..., None]), axis=-1)


def population_values(tau: float, cohort: dict | None = None) -> dict[str, np.ndarray]:
    """Per encoder (E,): label efficiency, robustness; per group and encoder (G, E): AUROC."""
    cohort = ENCODERS if cohort is None else cohort
    nodes, node_weights = np.polynomial.hermite_e.hermegauss(40)
    node_weights = node_weights / node_weights.sum()
    label, robust, by_group = [], [], []
    for name, (mu, _, _) in cohort.items():
        per_fraction = []
        for angle_sd in FRACTION_ANGLE.values():
            angle = PROBE_NOISE[name] * angle_sd * nodes
            variance = np.cos(angle) ** 2 * (1 + tau**2) + np.sin(angle) ** 2
            per_fraction.append(np.sum(node_weights * mixture_auroc(mu * np.cos(angle), variance)))
        label.append(np.mean(per_fraction))
        corrupt = [mixture_auroc(mu, 1 + tau**2 + (FRAGILITY[name] * k / 2) ** 2) for k in SEVERITIES]
        robust.append(0.5 * np.mean(corrupt) + 0.5 * mixture_auroc(SHIFT_SIGNAL * mu, 1 + tau**2))
        by_group.append([mixture_auroc(mu, 1 + tau**2, (g,)) for g in range(len(GROUP_SHARES))])
    return {"label_efficiency": np.array(label), "robustness": np.array(robust),
            "group_auroc": np.array(by_group, dtype=np.float64).T}
