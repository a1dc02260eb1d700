"""The interval-coverage simulation (decision 0036) runs end to end on a small size."""

from __future__ import annotations

import numpy as np

from crs.bench.interval_coverage import CONFIGURATIONS, draw_test_set, markdown, simulate


def test_test_sets_are_clustered_by_patient_as_configured():
    rng = np.random.default_rng(0)
    y, patient, probs = draw_test_set(400, 0.8, 1.0, rng)
    assert len(np.unique(patient)) == 400 and len(y) > 600  # 1 + Poisson(1) images a patient
    assert all(len(np.unique(y[patient == g])) == 1 for g in range(50))  # one label per patient
    assert probs.shape == (len(y), 5) and ((probs > 0) & (probs < 1)).all()
    y, patient, _ = draw_test_set(300, 0.0, 0.0, rng)
    assert len(y) == 300 and np.array_equal(patient, np.arange(300))


def test_a_small_coverage_run_reports_every_interval():
    result = simulate(list(CONFIGURATIONS)[0], data_sets=12, n_boot=60, truth_patients=40_000)
    for name in ("AUROC percentile interval", "CRS percentile interval", "rank sets, all encoders at once",
                 "calibration error percentile interval (centred on squares, 0061)",
                 "AUROC +- 1.96 DeLong SE (images independent)", "reversal-count percentile interval",
                 "robust reversals: data sets with a false one (rate, not coverage)"):
        assert 0.0 <= result.rows[name] <= 1.0
    assert 0.6 < result.rows["AUROC: bootstrap SD / fresh-sample SD"] < 1.5  # 12 test sets: a loose band
    assert "CRS percentile interval" in markdown([result])


def test_a_stratified_test_set_has_exactly_thirty_percent_positive_patients():
    y, patient, _ = draw_test_set(366, 0.8, 1.0, np.random.default_rng(1), stratified=True)
    per_patient = np.array([y[patient == g][0] for g in range(366)])
    assert per_patient.sum() == round(0.3 * 366)


def test_coverage_at_reduced_size_is_within_its_monte_carlo_error():
    """Issue 30 item 7: the bench at a reduced size (40 independent stratified test sets x 100
    replicates) against the figures of docs/crs.md 7b, each within 3 Monte Carlo SEs of a mean over
    five encoders (SE sqrt(p (1 - p) / (5 x 40)), encoders treated as independent: a loose bound)."""
    configuration = "independent, 732 images, stratified"
    result = simulate(configuration, data_sets=40, n_boot=100, truth_patients=60_000)
    rows = result.rows

    def within(name: str, measured: float) -> None:
        se = np.sqrt(measured * (1 - measured) / (5 * 40))
        assert rows[name] >= measured - 3 * se - 0.02, (name, rows[name], measured)  # 100 replicates: a bit lower

    within("AUROC percentile interval", 0.943)
    within("calibration error percentile interval (centred on squares, 0061)", 0.991)
    within("CRS percentile interval", 0.985)
    assert rows["calibration: negative lower bound, centred on squares"] == 0.0  # never, by construction
