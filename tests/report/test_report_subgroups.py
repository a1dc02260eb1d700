"""Who does it fail? (issue 39 items 13 and 19): the real finding of examples/who_does_it_fail.py (a
planted female gap) comes first, highlighted, and in one line of the report's opening summary; a
one-line summary opens the section and the long lists are collapsed; each group too small to judge
is named once; a group's two intervals say why they differ; the figures compare groups and keep
their titles whole."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "who_does_it_fail.py"


@pytest.fixture(scope="module")
def who(tmp_path_factory):
    """(score, report page, out folder) of the example as a user runs it."""
    module_spec = importlib.util.spec_from_file_location("who_does_it_fail", EXAMPLE)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    work = tmp_path_factory.mktemp("who")
    score = module.main(work)
    return score, (work / "out" / "report.html").read_text(), work / "out"


def _section(page: str) -> str:
    return page.split('<h2 id="subgroups">', 1)[1].split("<h2 ", 1)[0]


def test_the_planted_gap_is_first_highlighted_and_in_the_opening_summary(who):
    _, page, out = who
    section = _section(page)
    finding = "planted on cxr (clean), by sex: AUROC 0.50"
    assert finding in section
    highlighted = section.split('<ul class="findings">', 1)[1].split("</ul>", 1)[0]
    assert finding in highlighted and "for female against" in highlighted and "interval excludes 0" in highlighted
    # before the method text, every figure and every collapsed list
    assert section.index(finding) < min(section.index(x) for x in ("Per patient subgroup", "<figure", "<details"))
    # the section opens with a one-line summary that counts the findings
    first = re.search(r"<p[^>]*>(.*?)</p>", section, re.S).group(1)
    assert first.startswith("1 finding: a gap between subgroups whose interval excludes 0")
    # the opening summary (beside the headline, before the leaderboard) names it
    opening = page.split('<h2 id="leaderboard">', 1)[0]
    line = re.search(r"Who does it fail\? 1 subgroup finding[^<]*", opening)
    assert line and "planted on cxr (clean) does worse for female than for male" in line.group(0)
    markdown = (out / "report.md").read_text()
    assert markdown.index("Who does it fail? 1 subgroup finding") < markdown.index("## Leaderboard")


def test_the_long_lists_are_collapsed_and_each_small_group_is_named_once(who):
    score, page, _ = who
    section = _section(page)
    visible = re.sub(r"<details>.*?</details>", "", section, flags=re.S)
    assert "<table" not in visible and "worst group" not in visible  # the per-row lines and the table fold away
    collapsed = re.findall(r"<details><summary>(.*?)</summary>", section)
    assert len(collapsed) == 3 and "per group" in collapsed[1].lower()
    for _, row in score.subgroup_gaps.iterrows():  # every row is still there, folded
        assert f"{row['encoder']} on {row['task']} ({row['condition']}), by {row['attribute']}: worst group" in section
    small = score.subgroups[~score.subgroups["scored"].astype(bool)]
    assert len(small) == 6  # 80+ and <40 for each of three encoders
    assert section.count("too small") < 10  # 16 before: once per encoder and group, in the table and in each line
    assert section.count("80+ (24 images") == 1


def test_a_group_with_two_intervals_says_why(who):
    score, page, _ = who
    section = _section(page)
    gaps, groups = score.subgroup_gaps, score.subgroups
    row = gaps[(gaps["encoder"] == "pixel_stats") & (gaps["attribute"] == "age")].iloc[0]
    own = groups[(groups["encoder"] == "pixel_stats") & (groups["group"] == row["worst_group"])].iloc[0]
    worst_interval = f"[{row['worst_auroc_low']:.3f}, {row['worst_auroc_high']:.3f}]"
    own_interval = f"[{own['auroc_low']:.3f}, {own['auroc_high']:.3f}]"
    assert worst_interval != own_interval and worst_interval in section and own_interval in section
    why = "Why a group can show two intervals"
    showing = [block for block in re.findall(r"<details>.*?</details>", section, flags=re.S)
               if worst_interval in block or own_interval in block]
    assert len(showing) == 2 and all(why in block for block in showing)  # the worst-group lines and the table
    card = page.split('<h2 id="cards">', 1)[1]
    assert worst_interval in card and "Worst-group intervals allow for the worst group being picked" in card


def test_figures_compare_groups_and_keep_their_titles_whole(who, tmp_path):
    from crs.report.subgroup_plots import subgroup_plots

    score, page, out = who
    groups = score.subgroups.copy()
    figures = sorted(p.name for p in (out / "figures").glob("subgroups_*.png"))
    assert figures == ["subgroups_cxr_clean_age.png", "subgroups_cxr_clean_sex.png"]
    # one group left to score: nothing to compare, no figure (the demo drew 12 such)
    groups.loc[(groups["attribute"] == "sex") & (groups["group"] == "male"), "scored"] = False
    assert [p.name for p, _ in subgroup_plots(groups, {}, tmp_path)] == ["subgroups_cxr_clean_age.png"]
    # a title longer than the axes (the demo's shifted fundus site) is not cut at the left edge
    long = score.subgroups.assign(task="synthetic-fundus", condition="shift:synthetic-fundus-site-b")
    long = long[long["attribute"] == "sex"]
    (path, _), = subgroup_plots(long, {}, tmp_path)
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("L"))
    assert (pixels[:, :3] > 250).all(), "something is drawn against the left edge (a clipped title)"
