"""Small things a reader of the report and of the run records meets (issue 39 item 15): the run's date
and crs's git commit in the provenance box, settings at readable precision, the fit mode in words on a
card, and BLAS libraries listed in a fixed order so identical runs write identical metadata."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def page(tiny_run, tmp_path_factory) -> str:
    from crs.report import write_report

    spec, _, records, score = tiny_run
    out = tmp_path_factory.mktemp("small")
    return write_report(score, records, out, spec=spec, predictions_dir=Path(spec.output) / "predictions",
                        draw_corruption_grids=False).read_text()


def test_the_provenance_box_has_the_run_date_and_the_git_commit(page):
    box = page.split('<aside class="provenance" id="provenance">', 1)[1].split("</aside>", 1)[0]
    assert re.search(r"<dt>run date</dt><dd>20\d\d-\d\d-\d\d \d\d:\d\d UTC", box)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert re.search(rf"<dt>crs git commit</dt><dd>{head}( \+ local changes)?</dd>", box), box


def test_settings_print_no_float_noise_and_cards_say_the_fit_in_words(page):
    settings = page.split('<h2 id="settings">', 1)[1]
    assert not re.search(r"\d\.\d{7,}", settings), "a setting printed with float noise (0.3333333333333333)"
    assert "0.3333" in settings  # the default weights, a third each
    assert "(crop | pad | squash)" not in page
    assert "px, centre-cropped to a square" in page or "px, padded to a square" in page


def test_blas_libraries_are_listed_whatever_their_load_order():
    code = "import {}; from crs.evaluate.records import machine; print(machine()['blas'])"
    listed = []
    for order in ("torch, numpy, scipy.linalg", "sklearn.linear_model, torch"):  # two load orders here
        done = subprocess.run([sys.executable, "-c", code.format(order)], capture_output=True, text=True,
                              timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        listed.append(done.stdout.strip())
    assert listed[0] == listed[1] and listed[0] != "unknown"
