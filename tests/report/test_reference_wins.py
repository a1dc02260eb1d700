"""Issue 46 item 7: when the reference beats every candidate, the headline says so (with what the confidence
statements support) instead of "Build on X: better than every other encoder"; clean AUROC ties are said as ties,
and Kendall tau is printed as undefined, with the reason, instead of nan. The issue's repro: `crs init` on an easy
two-class PNG folder with random weights, then `crs run`."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from crs.cli.main import cli


def _easy_folder(root, n: int = 80) -> None:
    """Bright against dark noise images: any encoder separates them."""
    (root / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        label = "bright" if i % 2 else "dark"
        pixels = np.clip(rng.normal(180 if label == "bright" else 60, 25, (48, 48, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(root / "images" / f"img{i:03d}.png")
        rows.append({"image": f"images/img{i:03d}.png", "label": label})
    with open(root / "labels.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["image", "label"])
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def easy_run(tmp_path_factory):
    where = tmp_path_factory.mktemp("easy")
    _easy_folder(where / "easy")
    spec = where / "easy.toml"
    made = CliRunner().invoke(cli, ["init", str(where / "easy"), "--spec", str(spec), "--weights", "random", "--quick",
                                    "--encoders", "resnet18,pixel_stats,vit_tiny", "--input-size", "64",
                                    "--device", "cpu"])
    assert made.exit_code == 0, made.output
    spec.write_text(spec.read_text().replace('output = "crs-out/easy"', f'output = "{where / "out"}"')
                    .replace('cache = "cache"', f'cache = "{where / "cache"}"'))
    ran = CliRunner().invoke(cli, ["run", str(spec), "-q"])
    assert ran.exit_code == 0, ran.output
    return where / "out", ran.output


def test_the_headline_says_no_candidate_beats_the_reference(easy_run):
    out, printed = easy_run
    crs = pd.read_parquet(out / "score" / "crs.parquet").set_index("encoder")
    candidates = crs.drop(index="resnet18")
    assert crs.loc["resnet18", "crs"] > candidates["crs"].max()  # the situation: the reference wins
    page = (out / "report.md").read_text()
    opening = page.split("\n\n", 2)[1]
    for text in (opening, printed, (out / "score" / "score.txt").read_text()):
        assert "No candidate" in text and "the reference resnet18" in text
        assert "better than every other encoder" not in text
        assert "Among the candidates, build on" in text
    summary = json.loads((out / "score" / "summary.json").read_text())
    # one family decides it (decision 0166): every candidate surely below the reference, or not
    separated = set(candidates.index) <= set(summary["headline_family"]["below_reference"])
    assert opening.startswith("No candidate beats the reference resnet18" if separated
                              else "No candidate's point Clinical Reliability Score reaches the reference resnet18's")
    assert summary["headline"][0].startswith("No candidate")


def test_auroc_ties_are_ties_and_tau_is_never_nan(easy_run):
    out, printed = easy_run
    crs = pd.read_parquet(out / "score" / "crs.parquet").set_index("encoder")
    candidates = crs.drop(index="resnet18")
    text = (out / "score" / "score.txt").read_text()
    line = next(line for line in text.splitlines() if line.startswith("AUROC vs CRS"))
    assert "nan" not in line.lower()
    page = (out / "report.md").read_text()
    assert "would have picked resnet18" not in page  # the reference is no candidate to pick
    if candidates["auroc"].nunique() == 1:  # every candidate at the same clean AUROC (1.000 on this easy task)
        assert "Clean AUROC cannot pick a leader" in page and "would have picked" not in page
        assert "Kendall tau \u2014 (undefined: every clean AUROC is tied)" in line
    else:
        assert re.search(r"Kendall tau -?\d\.\d{3}", line)

