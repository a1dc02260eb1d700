"""The report built from a real tiny run: every figure renders in headless Chromium, offline, and
the page asks for nothing outside itself.

The run is the shared ``tiny_run`` fixture when tests/conftest.py provides it (one run per
session), else a run of the same tiny spec made here: 2 encoders (pixel_stats, resnet18 with
random weights at 32 px), 3 synthetic data sets of 120 images plus a shifted chest site,
2 corruptions x 2 severities, label fractions 0.25 and 1, 2 seeds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from headless import CHROMIUM, chromium
from PIL import Image

# After load, the page lists every image's natural size and load state into a <pre> for --dump-dom.
IMAGE_PROBE = (
    '<script>window.addEventListener("load", function () {'
    ' var rows = [].map.call(document.images, function (i) { return [i.naturalWidth, i.naturalHeight, i.complete]; });'
    ' var out = document.createElement("pre"); out.id = "crs-image-check"; out.textContent = JSON.stringify(rows);'
    " document.body.appendChild(out); });</script>"
)


@pytest.fixture(scope="module")
def report(tiny_run, tmp_path_factory):
    """(html path, out folder, score, records) for a report built from the session's real tiny run."""
    from crs.report import write_report

    spec, _stats, records, score = tiny_run
    out = tmp_path_factory.mktemp("report")
    path = write_report(score, records, out, title="crs report: tiny", spec=spec,
                        predictions_dir=Path(spec.output) / "predictions")
    return path, out, score, records


EXPECTED_FIGURES = {
    "axis_profiles.png", "pareto.png", "rank_slope.png", "bootstrap_ranks.png", "weight_sensitivity.png",
    "label_efficiency.png", "severity.png", "reliability.png",
    "corruption_grid_dermoscopy.png", "corruption_grid_fundus.png", "corruption_grid_chest_xray.png",
}  # fmt: skip


def test_every_figure_is_written_as_png_and_inlined(report):
    path, out, _score, _records = report
    written = {p.name for p in (out / "figures").glob("*.png")}
    assert EXPECTED_FIGURES <= written
    page = path.read_text()
    # One inline image per PNG; the Markdown links each PNG by relative path.
    assert page.count('src="data:image/png;base64,') == len(written)
    markdown = (out / "report.md").read_text()
    for name in written:
        assert f"](figures/{name})" in markdown


def test_page_requests_nothing_outside_itself(report):
    page = report[0].read_text()
    references = re.findall(r"""(?:src|href|action|poster|data)\s*=\s*["']([^"']*)["']""", page, flags=re.I)
    references += re.findall(r"url\(\s*['\"]?([^'\")]*)", page, flags=re.I)
    outside = [ref for ref in references if not (ref.startswith("data:") or ref.startswith("#"))]
    assert outside == []
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import", page, flags=re.I)


def test_leaderboard_and_cards_show_what_the_issue_asks(report):
    path, out, score, _records = report
    page = path.read_text()
    for encoder in score.crs.index:
        assert f"{encoder}" in page
    # CRS with interval, tier, AUROC rank beside CRS rank, exposure column, one card per encoder.
    from crs.report.tables import interval_label, is_case_level

    label = interval_label(score.bootstrap)
    assert f"CRS [{label} CI]" in page and "leading" in page and "AUROC rank" in page and ">exposure<" in page
    if is_case_level(score.bootstrap):  # issue 40: the default box reaches its level, so it reads a bare 95 %
        assert "measured" not in label and "simultaneous box" in page and "coverage measured by simulation" in page
    assert page.count('class="card"') == len(score.crs)
    leader = score.bootstrap.leader
    low, high = score.crs.loc[leader, ["crs_low", "crs_high"]]
    assert f"[{low:.3f}, {high:.3f}]" in page
    markdown = (out / "report.md").read_text()
    assert markdown.count("**Weakest: ") == len(score.crs)
    assert "sha256" in markdown or "random initialisation" in markdown  # weights provenance from the cache


def test_page_names_the_bootstrap_that_made_its_intervals(report):
    # the tiny spec runs the case-level bootstrap (score.case_bootstrap defaults to true)
    path, out, score, _records = report
    page, markdown = path.read_text(), (out / "report.md").read_text()
    assert score.bootstrap.level == "seed+case"
    named = f"{score.bootstrap.n_boot} replicates of the paired seed \u00d7 test-case bootstrap"
    assert named in page and named in markdown
    assert "paired-seed bootstrap replicates" not in page  # the old seed-only wording is gone
    assert "under seed and test-case resampling" in page or "The leading tier holds" in page


def test_page_has_the_stability_section(report):
    path, out, score, _records = report
    page, markdown = path.read_text(), (out / "report.md").read_text()
    for text in (page, markdown):
        assert "How stable is this ranking?" in text
        assert "cohort median" in text  # the reference-choice table has the median row
        # the leave-one-encoder-out table, or with two encoders the note that there is nothing to compare
        assert ("left out" in text) if len(score.crs) >= 3 else ("at least three encoders" in text)
    assert 'id="stability"' in page and 'href="#stability"' in page
    assert page.index('id="stability"') < page.index("Weight sensitivity")
    # no bootstrap reversal probabilities in this run: the opening sentence says the count is a point estimate
    if score.reversals.n_reversed:
        assert "in the point estimate" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium); .ci/run installs it")
def test_chromium_renders_every_figure_offline(report, tmp_path):
    path, out, _score, _records = report
    probe = tmp_path / "probe.html"
    probe.write_text(path.read_text().replace("</body>", IMAGE_PROBE + "</body>"))
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    match = re.search(r'<pre id="crs-image-check">([^<]*)</pre>', dom)
    assert match, "the page did not finish loading in Chromium"
    images = json.loads(match.group(1))
    assert len(images) == len(list((out / "figures").glob("*.png")))
    for width, height, complete in images:
        assert complete and 300 <= width <= 2400 and 200 <= height <= 3000, (width, height)

    screenshot = tmp_path / "report.png"
    chromium(tmp_path, "--window-size=1280,4000", f"--screenshot={screenshot}", path.as_uri())
    from PIL import Image

    with Image.open(screenshot) as shot:
        assert shot.size == (1280, 4000)
        colours = shot.convert("L").getextrema()
        assert colours[1] - colours[0] > 100  # not a blank page


# In a frame of a given width (headless Chromium will not make its window narrower than 500 px), the
# page reports its layout to the frame's parent, which writes it into a <pre> for --dump-dom.
LAYOUT_PROBE = (
    '<script>window.addEventListener("load", function () {'
    ' var board = document.querySelector("#leaderboard + .scroll table") || document.querySelector("table");'
    ' var figures = [].slice.call(document.querySelectorAll("figure"));'
    ' var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;'
    ' var image = target ? target.querySelector("img") : null;'
    ' var out = {width: innerWidth, page: document.documentElement.scrollWidth,'
    '  board: Math.round(board.getBoundingClientRect().width),'
    '  linked: figures.filter(function (f) { return f.querySelector(\'a[href="#\' + f.id + \'"] img\'); }).length,'
    '  figures: figures.length,'
    '  hints: [].filter.call(document.querySelectorAll(".scroll-hint"), function (h) { return h.offsetParent; }).length,'
    '  shown: image ? [Math.round(image.getBoundingClientRect().width), image.naturalWidth,'
    '   getComputedStyle(target).position] : null};'
    ' parent.postMessage(JSON.stringify(out), "*"); });</script>'
)
FRAME = (
    '<html><body><pre id="layout"></pre><iframe src="report.html{hash}" style="width:{width}px;height:800px;border:0">'
    '</iframe><script>addEventListener("message", function (e) {{'
    ' document.getElementById("layout").textContent = e.data; }});</script></body></html>'
)


def _layout(report_path: Path, folder: Path, width: int, hash: str = "") -> dict:
    """The page's layout at ``width`` CSS px (a copy of the page with LAYOUT_PROBE, in a frame)."""
    (folder / "report.html").write_text(report_path.read_text().replace("</body>", LAYOUT_PROBE + "</body>"))
    frame = folder / f"frame{width}{hash.strip('#')}.html"
    frame.write_text(FRAME.format(hash=hash, width=width))
    dom = chromium(folder, "--virtual-time-budget=8000", "--dump-dom", frame.as_uri())
    match = re.search(r'<pre id="layout">([^<]+)</pre>', dom)
    assert match, "the framed page did not report its layout"
    return json.loads(match.group(1).replace("&quot;", '"'))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium); .ci/run installs it")
def test_a_narrow_window_gets_a_layout_of_its_own_and_every_figure_opens_full_size(report, tmp_path):
    """Issue 39 item 14: at 420 px the page never scrolls sideways (the leaderboard becomes one block per
    encoder, wide tables say they scroll), and each figure links to itself at full size, on the page."""
    path, out, _score, _records = report
    narrow = _layout(path, tmp_path, 420)
    assert narrow["width"] == 420
    assert narrow["page"] <= 420 and narrow["board"] <= 420, narrow
    assert narrow["hints"] >= 1  # the wide tables below say that they scroll sideways
    assert narrow["figures"] == len(list((out / "figures").glob("*.png"))) == narrow["linked"]
    widest = max((out / "figures").glob("*.png"), key=lambda p: Image.open(p).size[0])
    full = _layout(path, tmp_path, 420, "#figure-" + widest.stem.replace("_", "-"))
    shown, natural, position = full["shown"]
    assert natural > 420 and natural <= shown <= natural + 2 and position == "fixed"  # full size (and its border)
    wide = _layout(path, tmp_path, 1280)
    assert wide["hints"] == 0 and wide["board"] > 420  # the wide layout is unchanged
