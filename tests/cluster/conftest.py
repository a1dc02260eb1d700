"""A real one-node SLURM on this machine for the cluster tests (started by .ci/run, or here when it is not).

The fixture uses a running cluster; without one it runs ``.ci/slurm/start.sh`` (which installs
Debian's slurm-wlm and munge as root) and stops what it started. The tests skip only when SLURM
cannot be installed or started, with start.sh's reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM_DIR = Path(os.environ.get("CRS_SLURM_DIR", "/tmp/crs-slurm"))


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    conf_path = SLURM_DIR / "conf_path"
    if conf_path.exists():
        env["SLURM_CONF"] = conf_path.read_text().strip()
    # Tasks import crs from this checkout (an editable install does the same on CI).
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _idle(env: dict[str, str]) -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and any(state.startswith(("idle", "mix", "alloc")) for state in out.stdout.split())


@pytest.fixture(scope="session")
def slurm():
    """The environment (SLURM_CONF, PYTHONPATH) under which sbatch, squeue and scancel reach the cluster."""
    env = _environment()
    started = False
    if not _idle(env):
        start = subprocess.run([str(REPO / ".ci/slurm/start.sh")], capture_output=True, text=True, timeout=900)
        env = _environment()
        started = True
        if not _idle(env):
            pytest.skip(f"no local SLURM: {(start.stdout + start.stderr).strip().splitlines()[-1:]}")
    yield env
    if started:
        subprocess.run([str(REPO / ".ci/slurm/stop.sh")], capture_output=True, timeout=60)
