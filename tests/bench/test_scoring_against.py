"""``crs.bench.scoring --against REV``: the same run folder scored by an older revision's code and this tree's,
interleaved, with the CPU ratio new / old (issue 47's cost check). Structure only, never speed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crs.bench.scoring import QUICK, ScoringSize, write_once
from crs.bench.scoring_against import side_by_side, side_by_side_text, this_tree

TINY = ScoringSize("tiny", QUICK.tasks, 3, 2, (0.5, 1.0), 10)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(this_tree()), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    if subprocess.run(["git", "-C", str(this_tree()), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("the source tree is not a git checkout")
    root = str(tmp_path_factory.mktemp("against") / "run")
    write_once(TINY, root)
    before = _git("worktree", "list")
    return side_by_side(root, "HEAD", TINY.n_boot, workers=1, pairs=1), before


def test_both_trees_score_the_folder_old_then_new(compared):
    result, _ = compared
    assert [run.tree for run in result.runs] == ["old", "new"]
    assert result.commit == _git("rev-parse", "HEAD").strip()
    for run in result.runs:
        assert run.cpu_s > 0 and run.wall_s > 0 and run.peak_rss_gib > 0 and run.leading_tier


def test_the_ratio_is_new_over_old_and_printed_with_its_spread(compared):
    result, _ = compared
    old, new = result.runs
    assert result.pair_ratios == pytest.approx((new.cpu_s / old.cpu_s,))
    assert result.ratio == pytest.approx(new.cpu_s / old.cpu_s)
    summary = result.summary()
    assert summary["ratio_low"] <= summary["ratio"] <= summary["ratio_high"]
    assert "CPU new / old" in side_by_side_text(result) and result.commit[:9] in side_by_side_text(result)


def test_the_temporary_worktree_is_removed(compared):
    _, before = compared
    after = _git("worktree", "list")
    assert "crs-against-" not in after, after
    assert len(after.splitlines()) <= len(before.splitlines())


def test_against_without_a_run_folder_is_refused_in_one_line():
    done = subprocess.run([sys.executable, "-m", "crs.bench.scoring", "--quick", "--against", "HEAD"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "--against needs --run-folder" in done.stderr
