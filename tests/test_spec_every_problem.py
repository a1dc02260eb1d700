"""A spec's value errors come all at once, one line each (issue 46, item 13): `seeds = "two"` no longer
hides `label_fractions = [0.25, 1.5]`, nor a bad encoder or data set."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from crs.cli.main import cli
from crs.spec import SpecError, load_spec

SPEC = """
name = "bad"
encoders = ["pixel_stats", {{ name = "resnet18", input_size = 3 }}]
[extract]
severities = [1, 9]
[probe]
seeds = "two"
label_fractions = [0.25, 1.5]
[score]
n_boot = 0
[[datasets]]
name = "derm"
loader = "synthetic"
root = "{data}"
[[datasets]]
name = "fundus"
root = "{data}"
"""

EXPECTED = (
    "encoder 'resnet18': input_size must be at least 8 pixels, got 3",
    "datasets[1]: missing required field 'loader'",
    "extract: severities must lie in 1..5, got (1, 9)",
    "probe: field 'seeds' must be a non-empty list of int, got 'two'",
    "probe: label_fractions must lie in (0, 1], got (0.25, 1.5)",
    "score: n_boot must be at least 1, got 0",
)


def test_crs_check_lists_every_value_problem_of_the_spec_one_line_each(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=tmp_path / "data"))
    result = CliRunner().invoke(cli, ["check", str(spec)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert f"crs: {len(EXPECTED)} problems in the spec:" in lines
    for problem in EXPECTED:
        assert f"  - {problem}" in lines, (problem, result.output)
    assert lines[-1].startswith(f"crs: error: {len(EXPECTED)} problems in the spec: ")
    assert not (tmp_path / "data").exists()  # refused before anything was read or written


def test_the_python_api_holds_every_problem_in_one_error(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=tmp_path / "data"))
    with pytest.raises(SpecError) as refused:
        load_spec(spec)
    assert sorted(refused.value.problems) == sorted(EXPECTED)


def test_unknown_keys_and_bad_values_come_together(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=tmp_path / "data").replace("n_boot = 0", "n_boot = 0\nnboot = 3"))
    with pytest.raises(SpecError) as refused:
        load_spec(spec)
    problems = refused.value.problems
    assert "score: unknown field(s) ['nboot']; did you mean 'n_boot' for 'nboot'?" in problems
    assert len(problems) == len(EXPECTED) + 1


def test_one_bad_value_reads_as_before(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "one"\nencoders = ["pixel_stats"]\n[probe]\nseeds = "two"\n[[datasets]]\nname = "a"\n'
                    f'loader = "synthetic"\nroot = "{tmp_path}"\n')
    result = CliRunner().invoke(cli, ["check", str(spec)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "crs: error: probe: field 'seeds' must be a non-empty list of int, got 'two'"]
