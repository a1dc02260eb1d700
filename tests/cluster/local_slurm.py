"""The ``slurm`` fixture: a real one-node SLURM on this machine for the cluster tests (issue 46 item 16).

A running scheduler is used only when it is the suite's (``.ci/slurm/start.sh --check``: it reads the
suite's slurm.conf, is named crs-ci and its node has this machine's CPUs and memory). Otherwise the
fixture runs ``start.sh`` (which installs Debian's slurm-wlm and munge as root, restarts a cluster of
its own that runs an older configuration, and leaves any other scheduler alone), and the tests skip
with its reason when the suite's cluster still does not run. What the fixture started it stops: at
teardown, on SIGTERM or SIGHUP (a time limit stopping ``make test`` skips the teardown), and, through
a watchdog process, when the test process dies in any other way (SIGKILL).

A plugin module, so a test can run the fixture in a pytest of its own (``-p local_slurm``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / ".ci" / "slurm"
PID_FILES = ("slurmd.pid", "slurmctld.pid", "munge/munged.pid")  # the order they are stopped in


def slurm_dir() -> Path:
    return Path(os.environ.get("CRS_SLURM_DIR", "/tmp/crs-slurm"))


def slurm_environment() -> dict[str, str]:
    env = dict(os.environ)
    conf_path = slurm_dir() / "conf_path"
    if conf_path.exists():
        env["SLURM_CONF"] = conf_path.read_text().strip()
    # Tasks import crs from this checkout (an editable install does the same on CI).
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def suite_cluster() -> tuple[bool, str]:
    """(whether the suite's own cluster runs with its node up, start.sh's one-line reason)."""
    try:
        check = subprocess.run([str(SCRIPTS / "start.sh"), "--check"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"start.sh --check failed: {error}"
    said = (check.stdout + check.stderr).strip().splitlines()
    return check.returncode == 0, said[-1] if said else f"start.sh --check exited {check.returncode}"


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def daemon_pids() -> dict[str, int]:
    """The running daemons start.sh started, by pid file (``slurmctld.pid``: pid)."""
    pids = {}
    for name in PID_FILES:
        try:
            pid = int((slurm_dir() / name).read_text().strip())
        except (OSError, ValueError):
            continue
        if running(pid):
            pids[name] = pid
    return pids


def _command(name: str) -> str:
    return Path(name).stem  # "munge/munged.pid" -> "munged"


def stop_daemons(pids: dict[str, int]) -> None:
    """Stop exactly these daemons (slurmd first), each only while its pid still names that daemon,
    and wait for them to end (slurmd may take ~30 s when its controller is gone)."""
    for name in sorted(pids, key=PID_FILES.index):
        pid = pids[name]
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != _command(name):
                continue
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue
        deadline = time.monotonic() + 60
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        pid_file = slurm_dir() / name
        try:
            if int(pid_file.read_text().strip()) == pid:
                pid_file.unlink()
        except (OSError, ValueError):
            pass


def stop_started_cluster() -> None:
    """Whatever the suite's start.sh started (its pid files): for tests that must begin without it."""
    subprocess.run([str(SCRIPTS / "stop.sh")], capture_output=True, timeout=300)


@contextmanager
def stopped_however_the_run_ends(started: dict[str, int]) -> Iterator[None]:
    """Stop the ``started`` daemons at the end of the block, on SIGTERM / SIGHUP, and (a watchdog in
    a session of its own) when this process dies without either. Only these pids: a later run's
    cluster, started from the same folder, is not this run's to stop."""
    kills = " ".join(f'[ "$(cat /proc/{pid}/comm 2>/dev/null)" = {_command(name)} ] && kill {pid};'
                     for name, pid in started.items())
    watchdog = subprocess.Popen(
        ["bash", "-c", f'while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; {kills} true'],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    previous: dict[int, object] = {}

    def stop_then_die(signum: int, frame: object) -> None:
        stop_daemons(started)
        handler = previous.get(signum, signal.SIG_DFL)
        if callable(handler):
            handler(signum, frame)
        else:  # the default action (end the process), as without this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            previous[signum] = signal.signal(signum, stop_then_die)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        watchdog.kill()
        watchdog.wait()
        stop_daemons(started)


@pytest.fixture(scope="session")
def slurm():
    """The environment (SLURM_CONF, PYTHONPATH) under which sbatch, squeue and scancel reach the cluster."""
    up, reason = suite_cluster()
    if up:
        yield slurm_environment()
        return
    before = daemon_pids()
    start = subprocess.run([str(SCRIPTS / "start.sh")], capture_output=True, text=True, timeout=900)
    started = {name: pid for name, pid in daemon_pids().items() if before.get(name) != pid}
    with stopped_however_the_run_ends(started) if started else _nothing():
        up, reason = suite_cluster()
        if not up:
            said = (start.stdout + start.stderr).strip().splitlines()[-1:]
            pytest.skip(f"no local SLURM for the cluster tests: {reason} (start.sh: {said[0] if said else 'nothing'})")
        print(f"local SLURM: started {sorted(started)}", file=sys.stderr)
        yield slurm_environment()


@contextmanager
def _nothing() -> Iterator[None]:
    yield
