"""What file system a cache folder lives on (from /proc/mounts), so network file systems get safe defaults.

On NFS, Lustre, GPFS, BeeGFS, CephFS, SMB and the like, O_DIRECT reads bypass the client's cache
for no gain (every read goes over the network anyway), are refused, or, on some clients, are
served inconsistently; stage 2 then reads chunk files through the page cache. Lock safety on
those systems is documented in docs/cluster.md.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "ceph", "fuse.ceph", "cifs", "smb3", "smbfs", "9p",
    "fuse.glusterfs", "glusterfs", "fuse.sshfs", "afs", "panfs", "wekafs", "fuse.juicefs",
})


def _unescape(field: str) -> str:
    """/proc/mounts writes spaces, tabs and backslashes in paths as octal escapes."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")


def filesystem_type(path: Path | str, mounts: str) -> str | None:
    """The type of the mount that holds ``path`` (the longest mount point above it), from a mounts table."""
    target = os.path.abspath(path)
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape(fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


@functools.lru_cache(maxsize=256)
def _type_of_folder(folder: str) -> str | None:
    try:
        mounts = Path("/proc/mounts").read_text()
    except OSError:
        return None
    return filesystem_type(os.path.realpath(folder), mounts)


def is_network_filesystem(path: Path | str) -> bool:
    """True when ``path`` (a file or folder) is on a network or parallel file system."""
    kind = _type_of_folder(str(Path(path).parent))
    return kind is not None and kind in NETWORK_FILESYSTEMS
