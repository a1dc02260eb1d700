"""`crs check` names every unknown key of a spec at once, each with its "did you mean" (issue 39, item 11)."""

from __future__ import annotations

from click.testing import CliRunner

from crs.cli.main import cli

SPEC = """
name = "typos"
encoders = [{{ name = "pixel_stats", weigths = "random" }}]
[extract]
batchsize = 4
[probe]
seed = [0]
[score]
weights = {{ dominanse = 1.0 }}
[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{data}"
option = {{ modality = "fundus" }}
shift_target = {{ name = "b", loader = "synthetic", root = "{data}", rot = "x" }}
"""


def test_every_unknown_key_in_one_run(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(data=tmp_path / "data"))
    result = CliRunner().invoke(cli, ["check", str(spec)])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    for where, key, guess in (("encoders[0]", "weigths", "weights"), ("extract", "batchsize", "batch_size"),
                              ("probe", "seed", "seeds"), ("score.weights", "dominanse", "dominance"),
                              ("datasets[0]", "option", "options"), ("datasets[0].shift_target", "rot", "root")):
        assert f"{where}: unknown field(s) ['{key}']; did you mean '{guess}' for '{key}'?" in line, (where, line)
    assert line.startswith("crs: error: unknown fields in 6 tables")
    assert not (tmp_path / "data").exists()


def test_one_unknown_key_reads_as_before(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "one"\ncolour = "blue"\nencoders = ["pixel_stats"]\n[[datasets]]\nname = "a"\n'
                    f'loader = "synthetic"\nroot = "{tmp_path}"\n')
    result = CliRunner().invoke(cli, ["check", str(spec)])
    assert result.exit_code == 2
    assert "crs: error: spec: unknown field(s) ['colour']; allowed: [" in result.output, result.output
