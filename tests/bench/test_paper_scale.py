"""`crs bench paper-scale` at a tiny scale: the paper's counts, whole groups, imports through the public path, a
learnable planted signal, and stage measurements that include every process of the tree."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from crs.bench.paper_scale import (
    TASKS,
    PaperScaleConfig,
    measure_command,
    prepare,
    task_size,
    task_table,
)
from crs.cache.store import FeatureStore, store_path
from crs.cli.main import cli

TINY = PaperScaleConfig(encoders=2, scale=0.01, dim=64, max_corruptions=1, severities=(1, 5), n_boot=20)


def test_full_size_has_the_paper_counts():
    config = PaperScaleConfig()
    sizes = {task.name: task_size(task, config) for task in TASKS}
    assert sizes["isic2019"].n_images == 25_331 and len(sizes["isic2019"].conditions) == 80
    assert sizes["aptos2019"].n_images == 3_662 and len(sizes["aptos2019"].conditions) == 45
    assert sizes["chexpert"].n_images == 191_027 and sizes["chexpert"].n_test == 38_117
    assert len(sizes["chexpert"].conditions) == 65 and sizes["chexpert"].shift_images == 5_000


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_tables_split_whole_groups_and_hold_every_class_in_every_split(task):
    size = task_size(task, PaperScaleConfig(scale=0.02))
    table = task_table(task, size, seed=0)
    assert len(table.ids) == size.n_images and len(set(table.ids.tolist())) == size.n_images
    assert (table.splits == "test").sum() == size.n_test and (table.splits == "val").sum() == size.n_val
    split_of_group: dict[str, set[str]] = {}
    for group, split in zip(table.groups.tolist(), table.splits.tolist(), strict=True):
        split_of_group.setdefault(group, set()).add(split)
    assert all(len(splits) == 1 for splits in split_of_group.values())
    counts = np.unique(table.groups, return_counts=True)[1]
    assert counts.max() <= task.max_group and (task.max_group == 1 or counts.max() > 1)
    for split in ("train", "val", "test"):
        labels = table.labels[table.splits == split]
        if task.kind == "multilabel":
            assert (labels.max(axis=0) == 1).all() and (labels.min(axis=0) == 0).all()
        else:
            assert set(labels.tolist()) == set(range(len(task.classes)))


def test_prepare_imports_one_group_per_encoder_with_a_learnable_signal(tmp_path):
    stats = prepare(TINY, tmp_path)
    assert stats["imports"] == 2 * (3 + 1 + 2 * 3)  # per encoder: 3 clean + shift target + 2 conditions x 3 tasks
    cache = tmp_path / "cache"
    for task in TASKS:
        store = FeatureStore(store_path(cache, task.name))
        table = store.read_table()
        for encoder in TINY.encoder_names():
            # Conditions imported one call each were appended: one group per encoder, nothing stale.
            assert len(store.fingerprints(encoder)) == 1
            assert len(store.feature_array_names(encoder)) == 1 + 2
        if task.kind != "multiclass":
            continue
        clean = store.read_features("enc00")
        train, test = table.splits == "train", table.splits == "test"
        probe = LogisticRegression(max_iter=2000).fit(clean[train], table.labels[train])
        clean_auroc = roc_auc_score(table.labels[test], probe.predict_proba(clean[test]), multi_class="ovr")
        corruption = task_size(task, TINY).conditions[-1]  # severity 5
        noisy = store.read_features("enc00", corruption)
        noisy_auroc = roc_auc_score(table.labels[test], probe.predict_proba(noisy), multi_class="ovr")
        assert clean_auroc > 0.75 and noisy_auroc < clean_auroc
    assert FeatureStore(store_path(cache, "mimic_cxr")).read_table().splits.tolist() == ["test"] * 100
    # Stage 2 evaluates exactly the spec's corrupted variants (decision 0050): the spec names every
    # imported one (it said corruptions = "none", and the bench measured no corrupted condition)
    from crs.evaluate.units import corrupted_arrays, probe_units
    from crs.spec import load_spec

    units = probe_units(load_spec(tmp_path / "spec.toml"))
    assert len(units) == 3 * 2
    for unit in units:
        store = FeatureStore(store_path(cache, unit.task))
        task = next(t for t in TASKS if t.name == unit.task)
        assert corrupted_arrays(unit, store, task.modality) == list(task_size(task, TINY).conditions)


def test_measured_memory_is_the_sum_over_the_process_tree():
    """A child holding 150 MB that starts a grandchild holding 150 MB: the tree peaks above 300 MB."""
    grandchild = "import time; block = bytearray(150 << 20); time.sleep(1.5)"
    child = (f"import subprocess, sys, time; block = bytearray(150 << 20); "
             f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); p.wait()")
    measured = measure_command([sys.executable, "-c", child])
    assert measured.returncode == 0
    assert measured.peak_tree_rss_bytes > 300 << 20
    assert measured.wall_s >= 1.5


def test_cli_runs_every_stage_and_deletes_its_work_folder(tmp_path):
    work = tmp_path / "work"
    result = CliRunner().invoke(cli, [
        "bench", "paper-scale", "--encoders", "2", "--scale", "0.01", "--dim", "16", "--max-corruptions", "1",
        "--severities", "1,5", "--n-boot", "20", "--in-process", "--json", "--workdir", str(work),
    ])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output[result.output.index("{"):])
    assert [stage["stage"] for stage in outcome["stages"]] == ["probe", "score", "report", "zero_shot", "zero_shot_score"]
    for stage in outcome["stages"]:
        assert stage["returncode"] == 0 and stage["wall_s"] > 0 and stage["peak_tree_rss_bytes"] > 0
    assert outcome["prepare"]["imports"] == 20 and outcome["sizes"]["chexpert"]["conditions"] == 2
    totals = outcome["total_15"]
    assert {"probe", "score", "report", "total"} <= set(totals) <= {"probe", "score", "report", "total", "probe_from_units",
                                                                 "total_from_units"}
    assert totals["total"] == pytest.approx(totals["probe"] + totals["score"] + totals["report"])
    # zero-shot of the VLM (enc01) reported beside the probes, outside the probes' 15-encoder totals
    zero_shot = outcome["zero_shot"]
    assert zero_shot["zero_shot_cpu_s"] > 0 and zero_shot["zero_shot_score_cpu_s"] > 0
    assert zero_shot["units_ratio_cpu_s"] == pytest.approx(zero_shot["zero_shot_cpu_s"] / outcome["stages"][0]["cpu_s"])
    assert zero_shot["unit_zero_shot_cpu_s"] > 0 and zero_shot["unit_probe_cpu_s"] > 0  # the units alone, per task too
    assert {f"unit_ratio_cpu_s_{task.name}" for task in TASKS} <= set(zero_shot)
    assert not work.exists()


def test_fifteen_encoder_totals_scale_the_measured_cost_per_encoder():
    """Derivable by hand: start-up 2 s; probe 22 s for 2 encoders -> 2 + 20 / 2 x 15 = 152 s. Per-unit costs:
    2 units of 4 s and 2 of 6 s took 20 s less start-up, so parallelism 1; 15 x (4 + 6) = 150 s + 2 s."""
    from crs.bench.paper_scale import StageCost, fifteen_encoders

    startup = StageCost("startup", 2.0, 1.0, 0, 0, 0)
    stages = [StageCost("probe", 22.0, 20.0, 0, 0, 0), StageCost("score", 4.0, 3.0, 0, 0, 0)]
    units = [{"task": "a", "units": 2, "mean_wall_s": 4.0}, {"task": "b", "units": 2, "mean_wall_s": 6.0}]
    totals = fifteen_encoders(stages, startup, 2, units)
    assert totals["probe"] == pytest.approx(152.0) and totals["score"] == pytest.approx(2 + 2 / 2 * 15)
    assert totals["total"] == pytest.approx(152.0 + 17.0)
    assert totals["probe_from_units"] == pytest.approx(152.0)
    assert totals["total_from_units"] == pytest.approx(152.0 + 17.0)
    # two workers: the units' 20 s took 10 s of the stage's 13 s beyond start-up, so 3 s are fixed;
    # 15 encoders: 2 + 3 + 15 x (4 + 6) / 2 = 80 s
    two = [dict(unit, workers=2) for unit in units]
    stages = [StageCost("probe", 15.0, 20.0, 0, 0, 0), StageCost("score", 4.0, 3.0, 0, 0, 0)]
    totals = fifteen_encoders(stages, startup, 2, two)
    assert totals["probe_from_units"] == pytest.approx(80.0)
    assert totals["total_from_units"] == pytest.approx(80.0 + 17.0)
    # a stage's own imports (1 s of score's 4) are fixed too: 2 + 1 + (4 - 3) / 2 x 15 = 10.5 s
    totals = fifteen_encoders([StageCost("score", 4.0, 3.0, 0, 0, 0, import_s=1.0)], startup, 2)
    assert totals["score"] == pytest.approx(10.5)


def test_zero_shot_share_counts_start_up_as_a_run_pays_it():
    """Derivable by hand (CPU s, 2 encoders, 1 VLM, start-up 2 s). As run: (4 + 3) x 7 / ((42 + 12) / 2 x 15)
    = 49 / 405. Net: zero-shot runs inside the probe and score processes, so its stages lose their start-up
    and keep their imports once: (1 + (4 - 2 - 1) x 7) + (0.5 + (3 - 2 - 0.5) x 7) = 8 + 4 = 12 s; probe and
    score keep start-up and imports once: (2 + 0 + 40 / 2 x 15) + (2 + 0 + 10 / 2 x 15) = 302 + 77 = 379 s."""
    from crs.bench.paper_scale import StageCost
    from crs.bench.paper_scale_zero_shot import zero_shot_summary

    stages = [StageCost("probe", 50.0, 42.0, 0, 0, 0), StageCost("score", 14.0, 12.0, 0, 0, 0),
              StageCost("zero_shot", 5.0, 4.0, 0, 0, 0, import_s=1.0),
              StageCost("zero_shot_score", 4.0, 3.0, 0, 0, 0, import_s=0.5)]
    summary = zero_shot_summary(stages, 2, None, StageCost("startup", 3.0, 2.0, 0, 0, 0))
    assert summary["ratio_paper_cpu_s"] == pytest.approx(49 / 405)
    assert summary["zero_shot_paper_net_cpu_s"] == pytest.approx(12.0)
    assert summary["probe_score_paper_cpu_s"] == pytest.approx(379.0)
    assert summary["ratio_paper_net_cpu_s"] == pytest.approx(12 / 379)
    assert "ratio_paper_net_cpu_s" not in zero_shot_summary(stages, 2, None)  # no start-up measured: as run only
    # fused (decisions 0112, 0117): both zero-shot stages were measured inside the probe and score
    # processes, with no start-up or imports of their own, so all of them scales: (4 + 3) x 7 = 49 s
    fused = zero_shot_summary(stages, 2, None, StageCost("startup", 3.0, 2.0, 0, 0, 0), fused=True)
    assert fused["zero_shot_paper_net_cpu_s"] == pytest.approx(49.0)
    assert fused["ratio_paper_net_cpu_s"] == pytest.approx(49 / 379)
    # the score measured at 15 encoders (60 CPU s) replaces the scaled 77 s: 302 + 60 = 362 s
    measured = zero_shot_summary(stages, 2, None, StageCost("startup", 3.0, 2.0, 0, 0, 0), fused=True,
                                 score_15=StageCost("score", 40.0, 60.0, 0, 0, 0))
    assert measured["probe_score_paper_cpu_s"] == pytest.approx(362.0)
    assert measured["ratio_paper_net_cpu_s"] == pytest.approx(49 / 362)


def test_fused_zero_shot_is_split_out_of_the_probe_and_score_stages(tmp_path):
    """The probe stage ran the VLM's zero-shot inside its units: 1.5 + 2.5 s of zero-shot phases and 0.5 s
    of prototypes come out as the zero_shot stage (4.5 s), the probe stage keeps 42 - 4.5 = 37.5 s CPU and
    50 - 4 - 0.5 = 45.5 s wall (one worker); per unit the probes' figures are net of it too. The score
    stage ran zero-shot's score after the probes' (3 s CPU, 2.5 s wall): it keeps 9 s CPU, 11.5 s wall."""
    from crs.bench.paper_scale import StageCost, per_unit
    from crs.bench.paper_scale_zero_shot import PROTOTYPES_COST, SCORE_COST, fused_stages, unit_ratio

    (tmp_path / "probe_costs.csv").write_text(
        "encoder,task,wall_s,cpu_s,worker_pid,zero_shot_cpu_s\nenc00,isic2019,10,9,7,0\nenc01,isic2019,14,12,7,1.5\n"
        "enc01,chexpert,20,18,7,2.5\n")
    (tmp_path / "zero_shot").mkdir()
    (tmp_path / PROTOTYPES_COST).write_text('{"cpu_s": 0.5}')
    (tmp_path / SCORE_COST).write_text('{"cpu_s": 3.0, "wall_s": 2.5}')
    stages = [StageCost("probe", 50.0, 42.0, 9, 9, 0), StageCost("score", 14.0, 12.0, 0, 0, 0, import_s=0.5)]
    split = fused_stages(stages, tmp_path)
    assert [s.stage for s in split] == ["probe", "score", "zero_shot", "zero_shot_score"]
    assert split[0].cpu_s == pytest.approx(37.5) and split[0].wall_s == pytest.approx(45.5)
    assert split[1].cpu_s == pytest.approx(9.0) and split[1].wall_s == pytest.approx(11.5)
    assert split[1].import_s == 0.5  # the probe score keeps the imports it paid
    assert split[2].cpu_s == pytest.approx(4.5) and split[2].import_s == 0.0
    assert split[3].cpu_s == pytest.approx(3.0) and split[3].wall_s == pytest.approx(2.5) and split[3].import_s == 0.0
    rows = {row["task"]: row for row in per_unit(tmp_path)}
    assert rows["isic2019"]["mean_cpu_s"] == pytest.approx((9 + 10.5) / 2)
    ratio = unit_ratio(tmp_path)
    assert ratio["unit_zero_shot_cpu_s"] == pytest.approx(4.0) and ratio["unit_probe_cpu_s"] == pytest.approx(26.0)
    assert ratio["unit_ratio_cpu_s_chexpert"] == pytest.approx(2.5 / 15.5)


def test_per_unit_figures_come_from_probe_costs_csv(tmp_path):
    from crs.bench.paper_scale import per_unit

    assert per_unit(tmp_path) == []  # crs probe without per-unit costs: nothing to read
    (tmp_path / "probe_costs.csv").write_text(
        "encoder,task,wall_s,cpu_s,peak_rss_bytes,worker_pid\nenc00,isic2019,10,9,100,7\nenc01,isic2019,14,12,300,8\n"
        "enc00,chexpert,100,90,2000,7\n")
    rows = {row["task"]: row for row in per_unit(tmp_path)}
    assert rows["isic2019"] == {"task": "isic2019", "units": 2, "workers": 2, "mean_wall_s": 12.0, "mean_cpu_s": 10.5,
                                "max_peak_rss_bytes": 300}
    assert rows["chexpert"]["units"] == 1 and rows["chexpert"]["max_peak_rss_bytes"] == 2000


def test_subgroups_enter_the_paper_scale_tables_only_when_asked(tmp_path):
    import dataclasses

    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    prepare(dataclasses.replace(TINY, subgroups=True), tmp_path / "on")
    chexpert = FeatureStore(store_path(tmp_path / "on" / "cache", "chexpert")).read_table()
    assert sorted(chexpert.subgroups) == ["age", "ap_pa", "sex"]
    assert set(chexpert.subgroups["ap_pa"]) == {"AP", "PA"} and set(chexpert.subgroups["sex"]) == {"female", "male"}
    # sex is a patient's: one value per group
    frame = pd.DataFrame({"group": chexpert.groups, "sex": chexpert.subgroups["sex"]})
    assert (frame.groupby("group")["sex"].nunique() == 1).all()
    isic = FeatureStore(store_path(tmp_path / "on" / "cache", "isic2019")).read_table()
    assert sorted(isic.subgroups) == ["age", "sex"]
    prepare(TINY, tmp_path / "off")
    assert FeatureStore(store_path(tmp_path / "off" / "cache", "chexpert")).read_table().subgroups == {}


def test_a_corruption_subsample_imports_the_whole_splits_rows(tmp_path):
    # The subsample bench compares runs that differ only in which rows are evaluated: a subsample's
    # corrupted features must be the whole split's at those rows, and only those rows are imported.
    from dataclasses import replace

    from crs.bench.corruption_subsample import forward_passes
    from crs.bench.paper_scale import corruption_subsample

    for name in ("whole", "sub"):
        (tmp_path / name).mkdir()
    prepare(TINY, tmp_path / "whole")
    small = replace(TINY, corruption_rows=20)
    prepare(small, tmp_path / "sub")
    corruption = task_size(TASKS[2], TINY).conditions[0]
    whole = FeatureStore(store_path(tmp_path / "whole" / "cache", "chexpert")).read_features("enc01", corruption)
    sub = FeatureStore(store_path(tmp_path / "sub" / "cache", "chexpert")).read_features("enc01", corruption)
    positions = corruption_subsample(tmp_path / "sub", "chexpert", 20)
    assert 20 <= len(positions) < len(whole) and np.array_equal(sub, whole[positions])
    counts = {task.name: len(corruption_subsample(tmp_path / "sub", task.name, 20)) for task in TASKS}
    passes, full = forward_passes(small, counts), forward_passes(TINY, {t.name: task_size(t, TINY).n_test for t in TASKS})
    assert passes["clean"] == full["clean"] and passes["corrupted"] < full["corrupted"]
    assert passes["corrupted"] == sum(counts[t.name] * len(task_size(t, TINY).conditions) for t in TASKS)


def test_zero_shot_counts_what_its_columns_added_to_the_probes_kernel_calls(tmp_path):
    """Decision 0116: zero-shot's columns ride in the predict phase. Against the same task's unit without
    zero-shot, the VLM's predict took 1.5 s more on CheXpert (counted) and 0.2 s less on ISIC (not
    counted below 0): 2 + 1.5 and 1 + 0; APTOS has no twin, so only its own phase (0.5) counts."""
    import pandas as pd

    from crs.bench.paper_scale_zero_shot import unit_ratio, zero_shot_unit_cpu_s

    costs = pd.DataFrame({
        "encoder": ["enc00", "enc01", "enc00", "enc01", "enc01"],
        "task": ["chexpert", "chexpert", "isic2019", "isic2019", "aptos2019"],
        "cpu_s": [30.0, 34.0, 10.0, 11.0, 2.0], "worker_pid": [1, 1, 1, 1, 1],
        "predict_cpu_s": [3.0, 4.5, 1.2, 1.0, 0.3], "zero_shot_cpu_s": [0.0, 2.0, 0.0, 1.0, 0.5],
    })
    assert zero_shot_unit_cpu_s(costs).tolist() == pytest.approx([0.0, 3.5, 0.0, 1.0, 0.5])
    assert zero_shot_unit_cpu_s(costs.drop(columns="predict_cpu_s")).tolist() == pytest.approx([0, 2, 0, 1, 0.5])
    costs.to_csv(tmp_path / "probe_costs.csv", index=False)
    ratio = unit_ratio(tmp_path)  # the probes keep the rest of each VLM unit: 34 - 3.5, 11 - 1, 2 - 0.5
    assert ratio["unit_zero_shot_cpu_s"] == pytest.approx(5.0) and ratio["unit_probe_cpu_s"] == pytest.approx(42.0)


def test_zero_shot_bound_compares_a_vlm_with_its_probes_evaluation_and_score(tmp_path):
    """Decision 0117, by hand: the image-only encoder's units evaluate in (1 + 0.5 + 0.5) + (3 + 1 + 1) = 7 s;
    the 15-encoder score took 120 s, 8 s per encoder; zero-shot took 4 + 6 = 10 s for one VLM: 10 / 15."""
    import pandas as pd

    from crs.bench.paper_scale import StageCost
    from crs.bench.paper_scale_zero_shot import zero_shot_summary

    pd.DataFrame({
        "encoder": ["enc00", "enc00", "enc01", "enc01"], "task": ["isic2019", "chexpert"] * 2,
        "cpu_s": [10.0, 30.0, 11.0, 33.0], "worker_pid": [1, 1, 1, 1],
        "predict_cpu_s": [1.0, 3.0, 1.0, 3.0], "metrics_cpu_s": [0.5, 1.0, 0.5, 1.0],
        "save_cpu_s": [0.5, 1.0, 0.5, 1.0], "zero_shot_cpu_s": [0.0, 0.0, 1.0, 3.0],
    }).to_csv(tmp_path / "probe_costs.csv", index=False)
    stages = [StageCost("probe", 50.0, 42.0, 0, 0, 0), StageCost("score", 14.0, 12.0, 0, 0, 0),
              StageCost("zero_shot", 4.0, 4.0, 0, 0, 0), StageCost("zero_shot_score", 6.0, 6.0, 0, 0, 0)]
    summary = zero_shot_summary(stages, 2, tmp_path, StageCost("startup", 3.0, 2.0, 0, 0, 0), fused=True,
                                score_15=StageCost("score", 70.0, 120.0, 0, 0, 0))
    assert summary["probe_evaluation_cpu_s"] == pytest.approx(7.0)
    assert summary["probe_score_per_encoder_cpu_s"] == pytest.approx(8.0)
    assert summary["bound_ratio_cpu_s"] == pytest.approx(10 / 15)
    assert "bound_ratio_cpu_s" not in zero_shot_summary(stages, 2, tmp_path, fused=True)  # no 15-encoder score

