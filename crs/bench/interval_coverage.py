"""Coverage of the intervals the report prints, by simulation of fresh patient samples (issue 23, decision 0036).

A cohort of five encoders is scored on one binary task whose test set is a sample of patients: each
patient has a label (prevalence 0.3; drawn at random, or a stratified sample with exactly 30 %
positive patients, as crs's own splits are made), a severity effect u ~ N(0, tau^2) shared by all its images and
all encoders, and 1 + Poisson(1) images (``clustered``) or one image with tau = 0
(``independent``). Encoder e scores an image s = mu_e y + u + noise and reports
p = sigmoid(a_e (Bayes logit of s) + b_e): a_e = 1, b_e = 0 is calibrated. The truth is each
encoder's population AUROC and calibration error (one sample of 300,000 patients) and the CRS on
those errors (discrimination and calibration axes, the median reference, the noise floor at its mean
over the simulated test sets).

Each simulated test set is scored as ``crs score`` scores a task at the full label fraction (where
every seed's probe is the same, so the seed level adds nothing): AUROC, the debiased calibration
error and their standard errors (``crs.axes``); ``n_boot`` patient-level bootstrap replicates, within
label strata for a stratified test set and plain for a random one as crs resamples them (decision 0085;
``--resample`` forces one way) (``crs.scoring.resample.group_bootstrap``, the weighted metrics of ``crs.axes.weighted``,
calibration replicates centred as decision 0017 does); the CRS of every replicate
(``crs.scoring.formula.crs_components``) and its 95 % percentile interval; the percentile intervals
of each axis; the simultaneous rank sets (``crs.scoring.rank_sets``). Also the AUROC +- 1.96 DeLong
SE interval and the ratio of every bootstrap SD to the spread over fresh test sets, plain and with
the (G - 1) / G correction (deviations from the replicate mean scaled by sqrt(G / (G - 1))).

Run ``python -m crs.bench.interval_coverage`` (``--data-sets``, ``--n-boot``; defaults 200 x 200).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from crs import axes
from crs.axes.weighted import prepare_weights, weighted_auroc, weighted_calibration_error
from crs.scoring.formula import crs_components
from crs.scoring.intervals import centre_on_squares, simultaneous_gap_interval
from crs.scoring.rank_sets import rank_confidence_sets
from crs.scoring.rankings import rank_reversals
from crs.scoring.resample import group_bootstrap
from crs.scoring.reversals import auroc_crs_reversals

ENCODERS = {  # name: (signal mu, calibration slope a, calibration intercept b)
    "A": (1.8, 1.0, 0.0),
    "B": (2.1, 1.8, 0.0),
    "C": (1.6, 0.8, 0.3),
    "D": (1.1, 1.0, 0.0),
    "E": (2.0, 0.6, -0.4),
}
PREVALENCE = 0.3
CONFIGURATIONS = {  # name: (patients, severity sd tau, extra images per patient (Poisson mean), stratified)
    "clustered, 150 patients (~300 images), random": (150, 0.8, 1.0, False),
    "clustered, 366 patients (~732 images), random": (366, 0.8, 1.0, False),
    "clustered, 366 patients, stratified": (366, 0.8, 1.0, True),
    "independent, 732 images, random": (732, 0.0, 0.0, False),
    "independent, 732 images, stratified": (732, 0.0, 0.0, True),
}


def draw_test_set(n_patients: int, tau: float, extra_images: float, rng: np.random.Generator,
                  stratified: bool = False):
    """(labels (N,), patient ids (N,), probabilities (N, E)) of one sample of patients: labels drawn at
    random, or ``stratified`` with exactly round(0.3 G) positive patients (as crs's own splits are)."""
    if stratified:
        label = rng.permutation(n_patients) < round(PREVALENCE * n_patients)
    else:
        label = rng.uniform(size=n_patients) < PREVALENCE
    severity = rng.normal(0.0, tau, n_patients) if tau > 0 else np.zeros(n_patients)
    images = 1 + (rng.poisson(extra_images, n_patients) if extra_images > 0 else np.zeros(n_patients, int))
    patient = np.repeat(np.arange(n_patients), images)
    y = label[patient].astype(np.float64)
    probs = np.empty((len(patient), len(ENCODERS)))
    for column, (mu, slope, intercept) in enumerate(ENCODERS.values()):
        score = mu * y + severity[patient] + rng.normal(size=len(patient))
        bayes_logit = mu * (score - mu / 2) / (1 + tau**2) + logit(PREVALENCE)
        probs[:, column] = expit(slope * bayes_logit + intercept)
    return y, patient, probs


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


RESAMPLE = {"as drawn": None, "stratified": "stratified", "plain": "official"}
"""How the bootstrap resamples a simulated test set: as crs does since decision 0085 (within label strata
where the test set was drawn stratified, plain patients where at random), or always one way (before 0085
crs always stratified), given as the sampling design ``group_bootstrap`` follows."""


def simulate(configuration: str, data_sets: int = 200, n_boot: int = 200, seed: int = 36,
             truth_patients: int = 300_000, resample: str = "as drawn") -> Coverage:
    n_patients, tau, extra, stratified = CONFIGURATIONS[configuration]
    design = RESAMPLE[resample] or ("stratified" if stratified else "official")
    names = list(ENCODERS)
    rng = np.random.default_rng([seed, list(CONFIGURATIONS).index(configuration)])
    y_big, _, probs_big = draw_test_set(truth_patients, tau, extra, rng)
    truth = point_metrics(y_big, probs_big)
    factor = np.sqrt(n_patients / (n_patients - 1))
    points, boot_sd, boot_sd_inflated = [], [], []
    hits: dict[str, list] = {}

    def hit(name: str, value) -> None:
        hits.setdefault(name, []).append(np.atleast_1d(value).astype(np.float64))

    floors, stored = [], []
    for data_set in range(data_sets):
        y, patient, probs = draw_test_set(n_patients, tau, extra, rng, stratified)
        point = point_metrics(y, probs, patient)
        floor = np.array([np.median(point["auroc_se"]), np.median(point["calibration_se"])])
        draws = group_bootstrap(patient, y.astype(np.int64), "binary", seed=[seed, data_set], design=design)
        weights = prepare_weights(draws.counts(range(n_boot)))
        auroc_boot = weighted_auroc(probs, y, weights)
        calibration_raw = weighted_calibration_error(probs, np.broadcast_to(y[:, None], probs.shape), weights)[0]
        with_point = np.vstack([point["calibration"][None], calibration_raw])
        calibration_boot = centre_on_squares(with_point)[1:]  # decision 0061, as crs score does
        calibration_additive = calibration_raw - (calibration_raw.mean(axis=0) - point["calibration"])  # 0017
        floors.append(floor)
        stored.append((point, auroc_boot, calibration_boot, floor, calibration_additive, calibration_raw))
    mean_floor = np.mean(floors, axis=0)
    truth_crs = crs_of(truth["auroc"], truth["calibration"], mean_floor)
    ranks = true_ranks(truth_crs)
    true_reversals = rank_reversals(pd.Series(truth["auroc"], index=names), pd.Series(truth_crs, index=names)).n_reversed
    for point, auroc_boot, calibration_boot, floor, calibration_additive, calibration_raw in stored:
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
        reversal = auroc_crs_reversals(pd.Series(point["auroc"], index=names), pd.Series(crs_point, index=names),
                                       auroc_boot, crs_boot)
        hit("reversal-count percentile interval", reversal.count_low <= true_reversals <= reversal.count_high)
        hit("robust reversals: data sets with a false one (rate, not coverage)", _false_robust(reversal, truth, truth_crs))
        sets = rank_confidence_sets(crs_point, crs_boot, encoders=names).table
        inside = (sets.loc[names, "rank_low"].to_numpy() <= ranks) & (ranks <= sets.loc[names, "rank_high"].to_numpy())
        hit("rank sets, all encoders at once", inside.all())
    spread = np.asarray(points).std(axis=0, ddof=1)
    n_enc = len(names)
    rows = {}
    for name, values in hits.items():
        per_encoder = np.mean(values, axis=0)
        rows[name] = float(per_encoder.mean())
        if len(per_encoder) > 1:
            rows[f"{name}, worst encoder"] = float(per_encoder.min())
    for label, part in (("AUROC", slice(0, n_enc)), ("calibration", slice(n_enc, 2 * n_enc)),
                        ("CRS", slice(2 * n_enc, 3 * n_enc))):
        rows[f"{label}: bootstrap SD / fresh-sample SD"] = float(np.mean(np.mean(boot_sd, axis=0)[part] / spread[part]))
        rows[f"{label}: corrected SD / fresh-sample SD"] = float(
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


GAP_GROUPS = (2, 4, 8)
"""Groups of the attribute in the null simulation of subgroup gaps (decision 0062)."""


def simulate_gap_null(n_groups: int, data_sets: int = 200, n_boot: int = 200, seed: int = 62,
                      patients_per_group: int = 80, alpha: float = 0.05) -> dict[str, float]:
    """Share of data sets in which an AUROC gap is called a finding when there is none (issue 30).

    One encoder with the same signal (s = 1.2 y + noise, prevalence 0.3) in each of ``n_groups``
    groups of ``patients_per_group`` patients (one image each, labels stratified as crs's splits);
    per data set ``n_boot`` stratified patient-level replicates (``group_bootstrap``) give each
    group's AUROC (``weighted_auroc``, one column per group); the gap is best minus worst group by
    the point estimate. A finding: the interval's lower bound above 0. Rates for the percentile
    interval of the picked pair (the old method) and the simultaneous max-|t| interval
    (:func:`crs.scoring.intervals.simultaneous_gap_interval`) on the AUROC scale and on the logit
    scale (what ``crs score`` prints). The Monte
    Carlo SE of a rate p is sqrt(p (1 - p) / data_sets).
    """
    rng = np.random.default_rng([seed, n_groups])
    n = n_groups * patients_per_group
    percentile_findings = raw_findings = simultaneous_findings = 0
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
    return {"percentile interval of the picked pair": percentile_findings / data_sets,
            "simultaneous max-|t|, AUROC scale": raw_findings / data_sets,
            "simultaneous max-|t|, logit scale (printed)": simultaneous_findings / data_sets}


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
    parser.add_argument("--gaps-only", action="store_true", help="only the null simulation of subgroup gaps")
    parser.add_argument("--resample", choices=list(RESAMPLE), default="as drawn",
                        help="resample each test set as it was drawn (crs's rule), or always stratified or plain")
    args = parser.parse_args(argv)
    print(f"{args.data_sets} simulated test sets x {args.n_boot} bootstrap replicates each, resampled {args.resample}")
    if not args.gaps_only:
        results = [simulate(name, args.data_sets, args.n_boot, resample=args.resample) for name in args.configurations]
        print(markdown(results))
    print()
    print("Subgroup AUROC gaps under equal signal in every group (null):")
    print(gap_null_markdown(args.data_sets, args.n_boot))


if __name__ == "__main__":
    main()
