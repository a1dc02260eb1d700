"""Candidate interval methods for the non-smooth CRS, evaluated by the coverage bench (issue 30 item 2).

Each takes the point estimate (E,), the bootstrap replicates (B, E) and what the method needs beyond
them, and returns (low, high), each (E,), clipped to the quantity's range:

* percentile (what crs prints), basic (2 point - the percentile bounds);
* BC and BCa (Efron 1987): the bias correction z0 from the share of replicates below the point (ties
  count half), BCa's acceleration from the leave-one-patient-out jackknife;
* m-out-of-n (Bickel, Goetze and van Zwet 1997): replicates of m < n patients, the spread rescaled by
  sqrt(m / n) around the point (basic form);
* the calibrated double bootstrap (Beran's prepivoting; Hall and Martin 1988): for each outer replicate
  the share p_b of inner replicates (resampled from it) at or below the point; the percentile levels are
  the alpha / 2 and 1 - alpha / 2 quantiles of p_b instead of alpha / 2 and 1 - alpha / 2.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def _clip(low: np.ndarray, high: np.ndarray, bounds: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    return np.clip(low, *bounds), np.clip(high, *bounds)


def _quantile_per_column(replicates: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(E,) the levels[e] quantile of column e."""
    return np.array([np.quantile(replicates[:, e], np.clip(levels[e], 0.0, 1.0)) for e in range(replicates.shape[1])])


def percentile(point, replicates, alpha=0.05, bounds=(0.0, 1.0)):
    low, high = np.percentile(replicates, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return _clip(low, high, bounds)


def basic(point, replicates, alpha=0.05, bounds=(0.0, 1.0)):
    low, high = np.percentile(replicates, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return _clip(2 * point - high, 2 * point - low, bounds)


def _z0(point, replicates):
    below = np.mean(replicates < point, axis=0) + 0.5 * np.mean(replicates == point, axis=0)
    return norm.ppf(np.clip(below, 0.5 / len(replicates), 1 - 0.5 / len(replicates)))


def bca(point, replicates, jackknife=None, alpha=0.05, bounds=(0.0, 1.0)):
    """BCa; ``jackknife`` (n, E) leave-one-patient-out values, None for BC (acceleration 0)."""
    z0 = _z0(point, replicates)
    if jackknife is None:
        acceleration = np.zeros_like(z0)
    else:
        deviation = jackknife.mean(axis=0) - jackknife
        denominator = 6 * np.sum(deviation**2, axis=0) ** 1.5
        acceleration = np.where(denominator > 0, np.sum(deviation**3, axis=0) / np.where(denominator > 0, denominator, 1), 0)
    levels = []
    for z in (norm.ppf(alpha / 2), norm.ppf(1 - alpha / 2)):
        levels.append(norm.cdf(z0 + (z0 + z) / (1 - acceleration * (z0 + z))))
    return _clip(_quantile_per_column(replicates, levels[0]), _quantile_per_column(replicates, levels[1]), bounds)


def m_out_of_n(point, replicates_m, ratio, alpha=0.05, bounds=(0.0, 1.0)):
    """``replicates_m`` (B, E) from resamples of m patients, ``ratio`` = m / n."""
    low, high = np.percentile(replicates_m, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    scale = np.sqrt(ratio)
    return _clip(point - scale * (high - point), point - scale * (low - point), bounds)


def double_bootstrap(point, replicates, inner_share_below, alpha=0.05, bounds=(0.0, 1.0)):
    """``inner_share_below`` (B, E): per outer replicate the share of its inner replicates below the
    point (ties half). The calibrated levels are its alpha / 2 and 1 - alpha / 2 quantiles."""
    low_level = np.quantile(inner_share_below, alpha / 2, axis=0)
    high_level = np.quantile(inner_share_below, 1 - alpha / 2, axis=0)
    return _clip(_quantile_per_column(replicates, low_level), _quantile_per_column(replicates, high_level), bounds)


def m_out_of_n_counts(patient: np.ndarray, y: np.ndarray, m_share: float, n_boot: int, rng: np.random.Generator,
                      stratified: bool) -> np.ndarray:
    """(B, N) row counts of resamples of round(m_share x patients) patients, within label strata when
    ``stratified`` (each stratum its share of m)."""
    ids, first, row_patient = np.unique(patient, return_index=True, return_inverse=True)
    strata = y[first].astype(int) if stratified else np.zeros(len(ids), int)
    counts = np.zeros((n_boot, len(ids)))
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        m = max(int(round(m_share * len(members))), 1)
        counts[:, members] = rng.multinomial(m, np.full(len(members), 1 / len(members)), size=n_boot)
    return counts[:, row_patient.ravel()]


def inner_counts(outer_patient_counts: np.ndarray, strata: np.ndarray, n_inner: int,
                 rng: np.random.Generator) -> np.ndarray:
    """(n_inner, G) patient counts of resamples drawn from one outer resample (G,) patient counts: each
    drawn copy of a patient is a patient of its own, n copies drawn per stratum of n copies."""
    out = np.zeros((n_inner, len(outer_patient_counts)))
    for stratum in np.unique(strata):
        members = np.flatnonzero((strata == stratum) & (outer_patient_counts > 0))
        size = int(outer_patient_counts[members].sum())
        if size == 0:
            continue
        out[:, members] = rng.multinomial(size, outer_patient_counts[members] / size, size=n_inner)
    return out
