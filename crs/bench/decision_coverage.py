"""What the headline's decision says, checked against planted encoders (issue 47 items 1-3, 6; decisions 0166, 0180).

Cohorts of :mod:`crs.bench.coverage_model` encoders (score x = mu y + patient effect + noise, probability
sigmoid(a * Bayes logit + b)) on one binary task, two axes (discrimination, calibration), median
reference, clustered patients (1 + Poisson(1) images, shared severity sd 0.8), test sets at random:

* exact ties: 2, 4 or 5 identical encoders, calibrated (a = 1) or overconfident (a = 1.8), beside one
  clearly weaker encoder; the identical ones tie for the lead in truth, by construction;
* a planted winner, better on both axes (AUROC 0.878 against 0.830, calibrated against a = 1.5) than three
  equal rivals, at 400 and 1,500 patients; the issue's design, the same winner against three
  overconfident rivals (a = 1.8), at 400 and 1,500; a clearer winner (AUROC 0.915) at 400;
* a trade-off (one encoder better on discrimination, another on calibration) at 400 and 1,500;
* four distinct encoders, no ties.

Truth: AUROC and calibration error of each distinct encoder from one sample of ``truth_patients``
patients (identical encoders share theirs), the CRS on them with the floor at its mean over the test
sets. Each test set is resampled ``n_boot`` times by patient (weighted AUROC and calibration error,
calibration centred on squares, as ``crs score``), then decided by every option of :data:`OPTIONS`
side by side (the CRS rank sets of decision 0009; :func:`crs.scoring.statements.simultaneous_statements`
as ``[score] headline`` = "bound", "smooth", "pretest", "stepdown"), and its CRS interval made by every
method of :data:`INTERVALS`.

Per design and option: the tier's validity (every true leader kept), the headline's family-wise error
(any false statement: a true leader left out, or an axis order or "surely above" that is false), the
winner named alone, "surely dominates" for the winner; per interval: the worst encoder's coverage and the
width against the percentile interval's. Monte Carlo SE of a rate p over n test sets: sqrt(p (1 - p) / n).

Run ``python -m crs.bench.decision_coverage --data-sets 100 --n-boot 200`` (docs/crs.md 7b).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from crs import axes
from crs.axes.weighted import prepare_weights, weighted_auroc, weighted_calibration_error
from crs.bench.coverage_model import draw_sample
from crs.scoring.comparisons import pairwise_comparisons
from crs.scoring.formula import crs_components
from crs.scoring.intervals import centre_on_squares
from crs.scoring.projection import adaptive_crs_bounds, sharper_bounds
from crs.scoring.rank_sets import rank_confidence_sets
from crs.scoring.resample import group_bootstrap
from crs.scoring.statements import simultaneous_statements

CALIBRATED, OVERCONFIDENT, WEAK = (1.8, 1.0, 0.0), (1.8, 1.8, 0.0), (1.1, 1.0, 0.0)


def _ties(count: int, kind: tuple[float, float, float]) -> dict[str, tuple[float, float, float]]:
    return {**{f"t{k + 1}": kind for k in range(count)}, "weak": WEAK}


DESIGNS: dict[str, tuple[dict[str, tuple[float, float, float]], int]] = {
    "2 identical calibrated, 400": (_ties(2, CALIBRATED), 400),
    "2 identical overconfident, 400": (_ties(2, OVERCONFIDENT), 400),
    "4 identical calibrated, 400": (_ties(4, CALIBRATED), 400),
    "4 identical overconfident, 400": (_ties(4, OVERCONFIDENT), 400),
    "5 identical calibrated, 400": (_ties(5, CALIBRATED), 400),
    "5 identical overconfident, 400": (_ties(5, OVERCONFIDENT), 400),
    "winner, 400": ({"win": (2.2, 1.0, 0.0), "r1": (1.8, 1.5, 0.0), "r2": (1.8, 1.5, 0.0), "r3": (1.8, 1.5, 0.0)},
                    400),
    "winner, 1500": ({"win": (2.2, 1.0, 0.0), "r1": (1.8, 1.5, 0.0), "r2": (1.8, 1.5, 0.0), "r3": (1.8, 1.5, 0.0)},
                     1500),
    "trade-off, 400": ({"sharp": (2.2, 1.8, 0.0), "calm": (1.8, 1.0, 0.0), "weak": WEAK}, 400),
    "winner +0.05 vs overconfident, 400": ({"win": (2.2, 1.0, 0.0), **{f"r{k}": OVERCONFIDENT for k in (1, 2, 3)}},
                                           400),
    "winner +0.05 vs overconfident, 1500": ({"win": (2.2, 1.0, 0.0), **{f"r{k}": OVERCONFIDENT for k in (1, 2, 3)}},
                                            1500),
    "clear winner +0.09 vs overconfident, 400": ({"win": (2.6, 1.0, 0.0),
                                                  **{f"r{k}": OVERCONFIDENT for k in (1, 2, 3)}}, 400),
    "trade-off, 1500": ({"sharp": (2.2, 1.8, 0.0), "calm": (1.8, 1.0, 0.0), "weak": WEAK}, 1500),
    "distinct, no ties, 400": ({"a": (2.6, 1.0, 0.0), "b": (2.2, 1.3, 0.0), "c": (1.8, 1.6, 0.0), "weak": WEAK}, 400),
}
"""Design name -> (encoders: name -> (signal mu, calibration slope a, intercept b), patients)."""
TAU, EXTRA_IMAGES = 0.8, 1.0


@dataclass(frozen=True)
class DecisionFigures:
    """Rates over the test sets of one design (each with its MC SE), before (0009) and now (0166)."""

    design: str
    data_sets: int
    n_boot: int
    rates: dict[str, float]

    def se(self, name: str) -> float:
        p = self.rates[name]
        return float(np.sqrt(max(p * (1 - p), 1e-12) / self.data_sets))


def _truth(cohort: dict, truth_patients: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(AUROC (E,), calibration error (E,)) of each encoder; identical encoders share one value."""
    distinct = list(dict.fromkeys(cohort.values()))
    big = draw_sample(truth_patients, TAU, EXTRA_IMAGES, rng, full=False, cohort=dict(enumerate(distinct)))
    auroc = [axes.auroc(big.y, big.probs[:, e], "binary") for e in range(len(distinct))]
    calibration = [axes.debiased_ece(big.y, big.probs[:, e], "binary") for e in range(len(distinct))]
    index = [distinct.index(value) for value in cohort.values()]
    return np.asarray(auroc)[index], np.asarray(calibration)[index]


def _test_set(cohort: dict, n_patients: int, n_boot: int, rng: np.random.Generator, seed: list[int]):
    """Point errors (E, 2), their SEs (E, 2) and replicate errors (B, E, 2) of one test set."""
    sample = draw_sample(n_patients, TAU, EXTRA_IMAGES, rng, cohort=cohort, full=False)
    y, probs = sample.y, sample.probs
    columns = range(probs.shape[1])
    auroc = np.array([axes.auroc(y, probs[:, e], "binary") for e in columns])
    calibration = np.array([axes.debiased_ece(y, probs[:, e], "binary") for e in columns])
    standard_errors = np.stack([
        [axes.auroc_standard_error(y, probs[:, e], "binary", sample.patient) for e in columns],
        [axes.ece_standard_error(y, probs[:, e], "binary") for e in columns]], axis=1)
    draws = group_bootstrap(sample.patient, y.astype(np.int64), "binary", seed=seed, design="official")
    weights = prepare_weights(draws.counts(range(n_boot)))
    auroc_boot = weighted_auroc(probs, y, weights)
    raw = weighted_calibration_error(probs, np.broadcast_to(y[:, None], probs.shape), weights)[0]
    calibration_boot = centre_on_squares(np.vstack([calibration[None], raw]))[1:]
    errors = np.stack([1 - auroc, calibration], axis=1)
    return errors, standard_errors, np.stack([1 - auroc_boot, calibration_boot], axis=-1)


OPTIONS = {
    "rank sets (0009)": None,
    "one family (0166, default)": {},
    "+ smooth part (0180)": {"smooth": True},
    "+ smooth part, pretest kappa 2 (0180)": {"smooth": True, "pretest": 2.0},
    "step-down (0166 option)": {"stepdown": True},
}
"""The decisions compared side by side: the CRS rank sets with the single-step comparisons (before 0166),
and :func:`crs.scoring.statements.simultaneous_statements` with each of its options."""
INTERVALS = ("percentile", "sharper box (0167, default)", "adaptive (0180)", "adaptive, pretest kappa 2 (0180)")
"""The printed CRS intervals compared: the replicates' percentile, the sharper box
(:func:`crs.scoring.projection.sharper_bounds`) and :func:`crs.scoring.projection.adaptive_crs_bounds`."""


def decide(errors: np.ndarray, replicates: np.ndarray, floor: np.ndarray, names: list[str], alpha: float = 0.05,
           **options):
    """The decision of one option on one test set: (tier (E,) bool, axis better (A, E, E), above (E, E) or
    None, surely dominates (E, E), family holds the truth: a callable or None). ``options`` None: the CRS
    rank sets and the single-step comparisons (decision 0009); else the keywords of
    :func:`crs.scoring.statements.simultaneous_statements`."""
    crs_point = crs_components(errors, None, floor=floor)["crs"]
    order = [names[j] for j in np.argsort(-crs_point, kind="stable")]
    if options.get("rank_sets"):
        crs_boot = crs_components(replicates, None, floor=floor)["crs"]
        sets = rank_confidence_sets(crs_point, crs_boot, encoders=names, alpha=alpha).table.reindex(names)
        tier = sets["in_leading_tier"].to_numpy(dtype=bool).copy()
        tier[int(np.argmax(crs_point))] = True
        before = pairwise_comparisons(errors, replicates, alpha, names)
        return tier, before.better, None, before.surely_dominates, None
    now = simultaneous_statements(errors, replicates, floor, ["logit", "square"], order, alpha=alpha,
                                  encoders=names, axes=("discrimination", "calibration"), **options)
    tier = np.array([name in now.leading_tier for name in names])
    return tier, now.comparisons.better, now.above, now.comparisons.surely_dominates, now.holds


def printed_intervals(errors: np.ndarray, replicates: np.ndarray, floor: np.ndarray, alpha: float = 0.05):
    """Per :data:`INTERVALS` name, the (low (E,), high (E,)) CRS interval of one test set."""
    crs_boot = crs_components(replicates, None, floor=floor)["crs"]
    percentile = tuple(np.percentile(crs_boot, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0))
    return {INTERVALS[0]: percentile,
            INTERVALS[1]: sharper_bounds(errors, replicates, floor, None, alpha=alpha)["crs"],
            INTERVALS[2]: adaptive_crs_bounds(errors, replicates, floor, None, alpha=alpha),
            INTERVALS[3]: adaptive_crs_bounds(errors, replicates, floor, None, alpha=alpha, pretest=2.0)}


def simulate(design: str, data_sets: int = 200, n_boot: int = 200, seed: int = 47, truth_patients: int = 200_000,
             alpha: float = 0.05) -> DecisionFigures:
    """The rates of one design over ``data_sets`` test sets (see the module docstring): per option of
    :data:`OPTIONS` ("<measure> | <option>") and per interval of :data:`INTERVALS`."""
    cohort, n_patients = DESIGNS[design]
    names = list(cohort)
    rng = np.random.default_rng([seed, list(DESIGNS).index(design)])
    truth_auroc, truth_calibration = _truth(cohort, truth_patients, rng)
    made = [_test_set(cohort, n_patients, n_boot, rng, [seed, data_set]) for data_set in range(data_sets)]
    floor = np.mean([np.median(se, axis=0) for _, se, _ in made], axis=0)  # the bench's fixed floor (as 7b)
    truth_errors = np.stack([1 - truth_auroc, truth_calibration], axis=1)
    truth_crs = crs_components(truth_errors, None, floor=floor)["crs"]
    leaders = np.isclose(truth_crs, truth_crs.max(), rtol=0, atol=1e-12)
    true_better = truth_errors.T[:, :, None] < truth_errors.T[:, None, :]  # (A, j, k): e_j < e_k
    true_above = truth_crs[:, None] > truth_crs[None, :] + 1e-12
    single = leaders.sum() == 1
    leader = int(np.argmax(leaders))
    others = [k for k in range(len(names)) if k != leader]
    counts: dict[str, float] = {}
    hits = {name: np.zeros(len(names)) for name in INTERVALS}
    widths = {name: 0.0 for name in INTERVALS}

    def add(name: str, value: float) -> None:
        counts[name] = counts.get(name, 0.0) + float(value)

    for errors, _, replicates in made:
        for option, keywords in OPTIONS.items():
            tier, better, above, dominates, holds = decide(errors, replicates, floor, names, alpha,
                                                            **(keywords if keywords is not None else {"rank_sets": True}))
            false = not tier[leaders].all() or (better & ~true_better).any()
            false = false or (above is not None and bool((above & ~true_above).any()))
            add(f"tier valid | {option}", tier[leaders].all())
            add(f"false statement | {option}", false)
            if holds is not None:
                held = holds(truth_errors)
                add(f"family holds | {option}", held)
                add(f"leader lost while the family held | {option}", held and not tier[leaders].all())
            if single:
                add(f"named alone | {option}", tier.sum() == 1 and tier[leader])
                add(f"surely dominates | {option}", dominates[leader, others].all())
        for name, (low, high) in printed_intervals(errors, replicates, floor, alpha).items():
            hits[name] += (low <= truth_crs + 1e-12) & (truth_crs <= high + 1e-12)
            widths[name] += float(np.mean(high - low))
    rates = {name: value / data_sets for name, value in counts.items()}
    for name in INTERVALS:
        rates[f"worst coverage | {name}"] = float(hits[name].min() / data_sets)
        rates[f"width | {name}"] = widths[name] / data_sets
        rates[f"width ratio | {name}"] = widths[name] / widths[INTERVALS[0]]
    return DecisionFigures(design, data_sets, n_boot, rates)


def markdown(results: list[DecisionFigures]) -> str:
    """Two tables: per design and decision option, the tier, the family-wise error, the winner named alone and
    "surely dominates"; per design and CRS interval, the worst encoder's coverage and the width. Each rate
    with its MC SE."""
    def rate(found: DecisionFigures, name: str) -> str:
        return "-" if name not in found.rates else f"{found.rates[name]:.3f} +- {found.se(name):.3f}"

    header = ["design", "decision", "tier keeps every true leader", "any false statement (family-wise)",
              "winner named alone", "winner surely dominates all"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for found in results:
        for option in OPTIONS:
            lines.append(f"| {found.design} | {option} | {rate(found, f'tier valid | {option}')} | "
                         f"{rate(found, f'false statement | {option}')} | {rate(found, f'named alone | {option}')} | "
                         f"{rate(found, f'surely dominates | {option}')} |")
    header = ["design", "CRS interval", "coverage, worst encoder", "mean width", "width / percentile's"]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for found in results:
        for name in INTERVALS:
            lines.append(f"| {found.design} | {name} | {rate(found, f'worst coverage | {name}')} | "
                         f"{found.rates[f'width | {name}']:.3f} | {found.rates[f'width ratio | {name}']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-sets", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--truth-patients", type=int, default=200_000)
    parser.add_argument("--design", action="append", choices=list(DESIGNS), help="default: every design")
    args = parser.parse_args(argv)
    results = []
    for design in args.design or list(DESIGNS):
        results.append(simulate(design, args.data_sets, args.n_boot, args.seed, args.truth_patients))
        print(f"{design}: " + ", ".join(f"{k} {v:.3f}" for k, v in results[-1].rates.items()), flush=True)
    print(markdown(results))


if __name__ == "__main__":
    main()
