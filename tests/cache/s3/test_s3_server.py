"""The local S3 API server the object-storage tests run against is real and strict: zarr v3 arrays go
through s3fs over HTTP, a conditional write is refused, and the project's scripts start and stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from s3_server import answers, free_port

REPO = Path(__file__).resolve().parents[3]


def test_a_zarr_array_written_through_s3fs_reads_back_equal(s3_bucket):
    import zarr
    from zarr.storage import FsspecStore

    values = np.arange(600, dtype=np.float16).reshape(20, 30)
    store = FsspecStore.from_url(f"{s3_bucket}/cache/t.zarr", storage_options={"asynchronous": True})
    array = zarr.create_array(store, name="clean", shape=values.shape, chunks=(8, 30), dtype="float16")
    array[...] = values
    again = zarr.open_array(FsspecStore.from_url(f"{s3_bucket}/cache/t.zarr", read_only=True), path="clean")
    np.testing.assert_array_equal(again[...], values)


def test_the_server_refuses_a_second_create_only_put(s3_bucket, s3_env):
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("s3", endpoint_url=s3_env)
    bucket = s3_bucket.removeprefix("s3://")
    client.put_object(Bucket=bucket, Key="lock", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=bucket, Key="lock", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key="lock")["Body"].read() == b"first"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_the_ci_scripts_start_and_stop_the_server(tmp_path, s3_server):
    environment = {**os.environ, "CRS_S3_DIR": str(tmp_path), "CRS_S3_PORT": str(free_port()),
                   "CRS_S3_PYTHON": sys.executable}
    started = subprocess.run([str(REPO / ".ci/s3/start.sh")], env=environment, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    pid = int((tmp_path / "moto.pid").read_text())
    assert url == f"http://127.0.0.1:{environment['CRS_S3_PORT']}" and answers(url)
    again = subprocess.run([str(REPO / ".ci/s3/start.sh")], env=environment, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 1 and "is taken" in again.stderr  # a fixed port is never shared silently
    subprocess.run([str(REPO / ".ci/s3/stop.sh")], env=environment, check=True, timeout=60)
    assert _gone(pid) and not answers(url)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_server_the_tests_started_stops_when_they_are_killed(tmp_path, how, s3_server):
    script = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, sys.argv[1])
        from s3_server import start_moto, stop_on_sigterm
        server = start_moto()
        stop_on_sigterm(server)
        print(server.process.pid, flush=True)
        time.sleep(120)
    """)
    runner = subprocess.Popen([sys.executable, "-c", script, str(REPO / "tests")], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(runner.stdout.readline())
        assert _pid_alive(server_pid)
        runner.send_signal(how)
        runner.wait(timeout=30)
        assert _gone(server_pid), f"the moto server outlived its test process ({how.name})"
    finally:
        runner.kill()
