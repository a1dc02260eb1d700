"""`crs bench paper-scale` at 15 encoders: the score and report measured on a run folder replicated from the
measured one (no new fits, predictions linked, nothing written to the cache), and the totals formed from them
(decision 0114)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from crs.bench.paper_scale import TASKS, PaperScaleConfig, StageCost, fifteen_encoders, run
from crs.bench.paper_scale_replicas import FOLDER, replicated_spec_text
from crs.cache.store import FeatureStore, store_path
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.records import read_provenance

# the smallest run the bench makes: one corruption at two severities, two fractions, two seeds, one C, one worker
TINY = PaperScaleConfig(encoders=2, scale=0.01, dim=16, max_corruptions=1, severities=(1, 5), n_boot=20,
                        label_fractions=(0.1, 1.0), seeds=(0, 1), Cs=(0.1,), jobs=1, in_process=True, zero_shot=False,
                        keep=True, measure_fifteen=True, keep_fifteen=True)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    work = tmp_path_factory.mktemp("paper-scale")
    config = PaperScaleConfig(**{**TINY.__dict__, "workdir": str(work)})
    return work, run(config, json_out=True, echo=lambda *_: None)


def test_fifteen_encoder_totals_use_the_measured_score_and_report():
    """Derivable by hand: start-up 2 s; 2 encoders: probe 22 s, score 4 s, report 6 s, so scaled to 15 the
    probe is 2 + 20 / 2 x 15 = 152 s, the score 2 + 2 / 2 x 15 = 17 s, the report 2 + 4 / 2 x 15 = 32 s.
    Measured at 15: score 9 s, report 7 s, so the total is 152 + 9 + 7 = 168 s (scaled: 201 s)."""
    startup = StageCost("startup", 2.0, 1.0, 0, 0, 0)
    stages = [StageCost("probe", 22.0, 20.0, 0, 0, 0), StageCost("score", 4.0, 3.0, 0, 0, 0),
              StageCost("report", 6.0, 5.0, 0, 0, 0)]
    units = [{"task": "a", "units": 2, "mean_wall_s": 4.0}, {"task": "b", "units": 2, "mean_wall_s": 6.0}]
    at_fifteen = [StageCost("score", 9.0, 8.0, 0, 0, 0), StageCost("report", 7.0, 6.0, 0, 0, 0)]
    totals = fifteen_encoders(stages, startup, 2, units, at_fifteen)
    assert totals["score"] == pytest.approx(9.0) and totals["report"] == pytest.approx(7.0)
    assert totals["score_scaled"] == pytest.approx(17.0) and totals["report_scaled"] == pytest.approx(32.0)
    assert totals["total"] == pytest.approx(168.0) and totals["total_scaled"] == pytest.approx(201.0)
    assert totals["probe_from_units"] == pytest.approx(152.0)
    assert totals["total_from_units"] == pytest.approx(168.0) and totals["total_from_units_scaled"] == pytest.approx(201.0)
    # a stage that failed at 15 is not used: the scaled figure stays, with no "_scaled" twin
    failed = fifteen_encoders(stages, startup, 2, units, [StageCost("score", 9.0, 8.0, 0, 0, 1, "boom"), at_fifteen[1]])
    assert failed["score"] == pytest.approx(17.0) and "score_scaled" not in failed
    assert failed["total"] == pytest.approx(152.0 + 17.0 + 7.0)
    assert fifteen_encoders(stages, startup, 2, units) == {
        key: value for key, value in totals.items() if not key.endswith("_scaled")} | {
        "score": 17.0, "report": 32.0, "total": 201.0, "total_from_units": 201.0}


def test_measured_by_default_with_reuse_or_at_full_size_only():
    assert PaperScaleConfig().measures_fifteen() and PaperScaleConfig(scale=0.05, reuse=True).measures_fifteen()
    assert not PaperScaleConfig(scale=0.05).measures_fifteen()
    assert not PaperScaleConfig(measure_fifteen=False).measures_fifteen()
    assert PaperScaleConfig(scale=0.01, measure_fifteen=True).measures_fifteen()


def test_the_bench_measures_score_and_report_on_fifteen_replicated_encoders(measured):
    work, result = measured
    assert [s.stage for s in result.stages_15] == ["score", "report"]
    assert all(s.returncode == 0 and s.wall_s > 0 for s in result.stages_15)
    score_15, report_15 = result.stages_15
    totals = result.total_15
    assert totals["score"] == score_15.wall_s and totals["report"] == report_15.wall_s
    assert {"score_scaled", "report_scaled", "total_scaled"} <= set(totals)
    assert totals["total"] == pytest.approx(totals["probe"] + score_15.wall_s + report_15.wall_s)
    if "probe_from_units" in totals:
        assert totals["total_from_units"] == pytest.approx(totals["probe_from_units"] + score_15.wall_s + report_15.wall_s)


def test_the_replicated_folder_holds_fifteen_copies_of_the_measured_records(measured):
    work, _ = measured
    names = [f"enc{k:02d}" for k in range(15)]
    source, copy = RunFolder(work / "out"), RunFolder(work / FOLDER / "out")
    original, replicated = source.read_records(), copy.read_records()
    assert sorted(replicated["encoder"].unique()) == names
    columns = [c for c in original.columns if c != "encoder"]
    for k, name in enumerate(names):
        mine = replicated[replicated["encoder"] == name][columns].reset_index(drop=True)
        theirs = original[original["encoder"] == f"enc{k % 2:02d}"][columns].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, theirs)
    # the score ranked all fifteen, and a copy ties its original exactly
    crs = pd.read_parquet(copy.score_dir / "crs.parquet")
    crs = crs.set_index("encoder") if "encoder" in crs.columns else crs
    assert sorted(map(str, crs.index)) == names
    assert crs.loc["enc02", "crs"] == crs.loc["enc00", "crs"] and crs.loc["enc13", "crs"] == crs.loc["enc01", "crs"]
    assert (work / FOLDER / "out" / "report.html").is_file()
    # predictions are links to the measured files, not copies
    for task in TASKS:
        linked, measured_file = copy.predictions_path("enc14", task.name), source.predictions_path("enc00", task.name)
        assert os.path.samefile(linked, measured_file)
    # provenance names the fifteen; the cache still holds only the two measured encoders
    provenance = read_provenance(copy.records_path)
    assert [entry["name"] for entry in provenance["spec"]["encoders"]] == names
    assert {key.split("|")[0] for key in provenance["cache_fingerprints"]} == set(names)
    store = FeatureStore(store_path(work / "cache", "isic2019"))
    assert sorted(store.encoder_names()) == ["enc00", "enc01"]


def test_the_replicated_folder_is_deleted_unless_kept(measured, tmp_path, monkeypatch):
    import crs.bench.paper_scale as bench

    work, _ = measured
    seen = []

    def stage(name, spec, jobs):  # stands in for the measured stage: the folder is there while it runs
        seen.append((name, spec.parent, (spec.parent / "out" / "records.parquet").is_file()))
        return StageCost(name, 1.0, 1.0, 0, 0, 0)

    monkeypatch.setattr(bench, "measure_in_process", stage)
    config = PaperScaleConfig(**{**TINY.__dict__, "workdir": str(work), "keep_fifteen": False})
    costs = bench.measure_fifteen(config, work / "spec.toml", folder=tmp_path / "fifteen")
    assert [c.stage for c in costs] == ["score", "report"]
    assert seen == [("score", tmp_path / "fifteen", True), ("report", tmp_path / "fifteen", True)]
    assert not (tmp_path / "fifteen").exists() and (work / "out" / "records.parquet").is_file()


def test_a_spec_without_a_top_level_encoder_list_is_refused(tmp_path):
    with pytest.raises(ValueError, match="top-level list"):
        replicated_spec_text('name = "x"\noutput = "o"\n\n[[encoders]]\nname = "a"\n', ["enc00"], tmp_path)
