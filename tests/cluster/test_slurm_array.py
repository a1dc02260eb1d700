"""Stage 1 as a real SLURM job array on this machine: the array's cache equals one process's, bit for bit,
and a task killed mid-run and requeued resumes from the chunk flags (what it kept is not redone).

The kill's loss itself (passes done and thrown away) is measured exactly, against decision 0031's
budget, by tests/faults/test_resume_loss.py, which counts the passes of the killed process.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cache.verify import repair, verify_store
from crs.cli.main import cli

SPEC = """
name = "array"
cache = "{cache}"
output = "{folder}/out"
encoders = ["pixel_stats", "resnet18"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
device = "cpu"
batch_size = 16
chunk_rows = 8
corruptions = ["gaussian_noise", "jpeg"]
severities = [2]

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "{data}"
options = {{ modality = "chest_xray", n_images = {n_images}, image_size = 32 }}
"""

pytestmark = pytest.mark.slow


def write_spec(folder: Path, data: Path, n_images: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.toml"
    path.write_text(SPEC.format(cache=folder / "cache", folder=folder, data=data, n_images=n_images))
    return path


def float_bits(store: Path) -> dict[str, bytes]:
    """Every array of a store as raw bytes (features, flags, checksums, the table)."""
    root = zarr.open_group(str(store), mode="r")
    return {name: np.asarray(node[...]).tobytes() for name, node in root.members(max_depth=None)
            if isinstance(node, zarr.Array)}


def sbatch_file(spec_path: Path, tasks: int) -> Path:
    script = spec_path.parent / "extract.sbatch"
    result = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(script), "--tasks", str(tasks),
                                      "--cpus-per-task", "1"], obj={})
    assert result.exit_code == 0, result.output
    return script


def submit(script: Path, env: dict[str, str], *options: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", *options, str(script)], env=env, cwd=script.parent,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def wait_for(job: str, env: dict[str, str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %t"], env=env, capture_output=True, text=True)
        if out.returncode == 0 and not out.stdout.strip():
            return
        time.sleep(1)
    subprocess.run(["scancel", job], env=env)
    pytest.fail(f"SLURM job {job} still queued or running after {timeout:.0f} s")


def forward_passes(log: str) -> int:
    """The forward passes a task's `crs extract` made, from its last summary line."""
    line = log.split("forward passes per encoder:")[-1].splitlines()[0]
    return sum(int(n.replace(",", "")) for n in re.findall(r"(?:pixel_stats|resnet18) ([\d,]*\d)", line))


def task_log(folder: Path, job: str, task: int) -> str:
    return (folder / f"crs-extract-{job}_{task}.out").read_text()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One process, no shard: the cache an array of the same spec must reproduce (per number of images)."""
    base = tmp_path_factory.mktemp("slurm-reference")
    made = {}

    def make(n_images: int) -> tuple[Path, Path, int]:
        if n_images not in made:
            spec_path = write_spec(base / f"one-{n_images}", base / f"data-{n_images}", n_images)
            Benchmark(spec_path).extract(progress=False)
            made[n_images] = (base / f"data-{n_images}", base / f"one-{n_images}" / "cache" / "cxr.zarr",
                              Benchmark(spec_path).plan().passes)
        return made[n_images]

    return make


def test_a_four_task_array_writes_the_single_process_cache_bit_for_bit(slurm, reference, tmp_path):
    data, reference_store, passes = reference(64)
    spec_path = write_spec(tmp_path, data, n_images=64)
    job = submit(sbatch_file(spec_path, 4), slurm)
    wait_for(job, slurm)
    logs = [task_log(tmp_path, job, task) for task in range(4)]
    for task, text in enumerate(logs):
        assert f"shard {task}/4 from the environment" in text, text
    done = [forward_passes(text) for text in logs]
    assert sum(done) == passes and min(done) > 0  # every task did a share, every pass done once
    store = tmp_path / "cache" / "cxr.zarr"
    assert float_bits(store) == float_bits(reference_store)
    root = zarr.open_group(str(store), mode="r")
    assert root["encoders/resnet18"].attrs.get("current") is not None
    assert verify_store(store) == []


def shard_rows_done(store: Path, journaled: bool = False) -> int:
    """Forward passes in complete chunks, every array of every encoder (read from the flags); with
    ``journaled``, also the rows journaled for chunks not yet complete: what a resumed run keeps
    (decision 0101)."""
    from crs.cache.writer import stored_rows_done, stored_rows_kept

    count = stored_rows_kept if journaled else stored_rows_done
    root = zarr.open_group(str(store), mode="r")
    total = 0
    for _, node in root.members(max_depth=None):
        if isinstance(node, zarr.Group):
            for name, _array in node.arrays():
                if not name.endswith(("__done", "__sha256")) and f"{name}__done" in node:
                    total += count(node, name)
    return total


def test_a_cancelled_task_requeued_resumes_from_its_flags(slurm, reference, tmp_path):
    data, reference_store, passes = reference(320)  # long enough (seconds) to be killed mid-run
    spec_path = write_spec(tmp_path, data, n_images=320)
    # One task holds the whole run, so the kill lands in the middle of real work.
    job = submit(sbatch_file(spec_path, 1), slurm)
    store = tmp_path / "cache" / "cxr.zarr"
    deadline = time.monotonic() + 180
    kept = 0
    while time.monotonic() < deadline and kept == 0:
        time.sleep(0.05)
        try:
            kept = shard_rows_done(store) if (store / "zarr.json").exists() else 0
        except Exception:  # arrays being created: look again
            kept = 0
    assert kept > 0, "the task wrote nothing in time"
    subprocess.run(["scancel", "--signal=KILL", f"{job}_0"], env=slurm, check=True)
    time.sleep(2)
    kept = shard_rows_done(store, journaled=True)  # a kill between two chunk flags leaves journaled rows
    assert 0 < kept < passes, "the kill should land mid-run"
    subprocess.run(["scontrol", "requeue", f"{job}_0"], env=slurm, check=True, capture_output=True)
    subprocess.run(["scontrol", "update", f"jobid={job}_0", "StartTime=now"], env=slurm, check=True,
                   capture_output=True)
    wait_for(job, slurm)
    log = task_log(tmp_path, job, 0)
    resumed = log[log.rindex("from the environment"):]
    assert f"{kept:,} of {passes:,} forward passes already cached" in resumed
    assert forward_passes(resumed) == passes - kept  # nothing kept is redone
    assert float_bits(store) == float_bits(reference_store)
    # A SIGKILL landing inside a chunk write leaves that write's temporary file (the kill-resume
    # contract of tests/faults/test_kill_resume.py): verify names it, repair removes it, nothing else.
    problems = verify_store(store)
    assert {p.kind for p in problems} <= {"temp-file"}, problems
    repair(problems)
    assert verify_store(store) == []


def test_extract_slurm_submits_through_submitit_and_equals_one_process(slurm, reference, tmp_path):
    import sys

    data, reference_store, passes = reference(64)
    spec_path = write_spec(tmp_path, data, n_images=64)
    run = subprocess.run([sys.executable, "-m", "crs", "extract", str(spec_path), "--slurm", "--tasks", "2",
                          "--cpus-per-task", "1", "--slurm-logs", str(tmp_path / "logs")],
                         env=slurm, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    made = [int(n.replace(",", "")) for n in re.findall(r"\(shard \d/2\): ([\d,]*\d) forward passes", run.stdout)]
    assert len(made) == 2 and sum(made) == passes, run.stdout
    assert float_bits(tmp_path / "cache" / "cxr.zarr") == float_bits(reference_store)
