"""`crs extract --allow-overlap` reaches every worker of --devices and every task of --slurm (issue 31)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import crs.extract.devices as devices
from crs.cli.main import cli
from crs.extract.runner import ExtractStats

from tiny import write_tiny_spec


@pytest.mark.parametrize("flag", [True, False])
def test_devices_pass_allow_overlap_to_every_worker(tmp_path, monkeypatch, flag):
    seen = []
    monkeypatch.setattr(devices, "extract_on_devices",
                        lambda spec, names, allow_overlap=False: seen.append((list(names), allow_overlap))
                        or ExtractStats())
    spec = write_tiny_spec(tmp_path, encoders=("pixel_stats",))
    args = ["extract", str(spec), "--devices", "cpu,cpu", "-q", *(["--allow-overlap"] if flag else [])]
    result = CliRunner().invoke(cli, args, obj={})
    assert result.exit_code == 0, result.output
    assert seen == [(["cpu", "cpu"], flag)]


def test_each_worker_and_each_slurm_task_screens_with_the_flag(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    import crs.extract.stage as stage
    from crs.extract.submit import ExtractShard
    from crs.spec import load_spec

    calls = []
    monkeypatch.setattr(stage, "extract_spec", lambda spec, **kwargs: calls.append(kwargs) or ExtractStats())
    ExtractShard()("spec", 1, 4, True)
    devices._worker(load_spec(write_tiny_spec(tmp_path, encoders=("pixel_stats",))), "cpu", 0, 2, None, True)
    assert calls == [{"progress": False, "shard": (1, 4), "allow_overlap": True},
                     {"progress": False, "shard": (0, 2), "allow_overlap": True}]
