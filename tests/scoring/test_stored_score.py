"""The score stored in ``<output>/score/`` comes back as the same ScoreResult (issue 16: the report reads it)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crs.evaluate.artifacts import RunFolder
from crs.scoring.formula import ScoreInputError
from crs.scoring.result import read_score


def test_a_stored_score_round_trips_through_the_run_folder(tiny_run, tmp_path):
    _spec, _stats, _records, score = tiny_run
    folder = RunFolder(tmp_path)
    folder.write_score(score.tables(), score.summary(), score.format())
    back = read_score(folder)
    assert back.format() == score.format()
    assert json.dumps(back.summary(), default=str, sort_keys=True) == json.dumps(score.summary(), default=str, sort_keys=True)
    for name, table in score.tables().items():
        pd.testing.assert_frame_equal(back.tables()[name], table, check_dtype=False, check_names=False, obj=name)
    assert back.bootstrap.leading_tier == score.bootstrap.leading_tier
    assert back.reversal_uncertainty is not None and back.reversal_uncertainty.n_robust == score.reversal_uncertainty.n_robust
    assert back.point.score(back.point.errors.to_numpy()[None])["crs"][0] == pytest.approx(score.crs["crs"].to_numpy())


def test_a_score_writes_its_tables_as_one_set(tiny_run, tmp_path):
    """Issue 30: scoring again without a table (equity off) left the earlier one beside the new summary."""
    _spec, _stats, _records, score = tiny_run
    folder = RunFolder(tmp_path)
    tables = score.tables()
    folder.write_score({**tables, "equity_stability": pd.DataFrame({"x": [1.0]})}, score.summary(), score.format())
    assert (folder.score_dir / "equity_stability.parquet").exists()
    folder.write_score(tables, score.summary(), score.format())
    assert not (folder.score_dir / "equity_stability.parquet").exists()
    assert {path.stem for path in folder.score_dir.glob("*.parquet")} == set(tables)
    assert read_score(folder).format() == score.format()


def test_a_score_from_an_older_crs_asks_for_a_rescore(tiny_run, tmp_path):
    _spec, _stats, _records, score = tiny_run
    folder = RunFolder(tmp_path)
    summary = {key: value for key, value in score.summary().items() if key != "stored"}
    folder.write_score(score.tables(), summary, score.format())
    with pytest.raises(ScoreInputError, match="crs score"):
        read_score(folder)


def test_the_report_reads_the_stored_score_and_recomputes_only_a_stale_one(tiny_run):
    import os

    from crs.benchmark import Benchmark

    spec, _stats, _records, score = tiny_run
    bench = Benchmark(spec)
    stored, source = bench.stored_score()
    assert source.startswith("stored score read") and stored.format() == score.format()
    earlier = bench.folder.records_path.stat().st_mtime - 10
    os.utime(bench.folder.score_summary_path, (earlier, earlier))  # the stored score is now older than the records
    again, source = bench.stored_score()
    assert source == "score recomputed: the stored score is older than the run records"
    assert again.format() == score.format()
    assert bench.stored_score()[1].startswith("stored score read")  # the recomputed score was stored


def test_a_stored_score_with_other_settings_is_refused_not_shown_as_the_specs(tiny_run):
    """Editing [score] and asking for the report must not show the old score as the new settings' result."""
    from dataclasses import replace

    from crs.benchmark import Benchmark

    spec, _stats, _records, _score = tiny_run
    bench = Benchmark(replace(spec, score=replace(spec.score, n_boot=spec.score.n_boot + 10)))
    before = sorted((p.name, p.stat().st_mtime_ns) for p in bench.folder.score_dir.iterdir())
    with pytest.raises(ValueError, match=r"other \[score\] settings \(n_boot\); it is not what the spec asks for"):
        bench.stored_score()
    with pytest.raises(ValueError, match="score again first"):
        bench.report()
    assert sorted((p.name, p.stat().st_mtime_ns) for p in bench.folder.score_dir.iterdir()) == before
