"""Shards of stage 1 on different hosts with one cache URL, against a real local S3 server: each shard
fills its own mirror and pushes each data set as it finishes, both at once (the second waits on the
URL's lock); nothing is lost, and one `crs extract` anywhere then marks the groups current with no
forward pass (docs/cluster.md, "A cache URL")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec


def _spec(folder: Path, cache: str) -> Path:
    spec = write_tiny_spec(folder, encoders=("pixel_stats",), n_images=120, chunk_rows=16,
                           data=folder.parent / "data")
    text = spec.read_text()
    start = text.index('cache = "')
    spec.write_text(text[:start] + f'cache = "{cache}"' + text[text.index("\n", start):])
    return spec


def _chunks(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and "/c/" in str(p) and not {"journal", ".crs-locks", ".crs-sync"} & set(p.parts)}


def test_two_shards_on_different_hosts_push_at_once_and_both_land(s3_bucket, tmp_path, monkeypatch):
    url = f"{s3_bucket}/shards"
    spec = _spec(tmp_path / "run", url)
    shards = [subprocess.Popen([sys.executable, "-m", "crs", "extract", str(spec), "--shard", f"{i}/2", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "CRS_CACHE_MIRROR": str(tmp_path / f"host{i}")})
              for i in range(2)]
    outputs = [shard.communicate(timeout=600)[0] for shard in shards]
    for shard, output in zip(shards, outputs, strict=True):
        assert shard.returncode == 0, output
        # one push per data set (cxr with its shift target cxr-b), none refused by the other shard's lock
        assert output.count("cache push:") == 3 and "being written by" not in output, output

    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "home"))
    status = CliRunner().invoke(cli, ["status", str(spec)])
    assert status.exit_code == 0 and "0 to go" in status.output, status.output  # every shard's chunks landed
    assert "not yet marked current" in status.output and "crs extract SPEC" in status.output, status.output
    finish = CliRunner().invoke(cli, ["extract", str(spec), "-q"])
    assert finish.exit_code == 0, finish.output
    assert "every encoder was cached; no forward pass ran" in finish.output, finish.output
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "elsewhere"))  # the marks were pushed
    assert "status: complete; stage 2 can run" in CliRunner().invoke(cli, ["status", str(spec)]).output

    local = _spec(tmp_path / "local", str(tmp_path / "local" / "cache"))
    assert CliRunner().invoke(cli, ["extract", str(local), "-q"]).exit_code == 0
    assert CliRunner().invoke(cli, ["cache", "pull", url, str(tmp_path / "pulled")]).exit_code == 0
    expected = _chunks(tmp_path / "local" / "cache")
    assert expected and _chunks(tmp_path / "pulled") == expected  # every chunk of both shards, bit-identical
    probe = CliRunner().invoke(cli, ["probe", str(spec), "--out", str(tmp_path / "out"), "-q"])
    assert probe.exit_code == 0, probe.output
