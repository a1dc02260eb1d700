"""Network faults between crs and a real S3 server (moto behind tests/fault_proxy.py, a real localhost
proxy): throttling (503 SlowDown), connections dropped before or after the server acted, answers cut
mid-body. A push and a pull either succeed after the client's retries with the copy byte-identical, or
stop with one line and a non-zero exit, leaving no chunk that reads as valid; a re-run resumes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fault_proxy import FaultProxy

from tiny import write_tiny_spec


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """The tiny spec (one encoder, 16-row chunks: about 300 objects) extracted into a local folder."""
    from crs.benchmark import Benchmark

    folder = tmp_path_factory.mktemp("faults")
    spec = write_tiny_spec(folder, encoders=("pixel_stats",), chunk_rows=16)
    Benchmark(spec).extract(progress=False)
    return folder / "cache"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not {".crs-locks", ".crs-sync"} & set(p.parts)}


def _crs(endpoint: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crs", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "AWS_ENDPOINT_URL": endpoint, **env})


def _nothing_reads_as_valid_that_is_not(folder: Path) -> None:
    """No damaged chunk, and every group that reads as complete or current has every chunk flagged."""
    from crs.cache.inspect import list_cache
    from crs.cache.verify import verify_cache

    assert not [str(p) for problems in verify_cache(folder).values() for p in problems if p.damaged]
    for store in list_cache(folder):
        for group in store.groups:
            if group.complete or group.current:
                assert all(array.complete for array in group.arrays), (store.path, group.encoder)


def _lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


@pytest.mark.parametrize("fault", ["slowdown", "drop", "lose", "cut"])
def test_push_and_pull_through_a_faulty_network_end_byte_identical(extracted, s3_bucket, s3_server, tmp_path, fault):
    """Every 7th of the first 250 requests meets the fault: the lock, the listings, PUTs and GETs of chunks
    all meet some. "lose": the server acted but the answer never came (a create-only lock PUT among them)."""
    url = f"{s3_bucket}/c"

    def every_seventh(number: int, method: str, path: str) -> str | None:
        return fault if number % 7 == 3 and number < 250 else None

    for args in (["cache", "push", str(extracted), url], ["cache", "pull", url, str(tmp_path / "home")]):
        with FaultProxy(s3_server.url, every_seventh) as proxy:
            result = _crs(proxy.url, *args)
        assert result.returncode == 0, result.stdout + result.stderr
        assert proxy.faults.get(fault, 0) >= 5, proxy.faults  # the faults did happen
        assert "311 object(s) copied" in result.stdout, result.stdout
    assert _files(tmp_path / "home") == _files(extracted)


def test_throttling_that_outlasts_the_retries_stops_in_one_line_leaves_nothing_valid_and_resumes(
        extracted, s3_bucket, s3_server, tmp_path):
    url = f"{s3_bucket}/c"

    def throttled_after_60(number: int, method: str, path: str) -> str | None:
        return "slowdown" if number > 60 else None

    with FaultProxy(s3_server.url, throttled_after_60) as proxy:
        failed = _crs(proxy.url, "cache", "push", str(extracted), url, AWS_MAX_ATTEMPTS="1")
    lines = _lines(failed)
    assert failed.returncode != 0 and len(lines) == 1, failed.stdout + failed.stderr
    assert "SlowDown" in lines[0] and "re-run: it resumes" in lines[0], lines[0]

    partial = _crs(s3_server.url, "cache", "pull", url, str(tmp_path / "partial"))  # pull verifies every chunk
    assert partial.returncode == 0, partial.stdout + partial.stderr
    _nothing_reads_as_valid_that_is_not(tmp_path / "partial")
    assert _files(tmp_path / "partial") != _files(extracted)  # the push did stop part-way

    resumed = _crs(s3_server.url, "cache", "push", str(extracted), url)  # the failed push's lock: its pid is gone
    assert resumed.returncode == 0 and " 0 already there" not in resumed.stdout, resumed.stdout + resumed.stderr
    assert _crs(s3_server.url, "cache", "pull", url, str(tmp_path / "home")).returncode == 0
    assert _files(tmp_path / "home") == _files(extracted)


def test_a_lost_answer_to_the_lock_creation_leaves_the_push_its_own_lock(extracted, s3_bucket, s3_env, s3_server):
    """The server creates the lock object but the answer is lost: the client's retry of the create-only PUT
    is refused (the object exists). The push must see its own token there, not another writer."""
    import boto3

    url = f"{s3_bucket}/c"
    lost: list[str] = []

    def lose_the_first_lock_answer(number: int, method: str, path: str) -> str | None:
        if method == "PUT" and path.split("?")[0].endswith("/.crs-locks/writer.lock") and not lost:
            lost.append(path)
            return "lose"
        return None

    with FaultProxy(s3_server.url, lose_the_first_lock_answer) as proxy:
        result = _crs(proxy.url, "cache", "push", str(extracted), url)
    assert lost, "the lock's creation was never seen"
    assert result.returncode == 0 and "being written by" not in result.stdout + result.stderr, \
        result.stdout + result.stderr
    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=s3_env)
            .list_objects_v2(Bucket=s3_bucket.removeprefix("s3://"), Prefix="c/.crs-locks/").get("Contents", [])]
    assert keys == []  # released at the end, as any push's
