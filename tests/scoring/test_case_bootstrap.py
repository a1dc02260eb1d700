"""Second bootstrap level: weighted metrics, strata, pairing across encoders and conditions, intervals."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from crs import axes
from crs.evaluate.units import condition_metrics
from crs.scoring.bootstrap import paired_seed_bootstrap
from crs.scoring.case_bootstrap import (
    CaseBootstrapError,
    TaskCases,
    case_strata,
    load_cases,
    paired_seed_case_bootstrap,
    stratified_case_counts,
    weighted_auroc,
    weighted_binned_ece,
    weighted_debiased_ece,
)
from crs.scoring.formula import AXES, ScoreInputError, point_estimate
from crs.scoring.measurements import measure
from crs.scoring.result import score_records
from crs.scoring.settings import ScoreSettings

# --- helpers ---------------------------------------------------------------------------------------


def _rows(cases: TaskCases, case_counts=None, shift_counts=None, seed_copies=None) -> list[dict]:
    """Run records recomputed from per-case predictions, on the resample the counts describe.

    ``seed_copies`` maps each new seed id to the stored seed it copies (a seed multiset); by default
    every stored seed once. Resampled cases are materialised with np.repeat: the oracle path.
    """

    def take(array: np.ndarray, counts) -> np.ndarray:
        return array if counts is None else np.repeat(array, counts, axis=0)

    seed_copies = seed_copies or {seed: seed for seed in cases.seeds}
    y = take(cases.labels, case_counts)
    y_shift = None if cases.shift_labels is None else take(cases.shift_labels, shift_counts)
    rows = []
    for e, encoder in enumerate(cases.encoders):
        for new_seed, stored_seed in seed_copies.items():
            s = cases.seeds.index(stored_seed)
            base = {"encoder": encoder, "task": cases.task, "task_kind": cases.kind, "seed": new_seed}
            for f, fraction in enumerate(cases.fractions):
                probs = take(cases.probs_by_fraction[e, f, s], case_counts)
                rows.append({**base, "label_fraction": fraction, "condition": "clean", "corruption": "",
                             "severity": 0, **condition_metrics(y, probs, cases.kind)})  # fmt: skip
            for c, name in enumerate(cases.corruptions):
                corruption, severity = name.split("/")
                probs = take(cases.corrupt_probs[e, c, s], case_counts)
                rows.append({**base, "label_fraction": cases.fractions[-1], "condition": "corrupt",
                             "corruption": corruption, "severity": int(severity), **condition_metrics(y, probs, cases.kind)})  # fmt: skip
            if cases.shift_probs is not None:
                probs = take(cases.shift_probs[e, s], shift_counts)
                rows.append({**base, "label_fraction": cases.fractions[-1], "condition": "shift", "corruption": "",
                             "severity": 0, **condition_metrics(y_shift, probs, cases.kind)})  # fmt: skip
    return rows


def _records(cases: dict[str, TaskCases], **kwargs) -> pd.DataFrame:
    return pd.DataFrame([row for task in sorted(cases) for row in _rows(cases[task], **kwargs)])


def _point(records: pd.DataFrame, reference: str, n_boot: int = 20, seed: int = 0):
    """(measurements, point estimate) of run records, as score_records makes them."""
    settings = ScoreSettings(reference=reference, n_boot=n_boot, seed=seed)
    measurements = measure(records, settings)
    return measurements, point_estimate(measurements.axis_errors(), measurements.axis_standard_errors(), settings)


# --- weighted metrics against the materialised resample ----------------------------------------------


def test_weighted_auroc_equals_sklearn_on_the_repeated_arrays():
    rng = np.random.default_rng(0)
    worst = 0.0
    for trial in range(200):
        n_cases, n_columns, n_boot = (
            int(rng.integers(2, 40)),
            int(rng.integers(1, 5)),
            int(rng.integers(1, 5)),
        )
        # every other trial: few distinct scores, so most pairs tie (the 1/2 rule is exercised)
        scores = (
            rng.integers(0, 4, (n_columns, n_cases)).astype(float)
            if trial % 2
            else rng.random((n_columns, n_cases))
        )
        positive = rng.random((n_columns, n_cases)) < rng.uniform(0.05, 0.6)  # imbalanced, sometimes absent
        negative = ~positive & (rng.random((n_columns, n_cases)) < 0.9)  # some cases ignored (NaN label)
        counts = rng.integers(0, 4, (n_boot, n_cases))
        got = weighted_auroc(scores, positive, negative, counts)
        for b in range(n_boot):
            for c in range(n_columns):
                keep = positive[c] | negative[c]
                y = np.repeat(positive[c][keep], counts[b][keep])
                s = np.repeat(scores[c][keep], counts[b][keep])
                if len(np.unique(y)) < 2:
                    assert np.isnan(got[b, c])
                    continue
                worst = max(worst, abs(roc_auc_score(y, s) - got[b, c]))
    assert worst < 1e-9


def test_weighted_auroc_scores_repeated_columns_once_and_identically():
    rng = np.random.default_rng(1)
    scores = rng.random((3, 30))
    positive = rng.random(30) < 0.4
    counts = rng.integers(0, 3, (7, 30))
    stacked = weighted_auroc(np.vstack([scores, scores[[1]]]), positive, ~positive, counts)
    assert np.array_equal(stacked[:, 3], stacked[:, 1])
    assert np.allclose(stacked[:, :3], weighted_auroc(scores, positive, ~positive, counts), atol=1e-15)


def test_weighted_ece_equals_the_ece_of_the_repeated_arrays():
    rng = np.random.default_rng(2)
    for _ in range(100):
        n_cases, n_classes = int(rng.integers(1, 50)), int(rng.integers(2, 6))
        probs = rng.dirichlet(np.full(n_classes, 0.5), n_cases)
        probs[rng.random(n_cases) < 0.1] = np.eye(n_classes)[0]  # confidence exactly 1 -> last bin
        y = rng.integers(0, n_classes, n_cases)
        counts = rng.integers(0, 4, (3, n_cases))
        correct = (probs.argmax(axis=1) == y).astype(float)
        got = weighted_binned_ece(probs.max(axis=1)[None], correct[None], None, counts)[:, 0]
        for b in range(3):
            if counts[b].sum() == 0:
                assert np.isnan(got[b])
                continue
            expected = axes.ece(np.repeat(y, counts[b]), np.repeat(probs, counts[b], axis=0), "multiclass")
            assert got[b] == pytest.approx(expected, abs=1e-12)


def test_weighted_ece_matches_torchmetrics_on_the_repeated_arrays():
    torch = pytest.importorskip("torch")
    functional = pytest.importorskip("torchmetrics.functional.classification")
    rng = np.random.default_rng(3)
    for _ in range(20):
        probs = rng.dirichlet(np.ones(4), 40)
        y = rng.integers(0, 4, 40)
        counts = rng.integers(0, 3, (1, 40))
        correct = (probs.argmax(axis=1) == y).astype(float)
        got = weighted_binned_ece(probs.max(axis=1)[None], correct[None], None, counts)[0, 0]
        expected = functional.multiclass_calibration_error(
            torch.tensor(np.repeat(probs, counts[0], axis=0)), torch.tensor(np.repeat(y, counts[0])),
            num_classes=4, n_bins=15, norm="l1",
        )  # fmt: skip
        assert got == pytest.approx(float(expected), abs=1e-6)  # torchmetrics works in float32


def test_multilabel_case_axes_match_the_axes_on_the_repeated_arrays():
    rng = np.random.default_rng(4)
    y = (rng.random((30, 3)) < 0.4).astype(float)
    y[rng.random((30, 3)) < 0.2] = np.nan  # ignored entries
    probs = rng.random((30, 3))
    counts = rng.integers(0, 3, (5, 30))
    known = ~np.isnan(y)
    got_auroc = np.nanmean(weighted_auroc(probs.T, y.T == 1, y.T == 0, counts), axis=1)
    got_ece = np.nanmean(weighted_binned_ece(probs.T, np.nan_to_num(y.T), known.T, counts), axis=1)
    got_debiased = np.nanmean(weighted_debiased_ece(probs.T, np.nan_to_num(y.T), known.T, counts), axis=1)
    for b in range(5):
        y_b, p_b = np.repeat(y, counts[b], axis=0), np.repeat(probs, counts[b], axis=0)
        assert got_auroc[b] == pytest.approx(axes.auroc(y_b, p_b, "multilabel"), abs=1e-12)
        assert got_ece[b] == pytest.approx(axes.ece(y_b, p_b, "multilabel"), abs=1e-12)
        assert got_debiased[b] == pytest.approx(axes.debiased_ece(y_b, p_b, "multilabel"), abs=1e-12)


def test_weighted_debiased_ece_equals_the_axis_on_the_repeated_arrays():
    rng = np.random.default_rng(5)
    for _ in range(30):
        probs = rng.dirichlet(np.full(4, 0.7), 50)
        y = rng.integers(0, 4, 50)
        counts = rng.integers(0, 3, (3, 50))
        correct = (probs.argmax(axis=1) == y).astype(float)
        got = weighted_debiased_ece(probs.max(axis=1)[None], correct[None], None, counts)[:, 0]
        for b in range(3):
            expected = axes.debiased_ece(np.repeat(y, counts[b]), np.repeat(probs, counts[b], axis=0), "multiclass")
            assert got[b] == pytest.approx(expected, abs=1e-12)


# --- strata -----------------------------------------------------------------------------------------


def test_case_strata():
    assert case_strata(np.array([2, 0, 2, 1]), "multiclass").tolist() == [2, 0, 2, 1]
    # multilabel: first label known positive, in class order; none known positive -> stratum L = 3
    labels = np.array([[np.nan, 1, 1], [0, 0, 0], [1, np.nan, 0], [np.nan, np.nan, np.nan]])
    assert case_strata(labels, "multilabel").tolist() == [1, 3, 0, 3]


def test_stratified_counts_keep_every_stratum_size():
    strata = np.array([0, 0, 0, 1, 2, 2, 1, 0])
    counts = stratified_case_counts(strata, 200, np.random.default_rng(0))
    for stratum in (0, 1, 2):
        assert (counts[:, strata == stratum].sum(axis=1) == (strata == stratum).sum()).all()
    assert counts.min() >= 0 and counts.max() > 1  # real resampling: some case drawn twice


# --- the bootstrap on a planted example ----------------------------------------------------------------


def _planted_cases(n_cases=60, seed=0) -> dict[str, TaskCases]:
    """One 3-class task, 3 encoders of rising quality; every seed predicts the same (the full-fraction case)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), n_cases // 3)
    fractions = (0.25, 1.0)
    probs = np.empty((3, 2, 2, n_cases, 3))
    corrupt = np.empty((3, 1, 2, n_cases, 3), dtype=np.float32)
    for e, signal in enumerate((1.0, 1.5, 2.0)):
        for f, shrink in enumerate((0.6, 1.0)):
            logits = rng.normal(0, 1, (n_cases, 3)) + signal * shrink * np.eye(3)[labels]
            p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            probs[e, f] = p  # the same for both seeds
        noisy = logits + rng.normal(0, 1.5, logits.shape)
        corrupt[e, 0] = np.exp(noisy) / np.exp(noisy).sum(axis=1, keepdims=True)
    return {"t": TaskCases("t", "multiclass", ("a", "b", "c"), (0, 1), fractions, labels, probs,
                           ("gaussian_noise/3",), corrupt)}  # fmt: skip


def test_case_level_interval_is_wider_than_the_seed_only_one():
    cases = _planted_cases()
    measurements, point = _point(_records(cases), "a", n_boot=200)
    seed_only = paired_seed_bootstrap(measurements, point)
    two_level = paired_seed_case_bootstrap(measurements, cases, point)
    seed_width = seed_only.table["crs_high"] - seed_only.table["crs_low"]
    case_width = two_level.table["crs_high"] - two_level.table["crs_low"]
    # seeds all predict the same, so the seed-only interval is a point; the test set adds the spread
    assert (seed_width == 0).all()
    assert (case_width >= seed_width).all() and (case_width.drop("a") > 0.01).all()
    assert two_level.level == "seed+case" and seed_only.level == "seed"
    # same seed draws as the seed-only bootstrap, so the two can be compared replicate by replicate
    assert two_level.seed_draws.equals(seed_only.seed_draws)


def test_with_every_case_once_the_point_estimate_is_the_records_estimate():
    cases = _planted_cases()
    measurements, point = _point(_records(cases), "a")
    result = paired_seed_case_bootstrap(measurements, cases, point)
    assert result.table["crs_from_predictions"].to_dict() == pytest.approx(point.table["crs"].to_dict(), abs=1e-12)


# --- on a real tiny pipeline run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_cases(tiny_run):
    spec, _, records, _ = tiny_run
    return spec, records, load_cases(spec.output / "predictions", records)


def test_tiny_run_predictions_reproduce_the_score_records_point_estimate(tiny_cases):
    spec, _, cases = tiny_cases
    # Records recomputed from the stored predictions (corrupt ones are float16), then scored both ways.
    records = _records(cases)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no precision warning: both sides read the same arrays
        result = score_records(records, "pixel_stats", n_boot=30, n_weight_samples=10,
                               predictions_dir=spec.output / "predictions", case_level=True)  # fmt: skip
    plain = score_records(records, "pixel_stats", n_boot=30, n_weight_samples=10)
    assert result.crs["crs"].to_dict() == pytest.approx(plain.crs["crs"].to_dict(), abs=1e-12)
    assert result.bootstrap.table["crs_from_predictions"].to_dict() == pytest.approx(
        plain.crs["crs"].to_dict(), abs=1e-9
    )
    assert result.settings.case_level and "test-case bootstrap" in result.format()


def test_each_replicate_uses_one_case_draw_for_every_encoder_and_condition(tiny_cases):
    _, _, cases = tiny_cases
    measurements, point = _point(_records(cases), "pixel_stats", n_boot=6, seed=5)
    result = paired_seed_case_bootstrap(measurements, cases, point)
    assert set(result.shift_case_draws) == {"cxr"}
    kept = result.axis_error_replicates
    shifts = []
    for replicate in (0, 5):
        seed_counts = result.seed_draws.iloc[replicate]
        drawn = [int(seed) for seed, count in seed_counts.items() for _ in range(int(count))]
        copies = dict(enumerate(drawn))  # every drawn copy of a seed becomes its own seed
        rows = []
        for task, task_cases in cases.items():
            shift = result.shift_case_draws.get(task)
            rows += _rows(task_cases, case_counts=result.case_draws[task][replicate],
                          shift_counts=None if shift is None else shift[replicate], seed_copies=copies)  # fmt: skip
        # the same resampled cases, materialised, for every encoder and every condition of a task
        errors = measure(pd.DataFrame(rows), point.settings).axis_errors()
        for axis in ("discrimination", "label_efficiency", "robustness"):
            assert kept[axis].iloc[replicate].to_numpy() == pytest.approx(errors[axis].to_numpy(), abs=1e-9)
        # calibration replicates are centred (crs.scoring.case_bootstrap.centre_calibration): they
        # differ from the materialised resample by one shift per encoder and seed, never by the cases
        shifts.append(kept["calibration"].iloc[replicate].to_numpy() - errors["calibration"].to_numpy())
    # at the full fraction every seed trains on the same rows, so the shift is the same in every replicate
    assert shifts[0] == pytest.approx(shifts[1], abs=1e-7) and np.all(shifts[0] < 0)


def test_calibration_replicates_centre_on_the_point_estimate():
    cases = _planted_cases()
    measurements, point = _point(_records(cases), "a", n_boot=200, seed=4)
    result = paired_seed_case_bootstrap(measurements, cases, point)
    calibration = result.axis_error_replicates["calibration"]
    # every seed predicts the same here, so centring per seed puts the replicate mean on the point estimate
    assert calibration.mean().to_numpy() == pytest.approx(point.errors["calibration"].to_numpy(), abs=1e-9)
    assert (calibration.std() > 0.005).all()  # the spread is kept
    discrimination = result.axis_error_replicates["discrimination"]
    assert np.abs(discrimination.mean() - point.errors["discrimination"]).max() < 0.01  # AUROC: no centring needed


def test_case_draws_are_stratified_and_shared(tiny_cases):
    _, _, cases = tiny_cases
    measurements, point = _point(_records(cases), "pixel_stats", n_boot=40, seed=1)
    result = paired_seed_case_bootstrap(measurements, cases, point)
    for task, task_cases in cases.items():
        draws = result.case_draws[task]
        strata = case_strata(task_cases.labels, task_cases.kind)
        assert draws.shape == (40, len(task_cases.labels))
        for stratum in np.unique(strata):
            assert (draws[:, strata == stratum].sum(axis=1) == (strata == stratum).sum()).all()


def test_missing_predictions_name_the_file_and_the_fix(tiny_cases, tmp_path):
    _, records, _ = tiny_cases
    with pytest.raises(CaseBootstrapError, match=r"pixel_stats__cxr\.npz.*crs probe"):
        load_cases(tmp_path, records)
    with pytest.raises(ScoreInputError, match="predictions_dir"):
        score_records(records, "pixel_stats", n_boot=5, n_weight_samples=5, case_level=True)


def test_case_level_keeps_every_axis_per_replicate_for_the_report():
    cases = _planted_cases()
    measurements, point = _point(_records(cases), "a", n_boot=30, seed=2)
    result = paired_seed_case_bootstrap(measurements, cases, point)
    kept = result.axis_error_replicates
    assert list(kept) == list(AXES)
    assert all(kept[axis].shape == (30, 3) and list(kept[axis].columns) == ["a", "b", "c"] for axis in AXES)
    # the kept errors are the very ones behind the replicate CRS (every axis measured here)
    errors = np.stack([kept[axis].to_numpy() for axis in AXES], axis=-1)
    assert point.score(errors)["crs"] == pytest.approx(result.replicates.to_numpy(), abs=1e-12)
    # seeds all predict the same, so the spread of the discrimination error is the test cases'
    assert (kept["discrimination"].std() > 0.005).all()
