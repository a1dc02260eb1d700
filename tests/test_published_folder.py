"""`crs score` never replaces a run folder's published score with one of other settings unless asked
(issue 34 item 6): refused in one line, `--to DIR` writes elsewhere, `--overwrite` replaces."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from crs.cli.main import cli


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_crs_score_with_other_weights_refuses_then_writes_elsewhere_or_overwrites(tiny_run, tmp_path):
    spec, *_ = tiny_run
    published = tmp_path / "published"
    shutil.copytree(spec.output, published)
    text = spec.source.read_text().replace("[score]\n", "[score]\nweights = { dominance = 1.0, balance = 1.0, worst_axis = 3.0 }\n", 1)
    other = tmp_path / "other.toml"
    other.write_text(text)
    before = _files(published)

    refused = CliRunner().invoke(cli, ["score", str(other), "--out", str(published)])
    assert refused.exit_code == 2
    line = refused.output.strip()
    assert "\n" not in line and "other [score] settings (weights)" in line and "(option --overwrite)" in line
    assert _files(published) == before

    elsewhere = CliRunner().invoke(cli, ["score", str(other), "--out", str(published), "--to", str(tmp_path / "explore")])
    assert elsewhere.exit_code == 0, elsewhere.output
    assert _files(published) == before
    explored = json.loads((tmp_path / "explore" / "score" / "summary.json").read_text())
    assert explored["settings"]["weights"] != json.loads((published / "score" / "summary.json").read_text())["settings"]["weights"]

    replaced = CliRunner().invoke(cli, ["score", str(other), "--out", str(published), "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads((published / "score" / "summary.json").read_text())["settings"]["weights"] == explored["settings"]["weights"]
