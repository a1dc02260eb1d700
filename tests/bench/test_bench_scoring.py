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
