"""Run stage-2 units in joblib worker processes, or on a Dask cluster through joblib's Dask backend.

Users with a cluster need no code change: ``--cluster tcp://host:port`` (or ``local:N``) sends the same
units to Dask workers. Workers write each unit's predictions into the run folder themselves (on a
cluster the output folder must therefore be reachable from the workers, as the cache is).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from joblib import Parallel, delayed, parallel_config
from tqdm.auto import tqdm

from crs.evaluate import memory
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.units import ProbeSettings, ProbeUnit, UnitResult, run_unit, unit_sizes
from crs.spec import for_setting

log = logging.getLogger("crs.probe")

AUTO = "auto"


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


def resolve_jobs(jobs: int | str, units: Sequence[ProbeUnit], cache_root: Path, settings: ProbeSettings) -> int:
    """The worker count: ``jobs`` itself, or for ``"auto"`` as many as the cores, the units and the
    memory allow, each worker planned at the predicted peak of the largest unit (logged)."""
    if jobs != AUTO:
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
            raise for_setting(ValueError(f"jobs must be a positive whole number or 'auto', got {jobs!r}"), "jobs")
        return jobs
    if not units:
        return 1
    sizes = unit_sizes(list(units), Path(cache_root), settings)
    peaks = {unit: memory.unit_peak_bytes(size, settings.backend, settings.family) for unit, size in sizes.items()}
    largest = max(peaks, key=lambda unit: peaks[unit])
    available, cores = memory.available_memory(), memory.usable_cores()
    chosen = memory.safe_jobs(peaks[largest], len(units), available, cores)
    log.info(
        "probe: jobs = auto -> %d worker%s (%d cores, %d units, %.1f GiB available; largest unit %s x %s "
        "predicted to peak at %.2f GiB)",
        chosen, "" if chosen == 1 else "s", cores, len(units), available / 2**30,
        largest.encoder, largest.task, peaks[largest] / 2**30,
    )
    if memory.SAFETY * available < peaks[largest]:
        log.warning(
            "probe: unit %s x %s is predicted to need %.2f GiB, more than %.0f %% of the %.1f GiB available; "
            "it may run out of memory", largest.encoder, largest.task, peaks[largest] / 2**30,
            100 * memory.SAFETY, available / 2**30,
        )
    return chosen


def run_units(
    units: Sequence[ProbeUnit],
    cache_root: Path,
    settings: ProbeSettings,
    jobs: int | str = 1,
    cluster: str | None = None,
    progress: bool = True,
    folder: RunFolder | None = None,
    zero_shot: dict | None = None,
) -> list[UnitResult]:
    """Run units in joblib worker processes (one BLAS thread each) or on a Dask cluster.

    ``jobs``: a worker count or ``"auto"`` (see :func:`resolve_jobs`). With ``folder``, each unit's
    predictions are written there by its worker (to be committed by the stage). Results are
    returned in unit order whichever way they were computed; each unit's cost is logged as it ends.
    ``zero_shot``: unit -> :class:`crs.evaluate.zero_shot.ZeroShotJob` for the units that run their
    zero-shot in their pass (decision 0112).
    """
    jobs_of = zero_shot or {}
    def logged(result: UnitResult) -> UnitResult:
        if result.cost is not None:
            log.info(result.cost.line())
        return result

    if cluster:
        with dask_client(cluster), parallel_config(backend="dask"):
            results = Parallel()(delayed(run_unit)(u, cache_root, settings, folder, jobs_of.get(u)) for u in units)
            return [logged(r) for r in results]
    n_jobs = resolve_jobs(jobs, units, cache_root, settings)
    if n_jobs == 1:
        return [
            logged(run_unit(unit, cache_root, settings, folder, jobs_of.get(unit)))
            for unit in tqdm(units, desc="probe units", disable=not progress, leave=False)
        ]
    with parallel_config(backend="loky", inner_max_num_threads=1):
        parallel = Parallel(n_jobs=n_jobs, return_as="generator")
        results = parallel(delayed(run_unit)(u, cache_root, settings, folder, jobs_of.get(u)) for u in units)
        return [logged(r) for r in tqdm(results, total=len(units), desc="probe units", disable=not progress, leave=False)]
