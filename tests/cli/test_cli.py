"""The command line: bad input gives one clear line and a non-zero exit; good input runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from joblib.externals.loky.process_executor import TerminatedWorkerError

import crs
from crs.benchmark import Benchmark
from crs.cli.main import cli, error_line
from crs.spec import for_setting

from tiny import write_tiny_spec


@pytest.fixture()
def runner():
    return CliRunner()


def _error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines, "no output"
    return lines[-1]


def test_unknown_encoder_is_one_line_error(runner, tmp_path):
    spec = write_tiny_spec(tmp_path, encoders=("pixel_stats", "resnet_9000"))
    result = runner.invoke(cli, ["extract", str(spec), "-q"])
    assert result.exit_code == 2
    line = _error_line(result)
    assert line.startswith("crs: error:") and "resnet_9000" in line
    assert "Traceback" not in result.output


def test_spec_missing_field(runner, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nencoders = ["pixel_stats"]\n')
    result = runner.invoke(cli, ["extract", str(path)])
    assert result.exit_code == 2
    assert "missing required field 'datasets'" in _error_line(result)


def test_spec_wrong_type(runner, tmp_path):
    spec = write_tiny_spec(tmp_path)
    text = spec.read_text().replace("batch_size = 32", 'batch_size = "many"')
    spec.write_text(text)
    result = runner.invoke(cli, ["extract", str(spec)])
    assert result.exit_code == 2
    assert "field 'batch_size' must be int" in _error_line(result)


def test_spec_unknown_key(runner, tmp_path):
    spec = write_tiny_spec(tmp_path)
    spec.write_text(spec.read_text().replace("[probe]", "[probe]\nlabel_fraction = [0.5]"))
    result = runner.invoke(cli, ["probe", str(spec)])
    assert result.exit_code == 2
    assert "unknown field(s) ['label_fraction']" in _error_line(result)


def test_missing_spec_file(runner, tmp_path):
    result = runner.invoke(cli, ["run", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2
    assert "spec file not found" in _error_line(result)


def test_output_folder_not_writable(runner, tmp_path, tiny_run):
    spec, _, _, _ = tiny_run
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    path = write_tiny_spec(tmp_path / "spec", cache=spec.cache, data=spec.datasets[0].root)
    result = runner.invoke(cli, ["probe", str(path), "--out", str(blocker / "out"), "-q"])
    assert result.exit_code == 2
    line = _error_line(result)
    assert "not writable" in line and str(blocker / "out") in line


def test_probe_without_cache_says_to_extract(runner, tmp_path):
    spec = write_tiny_spec(tmp_path)
    result = runner.invoke(cli, ["probe", str(spec), "-q"])
    assert result.exit_code == 2
    assert "crs extract" in _error_line(result)


def test_score_prints_leaderboard_and_writes_tables(runner, tiny_run, tmp_path):
    spec, _, _, _ = tiny_run
    path = write_tiny_spec(tmp_path, cache=spec.cache, output=spec.output, data=spec.datasets[0].root)
    result = runner.invoke(cli, ["score", str(path)])
    assert result.exit_code == 0, result.output
    assert "Clinical Reliability Score" in result.output and "resnet18" in result.output
    summary = json.loads((spec.output / "score" / "summary.json").read_text())
    assert {row["encoder"] for row in summary["ranking"]} == {"pixel_stats", "resnet18"}


def test_score_opens_with_whom_to_build_on_not_the_reference(runner, tiny_run, tmp_path):
    """issue 40: the tiny spec names pixel_stats as the reference, and it has the highest point CRS (0.5 on every
    axis by definition); `crs score` opens with the competing encoder and shows the reference as the baseline."""
    spec, _, _, _ = tiny_run
    path = write_tiny_spec(tmp_path, cache=spec.cache, output=spec.output, data=spec.datasets[0].root)
    result = runner.invoke(cli, ["score", str(path), "--to", str(tmp_path / "rescored")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("score:")]
    # issue 46 item 7: the reference pixel_stats scores above its one candidate, and the headline says so first
    assert lines[0].startswith("No candidate") and "the reference pixel_stats" in lines[0]
    assert lines[1].startswith("Among the candidates, build on resnet18")
    assert "pixel_stats is the reference: a baseline row" in result.output
    summary = json.loads((tmp_path / "rescored" / "score" / "summary.json").read_text())
    assert summary["leader"] == "resnet18" and summary["leading_tier"] == ["resnet18"]
    baseline = next(row for row in summary["ranking"] if row["encoder"] == "pixel_stats")
    assert baseline["competes"] is False and baseline["rank_low"] is None and not baseline["in_leading_tier"]
    assert summary["headline"][1].startswith("Among the candidates, build on resnet18") and summary["comparisons"]["axes"]


def test_help_lists_the_stages(runner):
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in ("demo", "run", "extract", "probe", "score", "report", "encoders"):
        assert command in result.output


def _folder_spec_with_missing_image(tmp_path):
    """A folder + CSV data set (built from synthetic fundus images) whose CSV names one missing file."""
    import pandas as pd

    from crs.data.synthetic import generate_synthetic

    folder = generate_synthetic(tmp_path / "data", "fundus", n_images=90, image_size=32)
    table = pd.read_csv(folder / "labels.csv")
    missing = {"image_id": "ghost", "path": "images/ghost.png", "group": "ghost", "label": 0}
    pd.concat([table, pd.DataFrame([missing])]).to_csv(folder / "labels.csv", index=False)
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
name = "folder"
cache = "{tmp_path / 'cache'}"
output = "{tmp_path / 'out'}"
encoders = ["pixel_stats"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
corruptions = "none"
[probe]
label_fractions = [0.5, 1.0]
seeds = [0]
Cs = [0.1]
[[datasets]]
name = "fundus-folder"
loader = "folder"
root = "{folder}"
options = {{ kind = "ordinal", modality = "fundus", id_column = "image_id", group_column = "group", image_size = 32 }}
""")
    return spec


def test_missing_image_stops_with_its_name_or_is_skipped_and_listed(runner, tmp_path):
    spec = _folder_spec_with_missing_image(tmp_path)
    result = runner.invoke(cli, ["extract", str(spec), "-q"])
    assert result.exit_code == 2
    assert "ghost.png" in _error_line(result)

    result = runner.invoke(cli, ["extract", str(spec), "-q", "--skip-bad"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["probe", str(spec), "-q"])
    assert result.exit_code == 0, result.output
    audit = json.loads((tmp_path / "out" / "audit.json").read_text())
    skipped = audit["skipped_images"]["fundus-folder"]
    assert len(skipped) == 1 and "ghost.png" in skipped[0]
    from crs.evaluate.records import read_provenance

    provenance = read_provenance(tmp_path / "out" / "records.parquet")
    assert provenance["skipped_images"]["fundus-folder"] == skipped


def test_memory_error_is_one_line_that_suggests_fewer_jobs(runner, tmp_path, monkeypatch):
    def out_of_memory(self, **kwargs):
        raise MemoryError("Unable to allocate 12.0 GiB for an array with shape (400000, 4096)")

    monkeypatch.setattr(Benchmark, "probe", out_of_memory)
    result = runner.invoke(cli, ["probe", str(write_tiny_spec(tmp_path)), "-q", "--jobs", "8"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "crs: error: out of memory (Unable to allocate 12.0 GiB for an array with shape (400000, 4096)); "
        "run fewer worker processes at once (option --jobs) or lower [extract] batch_size in the spec"
    ]
    # --debug keeps the traceback for a bug report
    with pytest.raises(MemoryError):
        runner.invoke(cli, ["--debug", "probe", str(write_tiny_spec(tmp_path)), "-q"], catch_exceptions=False)


def test_memory_error_without_a_message_still_names_the_fix():
    assert error_line(MemoryError()).startswith("out of memory; run fewer worker processes at once (option --jobs)")


def test_a_killed_worker_is_one_line_that_suggests_fewer_jobs():
    killed = TerminatedWorkerError("A worker process managed by the executor was unexpectedly terminated.\n\n"
                                   "The exit codes of the workers are {SIGKILL(-9)}")
    line = error_line(killed)
    assert "\n" not in line and "running out of memory" in line and line.endswith("(option --jobs)")


def test_library_error_gets_the_flag_of_its_setting():
    assert error_line(for_setting(ValueError("cache root is a file\nsecond line"), "cache")) == (
        "cache root is a file (option --cache)"
    )


def test_python_dash_m_crs_is_the_same_command_line():
    done = subprocess.run([sys.executable, "-m", "crs", "--version"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"crs, version {crs.__version__}"


def test_stage_commands_live_in_their_own_module():
    for name in ("demo", "run", "extract", "probe", "score", "report"):
        assert cli.commands[name].callback.__module__ == "crs.cli.stages"


@pytest.mark.parametrize(("given", "passed"), [("auto", "auto"), ("AUTO", "auto"), ("3", 3)])
def test_jobs_option_takes_auto_or_a_count(runner, tmp_path, monkeypatch, given, passed):
    seen = {}

    def record_jobs(self, **kwargs):
        seen.update(kwargs)
        raise MemoryError("stop here")

    monkeypatch.setattr(Benchmark, "probe", record_jobs)
    runner.invoke(cli, ["probe", str(write_tiny_spec(tmp_path)), "-q", "--jobs", given])
    assert seen["jobs"] == passed


@pytest.mark.parametrize("given", ["0", "-1", "many"])
def test_jobs_option_rejects_what_is_neither(runner, tmp_path, given):
    result = runner.invoke(cli, ["probe", str(write_tiny_spec(tmp_path)), "-q", "--jobs", given])
    assert result.exit_code == 2
    assert "neither 'auto' nor a positive number of worker processes" in result.output
