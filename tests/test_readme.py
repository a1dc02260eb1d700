"""The README's first screen is what a newcomer needs (issue 46, item 15).

What crs answers, the two commands, one picture of the demo report's first screen, and where to go
next, in one screen; measured history (dated timings, decision numbers) lives in docs/performance.md
and docs/decisions/, and every page the README points at exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
FIRST_SCREEN = README.split("## How it works", 1)[0]
SCREEN_LINES = 60  # a browser window of GitHub's README view at 1280 x 800 shows about this many


def test_the_first_screen_says_what_crs_answers_and_the_two_commands():
    assert len(FIRST_SCREEN.splitlines()) <= SCREEN_LINES
    assert "which frozen image encoder" in FIRST_SCREEN and "Clinical Reliability Score" in FIRST_SCREEN
    commands = re.search(r"```bash\n(.*?)```", FIRST_SCREEN, flags=re.DOTALL)
    assert commands is not None
    assert [line.split("#")[0].strip() for line in commands.group(1).splitlines()] == ["make demo", "make test"]
    assert "## Where next" in FIRST_SCREEN and "crs init IMAGE_FOLDER" in FIRST_SCREEN


def test_the_first_screen_shows_the_demo_reports_first_screen():
    (picture,) = re.findall(r"!\[[^\]]+\]\(([^)]+\.png)\)", FIRST_SCREEN)
    path = ROOT / picture
    assert path.stat().st_size < 150_000
    with Image.open(path) as image:
        assert image.format == "PNG"
        width, height = image.size
    assert 600 <= width <= 1280 and abs(width / height - 1280 / 800) < 0.02  # the 1280 x 800 window, scaled
    assert "crs-out/quickstart/report.html" in FIRST_SCREEN


def test_history_lives_in_the_docs_not_the_readme():
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README), "a dated measurement: docs/performance.md"
    assert not re.search(r"\b(decisions?|record) \d{4}", README), "a decision number: docs/decisions/"
    assert not re.search(r"\b\d+(\.\d+)? s wall\b|\d+ min \d+ s", README), "a measured time: docs/performance.md"
    assert "| command | what it does |" not in README, "the command table lives in docs/commands.md"
    performance = (ROOT / "docs" / "performance.md").read_text()
    assert "91 s wall in a fresh clone" in performance and "7 min 49 s" in performance


def test_every_page_the_readme_links_exists():
    links = re.findall(r"\]\(([^)#]+)", README)
    assert len(links) >= 10
    assert [link for link in links if not link.startswith("http") and not (ROOT / link).exists()] == []
