"""Corrupted chunks found by verify and repaired to the reference bytes; two writers; stale locks; shards."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import threading

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

from crs.cache.lock import LockHeldError, WriterLock, live_holder, writer_lock_path
from crs.cache.verify import repair, verify_store
from crs.cache.writer import chunk_file
from crs.cli.main import cli
from crs.cli.verify import verify

from faults_harness import assert_stores_identical, run_forked, write_fault_spec


def copy_reference(reference, tmp_path):
    _, data, reference_store, _, _ = reference
    spec_path = write_fault_spec(tmp_path, data)
    store = tmp_path / "cache" / "cxr.zarr"
    shutil.copytree(reference_store, store)
    return spec_path, store


def feature_array(store, encoder, name="clean"):
    root = zarr.open_group(str(store), mode="r")
    fingerprint = root[f"encoders/{encoder}"].attrs["current"]
    return f"encoders/{encoder}/{fingerprint}/{name}", root[f"encoders/{encoder}/{fingerprint}/{name}"]


def test_reference_store_verifies_clean(reference):
    assert verify_store(reference[2]) == []


def test_flipped_truncated_and_missing_chunks_are_named_and_repaired(reference, tmp_path):
    spec_path, store = copy_reference(reference, tmp_path)
    clean_path, clean = feature_array(store, "resnet18")
    jpeg_path, jpeg = feature_array(store, "pixel_stats", "corrupt/jpeg/2")
    flipped = chunk_file(clean, 3)
    raw = bytearray(flipped.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # one bit of one float16 value
    flipped.write_bytes(bytes(raw))
    truncated = chunk_file(clean, 5)
    truncated.write_bytes(truncated.read_bytes()[:10])
    chunk_file(jpeg, 0).unlink()

    found = {(p.array, p.chunk, p.kind) for p in verify_store(store)}
    assert found == {(clean_path, 3, "checksum"), (clean_path, 5, "unreadable"), (jpeg_path, 0, "missing-chunk")}

    # The CLI names each bad chunk and exits 1; --repair needs the spec.
    result = CliRunner().invoke(verify, ["--cache", str(store.parent)])
    assert result.exit_code == 1
    assert f"{clean_path} chunk 3: checksum" in result.output and f"{jpeg_path} chunk 0: missing-chunk" in result.output
    result = CliRunner().invoke(verify, ["--cache", str(store.parent), "--repair"])
    assert result.exit_code == 2 and "needs the spec" in result.output

    # Repair re-extracts exactly the three bad chunks and restores the reference bytes.
    result = CliRunner().invoke(verify, ["--spec", str(spec_path), "--repair", "-q"])
    assert result.exit_code == 0, result.output
    assert "re-extracted 3 chunk(s)" in result.output
    assert verify_store(store) == []
    assert_stores_identical(store, reference[2])


def test_wrong_shape_array_is_deleted_and_rebuilt(reference, tmp_path):
    spec_path, store = copy_reference(reference, tmp_path)
    path, clean = feature_array(store, "pixel_stats")
    root = zarr.open_group(str(store), mode="a")
    root.create_array(path, shape=(7, 3), dtype="float32", overwrite=True)
    kinds = {p.kind for p in verify_store(store) if p.array == path}
    assert kinds == {"dtype", "shape"}
    repair(verify_store(store))
    assert run_forked(spec_path) == 0
    assert_stores_identical(store, reference[2])


def start_holder(path):
    """Fork a child that takes the lock and holds it until the parent writes to ``release`` (or kills it)."""
    ready_read, ready_write = os.pipe()
    release_read, release_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with WriterLock(path, "test holder"):
                os.write(ready_write, b"1")
                os.read(release_read, 1)
        finally:
            os._exit(0)
    assert os.read(ready_read, 1) == b"1"
    return pid, release_write


def test_second_writer_exits_naming_the_holder_then_takes_over_a_dead_ones_lock(reference, tmp_path, caplog):
    spec_path = write_fault_spec(tmp_path, reference[1])
    store = tmp_path / "cache" / "cxr.zarr"
    lock = writer_lock_path(store, "resnet18")
    pid, _ = start_holder(lock)
    try:
        assert live_holder(store, "resnet18") is not None and f"pid {pid}" in live_holder(store, "resnet18")
        result = CliRunner().invoke(cli, ["extract", str(spec_path), "-q"], obj={})
        assert result.exit_code == 2
        line = result.output.strip().splitlines()[-1]
        assert line.startswith("crs: error: ") and f"held by pid {pid} on host {socket.gethostname()}" in line
    finally:
        os.kill(pid, signal.SIGKILL)  # dies holding the lock: its file stays behind
        os.waitpid(pid, 0)
    assert json.loads(lock.read_text())["pid"] == pid
    assert live_holder(store, "resnet18") is None
    with caplog.at_level(logging.WARNING, logger="crs.cache.lock"):
        result = CliRunner().invoke(cli, ["extract", str(spec_path), "-q"], obj={})
    assert result.exit_code == 0, result.output
    assert any(f"left by pid {pid}" in r.getMessage() and "no longer running" in r.getMessage() for r in caplog.records)
    assert_stores_identical(store, reference[2])
    assert not lock.exists()  # released at the end


def test_waiting_writer_proceeds_when_the_holder_releases(tmp_path):
    lock = tmp_path / "l.lock"
    pid, release = start_holder(lock)
    with pytest.raises(LockHeldError, match=f"held by pid {pid}"):
        WriterLock(lock).acquire()
    os.write(release, b"x")  # the holder releases; a waiting writer then gets the lock
    with WriterLock(lock, wait=True, timeout=60, poll_seconds=0.05) as acquired:
        assert json.loads(lock.read_text())["pid"] == os.getpid() and acquired.took_over is None
    os.waitpid(pid, 0)


def test_lock_from_another_host_whose_owner_renews_it_is_refused_with_the_fix(tmp_path):
    lock = tmp_path / "l.lock"
    lock.write_text(json.dumps({"pid": 4242, "host": "gpu-node-7", "started": "2025-01-01T00:00:00+00:00",
                                "lease": 2}))
    stop = threading.Event()

    def renew() -> None:  # the owner's heartbeat, on "another node"
        while not stop.wait(0.1):
            os.utime(lock)

    beat = threading.Thread(target=renew)
    beat.start()
    try:
        with pytest.raises(LockHeldError, match=f"pid 4242 on host gpu-node-7 .*delete {lock}"):
            WriterLock(lock, poll_seconds=0.05).acquire()
    finally:
        stop.set()
        beat.join()


def test_lock_file_of_a_dead_pid_is_taken_over(tmp_path, caplog):
    lock = tmp_path / "l.lock"
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)  # a pid that is certainly gone
    lock.write_text(json.dumps({"pid": child, "host": socket.gethostname(), "started": "x"}))
    with caplog.at_level(logging.WARNING, logger="crs.cache.lock"), WriterLock(lock) as held:
        assert held.took_over is not None and held.took_over.pid == child
    assert "no longer running" in caplog.text


def test_two_concurrent_shard_workers_fill_one_store_bit_identically(reference, tmp_path):
    spec_path = write_fault_spec(tmp_path, reference[1])
    store = tmp_path / "cache" / "cxr.zarr"
    reports = [tmp_path / f"shard{i}.json" for i in range(2)]
    pids = []
    for i in range(2):
        pid = os.fork()
        if pid == 0:
            os._exit(os.waitstatus_to_exitcode(run_forked(spec_path, report=reports[i], shard=(i, 2))))
        pids.append(pid)
    assert [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids] == [0, 0]
    written = [json.loads(r.read_text())["chunks_written"] for r in reports]
    assert sum(written) == reference[4]["chunks_written"] and min(written) > 0
    assert_stores_identical(store, reference[2])


def test_shards_one_after_another_and_a_finished_store_marks_current_once_complete(reference, tmp_path):
    spec_path = write_fault_spec(tmp_path, reference[1])
    store = tmp_path / "cache" / "cxr.zarr"
    for i in range(3):
        assert run_forked(spec_path, shard=(i, 3)) == 0
        root = zarr.open_group(str(store), mode="r")
        current = root["encoders/resnet18"].attrs.get("current")
        assert (current is not None) == (i == 2)  # current only once every shard is done
    assert_stores_identical(store, reference[2])


def test_invalid_shard_is_refused(reference):
    import click

    from crs.cli.shard import parse_shard

    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "-1/2", "a/b", "1"):
        with pytest.raises(click.BadParameter, match="i/n"):
            parse_shard(bad)


def test_incomplete_chunks_are_reported_by_verify(reference, tmp_path):
    _, store = copy_reference(reference, tmp_path)
    path, _ = feature_array(store, "pixel_stats")
    root = zarr.open_group(str(store), mode="a")
    root[path + "__done"][2] = 0
    problems = verify_store(store)
    assert [(p.array, p.chunk, p.kind) for p in problems] == [(path, 2, "incomplete")]
    assert np.asarray(root[path + "__done"][:]).sum() == 7


def test_a_second_array_with_other_settings_is_refused_while_the_first_is_unfinished(reference, tmp_path):
    from crs.cache.store import CacheError
    from crs.spec import load_spec

    from faults_harness import extract_spec

    spec_path = write_fault_spec(tmp_path, reference[1])
    assert run_forked(spec_path, shard=(0, 2)) == 0  # the first array's task 0; task 1 has not run
    spec = load_spec(spec_path)
    other = dataclasses.replace(spec, extract=dataclasses.replace(spec.extract, corruption_rows=6))
    with pytest.raises(CacheError, match="unfinished run with other settings") as error:
        extract_spec(other, (1, 2))
    assert "\n" not in str(error.value) and "corruption_rows 'all' here, 6 asked" in str(error.value)
    with pytest.raises(CacheError, match="unfinished run with other settings"):
        extract_spec(other)  # a lone run is refused too while the sharded one is unfinished
    assert run_forked(spec_path, shard=(1, 2)) == 0  # the first array finishes, as if nothing happened
    assert_stores_identical(store := tmp_path / "cache" / "cxr.zarr", reference[2])
    assert verify_store(store) == []
