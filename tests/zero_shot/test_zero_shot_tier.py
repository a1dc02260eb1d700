"""The zero-shot leaderboard's tier is read off one simultaneous family (decision 0185, issue 47 item 1).

Encoders identical in truth (:mod:`tied_zero_shot`: the same overconfident model, each with its own draw on
the same 400 patients) tie for the lead, so every one must stay in the leading tier in at least 95 % of test
sets (less 2 Monte Carlo SEs). The CRS's rank sets, which built the tier before, left one out in 5 of these
30 test sets (42 of 300): the dominance term jumps at exact ties.
"""

from __future__ import annotations

import json

import numpy as np
from tied_zero_shot import write_tied_run

from crs.scoring.settings import ScoreSettings
from crs.scoring.zero_shot import score_zero_shot, write_zero_shot_score
from crs.scoring.zero_shot_text import summary_lines

TEST_SETS = 30


def test_identical_zero_shot_encoders_all_stay_in_the_leading_tier(tmp_path):
    kept = []
    for seed in range(TEST_SETS):
        folder = tmp_path / str(seed)
        names = write_tied_run(folder, seed)
        board = score_zero_shot(folder, ScoreSettings()).leaderboard
        assert sorted(board.index) == sorted(names)
        kept.append(bool(board["in_leading_tier"].all()))
    rate = float(np.mean(kept))
    se = np.sqrt(0.95 * 0.05 / TEST_SETS)
    assert rate >= 0.95 - 2 * se, f"every identical encoder kept in {rate:.3f} of {TEST_SETS} test sets"


def test_the_zero_shot_tier_and_its_words_are_the_familys(tmp_path):
    write_tied_run(tmp_path, 5)  # a test set where the rank sets dropped a twin
    settings = ScoreSettings()
    score = score_zero_shot(tmp_path, settings)
    family = score.statements
    assert family is not None and family.alpha == settings.alpha
    board = score.leaderboard
    assert tuple(board.index[board["in_leading_tier"]]) == family.leading_tier
    sets = family.rank_sets().reindex(board.index)
    assert (board["rank_low"].to_numpy() == sets["rank_low"].to_numpy()).all()
    assert (board["rank_high"].to_numpy() == sets["rank_high"].to_numpy()).all()
    write_zero_shot_score(tmp_path, score)
    stored = json.loads((tmp_path / "zero_shot" / "score.json").read_text())
    assert stored["headline_family"]["leading_tier"] == list(family.leading_tier)
    line = next(line for line in summary_lines(stored) if "leading tier" in line)
    assert "one simultaneous 95 % family" in line, line
    assert ", ".join(family.leading_tier) in line, line
