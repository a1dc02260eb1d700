"""A real S3 API server for the tests: moto's standalone server (``python -m moto.server``) on 127.0.0.1.

The one that ``.ci/s3/start.sh`` started (its URL in ``CRS_TEST_S3_URL``) is used when it answers;
otherwise the tests start their own on a free port and stop it at the end of the session, on SIGTERM
too, and when the test process dies (the kernel sends the server SIGTERM: ``PR_SET_PDEATHSIG``).
Never an in-process patch of the client: every request crosses a socket, as against a real bucket.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass

URL_ENV = "CRS_TEST_S3_URL"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "crs-test-key-id-3f9a61",
    "AWS_SECRET_ACCESS_KEY": "crs-test-secret-7c1e0b42d5",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""Test credentials with values no other text holds, so a test can grep outputs for them."""


def answers(url: str, timeout: float = 1.0) -> bool:
    """True when a moto server answers at ``url``."""
    try:
        urllib.request.urlopen(f"{url}/moto-api/", timeout=timeout).close()
        return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process before exec: SIGTERM it when the process that started it dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class S3Server:
    """One moto server: its URL and, when this process started it, its process (else None)."""

    url: str
    process: subprocess.Popen | None = None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_moto(port: int | None = None, timeout: float = 30.0) -> S3Server:
    """Start ``python -m moto.server`` on 127.0.0.1 (a free port unless given); RuntimeError when it cannot."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()  # the server logs every request: a pipe nobody reads would fill and block it
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    server = S3Server(url, process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answers(url):
            return server
        if process.poll() is not None:
            log.seek(0)
            error = log.read().decode(errors="replace").strip()
            raise RuntimeError(f"moto server exited ({error.splitlines()[-1] if error else process.returncode})")
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"moto server did not answer on {url} within {timeout:.0f} s")


def stop_on_sigterm(server: S3Server) -> None:
    """Stop ``server`` when this process gets SIGTERM, then let the signal do what it did before."""
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: object) -> None:
        server.stop()
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, handler)


def server_for_tests() -> S3Server:
    """The server ``.ci/s3/start.sh`` started when it answers, else one of our own."""
    given = os.environ.get(URL_ENV, "").strip()
    if given and answers(given):
        return S3Server(given)
    return start_moto()
