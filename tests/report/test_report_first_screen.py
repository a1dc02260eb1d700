"""Issue 46 item 14 (the report part): the headline is short and says each thing once, and the provenance box is
collapsed so that the leaderboard is above the fold at 1280 x 800 in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from headless import CHROMIUM, chromium

FOLD_PROBE = (
    '<pre id="crs-fold"></pre><script>window.addEventListener("load", function () {'
    ' var rows = document.querySelectorAll("table.board tbody tr");'
    ' var details = document.querySelector("#provenance details");'
    ' document.getElementById("crs-fold").textContent = JSON.stringify({height: innerHeight,'
    '  rows: [].map.call(rows, function (r) { return Math.round(r.getBoundingClientRect().bottom); }),'
    '  collapsed: details ? !details.open : false}); });</script>'
)


@pytest.fixture(scope="module")
def written(tiny_run, tmp_path_factory):
    from crs.report import write_report

    spec, _, records, score = tiny_run
    out = tmp_path_factory.mktemp("first_screen")
    path = write_report(score, records, out, spec=spec, predictions_dir=Path(spec.output) / "predictions",
                        draw_corruption_grids=False)
    return path, score


def _headline(page: str) -> str:
    return re.sub(r"<[^>]+>", "", page.split('<p class="lede">', 1)[1].split("</p>", 1)[0])


def test_the_headline_says_each_thing_once_and_briefly(written):
    path, score = written
    text = _headline(path.read_text())
    sentences = [s.strip() for s in re.split(r"(?<=[.])\s+(?=[A-Z])", text) if s.strip()]
    assert len(sentences) == len(set(sentences))
    assert len(text.split()) <= 110, (len(text.split()), text)  # 133 words before issue 46
    page = path.read_text()
    details = re.sub(r"<[^>]+>", "", page.split('<p class="details">', 1)[1].split("</p>", 1)[0])
    said = text + " " + details  # the answer, and what backs it under the table: each thing once
    assert said.count("reference can reorder") + said.count("The CRS is relative") == 1
    assert "is the reference" in details and "is the reference" not in text
    leader = next(name for name in score.crs.index if bool(score.crs.loc[name, "in_leading_tier"]))
    interval = f"{score.crs.loc[leader, 'crs_low']:.3f} to {score.crs.loc[leader, 'crs_high']:.3f}"
    assert text.count(interval) <= 1  # the lead's interval is given once


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium); .ci/run installs it")
def test_the_leaderboard_is_above_the_fold_with_the_provenance_collapsed(written, tmp_path):
    path, score = written
    page = path.read_text()
    probe = tmp_path / "report.html"
    probe.write_text(page.replace("</body>", FOLD_PROBE + "</body>"))
    dom = chromium(tmp_path, "--window-size=1280,800", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = json.loads(re.search(r'<pre id="crs-fold">([^<]+)</pre>', dom).group(1).replace("&quot;", '"'))
    assert found["collapsed"]
    assert len(found["rows"]) == len(score.crs) and max(found["rows"]) <= 800, found  # every row above the fold
    box = page.split('<aside class="provenance" id="provenance">', 1)[1].split("</aside>", 1)[0]
    assert "<details>" in box and "spec hash" in box  # collapsed, every row still one click away
