"""The paper-size scoring benchmark runs end to end at its quick size and reports what it measured."""

from __future__ import annotations

import subprocess
import sys


def test_quick_scoring_bench_runs_and_reports_memory():
    done = subprocess.run([sys.executable, "-m", "crs.bench.scoring", "--quick"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout.lower()
    assert "rss" in text and "replicates" in text


def test_quick_run_folder_bench_scores_through_score_records(tmp_path):
    """The real path: a synthetic run folder (predictions with group ids + run records) scored by score_records."""
    from crs.bench.scoring import QUICK, ScoringSize, run_through_score_records
    from crs.evaluate.artifacts import RunFolder

    size = ScoringSize("tiny", QUICK.tasks, 3, 2, (0.5, 1.0), 20)
    result = run_through_score_records(size, str(tmp_path / "run"), workers=2)
    folder = RunFolder(tmp_path / "run")
    assert folder.records_path.exists() and folder.has_predictions("encoder_00", "chexpert")
    arrays = folder.read_predictions("encoder_00", "chexpert")
    assert "clean_groups" in arrays
    # the shift target under today's per-target keys, named as the records name it
    assert "shift__chexpert_shift_probs" in arrays and "shift_groups__chexpert_shift" in arrays
    assert "shift_probs" not in arrays
    assert 0 < result.peak_rss_gib < 3 and result.score_wall_s > 0 and result.leading_tier
    assert 0 <= result.n_robust <= 3  # 3 encoders: 3 pairs
