"""``crs plan``: its counts are the counts a real extraction makes, and it sees what is cached."""

from __future__ import annotations

import json

import numpy as np
import zarr
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cli.main import cli
from crs.extract.cores import cgroup_quota_cores, thread_plan, usable_cores
from crs.extract.runner import resume_line

from tiny import write_tiny_spec


def _plan_json(spec_path) -> dict:
    result = CliRunner().invoke(cli, ["plan", str(spec_path), "--json"], obj={})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_plan_counts_equal_a_real_extraction_and_a_half_filled_cache(tmp_path):
    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats", "resnet18"), n_images=120, chunk_rows=16)
    before = _plan_json(spec_path)
    # Every (data set, encoder), the three data sets and the shift target, nothing cached yet.
    assert {(r["dataset"], r["encoder"]) for r in before["rows"]} == {
        (d, e) for d in ("derm", "fundus", "cxr", "cxr-b") for e in ("pixel_stats", "resnet18")}
    assert before["totals"]["cached_passes"] == 0

    # Extract one encoder of two: the plan must show it cached and the other not.
    stats = Benchmark(spec_path).extract(["pixel_stats"], progress=False)
    half = _plan_json(spec_path)
    for row in half["rows"]:
        expected = row["passes"] if row["encoder"] == "pixel_stats" else 0
        assert row["cached_passes"] == expected, row
        assert row["cached_group"] is not None or expected == 0
    planned_pixel = sum(r["passes"] for r in before["rows"] if r["encoder"] == "pixel_stats")
    assert stats.forward_images["pixel_stats"] == planned_pixel  # the plan's count is what ran

    # By hand for one data set: clean = every image, corrupted = test images x 2 corruptions x 2 severities.
    cxr = next(r for r in before["rows"] if r["dataset"] == "cxr" and r["encoder"] == "resnet18")
    store = zarr.open_group(str(tmp_path / "cache" / "cxr.zarr"), mode="r")
    splits = np.array([str(s) for s in np.asarray(store["splits"][:]).tolist()])
    assert cxr["images"] == splits.size and cxr["test_images"] == int((splits == "test").sum())
    assert cxr["corrupted_passes"] == cxr["test_images"] * 4 and cxr["clean_passes"] == cxr["images"]
    assert cxr["bytes_total"] == cxr["passes"] * 512 * 2  # resnet18: 512 float16 features per pass

    stats = Benchmark(spec_path).extract(progress=False)
    assert stats.forward_images["resnet18"] == sum(r["passes"] for r in before["rows"] if r["encoder"] == "resnet18")
    assert stats.passes_cached_at_start == planned_pixel
    assert _plan_json(spec_path)["totals"]["passes_to_go"] == 0


def test_plan_sees_chunks_a_kill_left_unfinished(tmp_path):
    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=120, chunk_rows=16)
    Benchmark(spec_path).extract(progress=False)
    store = zarr.open_group(str(tmp_path / "cache" / "derm.zarr"), mode="a")
    fingerprint = store["encoders/pixel_stats"].attrs["current"]
    group = store[f"encoders/pixel_stats/{fingerprint}"]
    clean_chunk = int(group["clean"].attrs["chunk_rows"])
    group["clean__done"][0] = 0  # as if a kill came before the first chunk's flag
    row = next(r for r in _plan_json(spec_path)["rows"] if r["dataset"] == "derm")
    assert row["cached_passes"] == row["passes"] - clean_chunk
    assert row["bytes_to_write"] == clean_chunk * 120 * 2  # pixel_stats: 120 features

    lines = []
    stats = Benchmark(spec_path).extract(progress=False, announce=lines.append)
    assert stats.forward_images["pixel_stats"] == clean_chunk
    assert f"{row['cached_passes']:,} of {row['passes']:,} forward passes already cached; {clean_chunk:,} to go" \
        in "\n".join(lines)


def test_resume_line_words():
    assert resume_line("chexpert", 191_229, 2_653_364, 876_544, 1) == (
        "chexpert: 191,229 images, 1 encoder(s): 876,544 of 2,653,364 forward passes already cached; 1,776,820 to go")
    assert "nothing cached" in resume_line("x", 1, 5, 0, 1)
    assert "all 5 forward passes already cached" in resume_line("x", 1, 5, 5, 1)


def test_plan_without_the_data_uses_published_sizes(tmp_path):
    result = CliRunner().invoke(cli, ["plan", "examples/paper.toml", "--json", "--cache", str(tmp_path)], obj={})
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    chexpert = [r for r in plan["rows"] if r["dataset"] == "chexpert"]
    assert len(chexpert) == 15 and all(r["counts_from"] == "published" for r in chexpert)
    # 191,229 images + 37,879 test images x 13 corruptions x 5 severities (issue 24's measured run),
    # with the paper spec's corruption subsample of 5,000 test images (decision 0032): 5.1x fewer.
    assert chexpert[0]["passes"] + chexpert[0]["passes_saved"] == 191_229 + 37_879 * 65 == 2_653_364
    assert chexpert[0]["passes"] == 191_229 + 5_000 * 65 == 516_229
    assert any("not found" in note for note in plan["notes"])


def test_usable_cores_reads_the_cgroup_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_quota_cores(tmp_path) == 1.5
    assert usable_cores(tmp_path) == 1  # rounded down, never above the affinity set
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota_cores(tmp_path) is None
    assert thread_plan(threads=3).intra_op_threads == 3
    assert thread_plan(threads=4, device="cuda").decode_workers == 4


def test_one_encoder_or_one_task_says_what_it_cannot_rank(tmp_path):
    one = Benchmark(write_tiny_spec(tmp_path / "one", encoders=("pixel_stats",)))
    limits = one.ranking_limits()
    assert len(limits) == 1 and limits[0].startswith("1 encoder (pixel_stats): nothing is ranked")
    two = Benchmark(write_tiny_spec(tmp_path / "two", encoders=("pixel_stats", "resnet18")))
    assert two.ranking_limits() == []
    import dataclasses

    single_task = dataclasses.replace(two.spec, datasets=two.spec.datasets[:1])
    limits = Benchmark(single_task).ranking_limits()
    assert len(limits) == 1 and limits[0].startswith("1 task (derm): encoders are ranked on this task only")


def test_omp_num_threads_fixes_the_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    plan = thread_plan(cores=2)
    assert plan.intra_op_threads == 1 and plan.source == "OMP_NUM_THREADS"
    assert thread_plan(threads=2, cores=2).intra_op_threads == 2  # the spec's setting wins
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert thread_plan(cores=2).source == "affinity and cgroup quota"


def test_threads_follow_the_cores_others_leave_free():
    from crs.extract.cores import ThreadGovernor, ThreadPlan, threads_for

    assert threads_for(2, 0.0) == 2 and threads_for(2, 1.0) == 1 and threads_for(2, 2.0) == 1
    assert threads_for(8, 2.9) == 5 and threads_for(8, 0.4) == 8
    governor = ThreadGovernor(ThreadPlan(2, 2, 1, "test"), adaptive=True)
    governor._last = (0.0, 10.0, 3.0)  # (wall s, busy CPU-s of the usable CPUs, this process's CPU-s)
    # 4 s of wall: the CPUs were busy 7 CPU-s, 3 of them ours -> others kept 1 core busy.
    assert governor.others_busy((4.0, 17.0, 6.0)) == 1.0
    assert governor.others_busy((4.0, 12.0, 6.0)) == 0.0  # never negative


def test_plan_states_the_passes_a_corruption_subsample_saves(tmp_path):
    from crs.data import load_entry
    from crs.data.subsample import group_subsample

    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=120)
    full = Benchmark(spec_path).plan()
    what_if = Benchmark(spec_path).plan(corruption_rows=10)
    bench = Benchmark(spec_path)
    cxr = load_entry(bench.spec.datasets[2])
    test = cxr.indices("test")
    n_sub = len(group_subsample(cxr.labels[test], cxr.groups[test], 10))
    assert 10 <= n_sub < len(test)
    row = next(r for r in what_if.rows if r.dataset == "cxr")
    full_row = next(r for r in full.rows if r.dataset == "cxr")
    assert row.corrupted_passes == n_sub * 4 and row.passes_saved == (len(test) - n_sub) * 4
    assert row.passes_saved == full_row.corrupted_passes - row.corrupted_passes
    assert what_if.to_json()["totals"]["passes_saved"] == full.passes - what_if.passes
    assert any("what-if" in note for note in what_if.notes)


def test_plan_totals_say_which_data_sets_they_leave_out_and_honour_image_lists():
    """Issue 39 item 6: `crs plan examples/paper_shift.toml` totalled 11 of 13 data sets without a word
    in the totals, and counted ChestX-ray14 restricted to test_list.txt as all 112,120 images."""
    from pathlib import Path

    spec_path = Path(__file__).resolve().parents[2] / "examples" / "paper_shift.toml"
    result = CliRunner().invoke(cli, ["plan", str(spec_path)], obj={})
    assert result.exit_code == 0, result.output
    summary = result.output.splitlines()[0]
    assert "NOT counted: derm7pt, padchest (no data root here and no published size)" in summary, summary
    rows = [line.split() for line in result.output.splitlines() if line.startswith("chestxray14 ")]
    assert rows and all(row[2] == "25,596" for row in rows), rows  # test_list.txt only, as image_lists says
    plan = json.loads(CliRunner().invoke(cli, ["plan", str(spec_path), "--json"], obj={}).output)
    assert plan["left_out"] == ["derm7pt", "padchest"]


def test_plan_table_stays_aligned_for_long_data_set_names(tmp_path):
    """Issue 39 item 15: names longer than the table's column pushed their rows out of line."""
    spec = write_tiny_spec(tmp_path)
    spec.write_text(spec.read_text().replace('name = "derm"', 'name = "dermoscopy-from-hospital-a"'))
    result = CliRunner().invoke(cli, ["plan", str(spec)], obj={})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("data set"))
    rows = []
    for line in lines[header:]:
        if not line.strip():
            break
        rows.append(line)
    assert any(len(line.split()[0]) > 12 for line in rows[1:])  # the spec has names longer than 12
    # every row's columns end where the header's do: the last column (gpu) right-aligned at one width
    assert len({len(line) for line in rows}) == 1, sorted({len(line) for line in rows})
    encoder_at = rows[0].index("encoder")
    assert all(line[encoder_at - 1] == " " and line[encoder_at] != " " for line in rows[1:])


def test_plan_does_not_count_float32_features_for_a_float64_run(tmp_path):
    # [extract] precision = "float64" is another fingerprint: its extraction runs every pass again, and the plan
    # said "all cached" (it matched groups without their compute dtype)
    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats",))
    Benchmark(spec_path).extract(progress=False)
    assert _plan_json(spec_path)["totals"]["passes_to_go"] == 0
    text = spec_path.read_text().replace("[extract]\n", '[extract]\nprecision = "float64"\n', 1)
    assert text != spec_path.read_text()
    spec_path.write_text(text)
    planned = _plan_json(spec_path)
    assert planned["totals"]["cached_passes"] == 0
    stats = Benchmark(spec_path).extract(progress=False)
    assert stats.forward_images["pixel_stats"] == planned["totals"]["passes_to_go"] > 0
    assert _plan_json(spec_path)["totals"]["passes_to_go"] == 0
