"""Coverage of every interval the report prints, by simulation of fresh patient samples (issue 23, 30; decisions 0036, 0090).

The cohort (:mod:`crs.bench.coverage_model`): five encoders, one binary task, test sets of patients
with a label (prevalence 0.3; drawn at random, or stratified with exactly 30 % positive patients as
crs's own splits are), a severity effect shared by a patient's images (``clustered``: 1 + Poisson(1)
images; ``independent``: one image, no effect), an attribute of three groups, corrupted copies at
three severities, small-fraction probes over five seeds and a shifted site. Population values:
AUROC and calibration error from one sample of 300,000 patients, the rest in closed form; the CRS on
those errors (the median reference, the noise floor at its mean over the simulated test sets).

Each simulated test set is scored as ``crs score`` scores a task: AUROC, the debiased calibration
error and their standard errors (``crs.axes``); ``n_boot`` patient-level replicates (within label strata for a stratified test set, plain for a random one, as crs resamples them: decision 0085; ``--resample`` forces one way)
(``crs.scoring.resample.group_bootstrap``, the weighted metrics of ``crs.axes.weighted``, calibration
replicates centred on squares, decision 0061; one seed multiset a replicate for the label fractions;
the shifted site resampled apart); the percentile interval of every printed quantity (:data:`PRINTED`:
CRS, the four axes, per-group AUROC, calibration and positive rate, worst-group AUROC = the equity
axis, the simultaneous gap interval); the simultaneous rank sets; reversal counts; the AUROC +- 1.96
DeLong SE interval; bootstrap SD against the spread over fresh test sets; the projected box's CRS at its
corners (decision 0128), the sharper box over ratios and differences (0167, the default) and the adaptive
interval (0180: the smooth part's studentised interval plus the dominance term's range). ``--compare-methods``
adds the candidate CRS intervals of :mod:`crs.bench.interval_methods` (decision 0089).

Run ``python -m crs.bench.interval_coverage`` (``--data-sets``, ``--n-boot``; defaults 200 x 200).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs import axes
from crs.axes.weighted import prepare_weights, weighted_auroc, weighted_calibration_error
from crs.bench import interval_methods as methods
from crs.bench.coverage_model import (
    ENCODERS,
    FRACTION_ANGLE,
    GROUP_SHARES,
    NEAR_TIES,
    PREVALENCE,
    SEEDS,
    SEVERITIES,
    draw_sample,
    population_values,
)
from crs.scoring.box import simultaneous_box
from crs.scoring.formula import crs_components
from crs.scoring.intervals import (
    box_gap,
    centre_on_squares,
    simultaneous_gap_interval,
    simultaneous_group_box,
)
from crs.scoring.projection import adaptive_crs_bounds, project, sharper_bounds
from crs.scoring.rank_sets import rank_confidence_sets
from crs.scoring.rankings import rank_reversals
from crs.scoring.resample import group_bootstrap
from crs.scoring.reversals import auroc_crs_reversals, reversal_count_bounds

CONFIGURATIONS = {  # name: (patients, severity sd tau, extra images per patient (Poisson mean), stratified)
    "clustered, 150 patients (~300 images), random": (150, 0.8, 1.0, False),
    "clustered, 366 patients (~732 images), random": (366, 0.8, 1.0, False),
    "clustered, 366 patients, stratified": (366, 0.8, 1.0, True),
    "independent, 732 images, random": (732, 0.0, 0.0, False),
    "independent, 732 images, stratified": (732, 0.0, 0.0, True),
    "near-ties, clustered, 366 patients, random": (366, 0.8, 1.0, False),
}
COHORTS = {"near-ties, clustered, 366 patients, random": NEAR_TIES}
"""Designs on another cohort than :data:`crs.bench.coverage_model.ENCODERS` (issue 40: near-ties on an axis)."""


def draw_test_set(n_patients: int, tau: float, extra_images: float, rng: np.random.Generator,
                  stratified: bool = False):
    """(labels (N,), patient ids (N,), full-label probabilities (N, E)) of one sample of patients
    (:func:`crs.bench.coverage_model.draw_sample`): labels drawn at random, or ``stratified`` with
    exactly round(0.3 G) positive patients (as crs's own splits are)."""
    sample = draw_sample(n_patients, tau, extra_images, rng, stratified, full=False)
    return sample.y, sample.patient, sample.probs


def point_metrics(y: np.ndarray, probs: np.ndarray, patient: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per encoder: AUROC, its DeLong SE (and with ``patient`` the clustered one), the debiased
    calibration error and its SE."""
    columns = range(probs.shape[1])
    clustered = {} if patient is None else {
        "auroc_se_clustered": np.array([axes.auroc_standard_error(y, probs[:, e], "binary", patient) for e in columns])
    }
    return {
        **clustered,
        "auroc": np.array([axes.auroc(y, probs[:, e], "binary") for e in columns]),
        "auroc_se": np.array([axes.auroc_standard_error(y, probs[:, e], "binary") for e in columns]),
        "calibration": np.array([axes.debiased_ece(y, probs[:, e], "binary") for e in columns]),
        "calibration_se": np.array([axes.ece_standard_error(y, probs[:, e], "binary") for e in columns]),
    }


def crs_of(auroc: np.ndarray, calibration: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """CRS (..., E) from AUROC and calibration error (..., E): two axes, the median reference."""
    return crs_components(np.stack([1.0 - auroc, calibration], axis=-1), None, floor=floor)["crs"]


def true_ranks(score: np.ndarray) -> np.ndarray:
    """1 = best; ties share the better rank."""
    return np.array([1 + int(np.sum(score > s)) for s in score])


@dataclass(frozen=True)
class Coverage:
    configuration: str
    data_sets: int
    n_boot: int
    rows: dict[str, float]


def _inflate(replicates: np.ndarray, factor: float) -> np.ndarray:
    centre = replicates.mean(axis=0, keepdims=True)
    return centre + factor * (replicates - centre)


def _covers(replicates: np.ndarray, truth: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    low, high = np.percentile(replicates, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return (low <= truth) & (truth <= high)


def _false_robust(reversal, truth: dict[str, np.ndarray], truth_crs: np.ndarray) -> bool:
    """True when a pair called a robust reversal is not reversed that way in the population."""
    names = list(ENCODERS)
    for _, pair in reversal.pairs[reversal.pairs["robust"]].iterrows():
        first, second = names.index(pair["first"]), names.index(pair["second"])
        if pair["p_opposite"] > pair["p_as_point"]:
            first, second = second, first  # the orientation the replicates hold: first ahead on AUROC
        auroc_ahead = truth["auroc"][first] > truth["auroc"][second]
        crs_behind = truth_crs[first] < truth_crs[second]
        if not (auroc_ahead and crs_behind):
            return True
    return False


def box_projection(errors: np.ndarray, replicates: np.ndarray, floor: np.ndarray, calibration_scale: str = "square",
                   alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The default intervals of ``crs score`` (decision 0128) on one data set: the simultaneous box over
    every (encoder, axis) error ``errors`` (E, A) from ``replicates`` (B, E, A) (axis 1 the calibration
    error, the others 1 - AUROC on the logit scale) and its projection through the CRS (median reference,
    ``floor`` (A,)). Returns the box's (low, high) (E, A) and the projected bounds."""
    n_enc, n_axes = errors.shape
    scales = ["logit" if a != 1 else calibration_scale for _ in range(n_enc) for a in range(n_axes)]
    box = simultaneous_box(errors.ravel(), replicates.reshape(len(replicates), -1), alpha, scales)
    low, high = box.low.reshape(n_enc, n_axes), box.high.reshape(n_enc, n_axes)
    bounds = project(low, high, lambda stack: crs_components(stack, None, floor=floor))
    return low, high, bounds


def _interval_hits(low: np.ndarray, high: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return (low <= truth) & (truth <= high)


def _weights_with_point(counts: np.ndarray):
    """Prepared weights with row 0 every case once, then the replicate counts."""
    return prepare_weights(np.vstack([np.ones((1, counts.shape[1])), counts]))


def _grouped(sample, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score columns, labels (NaN outside the group) and the known mask, group-major: column g E + e."""
    n_enc = sample.probs.shape[1]
    mask = np.repeat(sample.group[:, None] == np.arange(n_groups)[None, :], n_enc, axis=1)  # (N, G E)
    labels = np.where(mask, np.tile(sample.y[:, None], (1, n_groups * n_enc)), np.nan)
    return np.tile(sample.probs, (1, n_groups)), labels, mask


def _subgroup_replicates(sample, counts: np.ndarray, weights) -> dict[str, np.ndarray]:
    """Per group (B + 1, G, E): AUROC, calibration error centred on squares (as the subgroup tables
    do) and (B + 1, G) positive rate."""
    n_groups, n_enc = len(GROUP_SHARES), sample.probs.shape[1]
    scores, labels, mask = _grouped(sample, n_groups)
    auroc = weighted_auroc(scores, labels, weights).reshape(-1, n_groups, n_enc)
    raw = weighted_calibration_error(scores, np.nan_to_num(labels), weights, known=mask)[0]
    calibration = centre_on_squares(raw).reshape(-1, n_groups, n_enc)
    with_point = np.vstack([np.ones((1, counts.shape[1])), counts])
    in_group = (sample.group[:, None] == np.arange(n_groups)[None, :]).astype(np.float64)
    rate = (with_point @ (in_group * sample.y[:, None])) / (with_point @ in_group)
    return {"auroc": auroc, "calibration": calibration, "positive_rate": rate}


def _axis_replicates(sample, weights, seed_draw: np.ndarray, shift_weights) -> tuple[np.ndarray, np.ndarray]:
    """(B + 1, E) label efficiency and robustness, row 0 the point: the mean over fractions of the
    mean over each replicate's seed multiset (row 0: every seed once); robustness half the mean over
    severities, half the shifted site."""
    n_enc = sample.probs.shape[1]
    per_seed = weighted_auroc(sample.fractions, sample.y, weights).reshape(-1, len(FRACTION_ANGLE), SEEDS, n_enc)
    every_seed = np.vstack([np.arange(SEEDS)[None], seed_draw])  # (B + 1, S)
    label = np.take_along_axis(per_seed, every_seed[:, None, :, None], axis=2).mean(axis=(1, 2))
    corrupted = weighted_auroc(sample.corrupted, sample.y, weights).reshape(-1, len(SEVERITIES), n_enc).mean(axis=1)
    shift = weighted_auroc(sample.shift_scores, sample.shift_y, shift_weights)
    return label, 0.5 * corrupted + 0.5 * shift


def _crs_of_counts(probs, y, counts, floor, centre_to) -> np.ndarray:
    """CRS (R, E) of replicate row counts (R, N): AUROC and the calibration error centred on squares
    to ``centre_to`` (E,) (the estimate of the sample the replicates were drawn from)."""
    weights = prepare_weights(counts)
    auroc = weighted_auroc(probs, y, weights)
    raw = weighted_calibration_error(probs, np.broadcast_to(y[:, None], probs.shape), weights)[0]
    calibration = centre_on_squares(np.vstack([centre_to[None], raw]))[1:]
    return crs_of(auroc, calibration, floor)


JACKKNIFE_BLOCKS = 100
"""BCa's acceleration from a grouped jackknife: patients dealt into at most this many blocks, one left out
at a time (the acceleration's expectation does not depend on the block count; the cost does)."""


def _method_intervals(sample, point, crs_point, crs_boot, calibration_raw, draws, floor, rng, stratified: bool, n_inner: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every candidate interval of the CRS (crs.bench.interval_methods) on one data set."""
    y, probs, patient = sample.y, sample.probs, sample.patient
    out = {"percentile (printed)": methods.percentile(crs_point, crs_boot),
           "basic": methods.basic(crs_point, crs_boot),
           "BC (bias-corrected percentile)": methods.bca(crs_point, crs_boot),
           "percentile at a nominal 99 % (a level calibrated offline)": methods.percentile(crs_point, crs_boot, 0.01)}
    ids, row_patient = np.unique(patient, return_inverse=True)
    block = rng.permutation(len(ids))[row_patient.ravel()] % min(len(ids), JACKKNIFE_BLOCKS)
    leave_out = (block[None, :] != np.arange(min(len(ids), JACKKNIFE_BLOCKS))[:, None]).astype(np.float64)
    weights = prepare_weights(leave_out)
    jack_auroc = weighted_auroc(probs, y, weights)
    jack_calibration = weighted_calibration_error(probs, np.broadcast_to(y[:, None], probs.shape), weights)[0]
    out["BCa (grouped patient jackknife)"] = methods.bca(crs_point, crs_boot, crs_of(jack_auroc, jack_calibration, floor))
    for share in (0.5, 0.25):
        m_counts = methods.m_out_of_n_counts(patient, y, share, len(crs_boot), rng, stratified)
        out[f"m-out-of-n, m = n/{round(1 / share)}"] = methods.m_out_of_n(
            crs_point, _crs_of_counts(probs, y, m_counts, floor, point["calibration"]), share)
    if n_inner > 0:
        patient_counts = draws.group_counts(range(len(crs_boot)))
        inner = np.concatenate([methods.inner_counts(patient_counts[b].astype(np.float64), draws.group_stratum, n_inner, rng)
                                for b in range(len(crs_boot))])[:, draws.row_group]  # (B n_inner, N)
        weights = prepare_weights(inner)
        auroc = weighted_auroc(probs, y, weights).reshape(len(crs_boot), n_inner, -1)
        raw = weighted_calibration_error(probs, np.broadcast_to(y[:, None], probs.shape), weights)[0]
        raw = raw.reshape(len(crs_boot), n_inner, -1)
        centred = np.stack([centre_on_squares(np.vstack([calibration_raw[b][None], raw[b]]))[1:]
                            for b in range(len(crs_boot))])
        inner_crs = crs_of(auroc, centred, floor)  # (B, n_inner, E)
        below = np.mean(inner_crs < crs_point, axis=1) + 0.5 * np.mean(inner_crs == crs_point, axis=1)
        out[f"double bootstrap, calibrated levels ({n_inner} inner)"] = methods.double_bootstrap(crs_point, crs_boot, below)
    return out


RESAMPLE = {"as drawn": None, "stratified": "stratified", "plain": "official"}
"""How the bootstrap resamples a simulated test set: as crs does since decision 0085 (within label strata
where the test set was drawn stratified, plain patients where at random), or always one way (before 0085
crs always stratified), given as the sampling design ``group_bootstrap`` follows."""


def simulate(configuration: str, data_sets: int = 200, n_boot: int = 200, seed: int = 36,
             truth_patients: int = 300_000, compare_methods: bool = False, n_inner: int = 0,
             resample: str = "as drawn") -> Coverage:
    n_patients, tau, extra, stratified = CONFIGURATIONS[configuration]
    cohort = COHORTS.get(configuration, ENCODERS)
    design = RESAMPLE[resample] or ("stratified" if stratified else "official")
    names = list(cohort)
    n_groups = len(GROUP_SHARES)
    rng = np.random.default_rng([seed, list(CONFIGURATIONS).index(configuration)])
    big = draw_sample(truth_patients, tau, extra, rng, full=False, cohort=cohort)
    truth = {"auroc": np.array([axes.auroc(big.y, big.probs[:, e], "binary") for e in range(len(names))]),
             "calibration": np.array([axes.debiased_ece(big.y, big.probs[:, e], "binary") for e in range(len(names))])}
    population = population_values(tau, cohort)
    truth_group_calibration = np.array([[axes.debiased_ece(big.y[big.group == g], big.probs[big.group == g, e], "binary")
                                         for e in range(len(names))] for g in range(n_groups)])
    del big
    factor = np.sqrt(n_patients / (n_patients - 1))
    points, boot_sd, boot_sd_inflated = [], [], []
    hits: dict[str, list] = {}
    widths: dict[str, list] = {}

    def hit(name: str, value) -> None:
        hits.setdefault(name, []).append(np.atleast_1d(value).astype(np.float64).ravel())

    floors, stored = [], []
    for data_set in range(data_sets):
        sample = draw_sample(n_patients, tau, extra, rng, stratified, cohort=cohort)
        y, patient, probs = sample.y, sample.patient, sample.probs
        point = point_metrics(y, probs, patient)
        floor = np.array([np.median(point["auroc_se"]), np.median(point["calibration_se"])])
        draws = group_bootstrap(patient, y.astype(np.int64), "binary", seed=[seed, data_set], design=design)
        counts = draws.counts(range(n_boot))
        weights = _weights_with_point(counts)
        auroc_boot = weighted_auroc(probs, y, weights)[1:]
        calibration_raw = weighted_calibration_error(probs, np.broadcast_to(y[:, None], probs.shape), weights)[0][1:]
        with_point = np.vstack([point["calibration"][None], calibration_raw])
        calibration_boot = centre_on_squares(with_point)[1:]  # decision 0061, as crs score does
        calibration_additive = calibration_raw - (calibration_raw.mean(axis=0) - point["calibration"])  # 0017
        shift_draws = group_bootstrap(sample.shift_patient, sample.shift_y.astype(np.int64), "binary",
                                      seed=[seed, data_set, 1])
        seed_draw = np.random.default_rng([seed, data_set, 2]).integers(0, SEEDS, (n_boot, SEEDS))
        label, robust = _axis_replicates(sample, weights, seed_draw, _weights_with_point(shift_draws.counts(range(n_boot))))
        groups = _subgroup_replicates(sample, counts, weights)
        extra_floor = np.array([floor[0], floor[1], floor[0], floor[0]])
        floors.append(floor)
        stored.append((point, auroc_boot, calibration_boot, floor, calibration_additive, calibration_raw,
                       label, robust, groups, extra_floor, sample, draws))
    mean_floor = np.mean(floors, axis=0)
    truth_crs = crs_of(truth["auroc"], truth["calibration"], mean_floor)
    four_floor = np.array([mean_floor[0], mean_floor[1], mean_floor[0], mean_floor[0]])
    truth_four = crs_components(np.stack([1 - truth["auroc"], truth["calibration"], 1 - population["label_efficiency"],
                                          1 - population["robustness"]], axis=-1), None, floor=four_floor)["crs"]
    ranks = true_ranks(truth_crs)
    true_reversals = rank_reversals(pd.Series(truth["auroc"], index=names), pd.Series(truth_crs, index=names)).n_reversed
    worst_group_truth = population["group_auroc"].min(axis=0)
    for (point, auroc_boot, calibration_boot, floor, calibration_additive, calibration_raw,
         label, robust, groups, extra_floor, sample, draws) in stored:
        crs_point = crs_of(point["auroc"], point["calibration"], floor)
        crs_boot = crs_of(auroc_boot, calibration_boot, floor)
        hit("calibration: additive centring (0017, replaced)", _covers(calibration_additive, truth["calibration"]))
        hit("calibration: uncentred percentile", _covers(calibration_raw, truth["calibration"]))
        hit("calibration: negative lower bound, additive centring",
            np.percentile(calibration_additive, 100 * 0.025, axis=0) < 0)
        hit("calibration: negative lower bound, centred on squares", np.percentile(calibration_boot, 2.5, axis=0) < 0)
        hit("CRS: additive calibration centring (0017, replaced)",
            _covers(crs_of(auroc_boot, calibration_additive, floor), truth_crs))
        points.append(np.concatenate([point["auroc"], point["calibration"], crs_point]))
        stacked = np.concatenate([auroc_boot, calibration_boot, crs_boot], axis=1)
        boot_sd.append(stacked.std(axis=0, ddof=1))
        boot_sd_inflated.append(_inflate(stacked, factor).std(axis=0, ddof=1))
        hit("AUROC percentile interval", _covers(auroc_boot, truth["auroc"]))
        hit("AUROC percentile, (G-1)/G corrected", _covers(_inflate(auroc_boot, factor), truth["auroc"]))
        delong = np.abs(point["auroc"] - truth["auroc"]) <= 1.959964 * point["auroc_se"]
        hit("AUROC +- 1.96 DeLong SE (images independent)", delong)
        clustered = np.abs(point["auroc"] - truth["auroc"]) <= 1.959964 * point["auroc_se_clustered"]
        hit("AUROC +- 1.96 clustered DeLong SE (Obuchowski)", clustered)
        hit("calibration error percentile interval (centred on squares, 0061)", _covers(calibration_boot, truth["calibration"]))
        hit("calibration, (G-1)/G corrected", _covers(_inflate(calibration_boot, factor), truth["calibration"]))
        hit("CRS percentile interval", _covers(crs_boot, truth_crs))
        hit("CRS percentile, (G-1)/G corrected", _covers(_inflate(crs_boot, factor), truth_crs))
        hit("label efficiency percentile interval (seeds x patients)", _covers(label[1:], population["label_efficiency"]))
        hit("robustness percentile interval (severities and shifted site)", _covers(robust[1:], population["robustness"]))
        four_boot = crs_components(np.stack([1 - auroc_boot, calibration_boot, 1 - label[1:], 1 - robust[1:]], axis=-1),
                                   None, floor=extra_floor)["crs"]
        hit("CRS, four axes, percentile interval", _covers(four_boot, truth_four))
        group_auroc = groups["auroc"]  # (B + 1, G, E)
        hit("per-group AUROC percentile interval (group x encoder)",
            _covers(group_auroc[1:], population["group_auroc"]))
        box = simultaneous_group_box(group_auroc.reshape(len(group_auroc), -1), 0.05)  # one box, as crs (0135)
        box_low, box_high = box.low.reshape(group_auroc.shape[1:]), box.high.reshape(group_auroc.shape[1:])
        hit("per-group AUROC, simultaneous box (group x encoder)",
            _interval_hits(box_low, box_high, population["group_auroc"]))
        hit("per-group calibration error percentile interval (group x encoder)",
            _covers(groups["calibration"][1:], truth_group_calibration))
        hit("per-group positive rate percentile interval (group)",
            _covers(groups["positive_rate"][1:], np.full(len(GROUP_SHARES), PREVALENCE)))
        rate_box = simultaneous_group_box(groups["positive_rate"], 0.05)  # one box over the groups, as crs
        hit("per-group positive rate, simultaneous box (group)",
            _interval_hits(rate_box.low, rate_box.high, np.full(len(GROUP_SHARES), PREVALENCE)))
        widths.setdefault("per-group positive rate, simultaneous box: width", []).append(rate_box.high - rate_box.low)
        rate_percentile = np.nanquantile(groups["positive_rate"][1:], [0.025, 0.975], axis=0)
        widths.setdefault("per-group positive rate percentile interval: width", []).append(
            rate_percentile[1] - rate_percentile[0])
        worst_group = np.nanmin(group_auroc, axis=1)  # (B + 1, E), the replicate minimum
        hit("worst-group AUROC = equity axis, percentile interval", _covers(worst_group[1:], worst_group_truth))
        hit("worst-group AUROC = equity axis, box corners",
            _interval_hits(box_low.min(axis=0), box_high.min(axis=0), worst_group_truth))
        gap_hits, box_gap_hits = [], []
        for e in range(len(names)):
            by_group = group_auroc[:, :, e]
            best, worst = int(np.argmax(by_group[0])), int(np.argmin(by_group[0]))
            gap_low, gap_high, _ = simultaneous_gap_interval(by_group, best, worst, 0.05, logit_scale=True)
            gap = population["group_auroc"][best, e] - population["group_auroc"][worst, e]
            gap_hits.append(gap_low <= gap <= gap_high)
            found_low, found_high = box_gap(box_low[:, e], box_high[:, e], best, worst)
            box_gap_hits.append(found_low <= gap <= found_high)
        hit("AUROC gap of the picked pair, simultaneous interval (0062)", np.array(gap_hits))
        hit("AUROC gap of the picked pair, box corners", np.array(box_gap_hits))
        reversal = auroc_crs_reversals(pd.Series(point["auroc"], index=names), pd.Series(crs_point, index=names),
                                       auroc_boot, crs_boot)
        hit("reversal-count percentile interval", reversal.count_low <= true_reversals <= reversal.count_high)
        hit("robust reversals: data sets with a false one (rate, not coverage)", _false_robust(reversal, truth, truth_crs))
        _box_rows(hit, widths, point, auroc_boot, calibration_boot, label, robust, floor, extra_floor, crs_boot,
                  four_boot, truth, truth_crs, truth_four, population, true_reversals, reversal)
        sets = rank_confidence_sets(crs_point, crs_boot, encoders=names).table
        inside = (sets.loc[names, "rank_low"].to_numpy() <= ranks) & (ranks <= sets.loc[names, "rank_high"].to_numpy())
        hit("rank sets, all encoders at once", inside.all())
        if compare_methods:
            found = _method_intervals(sample, point, crs_point, crs_boot, calibration_raw, draws, floor,
                                      np.random.default_rng([seed, draws.n_groups, len(points)]), stratified, n_inner)
            for method, (low, high) in found.items():
                hit(f"CRS method: {method}", _interval_hits(low, high, truth_crs))
                hit(f"CRS method: {method}, truth below the interval", truth_crs < low)
                widths.setdefault(f"CRS method: {method}, mean width", []).append(high - low)
    spread = np.asarray(points).std(axis=0, ddof=1)
    n_enc = len(names)
    rows = {}
    for name, found_hits in hits.items():
        per_encoder = np.mean(found_hits, axis=0)
        rows[name] = float(per_encoder.mean())
        if len(per_encoder) > 1:
            rows[f"{name}, worst encoder"] = float(per_encoder.min())
    for name, found_widths in widths.items():
        rows[name] = float(np.mean(found_widths))
    for label_name, part in (("AUROC", slice(0, n_enc)), ("calibration", slice(n_enc, 2 * n_enc)),
                             ("CRS", slice(2 * n_enc, 3 * n_enc))):
        rows[f"{label_name}: bootstrap SD / fresh-sample SD"] = float(np.mean(np.mean(boot_sd, axis=0)[part] / spread[part]))
        rows[f"{label_name}: corrected SD / fresh-sample SD"] = float(
            np.mean(np.mean(boot_sd_inflated, axis=0)[part] / spread[part])
        )
    delong_se = np.mean([p["auroc_se"] for p, *_ in stored], axis=0)
    rows["AUROC: clustered DeLong SE / fresh-sample SD"] = float(
        np.mean(np.mean([p["auroc_se_clustered"] for p, *_ in stored], axis=0) / spread[:n_enc]))
    calibration_se = np.mean([p["calibration_se"] for p, *_ in stored], axis=0)
    rows["AUROC: DeLong SE / fresh-sample SD"] = float(np.mean(delong_se / spread[:n_enc]))
    rows["calibration: ece_se / fresh-sample SD"] = float(np.mean(calibration_se / spread[n_enc : 2 * n_enc]))
    rows["true CRS gaps (smallest)"] = float(np.min(np.diff(np.sort(truth_crs))))
    return Coverage(configuration, data_sets, n_boot, rows)


def _box_rows(hit, widths, point, auroc_boot, calibration_boot, label, robust, floor, extra_floor, crs_boot, four_boot,
              truth, truth_crs, truth_four, population, true_reversals, reversal) -> None:
    """Coverage and width of the projected box (decision 0128) beside the percentile intervals, one data set."""
    def width(name: str, low, high) -> None:
        widths.setdefault(name, []).append(np.asarray(high, dtype=np.float64) - np.asarray(low, dtype=np.float64))

    def percentile(replicates):
        return np.percentile(replicates, [2.5, 97.5], axis=0)

    two = np.stack([1 - point["auroc"], point["calibration"]], axis=-1)
    two_boot = np.stack([1 - auroc_boot, calibration_boot], axis=-1)
    four = np.concatenate([two, np.stack([1 - label[0], 1 - robust[0]], axis=-1)], axis=-1)
    four_draws = np.concatenate([two_boot, np.stack([1 - label[1:], 1 - robust[1:]], axis=-1)], axis=-1)
    truth_errors = np.stack([1 - truth["auroc"], truth["calibration"], 1 - population["label_efficiency"],
                             1 - population["robustness"]], axis=-1)
    for scale in ("square", "identity"):
        tag = "" if scale == "square" else ", calibration on its own scale"
        _, _, bounds = box_projection(two, two_boot, floor, scale)
        hit(f"CRS box projection{tag}", _interval_hits(*bounds["crs"], truth_crs))
        width(f"CRS box projection{tag}: width", *bounds["crs"])
        low, high, bounds = box_projection(four, four_draws, extra_floor, scale)
        hit(f"CRS, four axes, box projection{tag}", _interval_hits(*bounds["crs"], truth_four))
        width(f"CRS, four axes, box projection{tag}: width", *bounds["crs"])
        for a, axis in enumerate(("AUROC", "calibration error", "label efficiency", "robustness")):
            hit(f"{axis} box (four-axis box){tag}", _interval_hits(low[:, a], high[:, a], truth_errors[:, a]))
            width(f"{axis} box (four-axis box){tag}: width", low[:, a], high[:, a])
        if scale == "square":
            auroc_low, auroc_high = 1 - high[:, 0], 1 - low[:, 0]
            _, _, two_bounds = box_projection(two, two_boot, floor, scale)
            count = reversal_count_bounds(auroc_low, auroc_high, *two_bounds["crs"])
            hit("reversal count, box bounds", count[0] <= true_reversals <= count[1])
            width("reversal count, box bounds: width", count[0], count[1])
    for tag, errors, draws, axis_floor, truth_score in (("CRS", two, two_boot, floor, truth_crs),
                                                        ("CRS, four axes", four, four_draws, extra_floor, truth_four)):
        sharper = sharper_bounds(errors, draws, axis_floor, None)["crs"]  # decision 0128's sharper box (issue 47)
        hit(f"{tag}, sharper box (ratios and differences)", _interval_hits(*sharper, truth_score))
        width(f"{tag}, sharper box (ratios and differences): width", *sharper)
        for name, kappa in (("adaptive (smooth part + dominance range)", None), ("adaptive, pretest kappa 2", 2.0)):
            adaptive = adaptive_crs_bounds(errors, draws, axis_floor, None, pretest=kappa)  # decision 0180
            hit(f"{tag}, {name}", _interval_hits(*adaptive, truth_score))
            width(f"{tag}, {name}: width", *adaptive)
    width("CRS percentile interval: width", *percentile(crs_boot))
    width("CRS, four axes, percentile interval: width", *percentile(four_boot))
    for axis, values in (("AUROC", auroc_boot), ("calibration error", calibration_boot),
                         ("label efficiency", label[1:]), ("robustness", robust[1:])):
        width(f"{axis} percentile interval: width", *percentile(values))
    width("reversal count, percentile interval: width", reversal.count_low, reversal.count_high)


GAP_GROUPS = (2, 4, 8)
"""Groups of the attribute in the null simulation of subgroup gaps (decision 0062)."""


def simulate_gap_null(n_groups: int, data_sets: int = 200, n_boot: int = 200, seed: int = 62,
                      patients_per_group: int = 80, alpha: float = 0.05) -> dict[str, float]:
    """Share of data sets in which an AUROC gap is called a finding when there is none (issue 30).

    One encoder with the same signal (s = 1.2 y + noise, prevalence 0.3) in each of ``n_groups``
    groups of ``patients_per_group`` patients (one image each, labels stratified as crs's splits);
    per data set ``n_boot`` patient-level replicates (within label strata for a stratified test set, plain for a random one, as crs resamples them: decision 0085; ``--resample`` forces one way) (``group_bootstrap``) give each
    group's AUROC (``weighted_auroc``, one column per group); the gap is best minus worst group by
    the point estimate. A finding: the interval's lower bound above 0. Rates for the percentile
    interval of the picked pair (the old method), the simultaneous max-|t| interval
    (:func:`crs.scoring.intervals.simultaneous_gap_interval`, 0062) on the AUROC scale and on the logit
    scale, and the picked pair at the corners of the groups' box (what ``crs score`` prints, 0136). The Monte
    Carlo SE of a rate p is sqrt(p (1 - p) / data_sets).
    """
    rng = np.random.default_rng([seed, n_groups])
    n = n_groups * patients_per_group
    percentile_findings = raw_findings = simultaneous_findings = box_findings = 0
    for data_set in range(data_sets):
        group = np.repeat(np.arange(n_groups), patients_per_group)
        label = np.zeros(n, dtype=np.int64)
        for g in range(n_groups):  # stratified within each group too: every group has its positives
            label[group == g] = rng.permutation(patients_per_group) < round(PREVALENCE * patients_per_group)
        score = 1.2 * label + rng.normal(size=n)
        draws = group_bootstrap(np.arange(n), label, "binary", seed=[seed, n_groups, data_set])
        weights = prepare_weights(np.vstack([np.ones((1, n), dtype=np.int64), draws.counts(range(n_boot))]))
        per_group = np.where(group[:, None] == np.arange(n_groups)[None, :], label[:, None], np.nan)
        aurocs = weighted_auroc(np.repeat(score[:, None], n_groups, axis=1), per_group, weights)  # (B + 1, G)
        best, worst = int(np.argmax(aurocs[0])), int(np.argmin(aurocs[0]))
        gap = aurocs[1:, best] - aurocs[1:, worst]
        percentile_findings += np.nanpercentile(gap, 100 * alpha / 2) > 0
        raw_findings += simultaneous_gap_interval(aurocs, best, worst, alpha)[0] > 0
        simultaneous_findings += simultaneous_gap_interval(aurocs, best, worst, alpha, logit_scale=True)[0] > 0
        box = simultaneous_group_box(aurocs, alpha)
        box_findings += box_gap(box.low, box.high, best, worst)[0] > 0
    return {"percentile interval of the picked pair": percentile_findings / data_sets,
            "simultaneous max-|t|, AUROC scale": raw_findings / data_sets,
            "simultaneous max-|t|, logit scale (0062)": simultaneous_findings / data_sets,
            "box corners (printed, 0136)": box_findings / data_sets}


def gap_null_markdown(data_sets: int, n_boot: int) -> str:
    rows = {g: simulate_gap_null(g, data_sets, n_boot) for g in GAP_GROUPS}
    methods = list(rows[GAP_GROUPS[0]])
    lines = ["| share of null data sets with a gap finding | " + " | ".join(f"{g} groups" for g in GAP_GROUPS) + " |",
             "|" + "---|" * (len(GAP_GROUPS) + 1)]
    for method in methods:
        cells = [f"{rows[g][method]:.3f} (MC SE {np.sqrt(rows[g][method] * (1 - rows[g][method]) / data_sets):.3f})"
                 for g in GAP_GROUPS]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PRINTED = {  # crs.scoring.intervals.MEASURED_COVERAGE key: (the bench's row, how the printed interval is made)
    "crs": ("CRS percentile interval", "percentile of the replicate CRS (two axes: AUROC, calibration)"),
    "crs_four_axes": ("CRS, four axes, percentile interval", "the same, four axes (+ label efficiency, robustness)"),
    "auroc": ("AUROC percentile interval", "percentile of the replicate AUROC"),
    "calibration": ("calibration error percentile interval (centred on squares, 0061)",
                    "percentile, replicates centred on squares (0061)"),
    "label_efficiency": ("label efficiency percentile interval (seeds x patients)",
                         "percentile over seed multisets x patient resamples"),
    "robustness": ("robustness percentile interval (severities and shifted site)",
                   "percentile; the shifted site resampled apart"),
    "group_auroc": ("per-group AUROC, simultaneous box (group x encoder)",
                    "one max-\\|t\\| box over every group and encoder, logit scale (0135)"),
    "group_calibration": ("per-group calibration error percentile interval (group x encoder)",
                          "percentile, centred on squares"),
    "positive_rate": ("per-group positive rate, simultaneous box (group)",
                      "one max-\\|t\\| box over the attribute's groups, logit scale"),
    "worst_group_auroc": ("worst-group AUROC = equity axis, box corners",
                          "the minimum at the box's lower and upper corners (0135)"),
    "auroc_gap": ("AUROC gap of the picked pair, box corners", "the picked pair at the box's corners (0136)"),
}
"""Every interval crs prints, with a measured coverage (docs/crs.md 7b; issue 30 item 6)."""
PRINTED_BOX = {  # crs.scoring.intervals.MEASURED_COVERAGE_BOX key: (the bench's row, the percentile row it replaces)
    "crs": ("CRS box projection", "CRS percentile interval"),
    "crs_four_axes": ("CRS, four axes, box projection", "CRS, four axes, percentile interval"),
    "auroc": ("AUROC box (four-axis box)", "AUROC percentile interval"),
    "calibration": ("calibration error box (four-axis box)", "calibration error percentile interval"),
    "label_efficiency": ("label efficiency box (four-axis box)", "label efficiency percentile interval"),
    "robustness": ("robustness box (four-axis box)", "robustness percentile interval"),
    "reversal_count": ("reversal count, box bounds", "reversal count, percentile interval"),
}
"""The default intervals (decision 0128): the box over the four axes' errors, its projection through the CRS
(two and four axes) and the reversal count's bounds; beside each, the width of the percentile interval."""


def box_markdown(results: list[Coverage]) -> str:
    """docs/crs.md 7b: per default interval and design, coverage mean / worst encoder, and its mean width
    against the percentile interval's (the ratio)."""
    lines = ["| default interval | " + " | ".join(r.configuration for r in results) + " |",
             "|" + "---|" * (len(results) + 1)]
    for key, (row, percentile) in PRINTED_BOX.items():
        cells = [f"{r.rows[row]:.3f} / {r.rows.get(row + ', worst encoder', r.rows[row]):.3f}; width "
                 f"{r.rows[row + ': width']:.3f} vs {r.rows[percentile + ': width']:.3f} "
                 f"({r.rows[row + ': width'] / r.rows[percentile + ': width']:.2f}x)" for r in results]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def measured_box_figures(results: list[Coverage]) -> dict[str, dict[str, float]]:
    """What crs.scoring.intervals.MEASURED_COVERAGE_BOX holds (as :func:`measured_figures`)."""
    out = {}
    for key in ("crs", "auroc", "calibration", "label_efficiency", "robustness"):
        rows = [PRINTED_BOX[key][0]] + ([PRINTED_BOX["crs_four_axes"][0]] if key == "crs" else [])
        means = [r.rows[name] for r in results for name in rows]
        worst = [r.rows.get(name + ", worst encoder", r.rows[name]) for r in results for name in rows]
        out[key] = {"mean_low": round(min(means), 3), "mean_high": round(max(means), 3),
                    "worst_encoder": round(min(worst), 3)}
    return out


EXTRA = {"reversal count": "reversal-count percentile interval",
         "rank sets (all five at once)": "rank sets, all encoders at once"}


def printed_markdown(results: list[Coverage]) -> str:
    """docs/crs.md 7b: per printed interval and design, the mean over encoders (cells) / the worst encoder."""
    lines = ["| printed interval | how it is made | " + " | ".join(r.configuration for r in results) + " |",
             "|" + "---|" * (len(results) + 2)]
    for key, (row, how) in PRINTED.items():
        cells = [f"{r.rows[row]:.3f} / {r.rows.get(row + ', worst encoder', r.rows[row]):.3f}" for r in results]
        lines.append(f"| {key} | {how} | " + " | ".join(cells) + " |")
    for name, row in EXTRA.items():
        cells = [f"{r.rows[row]:.3f}" + (f" / {r.rows[row + ', worst encoder']:.3f}" if row + ", worst encoder" in r.rows
                                         else "") for r in results]
        lines.append(f"| {name} | | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def measured_figures(results: list[Coverage]) -> dict[str, dict[str, float]]:
    """What crs.scoring.intervals.MEASURED_COVERAGE holds: per printed interval the range of the mean over
    the designs and the worst encoder (cell) in the worst design."""
    out = {}
    for key, (row, _) in PRINTED.items():
        rows = [row, PRINTED["crs_four_axes"][0]] if key == "crs" else [row]  # the printed CRS: both cohorts
        means = [r.rows[name] for r in results for name in rows]
        worst = [r.rows.get(name + ", worst encoder", r.rows[name]) for r in results for name in rows]
        out[key] = {"mean_low": round(min(means), 3), "mean_high": round(max(means), 3),
                    "worst_encoder": round(min(worst), 3)}
    out.pop("crs_four_axes")
    return out


def markdown(results: list[Coverage]) -> str:
    head = "| quantity | " + " | ".join(r.configuration for r in results) + " |"
    lines = [head, "|" + "---|" * (len(results) + 1)]
    for key in results[0].rows:
        lines.append(f"| {key} | " + " | ".join(f"{r.rows[key]:.3f}" for r in results) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-sets", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS))
    parser.add_argument("--resample", choices=list(RESAMPLE), default="as drawn",
                        help="resample each test set as it was drawn (crs's rule), or always stratified or plain")
    parser.add_argument("--gaps-only", action="store_true", help="only the null simulation of subgroup gaps")
    parser.add_argument("--compare-methods", action="store_true",
                        help="also every candidate CRS interval of crs.bench.interval_methods (decision 0089)")
    parser.add_argument("--inner", type=int, default=0,
                        help="inner replicates of the double bootstrap among the compared methods (0: left out)")
    args = parser.parse_args(argv)
    print(f"{args.data_sets} simulated test sets x {args.n_boot} bootstrap replicates each, resampled {args.resample}")
    if not args.gaps_only:
        results = [simulate(name, args.data_sets, args.n_boot, compare_methods=args.compare_methods,
                            n_inner=args.inner, resample=args.resample) for name in args.configurations]
        print(markdown(results), flush=True)
        print()
        print(printed_markdown(results))
        print(measured_figures(results))
        print()
        print(box_markdown(results))
        print(measured_box_figures(results))
    print()
    print("Subgroup AUROC gaps under equal signal in every group (null):")
    print(gap_null_markdown(args.data_sets, args.n_boot))


if __name__ == "__main__":
    main()
