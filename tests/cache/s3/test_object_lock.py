"""One writer per cache URL, by conditional writes on a real local S3 server: of many writers starting at
once exactly one gets the lock, a second push is refused in one line naming the holder, and a lock
whose holder stopped renewing it is taken over after its lease."""

from __future__ import annotations

import json
import threading

from click.testing import CliRunner

from crs.cache.object_lock import LOCK_KEY, ObjectLock, RemoteLockHeld
from crs.cli.main import cli


def test_of_writers_starting_at_once_exactly_one_holds_the_lock(s3_bucket):
    url = f"{s3_bucket}/cache"
    start = threading.Barrier(6)
    won, refused = [], []

    def writer() -> None:
        lock = ObjectLock(url, lease=60)
        start.wait()
        try:
            lock.acquire()
            won.append(lock)
        except RemoteLockHeld as error:
            refused.append(str(error))

    threads = [threading.Thread(target=writer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 5
    assert all("is being written by pid" in message for message in refused)
    won[0].release()
    with ObjectLock(url, lease=60):  # released: free again
        pass


def test_a_second_push_is_refused_while_a_writer_holds_the_url(s3_bucket, tmp_path):
    import s3fs

    folder = tmp_path / "cache"
    folder.mkdir()
    url = f"{s3_bucket}/cache"
    with ObjectLock(url, lease=60):
        result = CliRunner().invoke(cli, ["cache", "push", str(folder), url])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "is being written by pid" in lines[0], result.output
    s3fs.S3FileSystem.clear_instance_cache()
    assert s3fs.S3FileSystem().find(url) == []  # the refused push wrote nothing, and the lock is gone
    result = CliRunner().invoke(cli, ["cache", "push", str(folder), url])
    assert result.exit_code == 0, result.output


def test_a_lock_its_holder_stopped_renewing_is_taken_over_after_the_lease(s3_bucket, caplog):
    import time

    import s3fs

    url = f"{s3_bucket}/cache"
    dead = {"pid": 999999, "host": "rented-gpu-7", "lease_seconds": 1}
    s3fs.S3FileSystem().pipe_file(f"{url.removeprefix('s3://')}/{LOCK_KEY}", json.dumps(dead).encode())
    try:
        ObjectLock(url, lease=30).acquire()
        raise AssertionError("a fresh lock was taken over")
    except RemoteLockHeld as error:
        assert "pid 999999 on host rented-gpu-7" in str(error)
    time.sleep(2.5)  # the server's LastModified has second resolution
    with caplog.at_level("WARNING", logger="crs.cache.object_lock"), ObjectLock(url, lease=1):
        pass
    assert "taking over the lock" in caplog.text and "rented-gpu-7" in caplog.text
