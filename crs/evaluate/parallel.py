"""Run stage-2 units in joblib worker processes, or on a Dask cluster through joblib's Dask backend.

Users with a cluster need no code change: ``--cluster tcp://host:port`` (or ``local:N``) sends the same
units to Dask workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from joblib import Parallel, delayed, parallel_config
from tqdm.auto import tqdm

from crs.evaluate.units import ProbeSettings, ProbeUnit, UnitResult, run_unit
from crs.spec import for_setting


@contextmanager
def dask_client(address: str) -> Iterator[object]:
    """Connect to ``address`` (``tcp://host:port``) or start ``local:N`` (N worker processes, 1 thread each)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as error:  # pragma: no cover - depends on the optional extra
        raise for_setting(RuntimeError("a Dask cluster needs dask.distributed: pip install 'crs[dist]'"), "cluster") from error
    if address.startswith("local:"):
        try:
            n_workers = int(address.split(":", 1)[1])
        except ValueError:
            raise for_setting(ValueError(f"cluster {address!r}: expected local:N with N a whole number"), "cluster") from None
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


def run_units(
    units: Sequence[ProbeUnit],
    cache_root: Path,
    settings: ProbeSettings,
    jobs: int = 1,
    cluster: str | None = None,
    progress: bool = True,
) -> list[UnitResult]:
    """Run units in joblib worker processes (one BLAS thread each) or on a Dask cluster.

    Results are returned in unit order whichever way they were computed.
    """
    def call(unit: ProbeUnit) -> UnitResult:
        return run_unit(unit, cache_root, settings)

    if cluster:
        with dask_client(cluster), parallel_config(backend="dask"):
            return list(Parallel()(delayed(run_unit)(u, cache_root, settings) for u in units))
    if jobs == 1:
        return [call(unit) for unit in tqdm(units, desc="probe units", disable=not progress, leave=False)]
    with parallel_config(backend="loky", inner_max_num_threads=1):
        parallel = Parallel(n_jobs=jobs, return_as="generator")
        results = parallel(delayed(run_unit)(u, cache_root, settings) for u in units)
        return list(tqdm(results, total=len(units), desc="probe units", disable=not progress, leave=False))


