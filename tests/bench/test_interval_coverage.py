"""The interval-coverage simulation (decision 0036) runs end to end on a small size."""

from __future__ import annotations

import numpy as np
import pytest

from crs.bench.interval_coverage import (
    CONFIGURATIONS,
    PRINTED,
    draw_test_set,
    markdown,
    printed_markdown,
    simulate,
)


def test_test_sets_are_clustered_by_patient_as_configured():
    rng = np.random.default_rng(0)
    y, patient, probs = draw_test_set(400, 0.8, 1.0, rng)
    assert len(np.unique(patient)) == 400 and len(y) > 600  # 1 + Poisson(1) images a patient
    assert all(len(np.unique(y[patient == g])) == 1 for g in range(50))  # one label per patient
    assert probs.shape == (len(y), 5) and ((probs > 0) & (probs < 1)).all()
    y, patient, _ = draw_test_set(300, 0.0, 0.0, rng)
    assert len(y) == 300 and np.array_equal(patient, np.arange(300))


def test_a_small_coverage_run_reports_every_interval():
    result = simulate(list(CONFIGURATIONS)[0], data_sets=8, n_boot=50, truth_patients=20_000)
    for name in ("AUROC percentile interval", "CRS percentile interval", "rank sets, all encoders at once",
                 "calibration error percentile interval (centred on squares, 0061)",
                 "AUROC +- 1.96 DeLong SE (images independent)", "reversal-count percentile interval",
                 "robust reversals: data sets with a false one (rate, not coverage)", *ROW_OF.values()):
        assert 0.0 <= result.rows[name] <= 1.0
    assert 0.5 < result.rows["AUROC: bootstrap SD / fresh-sample SD"] < 1.8  # 8 test sets: a loose band
    assert "CRS percentile interval" in markdown([result])
    assert all(f"| {key} |" in printed_markdown([result]) for key in PRINTED)


def test_a_stratified_test_set_has_exactly_thirty_percent_positive_patients():
    y, patient, _ = draw_test_set(366, 0.8, 1.0, np.random.default_rng(1), stratified=True)
    per_patient = np.array([y[patient == g][0] for g in range(366)])
    assert per_patient.sum() == round(0.3 * 366)


ROW_OF = {key: row for key, (row, _) in PRINTED.items() if key != "crs_four_axes"}


def test_every_printed_interval_is_simulated():
    """Issue 30 item 6: each interval with a measured coverage (what the report, the summary and crs score
    print) is a row of the bench."""
    from crs.scoring.intervals import INTERVAL_NAMES, MEASURED_COVERAGE

    assert set(ROW_OF) == set(MEASURED_COVERAGE) == set(INTERVAL_NAMES)


def test_coverage_at_reduced_size_is_within_its_monte_carlo_error():
    """Issue 30 items 6-7: the bench at a reduced size (16 independent stratified test sets x 80
    replicates) against the measured figures of docs/crs.md 7b (crs.scoring.intervals.MEASURED_COVERAGE):
    the mean over encoders (cells) of every printed interval within 3 Monte Carlo SEs of the measured range,
    SE sqrt(p (1 - p) / (cells x 16)) with cells treated as independent (a loose bound), less 0.03 for
    the 80 replicates' coarser percentiles."""
    from crs.scoring.intervals import MEASURED_COVERAGE

    result = simulate("independent, 732 images, stratified", data_sets=16, n_boot=80, truth_patients=40_000)
    rows = result.rows
    cells = {"group_auroc": 15, "group_calibration": 15, "positive_rate": 3}
    for key, row in ROW_OF.items():
        measured = MEASURED_COVERAGE[key]
        se = np.sqrt(measured["mean_low"] * (1 - measured["mean_low"]) / (cells.get(key, 5) * 16))
        assert measured["mean_low"] - 3 * se - 0.03 <= rows[row] <= min(measured["mean_high"] + 3 * se, 1.0), (
            key, rows[row], measured)
    assert rows["calibration: negative lower bound, centred on squares"] == 0.0  # never, by construction


def test_the_population_values_are_those_of_a_large_sample():
    """The closed forms behind the new intervals' truth (coverage_model.population_values) against a
    sample of 60,000 patients: AUROC of the whole and of each group (the corrupted and small-fraction
    probes use the same mixture formula)."""
    from crs import axes
    from crs.bench.coverage_model import ENCODERS, GROUP_SHARES, draw_sample, mixture_auroc, population_values

    for tau, extra in ((0.8, 1.0), (0.0, 0.0)):
        big = draw_sample(60_000, tau, extra, np.random.default_rng(4), full=False)
        found = population_values(tau)["group_auroc"]
        for e, (mu, _, _) in enumerate(ENCODERS.values()):
            assert axes.auroc(big.y, big.probs[:, e], "binary") == pytest.approx(float(mixture_auroc(mu, 1 + tau**2)),
                                                                                  abs=0.006)
            for g in range(len(GROUP_SHARES)):
                rows = big.group == g
                assert axes.auroc(big.y[rows], big.probs[rows, e], "binary") == pytest.approx(found[g, e], abs=0.012)


def test_the_default_box_intervals_are_simulated_beside_the_percentile_ones():
    """Issue 40 items 1 and 6: the projected box (CRS two and four axes, each axis, the reversal count) is a row
    of the bench with its width beside the percentile interval's, on the near-tie cohort too, and its figures
    are what crs prints (crs.scoring.intervals.MEASURED_COVERAGE_BOX)."""
    from crs.bench.interval_coverage import PRINTED_BOX, box_markdown, measured_box_figures
    from crs.scoring.intervals import MEASURED_COVERAGE_BOX

    result = simulate("near-ties, clustered, 366 patients, random", data_sets=6, n_boot=60, truth_patients=20_000)
    for row, percentile in PRINTED_BOX.values():
        assert 0.0 <= result.rows[row] <= 1.0
        assert result.rows[row + ": width"] >= result.rows[percentile + ": width"] > 0  # the price is width
    assert result.rows["CRS, four axes, box projection"] >= 0.9  # valid by construction: 6 sets cannot miss much
    assert "| crs_four_axes |" in box_markdown([result])
    assert set(measured_box_figures([result])) == set(MEASURED_COVERAGE_BOX)
    assert min(found["worst_encoder"] for found in MEASURED_COVERAGE_BOX.values()) >= 0.95 - 2 * 0.0154
