"""A full disk (ENOSPC) in the middle of stage 1: one line naming the store and the bytes needed, no
finished-looking partial chunk, and a resume once space is freed that equals an uninterrupted run.

Two ways to fill the disk: a real size-limited file system (a tmpfs mounted here, as root), and
ENOSPC injected into zarr's file writes after a number of them (anywhere).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crs.cache.verify import verify_store
from crs.cache.writer import CacheFullError
from crs.spec import load_spec

from faults_harness import assert_stores_identical, extract_spec, write_fault_spec


def disk_bytes(folder: Path) -> int:
    """Bytes the folder's files take on a file system of 4 KiB pages (tmpfs)."""
    return sum(-(-path.stat().st_size // 4096) * 4096 for path in folder.rglob("*") if path.is_file())


def assert_stopped_cleanly(error: CacheFullError, store: Path) -> None:
    message = str(error)
    assert "\n" not in message and str(store) in message and "more bytes" in message, message
    assert not list(store.rglob("*.partial")), "a temporary file was left behind"
    # Every problem is a chunk not yet flagged: nothing looks finished that is not.
    assert {problem.kind for problem in verify_store(store)} == {"incomplete"}


@pytest.fixture
def tmpfs(tmp_path):
    folder = tmp_path / "small-disk"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (the injected ENOSPC test runs anyway)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_a_full_tmpfs_stops_with_one_line_and_resumes_once_space_is_freed(reference, tmpfs, tmp_path):
    _, data, reference_store, _, _ = reference
    full_size = disk_bytes(reference_store)
    size = full_size // 2 // 4096 * 4096
    subprocess.run(["mount", "-o", f"remount,size={size}", str(tmpfs)], check=True)
    spec = load_spec(write_fault_spec(tmp_path / "spec", data, cache=tmpfs / "cache"))
    store = tmpfs / "cache" / "cxr.zarr"
    with pytest.raises(CacheFullError) as error:
        extract_spec(spec)
    assert_stopped_cleanly(error.value, store)
    subprocess.run(["mount", "-o", f"remount,size={2 * full_size}", str(tmpfs)], check=True)  # space freed
    extract_spec(spec)
    assert_stores_identical(store, reference_store)
    assert verify_store(store) == []


def test_enospc_injected_mid_chunk_stops_with_one_line_and_resumes(reference, tmp_path, monkeypatch):
    import zarr.storage._local as local

    _, data, reference_store, writes, _ = reference
    spec = load_spec(write_fault_spec(tmp_path, data))
    store = tmp_path / "cache" / "cxr.zarr"
    original = local._put
    calls = {"n": 0}

    def full_disk(path, value, exclusive=False):
        calls["n"] += 1
        if calls["n"] >= writes // 2 and "/c/" in str(path):  # chunk data, checksums and flags from halfway on
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return original(path, value, exclusive)

    monkeypatch.setattr(local, "_put", full_disk)
    with pytest.raises(CacheFullError) as error:
        extract_spec(spec)
    assert_stopped_cleanly(error.value, store)
    monkeypatch.setattr(local, "_put", original)
    extract_spec(spec)
    assert_stores_identical(store, reference_store)
    assert verify_store(store) == []
    shutil.rmtree(store)
