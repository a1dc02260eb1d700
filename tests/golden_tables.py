"""The reduced synthetic benchmark whose tables are pinned by tests/golden/ (house move, issue 13)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tiny import write_tiny_spec

# Score tables whose values must not move when code moves; replicate tables are covered by their summaries.
SCORE_TABLES = ("seed_axes", "axis_errors", "crs", "bootstrap", "rank_pairs")


def run_reduced_benchmark(folder: Path) -> dict[str, pd.DataFrame]:
    """Extract, probe and score the tiny spec (2 encoders x 3 tasks); return the tables to compare."""
    from crs import pipeline
    from crs.score_io import score_and_save
    from crs.spec import load_spec

    spec = load_spec(write_tiny_spec(folder))
    pipeline.extract(spec, progress=False)
    records = pipeline.probe(spec, progress=False)
    aggregate = pd.read_parquet(spec.output / pipeline.AGGREGATE_FILE)
    score = score_and_save(spec, pipeline.read_records(spec))
    tables = {"records": records, "records_seed_aggregated": aggregate}
    score_tables = score.tables()
    tables.update({f"score_{name}": score_tables[name] for name in SCORE_TABLES})
    return tables
