"""A writer killed on one node and restarted on another takes over its own lock (issue 41, item 1).

Outside SLURM the lock's lease decides: a holder touches its lock file every lease / 4 seconds, and
a file not touched for a whole lease belongs to a dead owner. The restart runs under another host
name (``unshare --uts``, as root), so the kernel's flock cannot vouch for the old holder; the
lease here is shortened to a few seconds with ``CRS_LOCK_LEASE_SECONDS``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zarr

from crs.cache.lock import LockHeldError, WriterLock, layout_lock_path, writer_lock_path
from crs.cache.writer import stored_rows_kept

from faults_harness import assert_stores_identical, write_fault_spec

REPO = Path(__file__).resolve().parents[2]


def environment(lease: float) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "RANK", "WORLD_SIZE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["CRS_LOCK_LEASE_SECONDS"] = str(lease)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def rows_kept(store: Path) -> int:
    """Forward passes a resumed run keeps: rows in complete chunks and journaled rows (decision 0101)."""
    root = zarr.open_group(str(store), mode="r")
    total = 0
    for _, node in root.members(max_depth=None):
        if isinstance(node, zarr.Group):
            for name, _array in node.arrays():
                if not name.endswith(("__done", "__sha256")) and f"{name}__done" in node:
                    total += stored_rows_kept(node, name)
    return total


def forward_passes(output: str) -> int:
    line = output.split("forward passes per encoder:")[-1].splitlines()[0]
    return sum(int(n.replace(",", "")) for n in re.findall(r"(?:pixel_stats|resnet18) ([\d,]*\d)", line))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="another host name needs `unshare --uts` as root")
def test_a_writer_killed_here_resumes_under_another_host_name_after_its_lease(reference, tmp_path):
    base, data, _, _, _ = reference
    spec_path = write_fault_spec(tmp_path, data, n_images=240)
    reference_spec = write_fault_spec(base / "reference-240", data, n_images=240)
    reference_store = base / "reference-240" / "cache" / "cxr.zarr"
    if not reference_store.exists():
        made = subprocess.run([sys.executable, "-m", "crs", "extract", str(reference_spec), "-q"], env=environment(60),
                              capture_output=True, text=True, timeout=600)
        assert made.returncode == 0, made.stdout + made.stderr
    store = tmp_path / "cache" / "cxr.zarr"
    env = environment(lease=4)
    first = subprocess.Popen([sys.executable, "-m", "crs", "extract", str(spec_path), "--shard", "0/1", "-q"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    kept = 0
    while time.monotonic() < deadline and kept == 0 and first.poll() is None:
        time.sleep(0.05)
        try:
            kept = rows_kept(store) if (store / "zarr.json").exists() else 0
        except Exception:  # arrays being created: look again
            kept = 0
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert kept > 0, "the first writer wrote nothing before it was killed"
    locks = sorted((store.parent / ".crs-locks" / "cxr").glob("writer.*.lock"))
    assert locks, "a killed writer leaves its lock files behind"
    assert {json.loads(lock.read_text())["host"] for lock in locks} == {socket.gethostname()}
    kept = rows_kept(store)

    command = " ".join([sys.executable, "-m", "crs", "extract", str(spec_path), "--shard", "0/1", "-q"])
    second = subprocess.run(["unshare", "--uts", "sh", "-c", f"hostname node-b && exec {command}"], env=env,
                            capture_output=True, text=True, timeout=600)
    output = second.stdout + second.stderr
    assert second.returncode == 0, output
    takeovers = [line for line in output.splitlines() if "taking over" in line]
    assert len(takeovers) == len(locks), output  # one line per dead owner's lock
    assert all(f"on host {socket.gethostname()}" in line and "lease expired" in line for line in takeovers), takeovers
    passes = int(re.search(r"of ([\d,]+) forward passes already cached", output).group(1).replace(",", ""))
    assert f"{kept:,} of {passes:,} forward passes already cached" in output
    assert forward_passes(output) == passes - kept  # nothing kept is redone
    assert_stores_identical(store, reference_store)


def test_a_stale_layout_lock_from_another_node_is_taken_over_and_a_live_one_is_not_waited_for_forever(tmp_path,
                                                                                                   caplog):
    store = tmp_path / "cache" / "cxr.zarr"
    lock = layout_lock_path(store)
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 4242, "host": "gpu-node-7", "started": "2026-01-01T00:00:00+00:00",
                                "lease": 120}))
    os.utime(lock, (time.time() - 600, time.time() - 600))  # its owner stopped renewing it ten minutes ago
    with WriterLock(lock, "create arrays", wait=True, timeout=5) as held:
        assert held.took_over is not None and held.took_over.host == "gpu-node-7"
    assert "lease expired" in caplog.text and caplog.text.count("taking over") == 1

    lock.write_text(json.dumps({"pid": 4242, "host": "gpu-node-7", "started": "2026-01-01T00:00:00+00:00",
                                "lease": 120}))  # renewed just now: alive
    with pytest.raises(LockHeldError, match=r"gave up waiting after 1 s: .*gpu-node-7.*renewed its lease"):
        WriterLock(lock, "create arrays", wait=True, timeout=1, poll_seconds=0.05).acquire()


@pytest.mark.skipif(shutil.which("squeue") is None, reason="squeue is not installed")
def test_a_lock_of_a_slurm_job_that_squeue_does_not_know_is_taken_over_at_once(tmp_path, caplog):
    """The SLURM ids in a lock file are judged by squeue (no lease to wait out) when it answers."""
    lock = writer_lock_path(tmp_path / "cache" / "cxr.zarr", "resnet18")
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 4242, "host": "gpu-node-7", "started": "2026-01-01T00:00:00+00:00",
                                "lease": 120, "slurm": {"job": "999999", "procid": "0"}}))
    probe = subprocess.run(["squeue", "-h", "-j", "999999"], capture_output=True, text=True)
    if probe.returncode != 0 and "invalid job id" not in probe.stderr.lower():
        pytest.skip(f"squeue does not answer here: {probe.stderr.strip()}")
    with WriterLock(lock) as held:
        assert held.took_over is not None
    assert "SLURM says job 999999 is gone" in caplog.text


def test_a_shard_counts_the_rows_other_shards_journaled_as_the_plan_does(reference, tmp_path):
    """Issue 41 item 6: one task's log gave two cached counts ("160 already cached" from the plan
    beside "128 of 1,736" from the runner): the runner left out the rows other shards journaled."""
    from click.testing import CliRunner

    from crs.cli.main import cli

    from faults_harness import run_forked

    _, data, _, _, _ = reference
    spec_path = write_fault_spec(tmp_path, data)
    text = spec_path.read_text().replace("batch_size = 16", "batch_size = 4").replace("chunk_rows = 8", "chunk_rows = 16")
    spec_path.write_text(text)
    # Shard 0 of 2 killed at a file write while a chunk is half full: its journal stays. Which write
    # that is depends on how many files the layout takes, so a few kill points are tried.
    store = tmp_path / "cache" / "cxr.zarr"
    for kill_at in (200, 240, 160, 280, 320, 120):
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        assert os.WIFSIGNALED(run_forked(spec_path, kill_at=kill_at, shard=(0, 2)))
        if list(store.rglob("journal/*.rows")):
            break
    assert list(store.rglob("journal/*.rows")), "no journal left to count"
    result = CliRunner().invoke(cli, ["extract", str(spec_path), "--shard", "1/2", "-q"], obj={})
    assert result.exit_code == 0, result.output
    planned = re.search(r"plan: .*?([\d,]+) already cached", result.output).group(1)
    resumed = re.search(r"extract: cxr: .*?([\d,]+) of [\d,]+ forward passes already cached", result.output)
    assert resumed is not None and resumed.group(1) == planned, result.output


def test_a_live_holder_renews_its_lease_and_states_it_in_the_lock_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CRS_LOCK_LEASE_SECONDS", "0.4")
    lock = tmp_path / "held.lock"
    with WriterLock(lock, "test holder"):
        assert json.loads(lock.read_text())["lease"] == 0.4
        first = lock.stat().st_mtime_ns
        deadline = time.monotonic() + 30
        while lock.stat().st_mtime_ns == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.stat().st_mtime_ns > first  # touched by the heartbeat (every lease / 4)


def test_sigterm_stops_a_writer_cleanly_releasing_its_locks(reference, tmp_path):
    """SIGTERM (SLURM's warning, relayed by the job script; an `scancel`) stops `crs extract` as Ctrl-C
    does: exit 130, how to resume, and no lock file left for the next task to judge."""
    _, data, _, _, _ = reference
    spec_path = write_fault_spec(tmp_path, data, n_images=240)
    store = tmp_path / "cache" / "cxr.zarr"
    run = subprocess.Popen([sys.executable, "-m", "crs", "extract", str(spec_path), "-q"], env=environment(60),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
        try:
            if (store / "zarr.json").exists() and rows_kept(store) > 0:
                break
        except Exception:  # arrays being created: look again
            continue
    run.send_signal(signal.SIGTERM)
    output, _ = run.communicate(timeout=120)
    assert run.returncode == 130, output
    assert "crs: stopping on signal SIGTERM" in output and "to resume, run again" in output
    assert not list((store.parent / ".crs-locks").rglob("*.lock"))
