"""What stage 1's job commands say when there is nothing to do or nothing was done yet (issue 46, item 14).

A fully cached spec gets no SLURM script (and no talk of "about 4 estimated hours each"); a refused
script is a `crs: error:` line like every other error; a Ctrl-C before the cache folder exists says
plainly that nothing was kept yet, not that the user passed the wrong cache folder.
"""

from __future__ import annotations

from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cli.main import cli

from tiny import write_tiny_spec


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], obj={})


def test_a_fully_cached_spec_gets_no_job_script(tmp_path):
    spec = write_tiny_spec(tmp_path / "run", encoders=("pixel_stats",))
    assert invoke("extract", spec, "-q").exit_code == 0
    script = tmp_path / "stage1.sbatch"
    result = invoke("plan", spec, "--sbatch", script)
    assert result.exit_code == 0, result.output
    assert not script.exists()
    assert "estimated hours" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"sbatch: {script} not written") and "nothing to extract" in last, last
    assert f"crs run {spec}" in last


def test_a_small_plan_says_one_task_holds_it_all(tmp_path):
    spec = write_tiny_spec(tmp_path / "run", encoders=("pixel_stats",))
    script = tmp_path / "stage1.sbatch"
    result = invoke("plan", spec, "--sbatch", script)
    assert result.exit_code == 0, result.output
    assert "#SBATCH --array=0-0" in script.read_text()
    assert "1 task(s) (the " in result.output and "estimated work in all)" in result.output
    assert "about 4 estimated hours each" not in result.output


def test_a_refused_job_script_is_a_crs_error_line(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    spec = write_tiny_spec(tmp_path / "run", encoders=("pixel_stats",), output=tmp_path / "a-file" / "out")
    script = tmp_path / "stage1.sbatch"
    result = invoke("plan", spec, "--sbatch", script)
    assert result.exit_code != 0 and not script.exists()
    errors = [line for line in result.output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(f"crs: error: sbatch: {script} not written"), result.output
    assert "Error: " not in result.output


def test_ctrl_c_before_the_cache_exists_says_nothing_was_kept_yet(tmp_path, monkeypatch):
    spec = write_tiny_spec(tmp_path / "run", encoders=("pixel_stats",))
    cache = tmp_path / "run" / "cache"

    def interrupted(self, *args, **kwargs):  # Ctrl-C as the extraction starts: nothing written yet
        raise KeyboardInterrupt

    monkeypatch.setattr(Benchmark, "extract", interrupted)
    result = invoke("extract", spec)
    assert result.exit_code == 130, result.output
    assert not cache.exists()
    assert "could not read what was kept" not in result.output
    assert "pass the right cache folder" not in result.output
    (kept,) = [line for line in result.output.splitlines() if line.startswith("crs: nothing was kept yet")]
    assert "the next run starts from the beginning" in kept
    assert "to resume, run again: " in result.output and f"extract {spec}" in result.output
