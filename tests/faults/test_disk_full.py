"""A full disk (ENOSPC) in the middle of stage 1: one line naming the store and the bytes needed, no
finished-looking partial chunk, and a resume once space is freed that equals an uninterrupted run.

Two ways to fill the disk: a real size-limited file system (a tmpfs mounted here, as root), and
ENOSPC injected into zarr's file writes after a number of them (anywhere).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from crs.cache.verify import verify_store
from crs.cache.writer import CacheFullError
from crs.cli.main import cli
from crs.cli.verify import verify
from crs.spec import load_spec

from faults_harness import assert_stores_identical, extract_spec, write_fault_spec


def disk_bytes(folder: Path) -> int:
    """Bytes the folder's files take on a file system of 4 KiB pages (tmpfs)."""
    return sum(-(-path.stat().st_size // 4096) * 4096 for path in folder.rglob("*") if path.is_file())


def assert_stopped_cleanly(error: CacheFullError, store: Path) -> None:
    message = str(error)
    assert "\n" not in message and str(store) in message and "still need about" in message, message
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


def used_bytes(folder: Path) -> int:
    stats = os.statvfs(folder)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


@pytest.mark.parametrize("share, stage", [(1 / 64, "unfinished-table"), (1 / 6, "arrays"), (1 / 2, "incomplete")])
def test_a_full_tmpfs_at_any_moment_is_one_line_and_resumes_with_the_bytes_it_names(reference, tmpfs, tmp_path,
                                                                                     share, stage):
    """Full while the sample table is written, while the arrays are made, and among the chunks: the
    CLI prints one line naming the store and the bytes still needed in whole blocks; `crs cache
    verify` shows only unfinished parts (exit 0); a disk grown by exactly the bytes named resumes
    bit-identically."""
    _, data, reference_store, _, _ = reference
    size = max(4096, int(disk_bytes(reference_store) * share) // 4096 * 4096)
    subprocess.run(["mount", "-o", f"remount,size={size}", str(tmpfs)], check=True)
    spec_path = write_fault_spec(tmp_path / "spec", data, cache=tmpfs / "cache")
    store = tmpfs / "cache" / "cxr.zarr"
    # `crs extract` refuses to start on a disk smaller than the features (its check), or stops when
    # the disk fills: one line either way. A disk that fills while the run is under way (another job
    # writing beside it) is what stage 1 itself meets: the Python call below skips the check.
    stopped = CliRunner().invoke(cli, ["extract", str(spec_path), "-q"], obj={})
    last = stopped.output.strip().splitlines()[-1]
    assert stopped.exit_code != 0 and "Traceback" not in stopped.output and "[Errno" not in stopped.output
    assert last.startswith((f"crs: error: cache folder {tmpfs / 'cache'}", "crs: error: disk full")), last
    assert " bytes free" in last, last
    with pytest.raises(CacheFullError) as error:
        extract_spec(load_spec(spec_path))
    line = str(error.value)
    assert "\n" not in line and line.startswith(f"disk full under the cache store {store}"), line
    assert "[Errno" not in line and "blocks as the file system does" in line
    needed = int(re.search(r"still need about ([\d,]+) bytes", line).group(1).replace(",", ""))
    checked = CliRunner().invoke(verify, ["--cache", str(store.parent)])
    assert checked.exit_code == 0 and "BAD" not in checked.output, checked.output
    kinds = {problem.kind for problem in verify_store(store)}
    assert kinds <= {"unfinished-table", "incomplete", "temp-file"}, kinds
    if stage != "arrays":
        assert stage in kinds, kinds
    # Grow the disk by exactly what the line named: the resume fits and equals an uninterrupted run.
    subprocess.run(["mount", "-o", f"remount,size={used_bytes(tmpfs) + needed}", str(tmpfs)], check=True)
    result = CliRunner().invoke(cli, ["extract", str(spec_path), "-q"], obj={})
    assert result.exit_code == 0, result.output
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


def test_crs_check_judges_the_disk_in_whole_blocks_not_raw_feature_bytes(reference, tmpfs, tmp_path):
    """A disk that holds the raw feature bytes but not their chunks in whole blocks (with checksum and flag
    files) is refused by `crs check` before any GPU time, with both counts; judged on raw bytes it passed
    and the run then filled the disk."""
    from crs.extract.plan import plan_spec

    _, data, _, _, _ = reference
    spec_path = write_fault_spec(tmp_path / "spec", data, cache=tmpfs / "cache")
    plan = plan_spec(load_spec(spec_path))
    raw, on_disk = plan.bytes_to_write, plan.disk_bytes_to_write
    assert on_disk > 2 * raw + 2 * 4096, (raw, on_disk)  # small chunks: blocks and the side files dominate
    size = -(-(raw + 2 * 4096) // 4096) * 4096  # the raw bytes fit, with room to spare
    assert size < on_disk
    subprocess.run(["mount", "-o", f"remount,size={size}", str(tmpfs)], check=True)
    checked = CliRunner().invoke(cli, ["check", str(spec_path)], obj={})
    assert checked.exit_code != 0, checked.output
    assert f"{on_disk:,} bytes on disk in whole blocks" in checked.output, checked.output
    assert f"{raw:,} bytes of features" in checked.output
    # The estimate is what the finished store's feature arrays do take on a 4 KiB-page disk.
    _, _, reference_store, _, _ = reference
    taken = disk_bytes(reference_store / "encoders")
    assert 0.9 * taken <= on_disk <= 1.1 * taken, (on_disk, taken)
