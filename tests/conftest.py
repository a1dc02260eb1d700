"""Shared fixtures: one tiny end-to-end run per test session, reused by the pipeline tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
import crs  # noqa: E402,F401  (caps the CPU instruction set before any test runs a kernel: decision 0080)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """Extract + probe + score on the tiny synthetic spec once; returns (spec, first extract stats, records, score)."""
    from crs.benchmark import Benchmark
    from crs.spec import load_spec

    from tiny import write_tiny_spec

    folder = tmp_path_factory.mktemp("tiny_run")
    spec = load_spec(write_tiny_spec(folder))
    bench = Benchmark(spec)
    stats = bench.extract(progress=False)
    records = bench.probe(progress=False).records
    score = bench.score()
    return spec, stats, records, score


@pytest.fixture(params=["compiled", "numpy"])
def numba_path(request, monkeypatch):
    """Run a test through the numba-compiled kernels and through their numpy paths (the switch is
    ``CRS_NO_NUMBA``); the compiled run is skipped where numba (the `fast` extra) is not installed."""
    from crs.axes import weighted_kernel

    if request.param == "compiled" and weighted_kernel.numba is None:
        pytest.skip("numba is not installed (the `fast` extra)")
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "1" if request.param == "numpy" else "0")
    assert weighted_kernel.available() == (request.param == "compiled")
    return request.param
