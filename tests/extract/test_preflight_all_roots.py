"""`crs check` names every missing root at once, shift targets' included, and creates no folder (issue 39, item 16)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from click.testing import CliRunner

from crs.cli.main import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "paper_shift.toml"


def test_missing_source_and_target_roots_all_named_and_no_folder_made(tmp_path, monkeypatch):
    monkeypatch.setenv("CRS_WEIGHTS_DIR", str(tmp_path / "weights"))
    spec = tmp_path / "paper_shift.toml"
    spec.write_text(EXAMPLE.read_text().replace('root = "/data/', f'root = "{tmp_path}/data/'))
    entries = tomllib.loads(spec.read_text())["datasets"]
    targets = [t["name"] for entry in entries for t in entry.get("shift_target", [])]
    assert len(entries) == 3 and len(targets) == 10
    out, cache = tmp_path / "out" / "run", tmp_path / "cache"
    result = CliRunner().invoke(cli, ["check", str(spec), "--out", str(out), "--cache", str(cache)])
    assert result.exit_code == 1, result.output
    problems = [line for line in result.output.splitlines() if line.startswith("  - ")]
    for entry in entries:
        assert any(re.match(rf"  - data set '{entry['name']}': .*{tmp_path}/data/", p) for p in problems), entry["name"]
    for name in targets:
        assert any(re.match(rf"  - shift target '{name}': .*{tmp_path}/data/", p) for p in problems), (name, problems)
    assert not out.exists() and not (tmp_path / "out").exists() and not cache.exists()


def test_unwritable_output_under_a_file_is_still_found(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
name = "w"
encoders = ["pixel_stats"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
corruptions = []
[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{tmp_path / 'data'}"
options = {{ modality = "fundus", n_images = 30, image_size = 32 }}
""")
    result = CliRunner().invoke(cli, ["check", str(spec), "--out", str(blocker / "out"), "--cache", str(tmp_path / "c")])
    assert result.exit_code == 1
    assert f"output folder {blocker / 'out'} is not writable" in result.output
    assert not (tmp_path / "c").exists()
