"""Coverage of the subgroup intervals where groups tie: equal signal in every group (issue 40; decisions 0135-0137).

The worst-group AUROC (the ``equity`` axis) is a minimum over groups; where groups are equal the minimum of
their noisy AUROCs sits below the true one, and the percentile interval of the replicate minimum adds the
same bias again (an independent simulation on real CheXpert rows covered 0.43-0.82, every miss below the
truth). This bench measures, per design, the printed per-group AUROC, worst-group and gap intervals, the
method before (percentile; the picked pair's max-|t| gap, decision 0062) against the box
(:func:`crs.scoring.intervals.simultaneous_group_box`), their widths, the null gap findings and the
worst-group point estimate's bias.

Encoders (:data:`ENCODERS`): three with the same signal in every group (weak, medium, strong) and one whose
last group has 0.7 of it. An image scores x = mu m_g y + u + e, u ~ N(0, 0.8^2) shared by a patient's
images, e ~ N(0, 1); the AUROC of a group is Phi(mu m_g / sqrt(2 (1 + 0.8^2))) in closed form (pairs of a
positive and a negative image of one patient have weight 0 in the population). Groups below crs's
minimum size in a test set (50 images, 10 positives) are not scored, as in ``crs score``; the worst
group's truth is the minimum over the scored groups.

Designs: idealised (patients with 1 + Poisson(1) images, prevalence 0.3, 2 / 4 / 8 groups of unequal
shares) and, given ``--chexpert PATH`` (the official CheXpert ``train.csv``, or torchxrayvision's
``chexpert_train.csv.gz``), the real label file: its patients, their images and Pleural Effusion labels
(uncertain as negative), grouped by sex (2), four age bands (4) and both (8). No image is read or written.

Run ``python -m crs.bench.subgroup_coverage [--chexpert PATH] [--data-sets 200 --n-boot 200]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import norm

from crs.axes.weighted import prepare_weights, weighted_auroc
from crs.scoring.intervals import box_gap, box_minimum, simultaneous_gap_interval, simultaneous_group_box
from crs.scoring.resample import group_bootstrap
from crs.scoring.subgroups import MIN_IMAGES, MIN_POSITIVES, _nanmin_rows

ENCODERS = {  # name: (signal mu, signal factor of the last group)
    "equal, weak": (1.0, 1.0),
    "equal, medium": (1.6, 1.0),
    "equal, strong": (2.4, 1.0),
    "last group worse": (1.6, 0.7),
}
EQUAL = [name for name, (_, factor) in ENCODERS.items() if factor == 1.0]
TAU = 0.8
PREVALENCE = 0.3
SHARES = {2: (0.6, 0.4), 4: (0.4, 0.3, 0.2, 0.1), 8: (0.25, 0.2, 0.15, 0.12, 0.1, 0.08, 0.06, 0.04)}
"""Idealised designs: the groups' shares of patients (unequal)."""
PATIENTS = (200, 1000)
CHEXPERT_LABEL = "Pleural Effusion"
AGE_BANDS = (0, 40, 60, 80, 200)
TRUTH_CHECK_PATIENTS = 20_000


def true_group_auroc(n_groups: int) -> np.ndarray:
    """(G, E) population AUROC of every group and encoder."""
    factor = np.ones((n_groups, len(ENCODERS)))
    factor[-1] = [f for _, f in ENCODERS.values()]
    mu = np.array([m for m, _ in ENCODERS.values()])
    return norm.cdf(mu * factor / np.sqrt(2 * (1 + TAU**2)))


def scores_of(y: np.ndarray, patient: np.ndarray, group: np.ndarray, n_groups: int, rng: np.random.Generator) -> np.ndarray:
    """(N, E) scores: x = mu m_g y + u_patient + e."""
    _, inverse = np.unique(patient, return_inverse=True)
    u = rng.normal(0.0, TAU, inverse.max() + 1)[inverse.ravel()]
    factor = np.ones((n_groups, len(ENCODERS)))
    factor[-1] = [f for _, f in ENCODERS.values()]
    mu = np.array([m for m, _ in ENCODERS.values()])
    return mu[None, :] * factor[group] * y[:, None] + u[:, None] + rng.normal(size=(len(y), len(ENCODERS)))


Draw = Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""(patients, rng) -> (patient id, label, group) per image of a test set."""


def idealised(shares: tuple[float, ...]) -> Draw:
    def draw(n_patients: int, rng: np.random.Generator):
        label = rng.uniform(size=n_patients) < PREVALENCE
        group = rng.choice(len(shares), size=n_patients, p=shares)
        images = 1 + rng.poisson(1.0, n_patients)
        patient = np.repeat(np.arange(n_patients), images)
        return patient, label[patient].astype(np.float64), group[patient]
    return draw


@dataclass(frozen=True)
class LabelFile:
    """The rows of a real label file: patient, label and group codes per attribute design (no images)."""

    patient: np.ndarray
    label: np.ndarray
    groups: dict[str, tuple[np.ndarray, list[str]]] = field(default_factory=dict)


def read_chexpert(path: Path) -> LabelFile:
    """CheXpert's train.csv (or .csv.gz): patient from the path, Pleural Effusion (1 positive; 0, blank or
    uncertain negative), sex (2), age bands (4), both (8); rows of unknown sex or age 0 left out."""
    import pandas as pd

    frame = pd.read_csv(path, usecols=["Path", "Sex", "Age", CHEXPERT_LABEL])
    frame = frame[frame["Sex"].isin(["Female", "Male"]) & (frame["Age"] > 0)]
    patient = frame["Path"].str.extract(r"patient(\d+)", expand=False).astype(np.int64).to_numpy()
    label = (frame[CHEXPERT_LABEL] == 1).to_numpy().astype(np.float64)
    sex = (frame["Sex"] == "Male").to_numpy().astype(np.int64)
    age = np.digitize(frame["Age"].to_numpy(), AGE_BANDS[1:-1])
    bands = [f"{lo}-{hi - 1}" for lo, hi in zip(AGE_BANDS[:-1], AGE_BANDS[1:], strict=True)]
    return LabelFile(patient, label, {
        "sex": (sex, ["female", "male"]),
        "age band": (age, bands),
        "age band x sex": (2 * age + sex, [f"{b} {s}" for b in bands for s in ("female", "male")]),
    })


def real(rows: LabelFile, design: str, pool: np.ndarray) -> Draw:
    """Test sets of patients drawn without replacement from ``pool`` (patient ids), all their images."""
    group = rows.groups[design][0]
    order = np.argsort(rows.patient, kind="stable")
    ids, starts = np.unique(rows.patient[order], return_index=True)
    ends = np.append(starts[1:], len(order))
    where = {int(p): (s, e) for p, s, e in zip(ids, starts, ends, strict=True)}

    def draw(n_patients: int, rng: np.random.Generator):
        chosen = rng.choice(pool, size=n_patients, replace=False)
        picked = np.concatenate([order[slice(*where[int(p)])] for p in chosen])
        return rows.patient[picked], rows.label[picked], group[picked]
    return draw


def _percentile(values: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    return np.nanpercentile(values, 100 * alpha / 2, axis=0), np.nanpercentile(values, 100 * (1 - alpha / 2), axis=0)


@dataclass
class Tally:
    """Hits per cell name (encoder, or (group, encoder)), widths and point errors, over test sets."""

    hits: dict[str, dict[str, list[bool]]] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)

    def hit(self, row: str, cell: str, value: bool) -> None:
        self.hits.setdefault(row, {}).setdefault(cell, []).append(bool(value))

    def add(self, row: str, value: float) -> None:
        self.values.setdefault(row, []).append(float(value))

    def rows(self) -> dict[str, float]:
        out = {}
        for row, cells in self.hits.items():
            most = max(len(found) for found in cells.values())  # a group scored in few test sets is left out
            rates = {cell: float(np.mean(found)) for cell, found in cells.items() if len(found) >= most / 4}
            if not rates:
                continue
            out[f"{row}: mean"] = float(np.mean(list(rates.values())))
            worst = min(rates, key=rates.__getitem__)
            out[f"{row}: worst cell"] = rates[worst]
            out[f"{row}: worst cell's MC SE"] = float(np.sqrt(rates[worst] * (1 - rates[worst]) / len(cells[worst])))
        for row, found in self.values.items():
            out[row] = float(np.mean(found))
        return out


def simulate(draw: Draw, n_groups: int, n_patients: int, data_sets: int = 200, n_boot: int = 200,
             seed: int = 135, alpha: float = 0.05) -> dict[str, float]:
    """Every subgroup interval on ``data_sets`` fresh test sets of ``n_patients`` patients."""
    rng = np.random.default_rng([seed, n_groups, n_patients])
    truth = true_group_auroc(n_groups)
    names = list(ENCODERS)
    n_enc = len(names)
    tally = Tally()
    for data_set in range(data_sets):
        patient, y, group = draw(n_patients, rng)
        scores = scores_of(y, patient, group, n_groups, rng)
        sizes = np.bincount(group, minlength=n_groups)
        positives = np.bincount(group, weights=y, minlength=n_groups)
        scored = np.flatnonzero((sizes >= MIN_IMAGES) & (positives >= MIN_POSITIVES) & (positives < sizes))
        if len(scored) == 0:
            tally.add("test sets with no scored group", 1.0)
            continue
        tally.add("test sets with no scored group", 0.0)
        tally.add("scored groups", len(scored))
        draws = group_bootstrap(patient, y.astype(np.int64), "binary", seed=[seed, n_groups, n_patients, data_set],
                                design="official")
        weights = prepare_weights(np.vstack([np.ones((1, len(y))), draws.counts(range(n_boot))]))
        mask = np.repeat(group[:, None] == scored[None, :], n_enc, axis=1)  # column s E + e
        labels = np.where(mask, np.repeat(y[:, None], len(scored) * n_enc, axis=1), np.nan)
        aurocs = weighted_auroc(np.tile(scores, (1, len(scored))), labels, weights)  # (B + 1, S E)
        box = simultaneous_group_box(aurocs, alpha)
        p_low, p_high = _percentile(aurocs[1:], alpha)
        cell_truth = truth[scored].ravel()  # group-major, as the columns
        tally.add("box critical value", box.critical)
        for k in range(len(cell_truth)):
            cell = f"{scored[k // n_enc]}, {names[k % n_enc]}"
            tally.hit("per-group AUROC, percentile", cell, p_low[k] <= cell_truth[k] <= p_high[k])
            tally.hit("per-group AUROC, box", cell, box.low[k] <= cell_truth[k] <= box.high[k])
        moving = p_high > p_low  # a group ranked perfectly in every replicate has no percentile width
        tally.add("per-group AUROC width, box / percentile", np.mean((box.high - box.low)[moving] / (p_high - p_low)[moving]))
        by_group = aurocs.reshape(len(aurocs), len(scored), n_enc)
        low, high = box.low.reshape(len(scored), n_enc), box.high.reshape(len(scored), n_enc)
        for e, name in enumerate(names):
            values = by_group[:, :, e]
            worst_truth = float(truth[scored, e].min())
            minimum = _nanmin_rows(values)  # as crs.scoring.subgroups: a group without positives drawn is left out
            pl, ph = np.nanpercentile(minimum[1:], [100 * alpha / 2, 100 * (1 - alpha / 2)])
            bl, bh = box_minimum(low[:, e], high[:, e])
            tally.hit("worst group, percentile of the replicate minimum", name, pl <= worst_truth <= ph)
            tally.hit("worst group, percentile: truth above", name, worst_truth > ph)
            tally.hit("worst group, box corners", name, bl <= worst_truth <= bh)
            tally.add(f"worst group width, box / percentile ({name})", (bh - bl) / (ph - pl) if ph > pl else np.nan)
            own = simultaneous_group_box(values, alpha)  # the narrower variant: a box per encoder and attribute
            ol, oh = box_minimum(own.low, own.high)
            tally.hit("worst group, box of the encoder's own groups", name, ol <= worst_truth <= oh)
            tally.add(f"worst group width, own box / percentile ({name})", (oh - ol) / (ph - pl) if ph > pl else np.nan)
            tally.add(f"worst group point - truth, plain minimum ({name})", minimum[0] - worst_truth)
            corrected = 2 * minimum[0] - np.nanmean(minimum[1:])
            tally.add(f"worst group point - truth, bootstrap bias-corrected ({name})", corrected - worst_truth)
            tally.add(f"worst group squared error, plain minimum ({name})", (minimum[0] - worst_truth) ** 2)
            tally.add(f"worst group squared error, bias-corrected ({name})", (corrected - worst_truth) ** 2)
            if len(scored) < 2:
                continue
            best, worst = int(np.argmax(values[0])), int(np.argmin(values[0]))
            true_gap = float(truth[scored[best], e] - truth[scored[worst], e])
            gl, gh, _ = simultaneous_gap_interval(values, best, worst, alpha, logit_scale=True)
            xl, xh = box_gap(low[:, e], high[:, e], best, worst)
            tally.hit("gap, max-|t| over pairs (0062)", name, gl <= true_gap <= gh)
            tally.hit("gap, box corners", name, xl <= true_gap <= xh)
            tally.add(f"gap width, box / max-|t| pairs ({name})", (xh - xl) / (gh - gl))
            if name in EQUAL:
                tally.hit("gap finding under equal signal, max-|t| over pairs (0062)", "equal", gl > 0)
                tally.hit("gap finding under equal signal, box corners", "equal", xl > 0)
    return tally.rows()


def designs(chexpert: Path | None) -> dict[str, tuple[Draw, int, int]]:
    """name -> (draw, groups, patients per test set)."""
    out: dict[str, tuple[Draw, int, int]] = {}
    for n_groups, shares in SHARES.items():
        for n_patients in PATIENTS:
            out[f"idealised, {n_groups} groups, {n_patients} patients"] = (idealised(shares), n_groups, n_patients)
    if chexpert is not None:
        rows = read_chexpert(chexpert)
        ids = np.unique(rows.patient)
        pool = np.random.default_rng(40).permutation(ids)[TRUTH_CHECK_PATIENTS:]
        for design, (codes, _) in rows.groups.items():
            n_groups = int(codes.max()) + 1
            for n_patients in PATIENTS:
                out[f"CheXpert labels, {design} ({n_groups}), {n_patients} patients"] = (
                    real(rows, design, pool), n_groups, n_patients)
    return out


def truth_check(chexpert: Path, seed: int = 40) -> float:
    """Largest |closed-form group AUROC - the AUROC on the 20,000 held-out patients| over designs, groups and
    encoders: the closed form is the truth on the real rows too."""
    rows = read_chexpert(chexpert)
    ids = np.random.default_rng(seed).permutation(np.unique(rows.patient))[:TRUTH_CHECK_PATIENTS]
    keep = np.isin(rows.patient, ids)
    largest = 0.0
    rng = np.random.default_rng([seed, 1])
    for codes, _ in rows.groups.values():
        n_groups = int(codes.max()) + 1
        group, y, patient = codes[keep], rows.label[keep], rows.patient[keep]
        scores = scores_of(y, patient, group, n_groups, rng)
        one = prepare_weights(np.ones((1, len(y))))
        for g in range(n_groups):
            labels = np.where(group == g, y, np.nan)
            found = weighted_auroc(scores, labels, one)[0]
            largest = max(largest, float(np.max(np.abs(found - true_group_auroc(n_groups)[g]))))
    return largest


SUMMARY = (  # (column, rows of simulate's output: before / after)
    ("worst group / equity: percentile / box (worst encoder)",
     ("worst group, percentile of the replicate minimum: worst cell", "worst group, box corners: worst cell")),
    ("percentile misses, truth above (mean)", ("worst group, percentile: truth above: mean",)),
    ("per-group AUROC: percentile / box (worst cell)",
     ("per-group AUROC, percentile: worst cell", "per-group AUROC, box: worst cell")),
    ("gap: max-\\|t\\| pairs / box (worst encoder)",
     ("gap, max-|t| over pairs (0062): worst cell", "gap, box corners: worst cell")),
    ("null gap findings: max-\\|t\\| pairs / box",
     ("gap finding under equal signal, max-|t| over pairs (0062): mean",
      "gap finding under equal signal, box corners: mean")),
)


def summary_markdown(results: dict[str, dict[str, float]]) -> str:
    """docs/crs.md 7b's subgroup table: per design the intervals before and after, widths and the point's bias."""
    head = [c for c, _ in SUMMARY] + ["width box / percentile: worst group, per group", "gap width box / max-\\|t\\|",
                                      "minimum - truth, equal encoders (worst): plain / bias-corrected"]
    lines = ["| design | " + " | ".join(head) + " |", "|" + "---|" * (len(head) + 1)]
    for name, rows in results.items():
        cells = [" / ".join(f"{rows[r]:.3f}" for r in found) for _, found in SUMMARY]
        widths = [rows[f"worst group width, box / percentile ({e})"] for e in ENCODERS]
        gaps = [rows[f"gap width, box / max-|t| pairs ({e})"] for e in ENCODERS if f"gap width, box / max-|t| pairs ({e})" in rows]
        plain = min(rows[f"worst group point - truth, plain minimum ({e})"] for e in EQUAL)
        corrected = min(rows[f"worst group point - truth, bootstrap bias-corrected ({e})"] for e in EQUAL)
        cells += [f"{np.nanmean(widths):.2f}, {rows['per-group AUROC width, box / percentile']:.2f}",
                  f"{np.mean(gaps):.2f}" if gaps else "", f"{plain:.3f} / {corrected:.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-sets", type=int, default=200)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--chexpert", type=Path, default=None,
                        help="CheXpert's train.csv(.gz): the real-label designs (optional; no image is read)")
    parser.add_argument("--designs", nargs="*", default=None, help="names (substrings) of the designs to run")
    args = parser.parse_args(argv)
    if args.chexpert is not None:
        print(f"truth check: largest |closed form - {TRUTH_CHECK_PATIENTS} held-out patients| = "
              f"{truth_check(args.chexpert):.4f}", flush=True)
    results = {}
    for name, (draw, n_groups, n_patients) in designs(args.chexpert).items():
        if args.designs and not any(part in name for part in args.designs):
            continue
        results[name] = rows = simulate(draw, n_groups, n_patients, args.data_sets, args.n_boot)
        print(f"## {name} ({args.data_sets} test sets x {args.n_boot} replicates)", flush=True)
        for row, value in rows.items():
            print(f"  {row}: {value:.3f}", flush=True)
    print()
    print(summary_markdown(results))


if __name__ == "__main__":
    main()
