"""`crs check`: every problem before any encoder runs, in one pass (also the start of `crs run` and `crs extract`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from crs.benchmark import Benchmark
from crs.cli.main import cli
from crs.encoders import get_spec
from crs.encoders.locate import locate_weights
from crs.encoders.weights import WeightsNotFoundError
from crs.extract.preflight import PreflightError, preflight
from crs.spec import load_spec

SPEC = """
name = "preflight"
cache = "{cache}"
output = "{out}"
encoders = {encoders}

[extract]
corruptions = []

[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{data}"
options = {{ modality = "fundus", n_images = 60, image_size = 32 }}
"""


@pytest.fixture(autouse=True)
def no_local_weights(tmp_path, monkeypatch):
    """An empty $CRS_WEIGHTS_DIR: weights must be found there or in the (empty here) Hugging Face cache."""
    (tmp_path / "weights").mkdir()
    monkeypatch.setenv("CRS_WEIGHTS_DIR", str(tmp_path / "weights"))


def write_spec(tmp_path: Path, encoders: list[str], out: Path | None = None) -> Path:
    path = tmp_path / "spec.toml"
    text = SPEC.format(cache=tmp_path / "cache", out=out or tmp_path / "out", data=tmp_path / "data",
                       encoders="[" + ", ".join(f'"{e}"' for e in encoders) + "]")
    path.write_text(text)
    return path


def blocked_output(tmp_path: Path) -> Path:
    """An output folder that cannot be created (under a file): unwritable even for root."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    return blocker / "out"


def test_two_missing_weights_and_an_unwritable_output_in_one_run(tmp_path):
    out = blocked_output(tmp_path)
    spec_path = write_spec(tmp_path, ["pixel_stats", "resnet50", "efficientnet_b0"], out)
    report = preflight(load_spec(spec_path))
    messages = [finding.message for finding in report.problems]
    assert len(messages) == 3, messages
    assert "no local weights for encoder 'resnet50'" in messages[0]
    assert "no local weights for encoder 'efficientnet_b0'" in messages[1]
    assert messages[2].startswith(f"output folder {out} is not writable") and report.problems[2].setting == "output"
    assert any("pixels of 60 sampled image(s): RGB 8-bit 60" in note for note in report.notes)

    # `crs check` lists all three and exits 1
    result = CliRunner().invoke(cli, ["check", str(spec_path)], obj={})
    assert result.exit_code == 1, result.output
    assert "check: 3 problem(s):" in result.output
    assert "'resnet50'" in result.output and "'efficientnet_b0'" in result.output and "(option --out)" in result.output

    # `crs run` stops before stage 1 with all three (today: one missing encoder per attempt, the output at stage 2)
    result = CliRunner().invoke(cli, ["run", str(spec_path), "-q"], obj={})
    assert result.exit_code == 2
    listed = [line for line in result.output.splitlines() if line.startswith("  - ")]
    assert len(listed) == 3
    assert result.output.strip().splitlines()[-1].startswith("crs: error: no local weights for encoder 'resnet50'")
    assert "(+2 more)" in result.output.strip().splitlines()[-1]
    assert not (tmp_path / "cache" / "fundus.zarr").exists()  # no forward pass, no store


def test_clean_spec_passes_and_extract_runs(tmp_path):
    spec_path = write_spec(tmp_path, ["pixel_stats"])
    result = CliRunner().invoke(cli, ["check", str(spec_path)], obj={})
    assert result.exit_code == 0, result.output
    assert "check: ok" in result.output and "forward passes to go" in result.output
    assert CliRunner().invoke(cli, ["extract", str(spec_path), "-q"], obj={}).exit_code == 0


def test_unmappable_image_and_changed_cache(tmp_path):
    spec_path = write_spec(tmp_path, ["pixel_stats"])
    Benchmark(load_spec(spec_path)).extract(progress=False)
    (folder,) = (tmp_path / "data").glob("fundus-*")
    victim = sorted((folder / "images").glob("*.png"))[0]
    Image.fromarray(np.full((8, 8), 7.5, np.float32)).save(victim, format="TIFF")  # float pixels outside [0, 1]
    with pytest.raises(PreflightError) as raised:
        Benchmark(load_spec(spec_path)).check()
    messages = [finding.message for finding in raised.value.report.problems]
    assert any("float pixels in [7.5, 7.5]" in m and victim.name in m for m in messages), messages
    assert any("differ from those its cached features were computed from" in m for m in messages), messages


def test_missing_labels_and_missing_weights_together(tmp_path):
    data = tmp_path / "folder"
    data.mkdir()
    rng = np.random.default_rng(0)
    for i in range(12):
        Image.fromarray(rng.integers(0, 256, size=(8, 8), dtype=np.uint8)).save(data / f"x{i}.png")
    pd.DataFrame({"path": [f"x{i}.png" for i in range(12)], "grade": [i % 2 for i in range(12)]}).to_csv(
        data / "labels.csv", index=False)
    spec_path = tmp_path / "folder.toml"
    spec_path.write_text(f"""
name = "folder"
cache = "{tmp_path / 'cache'}"
output = "{tmp_path / 'out'}"
encoders = ["pixel_stats", "resnet50"]
[[datasets]]
name = "mine"
loader = "folder"
root = "{data}"
options = {{ modality = "fundus", label_columns = "diagnosis" }}
""")
    messages = [finding.message for finding in preflight(load_spec(spec_path)).problems]
    assert len(messages) == 2, messages
    assert "no local weights for encoder 'resnet50'" in messages[0]  # the spec's own faults come first
    assert messages[1].startswith("data set 'mine': ") and "diagnosis" in messages[1]


def test_locate_weights_builds_nothing_and_matches_create():
    assert locate_weights(get_spec("pixel_stats"), None) is None
    assert locate_weights(get_spec("resnet50"), "random") is None
    with pytest.raises(WeightsNotFoundError, match="no local weights for encoder 'retfound'"):
        locate_weights(get_spec("retfound"), None)


@pytest.mark.parametrize("name", ["resnet50", "clip_vit_b16", "rad_dino"])
def test_locate_weights_says_what_create_says(name):
    """The pre-flight check must find weights where the builders look: the same error, word for word."""
    from crs.encoders import create

    if name == "rad_dino":
        pytest.importorskip("transformers")
    with pytest.raises(WeightsNotFoundError) as located:
        locate_weights(get_spec(name), None)
    with pytest.raises(WeightsNotFoundError) as created:
        create(name)
    assert str(located.value) == str(created.value)
