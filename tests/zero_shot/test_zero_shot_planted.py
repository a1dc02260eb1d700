"""Planted truth for zero-shot: imported image features and imported prototypes with a known label direction.

Features are built so the cosine to prototype k is exactly x_k (x drawn in the span of orthonormal
prototypes, the rest of the unit vector filled orthogonally), and labels are drawn from
softmax(s_true * x): the model "zero-shot = softmax(scale * cos / T)" is exactly right with
T = scale / s_true. So the fitted temperature must come out near the planted one, and the zero-shot
AUROC's patient-level interval must hold the population AUROC (measured on a fresh large draw).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crs import axes
from crs.cache.imports import import_features
from crs.cache.prototypes import import_prototypes, read_prototypes, stored_digests
from crs.cache.store import FeatureStore, store_path
from crs.data.base import Dataset, Task
from crs.evaluate.units import ProbeSettings, ProbeUnit
from crs.evaluate.zero_shot import fit_temperature, run_zero_shot_unit, similarities
from crs.scoring.settings import ScoreSettings
from crs.scoring.zero_shot import _crossover, score_zero_shot, write_zero_shot_score

K, D = 4, 12
SCALE = 100.0  # the model's shipped scale (CLIP's clamp)
S_TRUE = 25.0  # the scale the labels were drawn with: planted temperature T = SCALE / S_TRUE = 4
CLASSES = ("a", "b", "c", "d")


def _draw(n: int, rng: np.random.Generator, basis: np.ndarray):
    x = rng.normal(0.0, 0.12, size=(n, K))
    logits = S_TRUE * x
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(K, p=row) for row in p])
    filler = np.sqrt(1.0 - (x**2).sum(1))
    features = x @ basis[:K] + filler[:, None] * basis[K]
    return features.astype(np.float32), y, p


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    rng = np.random.default_rng(7)
    basis = np.linalg.qr(rng.normal(size=(D, D)))[0].T  # orthonormal rows
    n = 3000
    features, y, _ = _draw(n, rng, basis)
    ids = np.array([f"img{i:05d}" for i in range(n)])
    groups = np.array([f"p{i // 2:05d}" for i in range(n)])  # two images per patient
    splits = np.array(["train"] * 600 + ["val"] * 1400 + ["test"] * 1000)  # 1,400 rows fit T to a few per cent
    task = Task("planted", "multiclass", CLASSES)
    dataset = Dataset("planted", root, task, "dermoscopy", 32, ids, [f"{i}.png" for i in ids], groups,
                      y.astype(np.int64), splits)
    cache = root / "cache"
    FeatureStore(store_path(cache, "planted"), mode="a").write_table(dataset)
    npz = root / "features.npz"
    np.savez(npz, features=features, ids=ids)
    import_features(cache, "planted", "hosted_vlm", npz)
    protos = root / "protos.npz"
    np.savez(protos, positive=basis[:K].astype(np.float32), scale=SCALE, link="softmax", prompt_set="planted")
    import_prototypes(cache, "planted", "hosted_vlm", protos)
    store = FeatureStore(store_path(cache, "planted"))
    prototypes = [read_prototypes(store, "hosted_vlm", d) for d in stored_digests(store, "hosted_vlm")]
    settings = ProbeSettings(label_fractions=(0.25, 1.0), seeds=(0, 1), Cs=(1.0,), validation="full")
    out = root / "out"
    result = run_zero_shot_unit(ProbeUnit("hosted_vlm", "planted"), cache, settings, prototypes, out)
    (out / "zero_shot").mkdir(parents=True, exist_ok=True)
    result.records.to_parquet(out / "zero_shot" / "records.parquet")
    result.prompts.to_parquet(out / "zero_shot" / "prompts.parquet")
    return {"root": root, "cache": cache, "basis": basis, "features": features, "y": y, "splits": splits, "result": result, "out": out,
            "prototypes": prototypes, "rng": rng}


def test_cosine_is_the_planted_coordinate(planted):
    x = similarities(planted["features"], planted["prototypes"][0])
    expected = planted["features"] @ planted["basis"][:K].T
    np.testing.assert_allclose(x, expected, atol=1e-5)


def test_fitted_temperature_within_ten_percent_of_planted(planted):
    records = planted["result"].records
    fitted = records[(records["calibration"] == "fitted") & (records["condition"] == "clean")
                     & (records["label_fraction"] == 1.0)]
    temperature = float(fitted["temperature"].iloc[0])
    planted_t = SCALE / S_TRUE
    assert abs(temperature - planted_t) / planted_t < 0.10, temperature
    # and fitting is what moves it: the shipped scale is 4x too sharp, so its calibration is worse
    shipped = records[(records["calibration"] == "shipped") & (records["condition"] == "clean")]
    assert float(fitted["ece_debiased"].iloc[0]) < float(shipped["ece_debiased"].iloc[0])


def test_zero_shot_auroc_interval_holds_the_population_auroc(planted):
    fresh_features, fresh_y, _ = _draw(40000, np.random.default_rng(99), planted["basis"])
    probs = np.exp(SCALE * similarities(fresh_features, planted["prototypes"][0]))
    population = axes.auroc(fresh_y, probs / probs.sum(1, keepdims=True), "multiclass")
    score = score_zero_shot(planted["out"], ScoreSettings(n_boot=200, seed=0))
    row = score.comparison.loc[("hosted_vlm", "planted")]
    assert row["zero_shot_auroc_low"] <= population <= row["zero_shot_auroc_high"], (row, population)
    assert row["zero_shot_auroc_high"] - row["zero_shot_auroc_low"] < 0.1  # an interval, not the whole range
    path = write_zero_shot_score(planted["out"], score)
    assert path.is_file()


def test_fit_temperature_recovers_a_planted_sigmoid_scale_and_bias():
    rng = np.random.default_rng(3)
    cosine = rng.normal(0, 0.1, size=(20000, 3))
    true_a, true_b = 30.0, -1.0
    labels = (rng.random(cosine.shape) < 1 / (1 + np.exp(-(true_a * cosine + true_b)))).astype(float)
    temperature, bias = fit_temperature(cosine, labels, "multilabel", 60.0, -10.0)
    assert abs(temperature - 2.0) / 2.0 < 0.10 and abs(bias - true_b) < 0.1


def test_crossover_is_the_first_fraction_whose_probe_beats_zero_shot():
    fractions = np.array([0.01, 0.05, 0.1, 0.25, 1.0])
    curve = np.array([[0.60, 0.70, 0.76, 0.80, 0.85]])
    assert _crossover(fractions, curve, np.array([0.75]))[0] == 0.1  # planted between 5 % and 10 %
    assert _crossover(fractions, curve, np.array([0.5]))[0] == 0.01
    assert np.isinf(_crossover(fractions, curve, np.array([0.9]))[0])  # never beaten within the fractions run


def test_records_have_the_zero_label_point_and_a_fitted_row_per_fraction_and_seed(planted):
    records = planted["result"].records
    clean = records[records["condition"] == "clean"]
    assert set(clean.loc[clean["calibration"] == "shipped", "label_fraction"]) == {0.0}
    fitted = clean[clean["calibration"] == "fitted"]
    assert sorted(map(tuple, fitted[["label_fraction", "seed"]].to_numpy().tolist())) == [
        (0.25, 0), (0.25, 1), (1.0, 0), (1.0, 1)]
    assert isinstance(records, pd.DataFrame) and Path(planted["out"]).is_dir()


def test_import_features_cli_brings_prototypes_and_refuses_bad_ones(planted):
    from click.testing import CliRunner

    from crs.cli.cache import import_features as command

    root, cache = planted["root"], planted["cache"]
    args = [str(root / "features.npz"), "--dataset", "planted", "--encoder", "hosted_copy", "--cache", str(cache)]
    result = CliRunner().invoke(command, [*args, "--prototypes", str(root / "protos.npz")])
    assert result.exit_code == 0, result.output
    assert "prototypes 'planted'" in result.output
    store = FeatureStore(store_path(cache, "planted"))
    assert len(stored_digests(store, "hosted_copy")) == 1
    bad = root / "bad.npz"
    np.savez(bad, positive=np.ones((K, D), np.float32), scale=SCALE, link="softmax")  # not unit vectors
    result = CliRunner().invoke(command, [*args, "--prototypes", str(bad)])
    assert result.exit_code != 0 and "unit vectors" in result.output
    assert len(stored_digests(FeatureStore(store_path(cache, "planted")), "hosted_copy")) == 1  # cache as it was


def test_spread_over_prompt_sets_and_records_reproducible_across_thread_counts(planted, tmp_path):
    from threadpoolctl import threadpool_limits

    cache = planted["cache"]
    blurred = planted["basis"][:K] + 0.8 * np.roll(planted["basis"][:K], 1, axis=0)  # a worse set: each class tilted to another
    blurred /= np.linalg.norm(blurred, axis=1, keepdims=True)
    path = planted["root"] / "blurred.npz"
    np.savez(path, positive=blurred.astype(np.float32), scale=SCALE, link="softmax", prompt_set="zz-blurred")
    import_prototypes(cache, "planted", "hosted_vlm", path)
    store = FeatureStore(store_path(cache, "planted"))
    sets = [read_prototypes(store, "hosted_vlm", d) for d in stored_digests(store, "hosted_vlm")]
    assert len(sets) == 2
    settings = ProbeSettings(label_fractions=(1.0,), seeds=(0,), Cs=(1.0,), validation="full")
    unit = ProbeUnit("hosted_vlm", "planted")
    with threadpool_limits(limits=1):
        one = run_zero_shot_unit(unit, cache, settings, sets, tmp_path / "a")
    with threadpool_limits(limits=2):
        two = run_zero_shot_unit(unit, cache, settings, list(reversed(sets)), tmp_path / "b")
    pd.testing.assert_frame_equal(one.records, two.records, check_exact=False, rtol=0, atol=1e-12)
    (tmp_path / "a" / "zero_shot").mkdir(parents=True, exist_ok=True)
    one.records.to_parquet(tmp_path / "a" / "zero_shot" / "records.parquet")
    one.prompts.to_parquet(tmp_path / "a" / "zero_shot" / "prompts.parquet")
    score = score_zero_shot(tmp_path / "a", ScoreSettings(n_boot=20, seed=0))
    row = score.comparison.loc[("hosted_vlm", "planted")]
    shipped = one.records[(one.records["calibration"] == "shipped") & (one.records["condition"] == "clean")]
    per_set = shipped.groupby("prompt_set")["auroc"].mean()
    assert per_set["planted"] > per_set["zz-blurred"]  # the tilt costs AUROC, as planted
    assert row["prompt_set_spread"] == pytest.approx(per_set.max() - per_set.min(), abs=1e-12)


def test_batched_records_equal_the_reference_metrics_of_each_calibration(planted):
    """The unit scores every calibration of a condition in one batched call; each row must equal the
    per-probe reference (``condition_metrics``, patient-clustered AUROC SE as the probes')."""
    from crs.evaluate.units import condition_metrics
    from crs.evaluate.zero_shot import probabilities

    test = planted["splits"] == "test"
    groups = np.array([f"p{i // 2:05d}" for i in range(len(test))])[test]
    cached = planted["features"][test].astype(np.float16)  # the cache stores float16
    cosine = similarities(cached, planted["prototypes"][0])
    records = planted["result"].records
    clean = records[(records["condition"] == "clean") & (records["seed"] == 0)]
    for _, row in clean.iterrows():
        probs = probabilities(cosine, "multiclass", SCALE / row["temperature"], 0.0)
        want = condition_metrics(planted["y"][test], probs, "multiclass", groups)
        for name in ("auroc", "auroc_se", "ece", "ece_debiased", "ece_se", "brier", "nll"):
            assert row[name] == pytest.approx(want[name], rel=1e-9, abs=1e-12), (row["calibration"], name)
