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
    # issue 46 item 6: the reference is the baseline row, never the leader; the leader is a contestant
    assert score.crs["rank"].idxmin() == "pixel_stats"  # the stored overall rank puts the reference first
    assert lines[1].split()[:2] == ["leader", "resnet18"]
    assert f"resnet18 (CRS {score.crs.loc['resnet18', 'crs']:.3f})" in lines[1] and "pixel_stats (CRS" in lines[1]
    assert lines[2].startswith("leading tier")
    assert lines[3].split() == ["reference", "pixel_stats", "(baseline", "row)", "resnet18", "(baseline", "row)"]
    first_row = next(line for line in lines if line.startswith("pixel_stats"))
    assert f"baseline CRS {score.crs.loc['pixel_stats', 'crs']:.3f}" in first_row and "1. CRS" in first_row
    second_row = next(line for line in lines if line.startswith("resnet18"))
    assert f"1. CRS {score.crs.loc['resnet18', 'crs']:.3f} leading" in second_row and "baseline CRS" in second_row
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
