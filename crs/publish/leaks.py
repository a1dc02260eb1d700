"""Nothing local leaves in a bundle: no absolute path, host name or credential-looking string (DESIGN 8g).

``crs publish`` searches every text a bundle carries (JSON and text files whole; a parquet file's
embedded metadata, column names and text columns; an npz file's array names and text arrays) before it
writes the manifest, and refuses to publish on a finding. The spec's own places are replaced first
(:mod:`crs.publish.places`), so a finding is something else that slipped in: a note with a path, a
host name, a token.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

ABSOLUTE_PATH = re.compile(
    r"(?<![\w.:/~\\-])/[\w.+@-]+/[\w.+@~/-]*"  # /home/alice/..., /mnt/pacs/... (two segments at least)
    r"|(?<![\w])~/[\w.+@~/-]+"  # ~/data
    r"|(?<![\w])[A-Za-z]:\\[^\s\"'<>]+"  # C:\Users\...
    r"|\\\\[\w.-]+\\[^\s\"'<>]+"  # \\server\share
)
CREDENTIALS = {
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "an AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b"),
    "a Hugging Face token": re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    "a Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "an API secret key": re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    "a password in a URL": re.compile(r"://[^/\s:@\"']+:[^/\s@\"']+@"),
    "a secret assigned a value": re.compile(
        r"(?i)\b(?:password|passwd|secret|api[_-]?key|access[_-]?key|auth[_-]?token|access[_-]?token|token)\b"
        r"[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9_\-./+=]{8,}"),
}
MIN_HOST_NAME = 4
"""Host names shorter than this (``vm``, ``db``) are words too often to search for."""


def host_names() -> list[str]:
    """This machine's host names worth searching for (the short name and the fully qualified one)."""
    names = {socket.gethostname(), socket.getfqdn()}
    names |= {name.split(".", 1)[0] for name in names}
    return sorted(n for n in names if len(n) >= MIN_HOST_NAME and n.lower() not in ("localhost", "localhost.localdomain"))


def bundle_texts(path: Path) -> Iterator[str]:
    """The texts one bundle file carries (see the module docstring); nothing for pure number arrays."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        for key, value in (table.schema.metadata or {}).items():
            yield key.decode(errors="replace")
            yield value.decode(errors="replace")
        yield "\n".join(table.column_names)
        for column in table.column_names:
            kind = str(table.schema.field(column).type)
            if kind in ("string", "large_string") or kind.startswith("dictionary"):
                yield "\n".join(str(v) for v in set(table.column(column).to_pylist()))
    elif path.suffix == ".npz":
        import numpy as np

        with np.load(path, allow_pickle=False) as arrays:
            yield "\n".join(arrays.files)
            for key in arrays.files:
                if arrays[key].dtype.kind in "US":
                    yield "\n".join(map(str, arrays[key].ravel().tolist()))
    elif path.suffix != ".sig":
        yield path.read_bytes().decode(errors="replace")


def _excerpt(text: str, match: re.Match[str]) -> str:
    return json.dumps(text[max(0, match.start() - 20):match.end() + 20])


def leaks(bundle: Path) -> list[str]:
    """Every local path, host name or credential-looking string in the bundle's files, one line each."""
    hosts = [re.compile(rf"(?i)(?<![\w-]){re.escape(h)}(?![\w-])") for h in host_names()]
    found: dict[tuple[str, str], str] = {}
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        name = path.relative_to(bundle).as_posix()
        for text in bundle_texts(path):
            for what, pattern in [("an absolute local path", ABSOLUTE_PATH), *CREDENTIALS.items(),
                                  *(("this machine's host name", h) for h in hosts)]:
                match = pattern.search(text)
                if match and (name, what) not in found:
                    found[name, what] = f"{name} holds {what}: {_excerpt(text, match)}"
    return list(found.values())
