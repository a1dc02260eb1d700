"""A genuinely interrupted extraction: verify says "unfinished, resumes", not BAD; Ctrl-C says what was kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import zarr
from click.testing import CliRunner

from crs.cache.verify import verify_store
from crs.cache.writer import chunk_file
from crs.cli.verify import verify

from faults_harness import run_forked, write_fault_spec

REPOSITORY = Path(__file__).resolve().parents[2]


def test_verify_on_a_killed_cache_says_unfinished_not_bad(reference, tmp_path):
    _, data, _, writes, _ = reference
    spec_path = write_fault_spec(tmp_path, data)
    status = run_forked(spec_path, kill_at=writes - 50, mode="after")  # a third of the chunks written
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    store = tmp_path / "cache" / "cxr.zarr"
    incomplete = [p for p in verify_store(store) if p.kind == "incomplete"]
    assert len(incomplete) >= 5  # one per unwritten row chunk: what used to be as many BAD lines

    result = CliRunner().invoke(verify, ["--cache", str(store.parent)])
    assert result.exit_code == 0, result.output
    assert "BAD" not in result.output
    groups = {"/".join(p.array.split("/")[:3]) for p in incomplete}
    lines = [line for line in result.output.splitlines() if line.startswith("INCOMPLETE ")]
    assert len(lines) == len(groups) and all("`crs extract` resumes it" in line for line in lines)
    assert "nothing damaged; 1 with unfinished extractions" in result.output

    # damage still reads BAD and exits 1, beside the unfinished groups
    root = zarr.open_group(str(store), mode="r")
    flags = [(name, np.asarray(node[:])) for name, node in root["encoders"].members(max_depth=None)
             if isinstance(node, zarr.Array) and name.endswith("__done")]
    name, done = next((name, done) for name, done in flags if done.any())
    array, chunk = root[f"encoders/{name.removesuffix('__done')}"], int(np.flatnonzero(done)[0])
    path = chunk_file(array, chunk)
    path.write_bytes(path.read_bytes()[:5])
    damaged = CliRunner().invoke(verify, ["--cache", str(store.parent)])
    assert damaged.exit_code == 1 and damaged.output.count("BAD ") == 1 and "INCOMPLETE " in damaged.output


INTERRUPT_AT_WRITE = textwrap.dedent("""
    import os, signal, sys, threading
    # Ctrl-C as in a terminal, even when this test runs under a background job that ignores SIGINT
    # (a script's `cmd &` does, and its children inherit it): Python then never installs its handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import zarr.storage._local as local
    original, calls, lock = local._put, {"n": 0}, threading.Lock()
    def put(path, value, exclusive=False):
        result = original(path, value, exclusive)
        with lock:
            calls["n"] += 1
            if calls["n"] == int(os.environ["INTERRUPT_AT"]):
                os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends
        return result
    local._put = put
    from crs.cli.main import main
    sys.argv = ["crs", *sys.argv[1:]]
    main()
""")


def test_ctrl_c_says_what_was_kept_and_how_to_resume(reference, tmp_path):
    _, data, _, writes, _ = reference
    spec_path = write_fault_spec(tmp_path, data)
    env = {**os.environ, "INTERRUPT_AT": str(writes // 2), "PYTHONPATH": str(REPOSITORY)}
    done = subprocess.run([sys.executable, "-c", INTERRUPT_AT_WRITE, "extract", str(spec_path), "-q"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 130, done.stderr
    assert "Aborted!" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("crs: interrupted")]
    assert "during extract" in line
    kept = [line for line in done.stderr.splitlines() if line.startswith("crs: kept ")]
    assert kept and "forward passes" in kept[0] and "row chunks" in kept[0]
    assert f"crs: to resume, run again: crs extract {spec_path}" in done.stderr
    # and what it says was kept is what a resume keeps
    resumed = subprocess.run([sys.executable, "-m", "crs", "extract", str(spec_path), "-q"], capture_output=True,
                             text=True, env=env, cwd=REPOSITORY, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    passes = kept[0].split("kept ")[1].split(" of ")[0]
    assert f"kept {passes} of " in resumed.stdout
