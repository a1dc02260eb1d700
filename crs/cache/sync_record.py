"""What a cache folder last held in step with a cache URL: the MD5 of every object it pulled or pushed.

A pull uses it to tell the URL's newer bytes from unpushed local work (decision 0190): a folder file
that differs from the URL's object is replaced only when it still holds the bytes of the last transfer
(so only the URL changed since); otherwise it was written here since, and is kept and reported.
One small JSON file per URL, ``<folder>/.crs-sync/<sha256(url)[:16]>.json``, outside every store, so
it never travels; only the URL's digest names it (no bucket name lands in a path).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

SYNC_FOLDER = ".crs-sync"


def record_path(folder: Path, url: str) -> Path:
    return Path(folder) / SYNC_FOLDER / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"


def load_record(folder: Path, url: str) -> dict[str, str]:
    """Object path (relative to the folder) -> MD5 of its bytes at the last transfer with ``url``; empty
    when the folder never exchanged with it (or the record is unreadable: then every difference counts
    as local work, the safe side)."""
    try:
        found = json.loads(record_path(folder, url).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def save_record(folder: Path, url: str, in_step: dict[str, str], gone: tuple[str, ...] = ()) -> None:
    """Merge ``in_step`` (objects now equal on both sides) into the record and drop ``gone``; written
    through a temporary file and a rename, so a kill leaves the old record or the new one."""
    if not in_step and not gone:
        return
    target = record_path(folder, url)
    merged = {**load_record(folder, url), **in_step}
    for relative in gone:
        merged.pop(relative, None)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, suffix=".partial")
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(merged, handle, sort_keys=True, separators=(",", ":"))
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)
