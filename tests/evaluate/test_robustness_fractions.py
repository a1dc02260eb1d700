"""Corrupted and shifted conditions are evaluated by the full label fraction's probes (the default),
each distinct probe predicted once; ``robustness_fractions = "all"`` keeps every probe's rows."""

from __future__ import annotations

import numpy as np
import pytest

from crs.probes import distinct_probes, fit_probes

from tiny import write_tiny_spec

METRICS = ("auroc", "ece", "brier", "nll")


def _run(folder, robustness_fractions: str):
    from crs.benchmark import Benchmark
    from crs.spec import load_spec

    path = write_tiny_spec(folder, encoders=("pixel_stats",))
    path.write_text(path.read_text().replace("[probe]\n", f'[probe]\nrobustness_fractions = "{robustness_fractions}"\n'))
    bench = Benchmark(load_spec(path))
    bench.extract(progress=False)
    return bench.probe(progress=False).records, bench.folder


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory):
    data = tmp_path_factory.mktemp("fractions")
    return _run(data / "full", "full"), _run(data / "all", "all")


def test_default_evaluates_corrupted_and_shifted_data_at_the_full_fraction_only(both_runs):
    (full, _), (every, _) = both_runs
    for records in (full, every):
        assert set(records.loc[records.condition == "clean", "label_fraction"]) == {0.25, 1.0}
    assert set(full.loc[full.condition != "clean", "label_fraction"]) == {1.0}
    assert set(every.loc[every.condition != "clean", "label_fraction"]) == {0.25, 1.0}
    assert len(every) - len(full) == (every.label_fraction == 0.25).sum() - (full.label_fraction == 0.25).sum() > 0


def test_rows_both_runs_have_agree(both_runs):
    (full, _), (every, _) = both_runs
    keys = ["encoder", "task", "condition", "corruption", "severity", "target", "label_fraction", "seed"]
    merged = full.merge(every, on=keys, suffixes=("", "_all"))
    assert len(merged) == len(full)
    for metric in METRICS:  # the same probes; only the float32 matrix product's layout differs
        np.testing.assert_allclose(merged[metric], merged[f"{metric}_all"], atol=1e-5, err_msg=metric)


def test_predictions_files_keep_their_layout(both_runs):
    (_, full_folder), (_, every_folder) = both_runs
    full, every = full_folder.read_predictions("pixel_stats", "cxr"), every_folder.read_predictions("pixel_stats", "cxr")
    assert sorted(full) == sorted(every)
    for key in full:
        assert full[key].shape == every[key].shape, key
        if full[key].dtype.kind == "f":
            np.testing.assert_allclose(full[key], every[key], atol=1e-5, err_msg=key)


@pytest.mark.parametrize(("family", "Cs"), [("logistic", (0.1, 1.0)), ("knn", (1.0, 5.0))])
def test_probes_fitted_on_the_same_rows_are_one_probe(family, Cs):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 16)).astype(np.float32)
    y = rng.integers(0, 3, 400)
    all_rows, half = np.arange(300), np.arange(0, 300, 2)
    subsets = [half, all_rows, all_rows, half[:90], all_rows]
    probe_set = fit_probes(X[:300], y[:300], X[300:], y[300:], subsets, "multiclass", Cs=Cs, n_classes=3, family=family)
    representative, position = distinct_probes(probe_set, [1, 2, 4, 0])
    assert representative.tolist() == [1, 0] and position.tolist() == [0, 0, 0, 1]
    representative, position = distinct_probes(probe_set, range(5))
    assert representative.tolist() == [0, 1, 3] and position.tolist() == [0, 1, 1, 2, 1]
    every = probe_set.predict_proba(X[300:])
    chosen = probe_set.select(representative)
    assert chosen.n_subsets == 3 and chosen.selected_C.tolist() == probe_set.selected_C[representative].tolist()
    np.testing.assert_allclose(chosen.predict_proba(X[300:])[position], every, atol=1e-6)
