"""``crs cache push FOLDER URL`` and ``crs cache pull URL FOLDER`` against a real local S3 server: the
copy is byte-identical and stage 2 runs from it, a re-run copies only what the destination lacks, a
push killed part-way leaves no chunk that reads as valid and resumes, and no credential is written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from s3_server import CREDENTIALS
from tiny import write_tiny_spec


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """The tiny spec (one encoder, 16-row chunks: a few hundred objects) extracted into a local folder."""
    from crs.benchmark import Benchmark

    folder = tmp_path_factory.mktemp("push_pull")
    spec = write_tiny_spec(folder, encoders=("pixel_stats",), chunk_rows=16)
    Benchmark(spec).extract(progress=False)
    return spec, folder / "cache"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".crs-locks" not in p.parts and ".crs-sync" not in p.parts}


def _invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_push_then_pull_is_byte_identical_and_stage_2_reads_it(extracted, s3_bucket, tmp_path):
    spec, cache = extracted
    url = f"{s3_bucket}/team/cache"
    pushed = _invoke("cache", "push", str(cache), url)
    assert "0 already there" in pushed
    pulled = _invoke("cache", "pull", url, str(tmp_path / "home"))
    assert "0 already there" in pulled and "4 store(s) verified" in pulled
    assert _files(tmp_path / "home") == _files(cache)
    listing = _invoke("cache", "ls", "--cache", str(tmp_path / "home"))
    assert "pixel_stats" in listing and "current complete" in listing
    _invoke("probe", str(spec), "--cache", str(tmp_path / "home"), "--out", str(tmp_path / "out"), "-q")
    assert (tmp_path / "out" / "records.parquet").is_file()
    secrets = [value.encode() for key, value in CREDENTIALS.items() if key != "AWS_DEFAULT_REGION"]
    files = [*_files(tmp_path / "home").values(), *(p.read_bytes() for p in (tmp_path / "out").rglob("*")
                                                     if p.is_file())]
    assert not [s for s in secrets for blob in [pushed.encode(), pulled.encode(), listing.encode(), *files]
                if s in blob]
    assert not [blob for blob in files if s3_bucket.encode().removeprefix(b"s3://") in blob]  # nor the bucket


def test_a_second_transfer_copies_only_what_the_destination_lacks(extracted, s3_bucket, s3_env, tmp_path):
    import boto3

    _, cache = extracted
    _invoke("cache", "push", str(cache), f"{s3_bucket}/c")
    total = len(_files(cache))
    client = boto3.client("s3", endpoint_url=s3_env)
    bucket = s3_bucket.removeprefix("s3://")
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket, MaxKeys=1000)["Contents"])
    assert len(keys) == total
    flag = next(k for k in keys if "clean__done/c/" in k)
    chunk = next(k for k in keys if k.endswith("/clean/c/1/0"))
    client.delete_object(Bucket=bucket, Key=flag)
    client.delete_object(Bucket=bucket, Key=chunk)
    damaged = client.get_object(Bucket=bucket, Key=keys[-1])["Body"].read()
    client.put_object(Bucket=bucket, Key=keys[-1], Body=bytes(b ^ 0xFF for b in damaged))  # same size
    again = _invoke("cache", "push", str(cache), f"{s3_bucket}/c")
    assert "3 object(s) copied" in again and f"{total - 3} already there" in again
    _invoke("cache", "pull", f"{s3_bucket}/c", str(tmp_path / "home"))
    (tmp_path / "home" / Path(chunk).relative_to("c")).unlink()
    repeat = _invoke("cache", "pull", f"{s3_bucket}/c", str(tmp_path / "home"))
    assert "1 object(s) copied" in repeat and f"{total - 1} already there" in repeat
    assert _files(tmp_path / "home") == _files(cache)


def _nothing_reads_as_valid_that_is_not(folder: Path) -> None:
    """Every group ``crs cache ls`` calls complete has every chunk flagged and matching its checksum."""
    from crs.cache.inspect import list_cache
    from crs.cache.verify import verify_cache

    damaged = [str(p) for problems in verify_cache(folder).values() for p in problems if p.damaged]
    assert not damaged
    for store in list_cache(folder):
        for group in store.groups:
            if group.complete or group.current:
                assert all(array.complete for array in group.arrays), (store.path, group.encoder)


def test_every_moment_of_a_push_leaves_a_valid_cache(extracted, tmp_path, monkeypatch):
    """Replay the objects a push writes, in its order, and check the destination after every batch
    and inside batches (a batch's PUTs may land in any order)."""
    from crs.cache import transfer

    _, cache = extracted
    written: list[list[tuple[str, bytes]]] = []
    monkeypatch.setattr(transfer, "_write_many", lambda fs, objects, url: written.append(list(objects.items())))
    transfer.push(cache, "memory://replay/c")
    assert sum(len(batch) for batch in written) == len(_files(cache))
    replay = tmp_path / "replay"
    for batch in written:
        for index, (path, data) in enumerate(reversed(batch)):  # the batch's last objects land first
            target = replay / path.split("/c/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if index in (0, len(batch) // 2):
                _nothing_reads_as_valid_that_is_not(replay)
        _nothing_reads_as_valid_that_is_not(replay)
    assert _files(replay) == _files(cache)


def test_a_push_killed_part_way_leaves_nothing_that_reads_as_valid_and_resumes(extracted, s3_bucket, s3_env,
                                                                               tmp_path):
    import boto3

    _, cache = extracted
    url = f"{s3_bucket}/c"
    bucket = s3_bucket.removeprefix("s3://")
    client = boto3.client("s3", endpoint_url=s3_env)
    pusher = subprocess.Popen([sys.executable, "-m", "crs", "cache", "push", str(cache), url],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and pusher.poll() is None:
            if client.list_objects_v2(Bucket=bucket, MaxKeys=1000).get("KeyCount", 0) >= 40:
                break
            time.sleep(0.02)
        pusher.send_signal(signal.SIGKILL)
        output = pusher.communicate(timeout=30)[0]
    finally:
        pusher.kill()
    assert "copied" not in output, "the push finished before it was killed"
    # What the killed push left is a valid, incomplete cache: every chunk flagged there is whole.
    _invoke("cache", "pull", url, str(tmp_path / "partial"))  # pull verifies every flagged chunk
    _nothing_reads_as_valid_that_is_not(tmp_path / "partial")
    assert _files(tmp_path / "partial") != _files(cache)
    resumed = _invoke("cache", "push", str(cache), url)
    assert " 0 already there" not in resumed and " 0 object(s) copied" not in resumed  # resumed, not redone
    _invoke("cache", "pull", url, str(tmp_path / "partial"))
    assert _files(tmp_path / "partial") == _files(cache)


def test_urls_crs_cannot_serve_are_refused_in_one_line(extracted, tmp_path, monkeypatch):
    _, cache = extracted
    result = CliRunner().invoke(cli, ["cache", "push", str(cache), "gs2://bucket/x"])
    assert result.exit_code != 0 and "cannot serve gs2:// URLs" in result.output
    monkeypatch.setitem(sys.modules, "s3fs", None)
    result = CliRunner().invoke(cli, ["cache", "pull", "s3://bucket/x", str(tmp_path / "home")])
    assert result.exit_code != 0 and "pip install 'crs[s3]'" in result.output


def test_a_network_fault_stops_with_one_line(extracted, s3_env, monkeypatch, tmp_path):
    from s3_server import free_port

    _, cache = extracted
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    result = CliRunner().invoke(cli, ["cache", "push", str(cache), "s3://bucket/x"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "re-run: it resumes" in lines[0], result.output


def test_the_server_stopped_mid_push_stops_it_with_one_line(extracted, s3_env, monkeypatch):
    import boto3

    from s3_server import start_moto

    _, cache = extracted
    server = start_moto()  # a server of its own, stopped part-way through the push
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        client = boto3.client("s3", endpoint_url=server.url)
        client.create_bucket(Bucket="fault")
        pusher = subprocess.Popen([sys.executable, "-m", "crs", "cache", "push", str(cache), "s3://fault/c"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and pusher.poll() is None:
            if client.list_objects_v2(Bucket="fault", MaxKeys=1000).get("KeyCount", 0) >= 40:
                break
            time.sleep(0.02)
        server.stop()
        output = pusher.communicate(timeout=300)[0]
    finally:
        server.stop()
    lines = [line for line in output.splitlines() if line.strip()]
    assert pusher.returncode != 0 and len(lines) == 1, output
    assert "failed" in lines[0] and "re-run: it resumes" in lines[0]


@pytest.mark.parametrize("finished_after_listing", [1, 2])
def test_a_chunk_a_writer_finishes_during_a_push_is_never_sent_flagged_without_its_data(
        extracted, tmp_path, monkeypatch, finished_after_listing):
    """The writer finishes chunk 1 (data, then flag) after the push's first or second listing of the
    folder: the push sends a set flag only with its data; the next push sends whatever is left."""
    import shutil

    import fsspec

    from crs.cache import transfer

    _, cache = extracted
    folder = tmp_path / "cache"
    shutil.copytree(cache, folder)
    data = next(folder.glob("derm.zarr/encoders/pixel_stats/*/clean/c/1/0"))
    flag = data.parents[3] / "clean__done" / "c" / "1"
    finished = data.read_bytes()
    data.unlink()
    flag.write_bytes(b"\0")  # chunk 1 not yet complete when the push starts
    listed, calls = transfer._relative_objects, []

    def list_then_finish(filesystem, root, url):
        found = listed(filesystem, root, url)
        calls.append(root)
        if calls.count(str(folder.resolve())) == finished_after_listing and root == str(folder.resolve()):
            data.write_bytes(finished)
            flag.write_bytes(b"\1")
        return found

    monkeypatch.setattr(transfer, "_relative_objects", list_then_finish)
    target = f"memory://during{finished_after_listing}/c"
    memory = fsspec.filesystem("memory")
    sent_flag = f"/during{finished_after_listing}/c/{flag.relative_to(folder).as_posix()}"
    sent_data = f"/during{finished_after_listing}/c/{data.relative_to(folder).as_posix()}"
    transfer.push(folder, target)
    if memory.cat_file(sent_flag) == b"\1":
        assert memory.cat_file(sent_data) == finished
    transfer.push(folder, target)
    assert memory.cat_file(sent_flag) == b"\1" and memory.cat_file(sent_data) == finished


def test_a_push_of_named_stores_reads_and_sends_only_those(extracted, s3_bucket, s3_env, tmp_path, monkeypatch):
    """A URL cache pushes each data set's stores when they are written: only those are verified, compared
    and sent, so a spec of N data sets does not re-read the whole mirror N times."""
    from crs.cache import transfer

    _, cache = extracted
    stores = sorted(p.name for p in cache.iterdir() if p.suffix == ".zarr")
    first, rest = stores[0], stores[1:]
    read: list[str] = []  # every path verified or read on the way
    verify, read_many = transfer.verify_cache, transfer._read_many
    monkeypatch.setattr(transfer, "verify_cache", lambda root, *a: read.append(f"{root}/") or verify(root, *a))
    monkeypatch.setattr(transfer, "_read_many", lambda fs, paths, url: read.extend(paths) or read_many(fs, paths, url))
    url = f"{s3_bucket}/named/cache"
    report = transfer.push(cache, url, [first])
    assert report.verified_stores == 1 and report.copied > 0
    transfer.pull(url, tmp_path / "home")
    assert sorted(p.name for p in (tmp_path / "home").iterdir() if p.suffix == ".zarr") == [first]
    assert _files(tmp_path / "home" / first) == _files(cache / first)
    assert read and not [path for path in read if any(f"/{name}/" in path for name in rest)]
    whole = transfer.push(cache, url)  # the rest follows; what was sent is kept
    assert whole.kept == report.copied and whole.verified_stores == len(stores)
