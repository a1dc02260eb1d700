"""``crs compare`` of two runs (issue 39 item 12): first what a user comparing runs wants, each run's
leader, tier and reference and which ranks moved, side by side; the column-by-column reproducibility
contract only for two runs of one spec (for different specs it printed a 93-line table and exit 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tiny import write_tiny_spec

ROOT = Path(__file__).resolve().parents[2]


def _crs(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crs", *arguments], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)


def test_runs_of_different_specs_are_compared_by_their_rankings(tiny_run, tmp_path):
    spec, _stats, _records, score = tiny_run
    first = Path(spec.output)
    # the same data and cache, another reference encoder: another spec, other CRS values
    other = write_tiny_spec(tmp_path / "b", data=Path(spec.datasets[0].root), cache=Path(spec.cache),
                            output=tmp_path / "b" / "out", reference="resnet18")
    done = _crs("run", str(other), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    done = _crs("compare", str(first), str(tmp_path / "b" / "out"))
    assert done.returncode == 0, done.stdout + done.stderr  # different specs: nothing "broke"
    lines = done.stdout.splitlines()
    assert lines[0].split() == [str(first), str(tmp_path / "b" / "out")]
    leader = score.crs["rank"].idxmin()
    assert lines[1].startswith("leader") and f"{leader} (CRS {score.crs.loc[leader, 'crs']:.3f})" in lines[1]
    assert lines[2].startswith("leading tier") and lines[3].split() == ["reference", "pixel_stats", "resnet18"]
    for encoder in score.crs.index:  # one row per encoder with both ranks
        row = next(line for line in lines if line.startswith(encoder))
        assert f"{int(score.crs.loc[encoder, 'rank'])}. CRS {score.crs.loc[encoder, 'crs']:.3f}" in row
        assert row.count(". CRS ") == 2
    assert any(line.startswith("ranks moved: ") for line in lines)
    assert "different specs (score.reference_encoder)" in done.stdout and "not checked" in done.stdout
    assert "max_difference" not in done.stdout and len(lines) < 20


def test_runs_of_one_spec_lead_with_the_ranking_then_the_contract(tiny_run):
    spec, *_ = tiny_run
    done = _crs("compare", spec.output, spec.output)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("leader") and "ranks moved: none" in done.stdout
    assert any(line.startswith("reproduced: ") for line in lines[lines.index(next(x for x in lines if x.startswith("ranks moved"))):])
