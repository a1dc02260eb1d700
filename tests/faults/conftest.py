"""One uninterrupted reference extraction per session: every fault test compares its store with it."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """(base folder, data folder, reference store, number of file writes, run report)."""
    import crs.corruptions.api  # noqa: F401  (torch and the operators imported before forking, so every child runs the same code)
    from crs.data import load_entry
    from crs.spec import load_spec

    from faults_harness import run_forked, write_fault_spec

    base = tmp_path_factory.mktemp("faults")
    data = base / "data"
    spec_path = write_fault_spec(base / "reference", data)
    spec = load_spec(spec_path)
    load_entry(spec.datasets[0])  # generate the images once, before any child runs
    status = run_forked(spec_path, report=base / "reference.json")
    assert status == 0, "the uninterrupted reference run failed"
    writes = int((base / "reference.writes").read_text())
    report = json.loads((base / "reference.json").read_text())
    return base, data, spec.cache / "cxr.zarr", writes, report
