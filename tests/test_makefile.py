"""The install recipe (issue 34 item 10, issue 46 item 14): without nvidia-smi `make demo` installs the
pinned torch and torchvision from PyTorch's CPU wheel index, falling back to the default index when
that index cannot be reached; with nvidia-smi, or CPU=0, the PyPI wheels. Read with `make -n` in a copy
(no command runs, nothing is installed), on a PATH that has or lacks a stand-in nvidia-smi."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PINS = "torch==2.14.1 torchvision==0.29.1"


def _dry_run(tmp_path: Path, *variables: str, gpu: bool = True) -> list[str]:
    """The torch install lines `make -n install` prints, on a PATH with (``gpu``) or without an nvidia-smi."""
    return [line for line in _recipe(tmp_path, *variables, gpu=gpu) if "pip install" in line and "torch==" in line]


def _recipe(tmp_path: Path, *variables: str, gpu: bool = True) -> list[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    tools = tmp_path / ("with-gpu" if gpu else "no-gpu")
    tools.mkdir(exist_ok=True)
    if gpu:
        (tools / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
        (tools / "nvidia-smi").chmod(0o755)
    done = subprocess.run([make, "-n", "install", "PYTHON=python3", *variables], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={"PATH": str(tools)})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_cpu_installs_the_same_pins_from_the_cpu_index(tmp_path):
    line, _ = _dry_run(tmp_path, "CPU=1")  # asked for on a GPU machine too
    assert "--index-url https://download.pytorch.org/whl/cpu" in line and line.rstrip("; \\").endswith(PINS)
    line, _ = _dry_run(tmp_path, "CPU=1", "TORCH_INDEX=https://mirror.example/cpu")
    assert "--index-url https://mirror.example/cpu" in line and line.rstrip("; \\").endswith(PINS)


def test_the_default_keeps_the_pypi_wheels(tmp_path):
    (line,) = _dry_run(tmp_path)
    assert "--index-url" not in line and line.endswith(PINS)


def test_without_nvidia_smi_the_cpu_index_first_then_the_default_index(tmp_path):
    """No GPU and no CPU=1: the CPU build is the default, and the default index is the fallback when the CPU
    index cannot be reached (this workplace reaches PyPI only), so `make test` installs anywhere."""
    recipe = _recipe(tmp_path, gpu=False)
    text = "\n".join(recipe)
    first, fallback = _dry_run(tmp_path, gpu=False)
    assert "--index-url https://download.pytorch.org/whl/cpu" in first and first.rstrip("; \\").endswith(PINS)
    assert "--index-url" not in fallback and fallback.rstrip("; \\").endswith(PINS)
    probe = "scripts/url_reachable.py https://download.pytorch.org/whl/cpu/"
    assert f"if .venv/bin/python {probe}; then" in text
    assert text.index(probe) < text.index(first) < text.index("else") < text.index(fallback)
    assert "no nvidia-smi here: the CPU build of torch" in text and "cannot be reached" in text
    (pinned,) = _dry_run(tmp_path, "CPU=0", gpu=False)  # asked for: the PyPI build, no probe
    assert "--index-url" not in pinned and "url_reachable" not in "\n".join(_recipe(tmp_path, "CPU=0", gpu=False))


def test_the_reachability_probe_says_no_for_a_closed_port_and_yes_for_any_answer(tmp_path):
    import socket
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/"
    script = str(ROOT / "scripts" / "url_reachable.py")
    assert subprocess.run([sys.executable, script, closed], timeout=60).returncode == 1

    class NotFound(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 - the http.server spelling
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu/"
        assert subprocess.run([sys.executable, script, url], timeout=60).returncode == 0
    finally:
        server.shutdown()
        server.server_close()
