"""The command-line flag of each setting a library error may name (:func:`crs.spec.for_setting`)."""

from __future__ import annotations

SETTING_FLAGS = {
    "cache": "--cache", "output": "--out", "shard": "--shard", "cluster": "--cluster", "jobs": "--jobs",
    "overwrite": "--overwrite", "allow_data_mismatch": "--allow-data-mismatch",
}


def refuse_cache_url_option(ctx: object, param: object, value: str | None) -> str | None:
    """click callback of every ``--cache``: a URL crs cannot serve is refused before anything runs
    (``Path`` would turn ``s3://bucket`` into a local folder named ``s3:``)."""
    from crs.spec import refuse_cache_url

    if value is not None:
        refuse_cache_url("--cache", value)
    return value


def cache_url_option(ctx: object, param: object, value: str | None) -> str | None:
    """click callback of the stages' ``--cache``: an ``s3://`` URL is served through a local mirror
    (decision 0178); any other URL is refused as :func:`refuse_cache_url_option` does."""
    from crs.spec import refuse_cache_url

    if value is not None:
        refuse_cache_url("--cache", value, servable=True)
    return value
