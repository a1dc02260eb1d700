"""Stage 1 as a real SLURM job array on this machine: the array's cache equals one process's, bit for bit,
and a task killed mid-run and requeued resumes from the chunk flags (what it kept is not redone).
First, the suite's own cluster: a SIGTERM stops the daemons the suite started, and a scheduler the
suite did not configure is not used.

The kill's loss itself (passes done and thrown away) is measured exactly, against decision 0031's
budget, by tests/faults/test_resume_loss.py, which counts the passes of the killed process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from local_slurm import SCRIPTS, daemon_pids, running, stop_started_cluster, suite_cluster

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


def sbatch_file(spec_path: Path, tasks: int, *options: str, host_per_start: bool = False) -> Path:
    """``crs plan --sbatch`` for the spec; ``host_per_start``: each start of a task runs under its own host
    name (``node-<restart count>``, through ``unshare --uts``), as a requeued task landing on another node."""
    script = spec_path.parent / "extract.sbatch"
    result = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(script), "--tasks", str(tasks),
                                      "--cpus-per-task", "1", *options], obj={})
    assert result.exit_code == 0, result.output
    if host_per_start:
        lines = script.read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if " -m crs extract " in line)
        lines[at] = ("unshare --uts sh -c 'hostname \"node-${SLURM_RESTART_COUNT:-0}\" && exec \"$@\"' sh "
                     + lines[at])
        script.write_text("\n".join(lines) + "\n")
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


# --- the suite's own cluster: stopped on SIGTERM, and no other scheduler used (issue 46 item 16) --------
# These run first in this file (pytest keeps file order, and --dist loadfile keeps the file on one
# worker), before the session fixture starts the cluster the tests below share.

INNER_TEST = """
import os
import subprocess
import time
from pathlib import Path


def test_holds_the_cluster(slurm):
    cpus = subprocess.run(["sinfo", "-h", "-o", "%c"], env=slurm, capture_output=True, text=True).stdout
    Path(os.environ["CRS_INNER_UP"]).write_text(cpus)
    time.sleep(float(os.environ.get("CRS_INNER_HOLD", "0")))
"""


def _inner_pytest(folder: Path, hold: float) -> subprocess.Popen:
    """A pytest of its own, in ``folder``, whose one test takes the ``slurm`` fixture and holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_inner.py").write_text(INNER_TEST)
    (folder / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, CRS_INNER_UP=str(folder / "up"), CRS_INNER_HOLD=str(hold))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "local_slurm", "test_inner.py"],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


@pytest.fixture
def no_cluster_running():
    """No scheduler runs during the test; the suite's cluster, when one ran, runs again after it."""
    if shutil.which("slurmctld") is None and os.geteuid() != 0:
        pytest.skip("SLURM is not installed and installing it needs root")
    was_running, reason = suite_cluster()
    ours = was_running or bool(daemon_pids())
    if not ours and "no scheduler answers" not in reason and "no SLURM installed" not in reason:
        pytest.skip(f"a scheduler runs that this test must not stop: {reason}")
    if ours:
        stop_started_cluster()
    yield
    if was_running:
        subprocess.run([str(SCRIPTS / "start.sh")], capture_output=True, timeout=900)


def test_sigterm_stops_the_daemons_the_suite_started(no_cluster_running, tmp_path):
    inner = _inner_pytest(tmp_path / "inner", hold=600)
    try:
        deadline = time.monotonic() + 600
        while not (tmp_path / "inner" / "up").exists():
            assert inner.poll() is None, inner.communicate()[0]
            assert time.monotonic() < deadline, "the inner pytest's cluster did not come up"
            time.sleep(0.5)
        started = daemon_pids()
        if not started:
            pytest.skip("start.sh started no daemon here")
        assert {"slurmctld.pid", "slurmd.pid"} <= set(started), started
        inner.send_signal(signal.SIGTERM)  # what a time limit sends make test
        output = inner.communicate(timeout=120)[0]
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()
    assert inner.returncode == -signal.SIGTERM, output  # it still ends as SIGTERM ends it
    left = {name: pid for name, pid in started.items() if running(pid)}
    assert not left, f"daemons the stopped suite had started still run: {left}"
    assert not suite_cluster()[0]


def test_a_leftover_cluster_of_another_configuration_is_started_again(no_cluster_running, tmp_path):
    # The case: an earlier run, stopped by a signal, left the suite's daemons with a one-CPU
    # node (start.sh had counted OMP_NUM_THREADS=1 as the machine's CPUs), and `--cpus-per-task 2`
    # was refused. The suite's own leftover is restarted with this machine's CPUs, then stopped.
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2 or shutil.which("taskset") is None:
        pytest.skip("needs two CPUs and taskset to leave a one-CPU node behind")
    subprocess.run(["taskset", "-c", "0", str(SCRIPTS / "start.sh")], capture_output=True, timeout=900)
    leftover = daemon_pids()
    if not suite_cluster()[1].startswith("slurm: the suite's scheduler runs an older configuration"):
        stop_started_cluster()
        pytest.skip(f"no one-CPU leftover to test with: {suite_cluster()[1]}")
    inner = _inner_pytest(tmp_path / "inner", hold=0)
    output = inner.communicate(timeout=900)[0]
    assert inner.returncode == 0 and "1 passed" in output, output
    assert (tmp_path / "inner" / "up").read_text().split() == [str(cpus)]
    assert not any(running(pid) for pid in leftover.values()), "the leftover daemons still run"
    assert not daemon_pids() and not suite_cluster()[0]  # and what the run started, it stopped


FOREIGN_CONF = """ClusterName=elsewhere
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs=1 State=UNKNOWN
PartitionName=other Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def test_a_scheduler_the_suite_did_not_configure_is_not_used(no_cluster_running, tmp_path):
    # Someone else's one-CPU scheduler answers on this host: the fixture must neither use it (its
    # tests would run against another configuration) nor stop it; the tests skip, saying why.
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        pytest.skip("SLURM is not installed")
    foreign = tmp_path / "foreign"
    for sub in ("state", "spool"):
        (foreign / sub).mkdir(parents=True)
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    conf = foreign / "slurm.conf"
    conf.write_text(FOREIGN_CONF.format(host=host, dir=foreign))
    env = dict(os.environ, SLURM_CONF=str(conf))
    munge_pid = foreign / "munged.pid"
    if subprocess.run(["munge", "-n"], capture_output=True, stdin=subprocess.DEVNULL).returncode != 0:
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        subprocess.run(["munged", "--force", f"--pid-file={munge_pid}"], check=True, capture_output=True)
    try:
        subprocess.run(["slurmctld", "-f", str(conf)], check=True, capture_output=True, env=env)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, capture_output=True, env=env)
        deadline = time.monotonic() + 60
        while not subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout.startswith("idle"):
            assert time.monotonic() < deadline, (foreign / "slurmctld.log").read_text()[-2000:]
            time.sleep(1)
        theirs = {name: int((foreign / name).read_text()) for name in ("slurmctld.pid", "slurmd.pid")}
        inner = _inner_pytest(tmp_path / "inner", hold=0)
        output = inner.communicate(timeout=600)[0]
        assert "1 skipped" in output and "this suite did not configure" in output and "elsewhere" in output, output
        assert not (tmp_path / "inner" / "up").exists()  # its test never ran
        assert all(running(pid) for pid in theirs.values()), "the suite stopped a scheduler it had not started"
    finally:
        for name in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            pid_file = foreign / name
            if pid_file.exists():
                pid = int(pid_file.read_text())
                os.kill(pid, signal.SIGTERM)
                for _ in range(40):
                    if not running(pid):
                        break
                    time.sleep(0.5)


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


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs `unshare --uts` as root")
def test_a_killed_task_requeued_onto_another_host_resumes_from_its_flags(slurm, reference, tmp_path):
    """Killed by SIGKILL (its lock files stay behind, naming host node-0), requeued, restarted as host
    node-1: it takes over its own locks at once (the same SLURM job and task) with one line each,
    redoes none of the passes it kept, and the cache equals one process's bit for bit."""
    data, reference_store, passes = reference(320)  # long enough (seconds) to be killed mid-run
    spec_path = write_spec(tmp_path, data, n_images=320)
    # One task holds the whole run, so the kill lands in the middle of real work.
    job = submit(sbatch_file(spec_path, 1, host_per_start=True), slurm)
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
    # SIGKILL to crs itself, as a node dying does: nothing is cleaned up, its lock files stay behind
    # (an `scancel` sends SIGTERM first, on which crs stops cleanly and releases them).
    locks = sorted((store.parent / ".crs-locks" / "cxr").glob("writer.*.lock"))
    holders = {json.loads(lock.read_text())["pid"] for lock in locks}
    assert len(locks) == 2 and len(holders) == 1, locks
    os.kill(holders.pop(), signal.SIGKILL)
    wait_for(job, slurm)  # the batch script ends with crs's status
    assert all(json.loads(lock.read_text())["host"] == "node-0" for lock in locks)
    kept = shard_rows_done(store, journaled=True)  # a kill between two chunk flags leaves journaled rows
    assert 0 < kept < passes, "the kill should land mid-run"
    subprocess.run(["scontrol", "requeue", f"{job}_0"], env=slurm, check=True, capture_output=True)
    start_requeued_now(job, slurm, time.monotonic())
    wait_for(job, slurm)
    log = task_log(tmp_path, job, 0)
    resumed = log[log.rindex("from the environment"):]
    takeovers = [line for line in resumed.splitlines() if "taking over" in line]
    assert len(takeovers) == 2, resumed  # the writer lock of each encoder, one line each
    assert all("on host node-0" in line and "this very SLURM task" in line for line in takeovers), takeovers
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
                          "--cpus-per-task", "1", "--slurm-logs", str(tmp_path / "logs"), "--account", "crs",
                          "--mem", "300M", "--constraint", "crsci", "--sbatch-option=--comment=crs-site"],
                         env=slurm, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    made = [int(n.replace(",", "")) for n in re.findall(r"\(shard \d/2\): ([\d,]*\d) forward passes", run.stdout)]
    assert len(made) == 2 and sum(made) == passes, run.stdout
    noise = [line for line in (run.stdout + run.stderr).splitlines() if "sacct" in line or "accounting" in line]
    assert len(noise) <= 1, noise  # accounting is off here: said once, if at all
    submitted = "\n".join(path.read_text() for path in (tmp_path / "logs").glob("*submission.sh"))
    for line in ("--account=crs", "--mem=300M", "--constraint=crsci", "--comment=crs-site", "--cpus-per-task=1",
                 "--signal=USR2@"):
        assert f"#SBATCH {line}" in submitted, submitted
    assert float_bits(tmp_path / "cache" / "cxr.zarr") == float_bits(reference_store)


REVOKED_CREDENTIAL_SECONDS = 2.0
"""slurmd refuses a job whose credential it revoked in the same second it would start again ("Killing
non-startable batch job: Job credential revoked"), so a requeued task is started early only this long
after its requeue (SLURM itself holds it about two minutes)."""


def start_requeued_now(job: str, env: dict[str, str], requeued_at: float) -> None:
    """Start a requeued task now instead of after SLURM's hold, once its old credential can no longer refuse it."""
    time.sleep(max(0.0, requeued_at + REVOKED_CREDENTIAL_SECONDS - time.monotonic()))
    subprocess.run(["scontrol", "update", f"jobid={job}_0", "StartTime=now"], env=env, capture_output=True)  # outcome: the caller waits for it


def job_field(job: str, env: dict[str, str], name: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True, text=True)
    found = re.search(rf"\b{name}=(\S*)", out.stdout)
    return found.group(1) if found else ""


def test_a_task_that_reaches_its_time_limit_requeues_itself_and_finishes(slurm, reference, tmp_path):
    """A 2-minute limit: warned (USR1 to the batch shell, `--signal=B:USR1@60`) before the limit, the
    script stops crs (SIGTERM), requeues the task, and the restart finishes the work; the cache is
    bit-identical. SLURM sends the warning up to a minute early, so a fast machine may finish before
    it: once the task has kept some passes, the test sends the same signal the same way
    (`scancel --batch --signal=USR1`) if SLURM has not yet."""
    data, reference_store, passes = reference(1920)
    spec_path = write_spec(tmp_path, data, n_images=1920)
    script = sbatch_file(spec_path, 1, "--time", "2")
    assert "#SBATCH --signal=B:USR1@60" in script.read_text()
    job = submit(script, slurm)
    store = tmp_path / "cache" / "cxr.zarr"
    warned = False
    held_since: float | None = None
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        state = job_field(f"{job}_0", slurm, "JobState")
        if not warned and state == "RUNNING":
            try:
                kept = shard_rows_done(store, journaled=True) if (store / "zarr.json").exists() else 0
            except Exception:  # arrays being created: look again
                kept = 0
            if kept > 0:
                warned = True
                if int(job_field(f"{job}_0", slurm, "Restarts") or 0) == 0:
                    subprocess.run(["scancel", "--batch", "--signal=USR1", f"{job}_0"], env=slurm,
                                   capture_output=True)
        if state == "COMPLETED" or state in ("FAILED", "CANCELLED", "TIMEOUT"):
            break
        if state == "PENDING" and job_field(f"{job}_0", slurm, "Reason") == "BeginTime":
            # SLURM holds a requeued job about two minutes before it may start again; here, start it now
            # (seen pending first now: the requeue happened at most one poll earlier).
            held_since = time.monotonic() if held_since is None else held_since
            start_requeued_now(job, slurm, held_since)
        else:
            held_since = None
        time.sleep(0.2 if not warned else 2)
    log = task_log(tmp_path, job, 0)
    assert state == "COMPLETED", f"{state}\n{log}"
    assert int(job_field(f"{job}_0", slurm, "Restarts") or 0) >= 1 and "crs-sbatch: time limit" in log, log
    assert "crs: stopping on signal SIGTERM" in log
    assert float_bits(tmp_path / "cache" / "cxr.zarr") == float_bits(reference_store)


def test_the_job_script_carries_the_site_options_and_fits_the_nodes(slurm, reference, tmp_path):
    """--account, --qos, --mem, --constraint and a passed-through option reach the scheduler; the CPUs
    never exceed what sinfo says a node has."""
    data, reference_store, _ = reference(64)
    spec_path = write_spec(tmp_path, data, n_images=64)
    script = tmp_path / "site.sbatch"
    cpus = int(subprocess.run(["sinfo", "-h", "-o", "%c"], env=slurm, capture_output=True,
                              text=True).stdout.split()[0].rstrip("+"))
    too_many = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(script), "--cpus-per-task",
                                        str(cpus + 1)], obj={}, env={"SLURM_CONF": slurm.get("SLURM_CONF", "")})
    assert too_many.exit_code == 2 and f"at most {cpus} CPUs (sinfo)" in too_many.output, too_many.output
    made = CliRunner().invoke(cli, ["plan", str(spec_path), "--sbatch", str(script), "--tasks", "1",
                                    "--account", "crs", "--qos", "normal", "--mem", "300M", "--constraint", "crsci",
                                    "--sbatch-option=--comment=crs-site"], obj={},
                              env={"SLURM_CONF": slurm.get("SLURM_CONF", "")})
    assert made.exit_code == 0, made.output
    text = script.read_text()
    for line in ("--account=crs", "--qos=normal", "--mem=300M", "--constraint=crsci", "--comment=crs-site",
                 f"--cpus-per-task={min(cpus, 8)}"):
        assert f"#SBATCH {line}" in text, text
    job = submit(script, slurm)
    assert job_field(f"{job}_0", slurm, "Account") == "crs"
    assert job_field(f"{job}_0", slurm, "MinMemoryNode") == "300M"
    assert job_field(f"{job}_0", slurm, "Features") == "crsci"
    assert job_field(f"{job}_0", slurm, "Comment") == "crs-site"
    wait_for(job, slurm)
    assert float_bits(tmp_path / "cache" / "cxr.zarr") == float_bits(reference_store)
