"""The calibration-error simulation harness (decision 0035) runs and tells the estimators apart."""

from __future__ import annotations

from crs.bench.calibration_error import simulate, table, worst


def test_a_small_simulation_shows_the_old_estimator_biased_low_and_the_scored_one_not():
    cells = simulate(shapes=("binary",), levels=("strong",), sizes=(5000,), repetitions=40, truth_size=200_000,
                     estimators=("ece_null_debiased", "l2_width"))
    by_name = {cell.estimator: cell for cell in cells}
    assert by_name["ece_null_debiased"].bias < -0.01  # the audit: -0.016 at 5,000
    assert abs(by_name["l2_width"].bias) < 0.003
    assert 0.7 < by_name["l2_width"].se_over_sd < 1.4  # 40 repetitions: a loose band
    assert "l2_width" in table(cells) and "worst abs bias" in worst(cells)
