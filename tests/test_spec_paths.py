"""One rule for every path in a spec file: relative paths resolve against the spec's folder (issue 46, item 5).

A spec written when crs resolved against the working folder is told, one line per path, where it now
points; a spec built in Python without a file keeps the working folder.
"""

from __future__ import annotations

import os
import subprocess
import sys

from crs.spec import load_spec, parse_spec

SPEC = """
name = "paths"
cache = "cache"
output = "out"
encoders = ["pixel_stats"]
[score]
zero_shot = true
prompts = {{ derm = ["prompts/derm.toml"] }}
[[datasets]]
name = "derm"
loader = "synthetic"
root = "data"
options = {{ modality = "dermoscopy", n_images = 40, image_size = 16, label_map = "maps/derm.toml" }}
shift_target = {{ name = "derm-b", loader = "synthetic", root = "{target}", options = {{ modality = "dermoscopy" }} }}
"""


def test_every_relative_path_resolves_against_the_spec_folder_not_the_working_folder(tmp_path, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "spec.toml").write_text(SPEC.format(target="../site-b"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = load_spec("../mine/spec.toml")
    base = elsewhere / ".." / "mine"
    assert os.path.samefile(spec.cache.parent, folder) and spec.cache.name == "cache"
    assert spec.cache == base / "cache" and spec.output == base / "out"
    (entry,) = spec.datasets
    assert entry.root == base / "data" and entry.shift_targets[0].root == base / "../site-b"
    assert entry.options["label_map"] == str(base / "maps/derm.toml")
    assert spec.score.prompts == {"derm": [str(base / "prompts/derm.toml")]}


def test_a_spec_built_in_python_keeps_the_working_folder(tmp_path):
    import tomllib

    data = tomllib.loads(SPEC.format(target="site-b"))
    spec = parse_spec(data)
    assert str(spec.cache) == "cache" and str(spec.output) == "out" and str(spec.datasets[0].root) == "data"
    assert spec.datasets[0].options["label_map"] == "maps/derm.toml"


def test_a_shipped_label_map_name_is_not_a_path(tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC.format(target="b").replace("maps/derm.toml", "isic2019-to-ham10000"))
    assert load_spec(tmp_path / "spec.toml").datasets[0].options["label_map"] == "isic2019-to-ham10000"


def test_an_old_spec_that_now_points_elsewhere_says_so_in_one_line_per_path(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "spec.toml").write_text(SPEC.format(target="site-b"))
    (tmp_path / "data").mkdir()  # the old meaning: under the working folder, where the user runs crs
    (tmp_path / "cache" / "derm.zarr").mkdir(parents=True)  # this spec's features, where the old rule put them
    (tmp_path / "out").mkdir()  # a folder but no run folder: nothing to say
    (tmp_path / "old" / "out").mkdir()  # exists beside the spec too: nothing to say for output
    done = subprocess.run([sys.executable, "-m", "crs", "check", "old/spec.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if "no longer against the working folder" in line]
    assert len(lines) == 2, done.stderr
    data_line = next(line for line in lines if "datasets[0].root" in line)
    assert f"({tmp_path / 'old' / 'data'}, not there)" in data_line and f"({tmp_path / 'data'}, which exists)" in data_line
    assert "write '../data' or an absolute path" in data_line
    assert any(line.startswith("WARNING crs.spec: old/spec.toml: cache = 'cache'") for line in lines), lines


def test_no_warning_when_the_spec_sits_in_the_working_folder(tmp_path, monkeypatch, caplog):
    (tmp_path / "spec.toml").write_text(SPEC.format(target="b"))
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    load_spec("spec.toml")
    assert "no longer against" not in caplog.text


def test_a_stray_cache_folder_under_the_working_folder_is_no_reason_to_warn(tmp_path, monkeypatch, caplog):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "spec.toml").write_text(SPEC.format(target="b"))
    (tmp_path / "mine" / "data").mkdir()
    (tmp_path / "cache").mkdir()  # e.g. the repository's own cache/README.md
    (tmp_path / "cache" / "README.md").write_text("features go here")
    monkeypatch.chdir(tmp_path)
    load_spec("mine/spec.toml")
    assert "no longer against" not in caplog.text
