"""The patient-clustered AUROC standard error (Obuchowski 1997; issue 30 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from crs.axes import auroc_standard_error


def test_one_case_a_group_is_the_unclustered_se():
    rng = np.random.default_rng(0)
    y = (rng.uniform(size=300) < 0.3).astype(float)
    s = y + rng.normal(size=300)
    assert auroc_standard_error(y, s, "binary", np.arange(300)) == pytest.approx(
        auroc_standard_error(y, s, "binary"), abs=1e-15)
    probs = rng.dirichlet(np.ones(3), size=300)
    labels = rng.integers(0, 3, 300)
    assert auroc_standard_error(labels, probs, "multiclass", np.arange(300)[::-1]) == pytest.approx(
        auroc_standard_error(labels, probs, "multiclass"), abs=1e-15)


def test_the_unclustered_se_agrees_with_mlstatkit_up_to_n_minus_1():
    """mlstatkit's DeLong (np.cov, n - 1) is the oracle; ours divides by n (docstring), so its variance
    lies between mlstatkit's times min((m - 1) / m, (n - 1) / n) and mlstatkit's."""
    mlstatkit = pytest.importorskip("MLstatkit.delong")
    rng = np.random.default_rng(1)
    for _ in range(3):
        y = (rng.uniform(size=200) < 0.35).astype(int)
        s = 1.2 * y + rng.normal(size=200)
        _, _, ci, _, auc, _, _ = mlstatkit.Delong_test(y, s, s + rng.normal(size=200), alpha=0.95)
        variance = ((ci[1] - ci[0]) / (2 * 1.959963984540054)) ** 2
        ours = auroc_standard_error(y.astype(float), s, "binary") ** 2
        m, n = int(y.sum()), int((1 - y).sum())
        assert variance * min((m - 1) / m, (n - 1) / n) - 1e-12 <= ours <= variance + 1e-12


def test_the_clustered_se_covers_on_clustered_patients():
    """366 patients with 1 + Poisson(1) images sharing a severity effect, five encoders: AUROC +- 1.96
    clustered SE covers the population AUROC in >= 0.94 of (test set, encoder) cells, within 2 Monte
    Carlo SEs (the unclustered SE: about 0.88). At 150 patients the Wald interval reaches about 0.93
    (docs/crs.md 7b): the clustered SE is right (SE / SD 0.88-1.05) but the AUROC's skew near 1 is not."""
    from crs.axes import auroc
    from crs.bench.interval_coverage import draw_test_set

    rng = np.random.default_rng(4)
    y_big, _, p_big = draw_test_set(100_000, 0.8, 1.0, rng)
    truth = np.array([auroc(y_big, p_big[:, e], "binary") for e in range(5)])
    clustered, plain, cells = 0, 0, 0
    for _ in range(120):
        y, patient, probs = draw_test_set(366, 0.8, 1.0, rng)
        for e in range(5):
            miss = abs(auroc(y, probs[:, e], "binary") - truth[e])
            clustered += miss <= 1.96 * auroc_standard_error(y, probs[:, e], "binary", patient)
            plain += miss <= 1.96 * auroc_standard_error(y, probs[:, e], "binary")
            cells += 1
    assert clustered / cells >= 0.94 - 2 * np.sqrt(0.95 * 0.05 / cells)
    assert plain / cells < 0.92 < clustered / cells
