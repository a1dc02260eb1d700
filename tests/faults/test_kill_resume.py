"""SIGKILL stage 1 at random file writes, resume, and demand the store of an uninterrupted run, bit for bit.

The kill points are drawn (seeded: ``CRS_FAULT_SEED``, default 0) one per tenth of the run's file
writes, so early (array creation), middle and late (last flags, ``current``) kills are all
covered; half tear the file being written, half land it. A further kill comes from outside, by
another process, while the real command line (``crs extract``) runs.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from crs.cache.verify import repair, verify_store

from faults_harness import assert_stores_identical, run_forked, write_fault_spec

N_KILLS = int(os.environ.get("CRS_FAULT_KILLS", "10"))
SEED = int(os.environ.get("CRS_FAULT_SEED", "0"))


def kill_plan(writes: int, n_kills: int, seed: int) -> list[tuple[int, str]]:
    """One kill point per equal slice of [1, writes], each tearing or landing its file."""
    rng = random.Random(seed)
    edges = np.linspace(1, writes + 1, n_kills + 1).astype(int)
    return [(rng.randrange(low, max(high, low + 1)), rng.choice(("torn", "after")))
            for low, high in zip(edges[:-1], edges[1:], strict=True)]


def flags_set(store) -> int:
    """Chunks marked complete over every feature array of the store."""
    if not (store / "zarr.json").exists():
        return 0
    root = zarr.open_group(str(store), mode="r")
    if "encoders" not in root:
        return 0
    return sum(int(np.asarray(node[:]).sum()) for name, node in root["encoders"].members(max_depth=None)
               if isinstance(node, zarr.Array) and name.endswith("__done"))


@pytest.mark.parametrize("case", range(N_KILLS))
def test_sigkill_at_a_random_write_then_resume_is_bit_identical(reference, tmp_path, case):
    base, data, reference_store, writes, reference_report = reference
    kill_at, mode = kill_plan(writes, N_KILLS, SEED)[case]
    spec_path = write_fault_spec(tmp_path, data)
    store = tmp_path / "cache" / "cxr.zarr"

    status = run_forked(spec_path, kill_at=kill_at, mode=mode)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"write {kill_at} did not kill"
    if mode == "torn":  # the kill left a half-written temporary file behind
        assert list(store.rglob("*.partial"))
    finished_before = flags_set(store)

    report = tmp_path / "resume.json"
    assert run_forked(spec_path, report=report) == 0
    import json

    resumed = json.loads(report.read_text())
    # Nothing finished is redone: the resume writes exactly the chunks the kill left unflagged.
    assert resumed["chunks_written"] == reference_report["chunks_written"] - finished_before
    assert_stores_identical(store, reference_store)

    # The only trace a kill may leave is a torn temporary file, which verify names and repair removes.
    problems = verify_store(store)
    assert {p.kind for p in problems} <= {"temp-file"}
    # A torn chunk file is still there for verify to name; a torn array metadata file is gone with
    # the half-created array, which the resume creates anew (its folder replaced).
    repair(problems)
    assert verify_store(store) == []


def test_kill_from_outside_while_the_cli_runs(reference, tmp_path):
    """A real `crs extract` process, SIGKILLed by another process once some chunks are flagged."""
    base, data, reference_store, writes, reference_report = reference
    spec_path = write_fault_spec(tmp_path, data)
    store = tmp_path / "cache" / "cxr.zarr"
    target = random.Random(SEED).randrange(1, reference_report["chunks_written"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", "from crs.cli.main import main; main()", "extract", str(spec_path), "-q"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while process.poll() is None and flags_set(store) < target:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode in (-signal.SIGKILL, 0), process.stderr.read().decode()[-2000:]
    finished_before = flags_set(store)
    report = tmp_path / "resume.json"
    assert run_forked(spec_path, report=report) == 0
    import json

    assert json.loads(report.read_text())["chunks_written"] == reference_report["chunks_written"] - finished_before
    assert_stores_identical(store, reference_store)


def test_kill_plan_spreads_over_the_run():
    plan = kill_plan(250, 10, seed=3)
    points = [point for point, _ in plan]
    assert len(plan) == 10 and points == sorted(points)
    assert points[0] <= 26 and points[-1] >= 225  # one kill in the first and in the last tenth
    assert {mode for _, mode in plan} <= {"torn", "after"}


def test_stale_partial_chunk_folder_is_not_mistaken_for_data(reference, tmp_path):
    """A copied store with a chunk's flag cleared is recomputed to the same bytes (resume = recompute)."""
    base, data, reference_store, writes, reference_report = reference
    spec_path = write_fault_spec(tmp_path, data)
    store = tmp_path / "cache" / "cxr.zarr"
    shutil.copytree(reference_store, store)
    root = zarr.open_group(str(store), mode="a")
    fingerprint = root["encoders/resnet18"].attrs["current"]
    group = root[f"encoders/resnet18/{fingerprint}"]
    group["clean"][8:16] = np.zeros((8, group["clean"].shape[1]), np.float16)  # stale bytes
    group["clean__done"][1] = 0
    report = tmp_path / "resume.json"
    assert run_forked(spec_path, report=report) == 0
    assert_stores_identical(store, reference_store)
