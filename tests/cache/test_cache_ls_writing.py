"""``crs cache ls`` names a group a live extraction is filling ``writing (pid N, host H)``, not stale garbage."""

from __future__ import annotations

import json
import os
import socket

import zarr
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cache.lock import WriterLock, writer_lock_path
from crs.cli.main import cli

from tiny import write_tiny_spec


def test_a_locked_incomplete_group_is_listed_as_writing(tmp_path):
    spec_path = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=120, chunk_rows=16)
    Benchmark(spec_path).extract(progress=False)
    store = tmp_path / "cache" / "derm.zarr"
    root = zarr.open_group(str(store), mode="a")
    fingerprint = root["encoders/pixel_stats"].attrs["current"]
    root[f"encoders/pixel_stats/{fingerprint}/clean__done"][0] = 0  # mid-extraction: a chunk not yet flagged
    root[f"encoders/pixel_stats/{fingerprint}"].attrs["complete"] = False
    runner = CliRunner()
    with WriterLock(writer_lock_path(store, "pixel_stats"), "crs extract derm pixel_stats"):
        listing = runner.invoke(cli, ["cache", "ls", "--cache", str(tmp_path / "cache")], obj={})
        as_json = runner.invoke(cli, ["cache", "ls", "--cache", str(tmp_path / "cache"), "--json"], obj={})
    assert listing.exit_code == 0, listing.output
    line = next(line for line in listing.output.splitlines() if fingerprint in line and "pixel_stats" in line
                and "derm" not in line)
    assert f"writing (pid {os.getpid()}, host {socket.gethostname()})" in line
    assert "INCOMPLETE" not in line and "stale" not in line
    derm = next(s for s in json.loads(as_json.output) if s["dataset"] == "derm")
    assert derm["groups"][0]["state"].startswith("writing (pid ")
    # Once the writer is gone the same group is reported for what it is.
    after = runner.invoke(cli, ["cache", "ls", "--cache", str(tmp_path / "cache")], obj={})
    assert any(fingerprint in line and "INCOMPLETE" in line for line in after.output.splitlines())
