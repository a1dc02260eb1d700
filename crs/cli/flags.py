"""The command-line flag of each setting a library error may name (:func:`crs.spec.for_setting`)."""

from __future__ import annotations

SETTING_FLAGS = {
    "cache": "--cache", "output": "--out", "shard": "--shard", "cluster": "--cluster", "jobs": "--jobs",
    "overwrite": "--overwrite", "allow_data_mismatch": "--allow-data-mismatch",
}
