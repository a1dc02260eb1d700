"""Benchmark specs: every field validated with a message that names it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from crs.spec import SpecError, load_spec, parse_spec, spec_to_dict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _minimal(**changes):
    data = {
        "name": "t",
        "encoders": ["pixel_stats", "resnet18"],
        "datasets": [{"name": "d", "loader": "synthetic", "root": "data"}],
    }
    data.update(changes)
    return data


def test_defaults_and_relative_paths(tmp_path):
    spec = parse_spec(_minimal(), base=tmp_path)
    assert spec.cache == tmp_path / "cache" and spec.output == tmp_path / "crs-out" / "t"
    assert spec.datasets[0].root == tmp_path / "data"
    assert spec.score.reference_encoder == "median"  # the cohort-median encoder when none is named
    assert 1.0 in spec.probe.label_fractions and spec.score.case_bootstrap is True


def test_encoder_tables_and_defaults_merge(tmp_path):
    spec = parse_spec(
        _minimal(encoders=["pixel_stats", {"name": "resnet18", "input_size": 64}],
                 encoder_defaults={"weights": "random", "input_size": 32}),
        base=tmp_path,
    )
    assert [(e.name, e.weights, e.input_size) for e in spec.encoders] == [
        ("pixel_stats", "random", 32), ("resnet18", "random", 64)]


@pytest.mark.parametrize("change,message", [
    ({"encoders": []}, "field 'encoders' must be a non-empty list"),
    ({"encoders": ["a", "a"]}, "encoder names repeat"),
    ({"probe": {"label_fractions": [0.1, 0.5]}}, "must include 1.0"),
    ({"probe": {"label_fractions": [0.0, 1.0]}}, "must lie in (0, 1]"),
    ({"probe": {"Cs": [-1.0]}}, "Cs must be positive"),
    ({"probe": {"seeds": "0"}}, "field 'seeds' must be a non-empty list of int"),
    ({"extract": {"severities": [0, 6]}}, "severities must lie in 1..5"),
    ({"extract": {"corruptions": "some"}}, "field 'corruptions' must be 'all', 'none' or a list"),
    ({"score": {"reference_encoder": "nope"}}, "reference_encoder 'nope' is not among the encoders"),
    ({"score": {"weights": {"speed": 1.0}}}, "unknown field(s) ['speed']"),
    ({"score": {"case_bootstrap": "yes"}}, "field 'case_bootstrap' must be bool"),
    ({"colour": "blue"}, "unknown field(s) ['colour']"),
])
def test_bad_fields_name_the_field(tmp_path, change, message):
    with pytest.raises(SpecError) as error:
        parse_spec(_minimal(**change), base=tmp_path)
    assert message in str(error.value)


def test_dataset_errors_name_the_entry(tmp_path):
    with pytest.raises(SpecError, match=r"datasets\[0\]: missing required field 'root'"):
        parse_spec(_minimal(datasets=[{"name": "d", "loader": "synthetic"}]), base=tmp_path)
    with pytest.raises(SpecError, match=r"datasets\[0\].shift_target: unknown field"):
        parse_spec(_minimal(datasets=[{"name": "d", "loader": "x", "root": "r",
                                       "shift_target": {"name": "e", "loader": "x", "root": "r", "shift_target": {}}}]),
                   base=tmp_path)
    with pytest.raises(SpecError, match="data set names repeat"):
        parse_spec(_minimal(datasets=[{"name": "d", "loader": "x", "root": "r"}] * 2), base=tmp_path)


def test_invalid_toml_is_reported_with_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(path)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_spec_validates(path):
    spec = load_spec(path)
    assert spec.encoders and spec.datasets
    # spec_to_dict is JSON-friendly and round-trips the names
    as_dict = spec_to_dict(spec)
    assert as_dict["name"] == spec.name
    assert tomllib.loads(path.read_text())["name"] == spec.name
