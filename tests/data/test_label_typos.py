"""A typo in a label column is refused, not made a class (issue 39, item 2; decision 0119).

With no ``class_names`` in the spec, one row labelled ``melanoma`` in a benign/malignant CSV used to
give `check: ok` and a three-class task with a one-image class. Now `crs check` and `crs run` stop,
naming the value, its rows and the classes it may mean, and say how to accept it; `crs init` writes
``class_names`` and leaves such a value out of it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner
from PIL import Image

from crs.cli.main import cli

SPEC = """
name = "typos"
cache = "{tmp}/cache"
output = "{tmp}/out"
encoders = ["pixel_stats"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
corruptions = []
[probe]
label_fractions = [1.0]
seeds = [0]
Cs = [1.0]
[score]
n_boot = 20
[[datasets]]
name = "mine"
loader = "folder"
root = "{tmp}/ds"
options = {{ modality = "dermoscopy", image_size = 32{extra} }}
"""


def build(root: Path, labels: dict[int, str] | None = None, n: int = 60) -> None:
    """``n`` images labelled benign/malignant alternately, with the rows in ``labels`` relabelled."""
    rng = np.random.default_rng(0)
    (root / "img").mkdir(parents=True)
    rows = []
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(root / f"img/{i:03d}.png")
        rows.append({"path": f"img/{i:03d}.png", "label": (labels or {}).get(i, ("benign", "malignant")[i % 2])})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)


def write_spec(tmp_path: Path, extra: str = "") -> Path:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(tmp=tmp_path, extra=extra))
    return spec


def invoke(*args) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_one_row_typo_stops_check_and_run_naming_value_rows_and_fix(tmp_path):
    build(tmp_path / "ds", {13: "melanoma"})
    spec = write_spec(tmp_path)
    check = invoke("check", spec)
    assert check.exit_code == 1, check.output
    assert ("label column 'label' of " in check.output and "'melanoma' has 1 row(s) (row 15)" in check.output
            and "did you mean one of 'benign', 'malignant'?" in check.output)
    assert "options.class_names = ['benign', 'malignant', 'melanoma']" in check.output
    run = invoke("run", spec)
    assert run.exit_code != 0 and "'melanoma' has 1 row(s)" in run.output
    assert not (tmp_path / "out" / "records.parquet").exists()


def test_a_case_variant_suggests_its_class_and_class_names_accepts(tmp_path):
    build(tmp_path / "ds", {i: "Malignant " for i in (1, 3, 5, 7, 9, 11)})
    check = invoke("check", write_spec(tmp_path))
    assert check.exit_code == 1
    assert "'Malignant' has 6 row(s) (row 3, 5, 7, 9, 11 ...)" in check.output
    assert "did you mean 'malignant'?" in check.output
    accepted = invoke("check", write_spec(tmp_path, ', class_names = ["Malignant", "benign", "malignant"]'))
    assert "row(s)" not in accepted.output


def test_unknown_value_under_class_names_names_its_rows(tmp_path):
    build(tmp_path / "ds", {20: "bengin"})
    check = invoke("check", write_spec(tmp_path, ', class_names = ["benign", "malignant"]'))
    assert check.exit_code == 1
    assert "labels ['bengin']" in check.output and "(row 22)" in check.output and "did you mean 'benign'?" in check.output


def test_init_writes_class_names_and_leaves_a_typo_out(tmp_path):
    build(tmp_path / "ds", {13: "melanoma"})
    spec = tmp_path / "init.toml"
    result = invoke("init", tmp_path / "ds", "--spec", spec, "--weights", "random", "--input-size", "32",
                    "--encoders", "pixel_stats", "--device", "cpu")
    assert result.exit_code == 0, result.output
    options = tomllib.loads(spec.read_text())["datasets"][0]["options"]
    assert options["class_names"] == ["benign", "malignant"]
    assert "left out of class_names" in result.output and "'melanoma' has 1 row(s) (row 15)" in result.output
    check = invoke("check", spec)
    assert check.exit_code == 1 and "labels ['melanoma']" in check.output and "(row 15)" in check.output


def test_small_balanced_classes_are_not_typos(tmp_path):
    build(tmp_path / "ds", {i: "nevus" for i in range(0, 12, 3)}, n=12)
    check = invoke("check", write_spec(tmp_path))
    assert "row(s)" not in check.output, check.output
