"""Run stage 2 on a Dask cluster through joblib's Dask backend, so users with a cluster need no code change."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def dask_client(address: str) -> Iterator[object]:
    """Connect to ``address`` (``tcp://host:port``) or start ``local:N`` (N worker processes, 1 thread each)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as error:  # pragma: no cover - depends on the optional extra
        raise RuntimeError("--cluster needs dask.distributed: pip install 'crs[dist]'") from error
    if address.startswith("local:"):
        try:
            n_workers = int(address.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"--cluster {address!r}: expected local:N with N a whole number") from None
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
    else:
        client = Client(address)
        try:
            yield client
        finally:
            client.close()
