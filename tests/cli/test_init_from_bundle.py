"""`crs init --from-bundle`: whatever a bundle's spec.json holds for the local folders (absolute paths,
relative ones, placeholders, nothing), the written spec holds placeholders for them and says which
(issue 46, item 4). The full walk-through (publish, init, extend) is tests/publish/test_walkthrough.py."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from crs.cli.main import cli
from crs.spec import PLACEHOLDER, SpecError, load_spec

PUBLISHED = {
    "name": "hospital",
    "encoders": [{"name": "resnet18", "weights": None, "input_size": None, "datasets": None},
                 {"name": "pixel_stats", "weights": "random", "input_size": 32, "datasets": ["derm"]}],
    "datasets": [
        {"name": "derm", "loader": "folder", "options": {"csv": "labels.csv", "image_size": 64},
         "shift_targets": [{"name": "derm-b", "loader": "folder", "root": "/srv/pacs/site-b", "options": {},
                            "shift_targets": []}]},
        {"name": "eyes", "loader": "synthetic", "root": "relative/eyes", "options": {"modality": "fundus"},
         "shift_target": {"name": "eyes-b", "loader": "synthetic", "root": "<local>", "options": {}}},
    ],
    "extract": {"batch_size": 16, "corruptions": ["jpeg"], "severities": [1, 3], "corruption_rows": None},
    "probe": {"label_fractions": [0.5, 1.0], "seeds": [0, 1, 2], "Cs": None, "family": "logistic"},
    "score": {"reference_encoder": "resnet18", "n_boot": 300, "weights": {"dominance": 2.0, "balance": 1.0},
              "prompts": {"eyes": ["/home/publisher/prompts/eyes.toml"]}, "zero_shot": True},
    "a_field_of_a_later_crs": 1,
}


def _bundle(tmp_path, spec):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "spec.json").write_text(json.dumps(spec))
    return bundle


def test_every_local_folder_becomes_a_named_placeholder_and_the_protocol_is_kept(tmp_path):
    bundle = _bundle(tmp_path, PUBLISHED)
    out = tmp_path / "mine" / "spec.toml"
    result = CliRunner().invoke(cli, ["init", "--from-bundle", str(bundle), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    for private in ("/srv/pacs", "relative/eyes", "<local>", "/home/publisher"):
        assert private not in text, private
    data = tomllib.loads(text)
    assert data["name"] == "hospital-extended" and "encoder_defaults" not in data  # the encoders differ
    assert data["encoders"] == ["resnet18", {"name": "pixel_stats", "weights": "random", "input_size": 32,
                                             "datasets": ["derm"]}]
    assert data["extract"] == {"batch_size": 16, "corruptions": ["jpeg"], "severities": [1, 3]}
    assert data["probe"] == {"label_fractions": [0.5, 1.0], "seeds": [0, 1, 2], "family": "logistic"}
    assert data["score"]["weights"] == {"dominance": 2.0, "balance": 1.0} and data["score"]["n_boot"] == 300
    roots = [data["datasets"][0]["root"], data["datasets"][0]["shift_target"][0]["root"],
             data["datasets"][1]["root"], data["datasets"][1]["shift_target"][0]["root"],
             data["cache"], data["output"], data["score"]["prompts"]["eyes"][0]]
    assert all(value.startswith(PLACEHOLDER) for value in roots), roots
    assert "the folder of data set 'derm' on this machine" in data["datasets"][0]["root"]
    assert "'eyes.toml'" in data["score"]["prompts"]["eyes"][0]
    said = result.output
    assert "fill in 7 placeholder(s)" in said and f"crs run {out} --extend {bundle}" in said
    for name in ("cache", "output", "datasets[0].root (derm)", "datasets[0].shift_target root (derm-b)",
                 "datasets[1].root (eyes)", "datasets[1].shift_target root (eyes-b)", "score.prompts.eyes"):
        assert name in said, name
    with pytest.raises(SpecError) as refused:  # unfilled, the spec is refused, every placeholder named
        load_spec(out)
    assert len(refused.value.problems) == 7


def test_the_command_takes_root_or_a_bundle(tmp_path):
    bundle = _bundle(tmp_path, PUBLISHED)
    neither = CliRunner().invoke(cli, ["init"])
    assert neither.exit_code == 2 and "give ROOT (a folder of images with a CSV) or --from-bundle BUNDLE" in neither.output
    both = CliRunner().invoke(cli, ["init", str(tmp_path), "--from-bundle", str(bundle)])
    assert both.exit_code == 2 and "give ROOT or --from-bundle, not both" in both.output
    (tmp_path / "x.toml").write_text("")
    kept = CliRunner().invoke(cli, ["init", "--from-bundle", str(bundle), "-o", str(tmp_path / "x.toml")])
    assert kept.exit_code == 2 and "--force" in kept.output and (tmp_path / "x.toml").read_text() == ""
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = CliRunner().invoke(cli, ["init", "--from-bundle", str(empty)])
    assert missing.exit_code == 2 and f"{empty}: no spec.json" in missing.output
