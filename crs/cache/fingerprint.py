"""Cache fingerprints: a hash of everything that determines an embedding."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(fields: dict[str, Any]) -> str:
    """Deterministic JSON (sorted keys, no spaces) so equal fields always hash equally."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)


def fingerprint(fields: dict[str, Any], length: int = 16) -> str:
    """sha256 of the canonical JSON of ``fields``, cut to ``length`` hex digits.

    ``fields`` holds the encoder source id, weights digest, preprocessing, pooling, dtype, the
    corruption suite version and the image-id digest: change any of them and the cache is new.
    """
    return hashlib.sha256(canonical_json(fields).encode()).hexdigest()[:length]
