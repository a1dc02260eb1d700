"""The headline's per-member clauses name each rival once: axes with the same rivals share a clause."""

from crs.scoring.verdict import _clauses


def test_axes_with_the_same_rivals_share_one_clause():
    found = {"discrimination": ["pixel_stats"], "label_efficiency": ["pixel_stats"]}
    assert _clauses(found, "worse") == "worse than pixel_stats on discrimination and label efficiency"


def test_axes_with_other_rivals_keep_their_own_clause_in_axis_order():
    found = {"calibration": ["C", "D"], "robustness": ["C"], "discrimination": ["C", "D"]}
    assert _clauses(found, "better") == "better than C and D on calibration and discrimination and than C on robustness"
