"""Shards: cut by forward passes from the plan, read from a scheduler's environment, and done when done."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cli.main import cli
from crs.extract.sbatch import sbatch_script, shard_plan, slurm_time
from crs.extract.shards import ChunkUnit, array_units, assign, passes_per_shard, shard_from_environment

from tiny import write_tiny_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_unit_goes_to_one_shard_and_shares_are_within_one_unit():
    rng = np.random.default_rng(0)
    # One cheap long array and many short ones, unevenly sized, like clean and corrupted arrays.
    units = array_units(0, 5000, 97) + [unit for k in range(1, 40)
                                        for unit in array_units(k, 800, int(rng.integers(3, 40)),
                                                                sorted(rng.uniform(0, 5000, 800)))]
    for count in (1, 2, 3, 7, 64):
        owner = assign(units, count)
        assert len(owner) == len(units) and set(owner) <= set(range(count))
        shares = passes_per_shard(units, count)
        total = sum(unit.passes for unit in units)
        assert sum(shares) == total
        largest = max(unit.passes for unit in units)
        assert max(abs(share - total / count) for share in shares) < largest


def test_shards_are_stretches_of_rows_not_every_nth_chunk():
    # Two arrays whose chunk 0 would both go to shard 0 under "chunk k % n": here shard 0 takes the
    # first rows of both, shard 1 the last rows of both.
    units = array_units(0, 8, 4) + array_units(1, 8, 2)
    owner = assign(units, 2)
    first_half = [shard for unit, shard in zip(units, owner, strict=True) if unit.row < 4]
    second_half = [shard for unit, shard in zip(units, owner, strict=True) if unit.row >= 4]
    assert set(first_half) == {0} and set(second_half) == {1}
    assert passes_per_shard(units, 2) == [8, 8]


def test_one_expensive_encoder_is_split_across_shards_not_given_to_one():
    # Encoder 0: 1 array of 1,000 rows; encoder 1: 40 arrays of 1,000 rows (40x the passes), all in
    # chunks of 10 rows that start at the same rows.
    units = array_units(0, 1000, 10, encoder=0) + [u for k in range(40) for u in array_units(k, 1000, 10, encoder=1)]
    owner = assign(units, 4)
    for encoder, arrays in ((0, 1), (1, 40)):
        per_shard = [sum(u.passes for u, s in zip(units, owner, strict=True) if s == shard and u.encoder == encoder)
                     for shard in range(4)]
        assert max(per_shard) - min(per_shard) <= 2 * 10 * arrays, per_shard  # each about a quarter of each
        assert sum(per_shard) == 1000 * arrays


@pytest.mark.parametrize("environ, expected", [
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_COUNT": "3"}, (1, 3)),
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, (2, 4)),
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, (3, 4)),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "RANK": "0", "WORLD_SIZE": "2"}, (3, 8)),
    ({"RANK": "1", "WORLD_SIZE": "2"}, (1, 2)),
])
def test_shard_from_the_scheduler_environment(environ, expected):
    assert shard_from_environment(environ)[0] == expected


@pytest.mark.parametrize("environ, message", [
    ({}, "no scheduler shard"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "invalid"),
    ({"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, "SLURM_PROCID='x'"),
])
def test_a_missing_or_bad_environment_is_one_line(environ, message):
    with pytest.raises(ValueError, match=message) as error:
        shard_from_environment(environ)
    assert "\n" not in str(error.value)


def test_shard_auto_on_the_command_line(monkeypatch):
    import click

    from crs.cli.shard import parse_shard

    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert parse_shard("auto") == (2, 4)
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(click.BadParameter, match="no scheduler shard"):
        parse_shard("auto")


@pytest.fixture(scope="module")
def paper():
    bench = Benchmark(EXAMPLES / "paper.toml")
    return bench, bench.plan()


@pytest.mark.parametrize("tasks", [4, 16, 37])
def test_paper_array_tasks_cover_every_planned_pass_once_and_balance(paper, tasks):
    bench, plan = paper
    extract = bench.spec.extract
    shards = shard_plan(plan, tasks, extract.batch_size, extract.chunk_rows, "cuda")
    assert sum(shards.passes) == plan.passes  # every planned pass in exactly one task
    share = plan.passes / tasks
    datasets = len({row.dataset for row in plan.rows})
    # Stated bound (crs/extract/shards.py): within one chunk per data set of an equal share.
    assert max(abs(n - share) for n in shards.passes) < shards.largest_chunk * datasets
    assert max(abs(n - share) for n in shards.passes) < 0.01 * share
    # Every encoder is split alike, so the estimated seconds balance too (encoders differ 60x in cost).
    assert max(shards.seconds) < 1.05 * sum(shards.seconds) / tasks


def test_sbatch_script_is_sized_from_the_plan(paper, tmp_path):
    bench, plan = paper
    spec_path = EXAMPLES / "paper.toml"
    out = tmp_path / "paper.sbatch"
    result = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(out), "--tasks", "16",
                                      "--partition", "gpu", "--allow-missing"], obj={})
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "#SBATCH --array=0-15" in text and "#SBATCH --gpus=1" in text and "#SBATCH --partition=gpu" in text
    assert "--shard auto" in text and str(spec_path.resolve()) in text
    shards = shard_plan(plan, 16, bench.spec.extract.batch_size, bench.spec.extract.chunk_rows, "cuda")
    assert f"#SBATCH --time={slurm_time(shards.time_limit_seconds)}" in text
    assert shards.time_limit_seconds > 2 * max(shards.seconds)
    listed = [int(line.split(": ")[1].split(" passes")[0].replace(",", "")) for line in text.splitlines()
              if line.startswith("#   task ")]
    assert listed == list(shards.passes) and sum(listed) == plan.passes


def test_sbatch_is_not_written_when_data_or_weights_are_missing_and_says_so(tmp_path):
    """Issue 39 item 20: the script was written although data roots and weights were missing, for one
    task of 14.7 million passes, naming paths of this machine without a word."""
    spec_path = EXAMPLES / "paper.toml"
    out = tmp_path / "paper.sbatch"
    refused = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(out)], obj={})
    assert refused.exit_code != 0 and not out.exists()
    last = refused.output.strip().splitlines()[-1]
    assert f"{out} not written" in last and "crs check" in last and "--allow-missing" in last, last
    written = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(out), "--allow-missing"], obj={})
    assert written.exit_code == 0 and out.exists(), written.output
    assert "written anyway (--allow-missing)" in written.output
    count = int(re.search(r"sbatch: .*?: (\d+) task\(s\) \(at most 1,000,000 forward passes each",
                          written.output).group(1))
    assert count >= 15  # 14.7 million passes: not one task
    assert f"#SBATCH --array=0-{count - 1}" in out.read_text()
    if "local file system" not in written.output:  # this checkout on a network file system: nothing to say
        return
    assert str(spec_path.resolve()) in written.output and "shared file system" in written.output


def test_slurm_time_format():
    assert slurm_time(90061) == "1-01:01:01"
    assert slurm_time(600) == "0-00:10:00"


def test_a_cpu_spec_asks_for_no_gpu(tmp_path):
    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=40)
    bench = Benchmark(spec_path)
    plan = bench.plan()
    shards = shard_plan(plan, 2, 32, 4096, "cpu")
    text = sbatch_script(plan, shards, ["crs", "extract", "x.toml"], "tiny", "cpu", str(tmp_path))
    assert "--gpus" not in text and "#SBATCH --array=0-1" in text


def test_shards_fill_balanced_disjoint_parts_and_a_finished_shard_says_so(tmp_path):
    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=120, chunk_rows=8)
    runner = CliRunner()
    bench = Benchmark(spec_path)
    total = bench.plan().passes
    done = []
    for index in range(3):
        stats = Benchmark(spec_path).extract(progress=False, shard=(index, 3))
        done.append(stats.total_forward)
        if index == 0:  # progress over all shards, from the flags alone
            shown = runner.invoke(cli, ["status", str(spec_path)], obj={})
            assert shown.exit_code == 0, shown.output
            assert f"status: {done[0]:,} of {total:,} forward passes done" in shown.output
            assert f"{total - done[0]:,} to go" in shown.output and "left at that rate" in shown.output
    assert sum(done) == total  # disjoint and complete: each pass made by one shard
    assert max(done) - min(done) <= 0.25 * total / 3, done
    assert "status: complete" in runner.invoke(cli, ["status", str(spec_path)], obj={}).output
    again = runner.invoke(cli, ["extract", str(spec_path), "--shard", "1/3", "-q"], obj={})
    assert again.exit_code == 0, again.output
    assert "shard 1/3: its work is done" in again.output


def test_chunk_units_cover_each_array():
    units = array_units(3, 10, 4, [float(r) for r in range(100, 110)])
    assert [(u.row, u.passes, u.array, u.chunk) for u in units] == [
        (100.0, 4, 3, 0), (104.0, 4, 3, 1), (108.0, 2, 3, 2)]
    assert isinstance(units[0], ChunkUnit)


def store_bytes(store: Path) -> dict[str, bytes]:
    """Every array of a store (features, flags, checksums, the table) as raw bytes."""
    import zarr

    root = zarr.open_group(str(store), mode="r")
    return {name: np.asarray(node[...]).tobytes() for name, node in root.members(max_depth=None)
            if isinstance(node, zarr.Array)}


def test_two_cpu_devices_write_the_cache_of_one_process(tmp_path):
    one = write_tiny_spec(tmp_path / "one", encoders=("pixel_stats", "resnet18"), n_images=120, chunk_rows=8,
                          data=tmp_path / "data")
    two = write_tiny_spec(tmp_path / "two", encoders=("pixel_stats", "resnet18"), n_images=120, chunk_rows=8,
                          data=tmp_path / "data")
    Benchmark(one).extract(progress=False)
    result = CliRunner().invoke(cli, ["extract", str(two), "--devices", "cpu,cpu", "-q"], obj={})
    assert result.exit_code == 0, result.output
    assert "2 worker(s), one per device: cpu, cpu" in result.output
    for name in ("derm", "fundus", "cxr", "cxr-b"):
        assert store_bytes(tmp_path / "two" / "cache" / f"{name}.zarr") == \
            store_bytes(tmp_path / "one" / "cache" / f"{name}.zarr"), name
    bad = CliRunner().invoke(cli, ["extract", str(two), "--devices", "gpu0"], obj={})
    assert bad.exit_code != 0 and "each must be cpu, cuda or cuda:N" in bad.output


def test_sbatch_time_limit_uses_a_gpu_node_measurement_and_says_so(tmp_path, monkeypatch):
    """Issue 41 item 2: the time limit came from an H200's bare forward speed even where a GPU node had
    measured itself with `crs bench extract`; the job script is planned on another host (a login node)."""
    import json

    spec_path = EXAMPLES / "paper.toml"
    store = tmp_path / "throughput.json"
    monkeypatch.setenv("CRS_THROUGHPUT", str(store))
    args = ["plan", str(spec_path), "--sbatch", str(tmp_path / "a.sbatch"), "--tasks", "16", "--allow-missing"]
    assert CliRunner().invoke(cli, args, obj={}).exit_code == 0
    estimated = (tmp_path / "a.sbatch").read_text()
    assert "estimate: bare forward at an H200's peak" in estimated
    # a GPU node measured itself (decode-bound: far slower than the peak estimate) into the shared file
    store.write_text(json.dumps([{"host": "gpu-node-7", "encoder": "vit_base", "device": "cuda:0",
                                  "passes_per_s": 900.0, "gflops": 17.6, "threads": 8}]))
    args[3] = str(tmp_path / "b.sbatch")
    assert CliRunner().invoke(cli, args, obj={}).exit_code == 0
    measured = (tmp_path / "b.sbatch").read_text()
    assert "on gpu-node-7 (not this host)" in measured and "H200" not in measured.split("estimate basis")[1].split("\n")[0]

    def limit(text):
        return re.search(r"#SBATCH --time=(\S+)", text).group(1)

    def seconds(value):
        days, rest = value.split("-")
        h, m, s = map(int, rest.split(":"))
        return int(days) * 86400 + h * 3600 + m * 60 + s

    assert seconds(limit(measured)) > 3 * seconds(limit(estimated))  # 900 passes/s, not 20,000 at ViT-B/16
