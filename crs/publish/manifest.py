"""A bundle's manifest: the sha256 of every file in it, written and checked in one canonical form.

The manifest's bytes are what a signature signs (:mod:`crs.publish.signing`), so they are written
deterministically: keys sorted, paths relative with ``/``, one file a line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
SIGNATURE_FILE = "manifest.sig"
BUNDLE_FORMAT = "crs-bundle/1"
_NOT_LISTED = {MANIFEST_FILE, SIGNATURE_FILE}


def file_sha256(path: Path) -> str:
    """sha256 of ``path``'s bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def bundle_files(root: Path) -> list[str]:
    """Every file under ``root`` but the manifest and its signature, as sorted ``/`` paths."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and p.relative_to(root).as_posix() not in _NOT_LISTED)


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The canonical bytes of a manifest (what is written and signed)."""
    return (json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()


def write_manifest(root: Path, kind: str, fields: dict[str, Any]) -> bytes:
    """Hash every file under ``root`` and write ``manifest.json``; return its bytes."""
    manifest = {"format": BUNDLE_FORMAT, "kind": kind, **fields,
                "files": {name: file_sha256(root / name) for name in bundle_files(root)}}
    data = manifest_bytes(manifest)
    (root / MANIFEST_FILE).write_bytes(data)
    return data


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``root`` (ValueError when it is missing or not a crs bundle)."""
    path = root / MANIFEST_FILE
    if not path.is_file():
        raise ValueError(f"{root} holds no {MANIFEST_FILE}: not a crs bundle (write one with `crs publish RUN BUNDLE`)")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{path}: format {manifest.get('format')!r} is not {BUNDLE_FORMAT!r}")
    return manifest


def manifest_problems(root: Path, manifest: dict[str, Any]) -> list[str]:
    """Files missing, changed or not listed, each one line (empty: the bundle is as published)."""
    listed: dict[str, str] = manifest.get("files", {})
    present = set(bundle_files(root))
    problems = [f"missing: {name}" for name in sorted(set(listed) - present)]
    problems += [f"not in the manifest: {name}" for name in sorted(present - set(listed))]
    problems += [f"changed: {name} (sha256 {file_sha256(root / name)[:12]}..., manifest {digest[:12]}...)"
                 for name, digest in sorted(listed.items()) if name in present and file_sha256(root / name) != digest]
    return problems
