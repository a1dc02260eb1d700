"""End to end on the tiny synthetic benchmark: extract once, reuse the cache, probe, score, report."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crs.benchmark import DEMO_SPEC, Benchmark
from crs.cache.store import FeatureStore, store_path
from crs.evaluate import artifacts
from crs.evaluate.records import read_provenance, write_parquet
from crs.spec import Spec, SpecError, load_spec, spec_from_dict, spec_to_dict


def test_first_extraction_runs_every_encoder_on_every_variant(tiny_run):
    spec, stats, _, _ = tiny_run
    # 3 data sets of 120 images + 60 shift images; test split images x (2 corruptions x 2 severities) more.
    n_test = sum(
        FeatureStore(store_path(spec.cache, e.name)).read_table().indices("test").size for e in spec.datasets
    )
    expected = 3 * 120 + 60 + n_test * 4
    assert stats.forward_images == {"pixel_stats": expected, "resnet18": expected}
    # Each image is decoded once for all encoders and variants.
    assert stats.images_decoded == 3 * 120 + 60


def test_second_extraction_runs_no_forward_pass(tiny_run):
    spec, _, _, _ = tiny_run
    again = Benchmark(spec).extract(progress=False)
    assert again.total_forward == 0
    assert again.images_decoded == 0


def test_records_cover_every_probe_and_condition(tiny_run):
    spec, _, records, _ = tiny_run
    probes = records.drop_duplicates(["encoder", "task", "label_fraction", "seed"])
    assert len(probes) == 2 * 3 * 2 * 2  # encoders x tasks x fractions x seeds
    per_probe = records.groupby(["encoder", "task", "label_fraction", "seed"]).size()
    # full fraction: clean + 4 corrupt variants, + 1 shift condition on the chest task; below it clean only
    # (robustness_fractions = "full", the default)
    assert set(per_probe.xs(("cxr", 1.0), level=("task", "label_fraction"))) == {6}
    assert set(per_probe.xs(("derm", 1.0), level=("task", "label_fraction"))) == {5}
    assert set(per_probe.xs(0.25, level="label_fraction")) == {1}
    clean = records[records["condition"] == "clean"]
    assert clean["auroc"].between(0, 1).all()
    assert clean["ece"].between(0, 1).all()
    # the learnable synthetic signal is found at 100 % labels
    full = clean[clean["label_fraction"] == 1.0]
    assert full.groupby("task")["auroc"].mean().min() > 0.6
    assert (records[records["condition"] == "shift"]["target"] == "cxr-b").all()


def test_seed_aggregate_matches_pandas(tiny_run):
    spec, _, records, _ = tiny_run
    aggregate = pd.read_parquet(spec.output / artifacts.AGGREGATE_FILE)
    row = aggregate[(aggregate["encoder"] == "resnet18") & (aggregate["task"] == "derm")
                    & (aggregate["condition"] == "clean") & (aggregate["label_fraction"] == 0.25)].iloc[0]
    seeds = records[(records["encoder"] == "resnet18") & (records["task"] == "derm")
                    & (records["condition"] == "clean") & (records["label_fraction"] == 0.25)]["auroc"]
    assert np.isclose(row["auroc_mean"], seeds.mean()) and np.isclose(row["auroc_std"], seeds.std())
    assert row["auroc_n"] == 2


def test_provenance_and_audit_are_written(tiny_run):
    spec, _, _, _ = tiny_run
    provenance = read_provenance(spec.output / artifacts.RECORDS_FILE)
    assert provenance["spec"]["name"] == "tiny"
    assert "torch" in provenance["versions"]
    import json

    audit = json.loads((spec.output / artifacts.AUDIT_FILE).read_text())
    drawn = audit["label_fraction_ids"]["derm"]["0"]
    assert set(drawn["0.25"]) <= set(drawn["1.0"])
    # by default (validation = "fraction") the rows that chose C are drawn nested too, from the validation split
    assert spec.probe.validation == "fraction"
    validation = audit["validation_fraction_ids"]["derm"]["0"]
    assert set(validation["0.25"]) <= set(validation["1.0"])
    assert len(validation["0.25"]) < len(validation["1.0"])
    assert not set(validation["1.0"]) & set(drawn["1.0"])


def test_score_has_four_axes_and_a_ranked_table(tiny_run):
    _, _, _, score = tiny_run
    assert set(score.axis_errors.columns) >= {"discrimination", "calibration", "label_efficiency", "robustness"}
    assert sorted(score.crs["rank"]) == [1, 2]
    # the reference scores u = 0.5 on every axis
    reference = score.crs.loc[score.reference]
    for axis in ("discrimination", "calibration", "label_efficiency", "robustness"):
        assert np.isclose(reference[f"u_{axis}"], 0.5)


def test_report_embeds_its_figures(tiny_run):
    from crs.report import write_report

    spec, _, records, score = tiny_run
    path = write_report(score, records, spec.output / "report-test")
    page = path.read_text()
    assert page.count("<img") >= 3
    assert "data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page
    assert (path.parent / "report.md").read_text().startswith("#")


def test_copied_cache_runs_stage_two_without_images_or_encoders(tiny_run, tmp_path, monkeypatch):
    """A cache folder moved to another machine (no images, no encoders) reproduces the records."""
    spec, _, records, _ = tiny_run
    moved_cache = tmp_path / "elsewhere" / "cache"
    shutil.copytree(spec.cache, moved_cache)
    data_root = spec.datasets[0].root
    hidden = tmp_path / "hidden-data"
    shutil.move(str(data_root), hidden)  # the images are gone
    import crs.encoders
    import crs.extract.stage

    def no_encoders(*args, **kwargs):
        raise AssertionError("stage 2 must not build an encoder")

    monkeypatch.setattr(crs.encoders, "create", no_encoders)
    monkeypatch.setattr(crs.extract.stage, "create", no_encoders)  # where stage 1 looks it up
    try:
        moved = Spec(**{**spec.__dict__, "cache": moved_cache, "output": tmp_path / "out"})
        again = Benchmark(moved).probe(progress=False).records
        pd.testing.assert_frame_equal(again, records)
        score = Benchmark(moved).score()
        assert len(score.crs) == 2
    finally:
        shutil.move(str(hidden), data_root)


def test_quickstart_spec_loads_and_names_four_encoders_three_tasks():
    spec = load_spec(DEMO_SPEC, base=Path.cwd())  # the embedded demo's folders: under the working folder
    assert Benchmark.demo(output="elsewhere").spec == dataclasses.replace(spec, output=Path("elsewhere"))
    assert Benchmark.demo().spec.cache == Path.cwd() / "cache"
    assert len(spec.encoders) >= 4 and len(spec.datasets) == 3
    assert spec.datasets[2].shift_target_names
    assert len(spec.extract.corruptions) >= 4 and spec.extract.severities == (1, 2, 3, 4, 5)


# --- a run folder scored without its TOML --------------------------------------------------------

def test_spec_round_trips_through_the_records_provenance(tiny_run):
    spec, _, _, _ = tiny_run
    recorded = read_provenance(spec.output / artifacts.RECORDS_FILE)["spec"]
    assert spec_from_dict(recorded) == spec
    assert spec_from_dict(spec_to_dict(spec)).extract.corruptions == ("gaussian_noise", "jpeg")


def test_spec_from_dict_refuses_a_field_it_does_not_know(tiny_run):
    spec, _, _, _ = tiny_run
    data = spec_to_dict(spec)
    data["probe"]["label_fraction"] = [0.5]
    with pytest.raises(SpecError, match=r"spec.probe: unknown field\(s\) \['label_fraction'\]"):
        spec_from_dict(data)


def test_copied_run_folder_scores_and_reports_without_toml_or_cache(tiny_run, tmp_path):
    """A run folder copied elsewhere is rebuilt from its own records: same spec, same scores, a report."""
    spec, _, records, score = tiny_run
    copy = tmp_path / "laptop" / "run"
    shutil.copytree(spec.output, copy)
    shutil.rmtree(copy / artifacts.SCORE_DIR, ignore_errors=True)
    bench = Benchmark.from_run_folder(copy, cache=tmp_path / "no-cache-here")
    assert bench.spec.output == copy and bench.spec.cache == tmp_path / "no-cache-here"
    assert bench.spec.encoder_names == spec.encoder_names and bench.spec.score == spec.score
    pd.testing.assert_frame_equal(bench.records(), records)
    again = bench.score()
    pd.testing.assert_frame_equal(again.crs, score.crs)
    assert again.bootstrap.leading_tier == score.bootstrap.leading_tier
    assert (copy / artifacts.SCORE_DIR / artifacts.SCORE_SUMMARY_FILE).exists()
    page = bench.report(again)  # the cache named is absent: the page says what it lacks instead of failing
    assert page == copy / "report.html" and "resnet18" in page.read_text()


def test_from_run_folder_names_what_is_missing(tiny_run, tmp_path):
    with pytest.raises(artifacts.RunFolderError, match="no run records at .*records.parquet"):
        Benchmark.from_run_folder(tmp_path / "empty")
    _, _, records, _ = tiny_run
    write_parquet(records, tmp_path / "old" / artifacts.RECORDS_FILE, {"versions": {}})
    with pytest.raises(SpecError, match="carry no spec; give the TOML"):
        Benchmark.from_run_folder(tmp_path / "old")
