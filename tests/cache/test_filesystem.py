"""Network file systems are recognised from the mounts table, and chunk reads there skip O_DIRECT."""

from __future__ import annotations

import numpy as np

from crs.cache import direct, filesystem

MOUNTS = """\
overlay / overlay rw,relatime 0 0
proc /proc proc rw 0 0
server:/export /data nfs4 rw,vers=4.2 0 0
10.0.0.1@tcp:/scratch /lus/scratch lustre rw,flock 0 0
tmpfs /data/local\\040disk tmpfs rw 0 0
"""


def test_the_longest_mount_point_above_a_path_decides():
    assert filesystem.filesystem_type("/data/cache/cxr.zarr", MOUNTS) == "nfs4"
    assert filesystem.filesystem_type("/lus/scratch/me/cache", MOUNTS) == "lustre"
    assert filesystem.filesystem_type("/data/local disk/cache", MOUNTS) == "tmpfs"  # escaped space, nested
    assert filesystem.filesystem_type("/database", MOUNTS) == "overlay"  # a prefix of a name is not a parent
    assert filesystem.filesystem_type("/home/me", MOUNTS) == "overlay"


def test_chunk_reads_on_a_network_file_system_skip_o_direct(tmp_path, monkeypatch):
    path = tmp_path / "chunk"
    data = np.arange(direct.DIRECT_MIN_BYTES // 8, dtype=np.float64)
    path.write_bytes(data.tobytes())
    tried = []
    monkeypatch.setattr(direct, "_read_direct", lambda *args: tried.append(args) or None)
    target = np.empty_like(data)
    monkeypatch.setattr(direct, "is_network_filesystem", lambda p: True)
    assert direct._read_chunk(path, 0, memoryview(target).cast("B")) == data.nbytes
    assert np.array_equal(target, data) and tried == []  # read through the page cache
    monkeypatch.setattr(direct, "is_network_filesystem", lambda p: False)
    direct._read_chunk(path, 0, memoryview(target).cast("B"))
    assert len(tried) == (1 if direct.direct_reads() else 0)  # a local disk still tries O_DIRECT


def test_this_machines_temporary_folder_is_not_a_network_file_system(tmp_path):
    assert filesystem.is_network_filesystem(tmp_path / "x") is False
