"""Find cut-short image files without decoding them: a JPEG ends with its EOI marker, a PNG with IEND.

`crs check` runs this over every image of a data set that no cache record vouches for (decision
0118): one open and two small reads per file, where a decode costs the whole file. A file whose end
is not what its format requires is then decoded to confirm (some writers append bytes after the end
marker); only a file that fails to decode is reported. DICOM and other formats are left to the
sampled decode and to `crs datasets check`, which decodes every file.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crs.data.base import DataError
from crs.data.images import decode_image

JPEG_START, JPEG_END = b"\xff\xd8", b"\xff\xd9"
PNG_START, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"
TAIL_BYTES = 64


def looks_cut_short(path: Path) -> bool | None:
    """True when ``path`` is a JPEG or PNG whose last bytes are not its end marker; False when they are;
    None for a file of another format (or one that cannot be opened: the loaders report those)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return None
    if head.startswith(JPEG_START):
        return not tail.rstrip(b"\x00\r\n ").endswith(JPEG_END)
    if head.startswith(PNG_START):
        return PNG_END not in tail
    return None


def _cut_short(path: Path) -> str | None:
    """Why ``path`` cannot be decoded, when its end looks wrong; None when it is fine."""
    if not looks_cut_short(path):
        return None
    try:
        decode_image(path, draft_size=64)
    except DataError as error:
        return str(error)
    return None


def cut_short_files(root: Path | str, paths: Sequence[str], workers: int = 8) -> list[tuple[str, str]]:
    """(path, why) for each of ``paths`` under ``root`` that is a truncated JPEG or PNG, in order."""
    root = Path(root)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        found = list(pool.map(lambda p: _cut_short(root / p), paths, chunksize=256))
    return [(str(path), why) for path, why in zip(paths, found, strict=True) if why is not None]
