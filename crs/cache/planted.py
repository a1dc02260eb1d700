"""A planted subgroup failure for the demo and the tests: one encoder blind for one patient group.

:func:`import_planted_encoder` copies an extracted encoder's features (every condition of a task
store and of its shift-target stores) into a new encoder through :func:`crs.cache.imports.import_features`,
with the rows of one subgroup shuffled among themselves (:func:`crs.data.synthetic.plant_subgroup_failure`):
the copy sees those patients' images as noise and every other patient exactly as the source does.
The cache stays consistent (checksums, fingerprints): stage 2 cannot tell the copy from an extraction.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from crs.cache.imports import import_features
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.data.synthetic import plant_subgroup_failure


def import_planted_encoder(
    cache_root: Path | str,
    datasets: Sequence[str],
    source_encoder: str,
    encoder: str,
    attribute: str,
    group: str,
    seed: int = 0,
) -> None:
    """Store ``encoder``: ``source_encoder``'s features with no signal for images whose ``attribute`` is ``group``.

    ``datasets``: the stores to plant in (a task and its shift targets); each must hold the attribute.
    """
    cache_root = Path(cache_root)
    for dataset in datasets:
        store = FeatureStore(store_path(cache_root, dataset))
        table = store.read_table()
        if attribute not in table.subgroups:
            raise CacheError(f"{store.path} has no subgroup attribute {attribute!r}; found {sorted(table.subgroups)}")
        in_group = table.subgroups[attribute] == group
        test = table.splits == "test"
        with tempfile.TemporaryDirectory(dir=cache_root) as scratch:
            for name in store.feature_array_names(source_encoder):
                features = store.read_features(source_encoder, name)
                ids, rows = (table.ids, in_group) if name == "clean" else (table.ids[test], in_group[test])
                planted = plant_subgroup_failure(features, rows, seed)
                path = Path(scratch) / f"{name.replace('/', '__')}.npz"
                np.savez(path, features=planted.astype(np.float32), ids=ids.astype(str))
                import_features(cache_root, dataset, encoder, path, condition=name)
