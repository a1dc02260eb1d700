"""The feature cache: one zarr v3 store per data set, one group per encoder fingerprint.

Layout (see docs/cache.md)::

    <cache>/<dataset>.zarr/
        ids, labels, splits, groups            # the sample table, stored beside the features
        encoders/<encoder>/<fingerprint>/
            clean                               # (N, D) float16, rows in id order
            corrupt/<corruption>/<severity>     # (N_test, D) float16, rows in test-split order
            <array>__done                       # (n_chunks,) uint8: 1 once that row chunk is durable
            <array>/journal/<chunk>.rows        # rows computed for an unfinished chunk (journal.py)
"""

from crs.cache import readthrough  # noqa: F401  (registers the read-through of URL caches with FeatureStore)
from crs.cache.fingerprint import fingerprint
from crs.cache.store import CacheError, FeatureStore, SampleTable, store_path

__all__ = ["CacheError", "FeatureStore", "SampleTable", "fingerprint", "store_path"]
