"""Subgroup scores (crs.scoring.subgroups): a planted failure is found, named and separated from noise.

The benchmark: the synthetic chest task (1,500 films, about 310 test films, 150 per sex) with three
encoders: ``pixel_stats``, a randomly initialised ``resnet18``, and ``planted``, a copy of
pixel_stats whose features of every female patient are shuffled among the female patients
(crs.cache.planted): no signal for women, the same features as pixel_stats for men.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from crs import Benchmark
from crs.cache.planted import import_planted_encoder
from crs.evaluate import artifacts
from crs.scoring import subgroups

SPEC = """
name = "planted"
cache = "{folder}/cache"
output = "{folder}/out"
encoders = ["pixel_stats", "resnet18", "planted"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
batch_size = 64
corruptions = ["gaussian_noise"]
severities = [2]

[probe]
label_fractions = [0.5, 1.0]
seeds = [0]
Cs = [0.1, 1.0]
jobs = 1

[score]
n_boot = 200

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "{folder}/data"
# data seed 1: a fixed draw. At 95 % an honest encoder's gap interval misses 0 in about one draw
# of 20 by chance; with data seed 0 pixel_stats' sex gap happened to be 0.049 (0.013 to 0.081).
options = {{ modality = "chest_xray", n_images = 1500, image_size = 32, seed = 1 }}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    (folder / "spec.toml").write_text(SPEC.format(folder=folder))
    bench = Benchmark(folder / "spec.toml")
    bench.extract(["pixel_stats", "resnet18"], progress=False)
    import_planted_encoder(folder / "cache", ["cxr"], "pixel_stats", "planted", "sex", "female")
    bench.probe(progress=False)
    return bench, bench.score()


def _gaps(result, attribute="sex"):
    gaps = result.subgroup_gaps
    return gaps[(gaps["attribute"] == attribute) & (gaps["condition"] == "clean")].set_index("encoder")


@pytest.mark.slow
def test_the_planted_failure_is_found_and_named(planted):
    _, result = planted
    sex = _gaps(result)
    # the planted encoder has the lowest worst-group AUROC, and its worst group is the planted one
    assert sex["worst_auroc"].idxmin() == "planted"
    assert sex.loc["planted", "worst_group"] == "female"
    assert sex.loc["planted", "worst_auroc"] < 0.6  # no signal: about 0.5
    # its gap's interval excludes 0; the honest encoders' include 0
    assert sex.loc["planted", "auroc_gap_low"] > 0
    for honest in ("pixel_stats", "resnet18"):
        assert sex.loc[honest, "auroc_gap_low"] <= 0 <= sex.loc[honest, "auroc_gap_high"], sex.loc[honest]
    # the terminal text names it, and only it
    text = result.format()
    assert "planted on cxr (clean), by sex: worst female" in text
    assert "pixel_stats on cxr (clean), by sex" not in text and "resnet18 on cxr (clean), by sex" not in text
    # the same numbers in the JSON summary
    summary = result.summary()["subgroups"]
    found = [row for row in summary["gaps"] if row["encoder"] == "planted" and row["attribute"] == "sex"]
    assert found[0]["worst_group"] == "female" and found[0]["auroc_gap_low"] == sex.loc["planted", "auroc_gap_low"]


@pytest.mark.slow
def test_group_aurocs_match_sklearn_on_the_group_rows(planted):
    """Row 0 of the weighted replicates (every case once) is the plain macro AUROC on the group's rows."""
    bench, result = planted
    arrays = bench.folder.read_predictions("planted", "cxr")
    labels = arrays[artifacts.labels_key(artifacts.CLEAN)]
    probs = arrays[artifacts.probs_key(artifacts.CLEAN)][0]
    sex = arrays[artifacts.subgroup_key("sex")]
    table = result.subgroups.set_index(["encoder", "condition", "attribute", "group"])
    for group in ("female", "male"):
        rows = sex == group
        per_label = [roc_auc_score(labels[rows, k], probs[rows, k]) for k in range(labels.shape[1])]
        assert table.loc[("planted", "clean", "sex", group), "auroc"] == pytest.approx(np.mean(per_label), abs=1e-6)
        assert table.loc[("planted", "clean", "sex", group), "n_images"] == rows.sum()
        positive_share = np.nanmean(labels[rows], axis=0).mean()
        assert table.loc[("planted", "clean", "sex", group), "positive_rate"] == pytest.approx(positive_share)


@pytest.mark.slow
def test_small_groups_are_listed_never_scored(planted):
    _, result = planted
    groups = result.subgroups
    small = groups[(groups["n_images"] < subgroups.MIN_IMAGES) | (groups["min_positives"] < subgroups.MIN_POSITIVES)]
    assert len(small) > 0  # the age bands at the ends are small at this size
    assert not small["scored"].any() and small["auroc"].isna().all() and small["calibration"].isna().all()
    age = _gaps(result, "age")
    for _, row in small[small["attribute"] == "age"].iterrows():
        assert row["group"] in age.loc[row["encoder"], "too_small"].split(", ")


@pytest.mark.slow
def test_the_subgroup_tables_survive_the_stored_score(planted):
    from crs.scoring.result import read_score

    bench, result = planted
    stored = read_score(bench.folder)
    assert stored.subgroup_gaps is not None
    assert stored.subgroup_gaps["worst_group"].tolist() == result.subgroup_gaps["worst_group"].tolist()
    np.testing.assert_allclose(stored.subgroups["auroc"], result.subgroups["auroc"], equal_nan=True)


@pytest.mark.slow
def test_the_report_names_the_group(planted):
    bench, result = planted
    page = bench.report(result)
    markdown = (page.parent / "report.md").read_text()
    section = markdown.split("## Who does it fail?")[1].split("\n## ")[0]
    planted_line = next(line for line in section.splitlines() if line.startswith("- planted on cxr (clean), by sex"))
    assert "worst group female" in planted_line and "(interval excludes 0)" in planted_line
    sex = _gaps(result)
    assert f"{sex.loc['planted', 'worst_auroc']:.3f} [{sex.loc['planted', 'worst_auroc_low']:.3f}," in planted_line
    honest = next(line for line in section.splitlines() if line.startswith("- pixel_stats on cxr (clean), by sex"))
    assert "excludes 0" not in honest
    assert "too small to judge" in section  # the end age bands
    assert (page.parent / "figures" / "subgroups_cxr_clean_sex.png").exists()
    assert "- subgroup: cxr, sex: worst female" in markdown  # the planted encoder's card
    assert "Who does it fail?" in page.read_text()


@pytest.mark.slow
def test_the_equity_axis_scores_the_worst_group_and_leaves_the_four_axes_alone(planted):
    from crs.scoring.result import score_records

    bench, result = planted
    records = bench.records()
    on = score_records(records, result.settings.replace(equity=True), run_folder=bench.folder)
    assert "u_equity" in on.crs.columns and "u_equity" not in result.crs.columns
    # the equity error is 1 - the worst clean group's AUROC, mean over the scored attributes (sex, age here)
    gaps = result.subgroup_gaps[result.subgroup_gaps["condition"] == "clean"]
    expected = 1 - gaps[gaps["n_groups"] > 0].groupby("encoder")["worst_auroc"].mean()
    np.testing.assert_allclose(on.point.errors["equity"].reindex(expected.index), expected, atol=1e-12)
    # the four axes and their u are untouched; the planted encoder's equity is its worst axis
    for axis in ("discrimination", "calibration", "label_efficiency", "robustness"):
        np.testing.assert_array_equal(on.point.errors[axis], result.point.errors[axis])
    # the planted copy equals pixel_stats for men and is blind for women: its equity is the worse
    assert on.point.errors.loc["planted", "equity"] > on.point.errors.loc["pixel_stats", "equity"] + 0.2
    # the bootstrap replicates carry the fifth axis: the CRS from predictions matches the point CRS
    np.testing.assert_allclose(on.bootstrap.table["crs_from_predictions"], on.crs["crs"].reindex(on.bootstrap.table.index),
                               atol=0.005)


@pytest.mark.slow
def test_shift_targets_are_scored_per_subgroup_too(tmp_path):
    """The tiny spec's chest task has a shifted site: its rows carry their own categories and draws."""
    from crs.scoring.result import score_records

    from tiny import write_tiny_spec

    bench = Benchmark(write_tiny_spec(tmp_path, encoders=("pixel_stats",)))
    bench.extract(progress=False)
    bench.probe(progress=False)
    arrays = bench.folder.read_predictions("pixel_stats", "cxr")
    assert artifacts.subgroup_attributes(arrays, "cxr-b") == ["age", "sex"]
    assert len(arrays[artifacts.subgroup_key("sex", "cxr-b")]) == len(arrays["shift__cxr-b_labels"]) == 60
    result = score_records(bench.records(), "pixel_stats", run_folder=bench.folder, case_level=True, n_boot=30,
                           subgroup_min_images=10, subgroup_min_positives=1)
    shift = result.subgroups[result.subgroups["condition"] == "shift:cxr-b"]
    sex = arrays[artifacts.subgroup_key("sex", "cxr-b")]
    counts = shift[shift["attribute"] == "sex"].set_index("group")["n_images"]
    assert counts.to_dict() == {g: int((sex == g).sum()) for g in ("female", "male")}
    assert set(result.subgroup_gaps["condition"]) == {"clean", "shift:cxr-b"}
    assert set(result.subgroup_gaps["task"]) == {"cxr", "derm", "fundus"}


def test_a_group_on_its_own_rows_equals_the_group_as_a_zero_one_mask():
    """plan_groups measures a group on its own rows; zero weights elsewhere give the same replicates."""
    from crs.axes.weighted import prepare_weights, weighted_auroc, weighted_debiased_ece

    rng = np.random.default_rng(0)
    n = 300
    labels = (rng.random((n, 3)) < 0.3).astype(np.float64)
    probs = np.clip(labels * 0.3 + rng.random((n, 3)) * 0.7, 0, 1)
    counts = rng.poisson(1.0, size=(20, n)).astype(np.float64)
    members = np.flatnonzero(rng.random(n) < 0.4)
    mask = np.zeros(n)
    mask[members] = 1.0
    masked = prepare_weights(counts * mask)
    own = prepare_weights(counts[:, members])
    np.testing.assert_allclose(weighted_debiased_ece(labels, probs, "multilabel", masked),
                               weighted_debiased_ece(labels[members], probs[members], "multilabel", own), atol=1e-12)
    np.testing.assert_allclose(weighted_auroc(probs[:, :1].astype(np.float32), labels[:, 0], masked),
                               weighted_auroc(probs[members, :1].astype(np.float32), labels[members, 0], own), atol=1e-12)


@pytest.mark.slow
def test_with_equity_the_ranking_without_it_is_shown_beside(planted, tmp_path):
    from crs.report import write_report
    from crs.scoring.result import score_records

    bench, result = planted
    on = score_records(bench.records(), result.settings.replace(equity=True), run_folder=bench.folder)
    both = on.equity_stability
    np.testing.assert_allclose(both["crs_without_equity"], result.crs["crs"].reindex(both.index), atol=1e-12)
    np.testing.assert_allclose(both["crs_with_equity"], on.crs["crs"].reindex(both.index), atol=1e-12)
    assert on.summary()["equity_stability"][0]["encoder"] in both.index
    write_report(on, bench.records(), tmp_path, spec=bench.spec)
    assert "With and without equity" in (tmp_path / "report.md").read_text()
    assert result.equity_stability is None
    from crs.evaluate.artifacts import RunFolder
    from crs.scoring.result import read_score

    copy = RunFolder(tmp_path / "stored")
    copy.write_score(on.tables(), on.summary(), on.format())
    stored = read_score(copy)
    assert stored.point.axes[-1] == "equity"
    pd.testing.assert_frame_equal(stored.equity_stability, both, check_names=False)
