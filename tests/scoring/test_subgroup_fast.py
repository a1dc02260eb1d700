"""The subgroup tables' one-pass measures (crs.scoring.subgroups) against a straightforward reference.

The reference is what the subgroup scoring did before it was made fast (issue 25): each group cut out
of the condition (its rows, labels, predictions and replicate counts), its size and positives counted
on those rows, its AUROC by ``macro_auroc_columns``, its calibration by ``SCORED_CALIBRATION`` and its
positive rate by a float64 product of the counts, each on the group's own rows. The fast path takes
the calibration of every group of every attribute in one pass over the rows (joint groups), the AUROC
on the whole condition with the other rows left out, and the sizes through MetricFrame on the joint
groups. Both must agree to 1e-12 on random inputs of every kind, with small, unknown and too-small
groups, several seeds with repeated predictions, and patient-level replicate draws.
"""

from __future__ import annotations

import numpy as np
import pytest

from crs.axes.weighted import prepare_weights
from crs.evaluate import artifacts
from crs.scoring import subgroups
from crs.scoring.case_bootstrap import _distinct_rows, macro_auroc_columns
from crs.scoring.resample import group_bootstrap

pytestmark = pytest.mark.usefixtures("numba_path")  # the compiled cell sums and the scipy path


def _reference_rate(labels: np.ndarray, kind: str, weights: np.ndarray) -> np.ndarray:
    if kind == "multiclass":
        return np.full(len(weights), np.nan)
    positive = (labels > 0).astype(float)[:, None] if kind == "ordinal" else labels.reshape(len(labels), -1)
    known = (~np.isnan(positive)).astype(float)
    weights = weights.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = (weights @ np.nan_to_num(positive)) / (weights @ known)
    finite = np.isfinite(shares)
    return np.where(finite.any(axis=1), np.where(finite, shares, 0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1),
                    np.nan)


def _reference(labels, kind, n_outputs, categories, weights, probs_by_seed, min_images, min_positives):
    """Per (attribute, group): size, positives, scored, and the (B + 1,) rate, AUROC and calibration."""
    needed = subgroups.positive_counts(labels, kind, n_outputs) > 0
    probs, index = _distinct_rows(probs_by_seed)
    keys = [p.astype(np.float32) for p in probs]
    out = {}
    for attribute, values in categories.items():
        for group in sorted(set(values.tolist())):
            rows = np.flatnonzero(values == group)
            own = weights[:, rows]
            positives = int(subgroups.positive_counts(labels[rows], kind, n_outputs)[needed].min(initial=10**6))
            found = {"n_images": len(rows), "min_positives": positives,
                     "scored": len(rows) >= min_images and positives >= min_positives,
                     "rate": _reference_rate(labels[rows], kind, own)}
            if found["scored"]:
                prepared = prepare_weights(own)
                found["auroc"] = macro_auroc_columns([k[rows] for k in keys], labels[rows], kind, prepared)[:, index].mean(1)
                calibration = np.stack([subgroups.SCORED_CALIBRATION(labels[rows], p[rows], kind, prepared) for p in probs],
                                       axis=1)[:, index].mean(axis=1)
                # centred on the squared scale (decision 0061), written out here as the reference
                shift = np.mean(calibration[1:] ** 2) - calibration[0] ** 2
                calibration[1:] = np.sqrt(np.maximum(calibration[1:] ** 2 - shift, 0.0))
                found["calibration"] = calibration
            out[attribute, group] = found
    return out


def _task(rng, kind: str, n: int):
    if kind == "multilabel":
        labels = (rng.uniform(size=(n, 3)) < [0.3, 0.15, 0.5]).astype(float)
        labels[rng.uniform(size=labels.shape) < 0.08] = np.nan
        signal = np.nan_to_num(labels)
        n_outputs = 3
    else:
        n_outputs = 4
        labels = rng.integers(0, n_outputs, size=n)
        signal = np.eye(n_outputs)[labels]
    def probs() -> np.ndarray:
        logits = rng.normal(size=(n, n_outputs)) + 1.2 * signal
        if kind == "multilabel":
            return np.round(1 / (1 + np.exp(-logits)), 3)  # coarse: ties and bin edges
        return np.round(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True), 3)
    one, two = probs(), probs()
    return labels, n_outputs, np.stack([one, two, one])  # three seeds, two distinct predictions


@pytest.mark.parametrize("kind", ["multilabel", "multiclass", "ordinal"])
@pytest.mark.parametrize("case", range(2))
def test_fast_subgroup_measures_equal_the_group_by_group_reference(kind, case):
    rng = np.random.default_rng(700 + case)
    n = 900
    labels, n_outputs, probs_by_seed = _task(rng, kind, n)
    patients = np.repeat(np.arange(n), rng.integers(1, 4, size=n))[:n]
    per_patient = rng.uniform(size=patients.max() + 1)
    categories = {
        "sex": np.where(per_patient < 0.45, "female", np.where(per_patient < 0.97, "male", "unknown"))[patients],
        "age": np.array(["<40", "40-59", "60-79", "80+"])[rng.choice(4, patients.max() + 1, p=[.1, .4, .35, .15])][patients],
        "view": np.where(rng.uniform(size=n) < 0.8, "AP", "PA"),  # per image, not per patient
        # case 1: an attribute none of whose 30 groups (about 30 images each) is large enough to score
        "site": np.where(rng.uniform(size=n) < 0.5, "a", "b") if case == 0 else np.char.add("s", (np.arange(n) % 30).astype(str)),
    }
    draws = group_bootstrap(patients, labels, kind, seed=[case, 0, 0])
    weights = np.vstack([np.ones((1, n), dtype=np.uint16), draws.counts(range(60))])
    rows = subgroups.SubgroupRows("clean", labels, categories, weights)
    min_images, min_positives = 60, 5
    plan = subgroups.plan_groups(rows, kind, n_outputs, min_images, min_positives)
    key = artifacts.probs_key(artifacts.CLEAN)
    arrays = {artifacts.FULL_SEEDS: np.array([4, 5, 6]), key: probs_by_seed}
    group_rows, gap_rows, worst, box_inputs = subgroups.encoder_subgroups(
        "e", "t", kind, arrays, "clean", plan, key, (4, 5, 6), 0.05)
    critical = subgroups.apply_group_box(group_rows, gap_rows, {("e", "t", a): v for a, v in box_inputs.items()}, 0.05)
    expected = _reference(labels, kind, n_outputs, categories, weights, probs_by_seed, min_images, min_positives)

    assert [(r["attribute"], r["group"]) for r in group_rows] == list(expected)
    assert any(not e["scored"] for e in expected.values()) and sum(e["scored"] for e in expected.values()) >= 4
    for row in group_rows:
        reference = expected[row["attribute"], row["group"]]
        assert (row["n_images"], row["min_positives"], row["scored"]) == (
            reference["n_images"], reference["min_positives"], reference["scored"])
        plan_group = next(p for p in plan.groups[row["attribute"]] if p.group == row["group"])
        np.testing.assert_allclose(plan_group.positive_rate, reference["rate"], atol=1e-12, rtol=0)
        for name in ("auroc", "calibration"):
            if reference["scored"]:
                assert row[name] == pytest.approx(reference[name][0], abs=1e-12)
                if name == "calibration":
                    low, high = np.percentile(reference[name][1:], [2.5, 97.5])
                else:  # one simultaneous box over every scored group of every attribute (decision 0135)
                    logits = np.log(reference[name]) - np.log1p(-reference[name])
                    half = critical * logits[1:].std(ddof=1)
                    low, high = 1 / (1 + np.exp(-(logits[0] - half))), 1 / (1 + np.exp(-(logits[0] + half)))
                assert (row[f"{name}_low"], row[f"{name}_high"]) == pytest.approx((low, high), abs=1e-12)
            else:
                assert name not in row
    for attribute in categories:
        scored = [e["auroc"] for (a, _), e in expected.items() if a == attribute and e["scored"]]
        if scored:
            np.testing.assert_allclose(worst[attribute], np.min(scored, axis=0), atol=1e-12, rtol=0)
    assert {g["attribute"] for g in gap_rows} == set(categories)
    checked = 0
    by_group = {(r["attribute"], r["group"]): r for r in group_rows}
    for gap in gap_rows:  # worst group and gap at the box's corners (decisions 0135, 0136)
        names = sorted(g for (a, g), e in expected.items() if a == gap["attribute"] and e["scored"])
        if not names:
            continue
        lows = [by_group[gap["attribute"], g]["auroc_low"] for g in names]
        highs = [by_group[gap["attribute"], g]["auroc_high"] for g in names]
        assert (gap["worst_auroc_low"], gap["worst_auroc_high"]) == pytest.approx((min(lows), min(highs)), abs=1e-12)
        if len(names) < 2:
            continue
        best, worst = names.index(gap["best_group"]), names.index(gap["worst_group"])
        assert (gap["auroc_gap_low"], gap["auroc_gap_high"]) == pytest.approx(
            (lows[best] - highs[worst], highs[best] - lows[worst]), abs=1e-12)
        checked += 1
    assert checked >= 1


def test_scored_calibration_by_group_is_the_scored_calibration_per_group():
    """The two names change together: the one-pass error of each group is SCORED_CALIBRATION on its rows."""
    rng = np.random.default_rng(9)
    labels, _, probs = _task(rng, "multilabel", 400)
    codes = rng.integers(-1, 3, size=400)
    weights = rng.poisson(1.0, size=(30, 400))
    found = subgroups.SCORED_CALIBRATION_BY_GROUP(labels, probs[0], "multilabel", prepare_weights(weights), [codes])[0]
    for g in range(3):
        rows = np.flatnonzero(codes == g)
        np.testing.assert_allclose(
            found[:, g], subgroups.SCORED_CALIBRATION(labels[rows], probs[0][rows], "multilabel", weights[:, rows]),
            atol=1e-12, rtol=0)
