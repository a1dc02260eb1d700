"""Results that travel (DESIGN 8g): a published run is a bundle anyone can verify.

:func:`publish` writes a run folder's records, per-case predictions (with the data sets' own image
ids), score tables, provenance and the sha256 of every image the run read into a bundle with a
manifest of every file's sha256, optionally signed with Ed25519; :func:`verify_bundle` checks the
manifest and the signature and re-scores the records under the reproducibility contract.
:func:`publish_aggregates` writes what a hospital can share (axis errors, replicate vectors, group
sizes; no image id or per-case row) and :func:`merge` ranks several such sites together.
"""

from __future__ import annotations

from crs.publish.aggregates import publish_aggregates
from crs.publish.bundle import BundleError, publish
from crs.publish.merge import MergeError, merge
from crs.publish.signing import new_key_pair
from crs.publish.verify import Verification, verify_bundle

__all__ = ["BundleError", "MergeError", "Verification", "merge", "new_key_pair", "publish", "publish_aggregates",
           "verify_bundle"]
