"""The content check reads every file, not a sample (issue 39, item 1; decision 0118).

A file changed in place anywhere in the data set is found by `crs check` and refused by `crs run` and
`crs extract` before features are reused; `crs cache verify --images` exits 1 on it. A truncated JPEG
anywhere in a data set not yet extracted is found by `crs check`; a bad image met by the extraction is
reported on a line of its own, naming skip_bad and `crs datasets check`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner
from PIL import Image

from crs.cache.images import sample_rows
from crs.cache.store import FeatureStore, store_path
from crs.cli.main import cli
from crs.data import load_entry
from crs.spec import load_spec

SPEC = """
name = "complete"
cache = "{cache}"
output = "{out}"
encoders = ["pixel_stats"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
corruptions = []
chunk_rows = 64
skip_bad = {skip_bad}
[probe]
label_fractions = [1.0]
seeds = [0]
Cs = [1.0]
[score]
n_boot = 20
[[datasets]]
name = "mine"
loader = "folder"
root = "{data}"
options = {{ modality = "dermoscopy", split_column = "split", image_size = 32, class_names = ["benign", "malignant"] }}
"""

N_IMAGES = 160


def build_folder(root: Path, suffix: str = "png") -> list[str]:
    """``N_IMAGES`` noise images with labels.csv (label, split columns); returns the relative paths."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(N_IMAGES):
        relative = f"img/{i:03d}.{suffix}"
        (root / "img").mkdir(parents=True, exist_ok=True)
        label = (i // 4) % 2  # every split holds both classes (split is i % 4)
        pixels = rng.integers(0, 120, (24, 24, 3), dtype=np.uint8) + np.uint8(100 * label)
        Image.fromarray(pixels).save(root / relative)
        rows.append({"path": relative, "label": ("benign", "malignant")[label], "split": ("train", "val", "test", "train")[i % 4]})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    return [row["path"] for row in rows]


def write_spec(tmp_path: Path, data: Path, skip_bad: bool = False) -> Path:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(cache=tmp_path / "cache", out=tmp_path / "out", data=data,
                                skip_bad="true" if skip_bad else "false"))
    return spec


def outside_sample(n: int) -> int:
    row = next(r for r in range(n // 3, n) if r not in set(sample_rows(n).tolist()))
    return row


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_changed_file_outside_the_sample_is_found_and_refused(tmp_path):
    data = tmp_path / "dsA"
    paths = build_folder(data)
    spec = write_spec(tmp_path, data)
    assert invoke("extract", spec).exit_code == 0
    row = outside_sample(N_IMAGES)
    victim = data / paths[row]
    original = victim.read_bytes()
    shutil.copyfile(data / paths[row + 2], victim)  # another image of the same class, in place

    check = invoke("check", spec)
    assert check.exit_code == 1, check.output
    assert f"1 of {N_IMAGES} checked image file(s)" in check.output and str(victim) in check.output
    assert "content differs" in check.output and "restore the original file(s)" in check.output
    for stage in ("extract", "run"):
        result = invoke(stage, spec)
        assert result.exit_code != 0, result.output
        assert str(victim) in result.output and "differ from those its cached features" in result.output
    verify = invoke("cache", "verify", "--spec", spec, "--images")
    assert verify.exit_code == 1 and f"CHANGED mine: {paths[row]}" in verify.output, verify.output

    victim.write_bytes(original)  # the same bytes again (a new mtime): nothing is refused, the record's stats refresh
    assert invoke("check", spec).exit_code == 0
    assert invoke("extract", spec).exit_code == 0
    from crs.cache.images import check_contents

    store = FeatureStore(store_path(tmp_path / "cache", "mine"))
    dataset = load_entry(load_spec(spec).datasets[0])
    assert len(check_contents(store, dataset).hashed) == 0  # the stat pass alone: nothing left to hash


def test_truncated_jpeg_outside_the_sample_is_found_before_extraction(tmp_path):
    data = tmp_path / "dsA"
    paths = build_folder(data, suffix="jpg")
    row = outside_sample(N_IMAGES)
    victim = data / paths[row]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size * 2 // 5])
    check = invoke("check", write_spec(tmp_path, data))
    assert check.exit_code == 1, check.output
    assert f"1 image file(s) cut short, first: image unreadable or truncated: {victim}" in check.output
    assert "skip_bad = true" in check.output and "crs datasets check" in check.output
    skipping = invoke("check", write_spec(tmp_path, data, skip_bad=True))
    assert skipping.exit_code == 0, skipping.output
    assert f"1 truncated image file(s) will be skipped and listed (skip_bad), first: {paths[row]}" in skipping.output


def test_bad_image_met_by_extraction_is_reported_on_its_own_line(tmp_path):
    data = tmp_path / "dsA"
    paths = build_folder(data)
    victim = data / paths[outside_sample(N_IMAGES)]
    broken = bytearray(victim.read_bytes())
    broken[150:200] = b"\0" * 50  # a garbled middle: the end marker is intact, the decode fails
    victim.write_bytes(bytes(broken))
    result = invoke("extract", write_spec(tmp_path, data))
    assert result.exit_code == 2, result.output
    lines = result.output.split("\n")
    error = [line for line in lines if "crs: error:" in line]
    assert len(error) == 1 and error[0].startswith(f"crs: error: image unreadable or truncated: {victim}"), lines
    assert "skip_bad = true under [extract]" in error[0] and "crs datasets check" in error[0]
