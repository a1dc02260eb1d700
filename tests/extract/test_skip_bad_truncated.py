"""``skip_bad = true`` skips a truncated PNG end to end (issue 46, item 10).

Without ``skip_bad`` `crs check` refuses a cut-short image and advises ``skip_bad = true``; with it, the
image is a note ("will be skipped and listed"), never a problem, also when it is among the images whose
pixels `crs check` samples; `crs extract` and `crs run` then skip it, list it in ``audit.json`` and exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner
from PIL import Image

from crs.cache.images import sample_rows
from crs.cli.main import cli

N_IMAGES = 96

SPEC = """
name = "skipping"
cache = "{cache}"
output = "{out}"
encoders = ["pixel_stats", "resnet18"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
corruptions = ["jpeg"]
severities = [1]
skip_bad = {skip_bad}
[probe]
label_fractions = [0.5, 1.0]
seeds = [0, 1]
Cs = [1.0]
[score]
reference_encoder = "pixel_stats"
n_boot = 20
[[datasets]]
name = "mine"
loader = "folder"
root = "{data}"
options = {{ modality = "dermoscopy", split_column = "split", image_size = 32, class_names = ["benign", "malignant"] }}
"""


def build_folder(root: Path) -> list[str]:
    """``N_IMAGES`` noise PNGs with labels.csv; both classes in every split."""
    rng = np.random.default_rng(0)
    (root / "img").mkdir(parents=True)
    rows = []
    for i in range(N_IMAGES):
        relative, label = f"img/{i:03d}.png", (i // 4) % 2
        pixels = rng.integers(0, 120, (24, 24, 3), dtype=np.uint8) + np.uint8(100 * label)
        Image.fromarray(pixels).save(root / relative)
        rows.append({"path": relative, "label": ("benign", "malignant")[label],
                     "split": ("train", "val", "test", "train")[i % 4]})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    return [row["path"] for row in rows]


def write_spec(tmp_path: Path, data: Path, skip_bad: bool) -> Path:
    spec = tmp_path / f"spec-{skip_bad}.toml"
    spec.write_text(SPEC.format(cache=tmp_path / "cache", out=tmp_path / "out", data=data,
                                skip_bad="true" if skip_bad else "false"))
    return spec


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_skip_bad_skips_a_truncated_png_among_the_sampled_images(tmp_path):
    data = tmp_path / "data"
    paths = build_folder(data)
    row = sample_rows(N_IMAGES).tolist()[1]  # among the images whose pixels `crs check` decodes
    victim = data / paths[row]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])

    refused = invoke("check", write_spec(tmp_path, data, skip_bad=False))
    assert refused.exit_code == 1 and "skip_bad = true" in refused.output, refused.output

    spec = write_spec(tmp_path, data, skip_bad=True)
    check = invoke("check", spec)
    assert check.exit_code == 0, check.output
    assert "problem" not in check.output, check.output
    assert f"1 truncated image file(s) will be skipped and listed (skip_bad), first: {paths[row]}" in check.output

    extract = invoke("extract", spec)
    assert extract.exit_code == 0, extract.output
    run = invoke("run", spec)
    assert run.exit_code == 0, run.output
    audit = json.loads((tmp_path / "out" / "audit.json").read_text())
    skipped = audit["skipped_images"]["mine"]
    assert len(skipped) == 1 and skipped[0].startswith(f"{paths[row]}: unreadable"), skipped
    records = pd.read_parquet(tmp_path / "out" / "records.parquet")
    assert records["auroc"].notna().all()
