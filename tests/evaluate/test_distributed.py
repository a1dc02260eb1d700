"""Stage 2 on a Dask LocalCluster (2 worker processes) gives the same run records as the local run."""

from __future__ import annotations

import pandas as pd
import pytest

from crs.evaluate.parallel import run_units
from crs.evaluate.units import ProbeUnit, probe_settings, probe_units

pytest.importorskip("dask.distributed")


def test_dask_local_cluster_matches_local_run(tiny_run):
    spec, _, records, _ = tiny_run
    results = run_units(probe_units(spec), spec.cache, probe_settings(spec), cluster="local:2", progress=False)
    from crs.evaluate.records import combine

    on_cluster = combine([r.records for r in results])
    pd.testing.assert_frame_equal(on_cluster, records)


def test_joblib_processes_match_local_run(tiny_run):
    spec, _, records, _ = tiny_run
    units = [ProbeUnit(encoder, "derm") for encoder in spec.encoder_names]
    serial = run_units(units, spec.cache, probe_settings(spec), jobs=1, progress=False)
    parallel = run_units(units, spec.cache, probe_settings(spec), jobs=2, progress=False)
    for a, b in zip(serial, parallel, strict=True):
        pd.testing.assert_frame_equal(a.records, b.records)


def test_bad_cluster_address_is_a_clear_error(tiny_run):
    spec, _, _, _ = tiny_run
    with pytest.raises(ValueError, match="local:N"):
        run_units([ProbeUnit("pixel_stats", "derm")], spec.cache, probe_settings(spec), cluster="local:two")
