"""Shared fixtures: one tiny end-to-end run per test session, reused by the pipeline tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """Extract + probe + score on the tiny synthetic spec once; returns (spec, first extract stats, records, score)."""
    from crs import pipeline
    from crs.score_io import score_and_save
    from crs.spec import load_spec

    from tiny import write_tiny_spec

    folder = tmp_path_factory.mktemp("tiny_run")
    spec = load_spec(write_tiny_spec(folder))
    stats = pipeline.extract(spec, progress=False)
    records = pipeline.probe(spec, progress=False)
    score = score_and_save(spec, pipeline.read_records(spec))
    return spec, stats, records, score
