"""``cache = "s3://bucket/prefix"`` in a spec, against a real local S3 server: the run gives the records and
score tables of a local cache, another machine (an empty mirror) runs stage 2 from the URL alone fetching
each byte once, a lost mirror is pulled back and nothing is extracted again, and no credential is written
(decision 0178)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli
from crs.spec import load_spec

from s3_server import CREDENTIALS
from tiny import write_tiny_spec


def _spec(folder: Path, cache: str) -> Path:
    """The tiny spec (one encoder, 16-row chunks) with ``cache = <cache>`` written verbatim."""
    spec = write_tiny_spec(folder, encoders=("pixel_stats",), n_images=120, chunk_rows=16,
                           data=folder.parent / "data")
    text = spec.read_text()
    start = text.index('cache = "')
    spec.write_text(text[:start] + f'cache = "{cache}"' + text[text.index("\n", start):])
    return spec


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _score_tables(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "score").rglob("*")) if p.is_file()}


def _records(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "records.parquet")


def _files(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in folder.rglob("*") if p.is_file()]


@pytest.fixture
def mirrors(tmp_path, monkeypatch):
    """The folder holding this machine's mirrors (``CRS_CACHE_MIRROR``): a fresh one per test."""
    folder = tmp_path / "mirrors"
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(folder))
    return folder


def test_an_s3_cache_gives_the_records_and_score_tables_of_a_local_cache(s3_bucket, mirrors, tmp_path, monkeypatch):
    local = _spec(tmp_path / "local", str(tmp_path / "local" / "cache"))
    _invoke("run", str(local), "-q")
    url = f"{s3_bucket}/team/cache"
    remote = _spec(tmp_path / "remote", url)
    loaded = load_spec(remote)
    assert loaded.cache_url == url and loaded.cache.parent == mirrors  # the URL is kept, never a path
    output = _invoke("run", str(remote), "-q")
    assert f"cache pull: {url} -> " in output and f"cache push: {loaded.cache} -> {url}" in output
    assert not (tmp_path / "remote" / "s3:").exists() and not Path("s3:").exists()
    pd.testing.assert_frame_equal(_records(tmp_path / "remote" / "out"), _records(tmp_path / "local" / "out"))
    assert _score_tables(tmp_path / "remote" / "out") == _score_tables(tmp_path / "local" / "out")
    assert _score_tables(tmp_path / "local" / "out")  # the comparison compared something

    # Another machine: an empty mirror, stage 2 from the URL alone, each byte fetched once.
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "elsewhere"))
    first = _invoke("probe", str(remote), "--out", str(tmp_path / "home"), "-q")
    pulled = next(line for line in first.splitlines() if line.startswith("cache pull:"))
    assert " 0 object(s) copied" not in pulled and "0 already there" in pulled, pulled
    pd.testing.assert_frame_equal(_records(tmp_path / "home"), _records(tmp_path / "local" / "out"))
    again = _invoke("report", str(remote), "--out", str(tmp_path / "home"))
    assert "0 object(s) copied (0 bytes)" in again, again  # the mirror holds it all: nothing fetched twice
    from crs.benchmark import Benchmark

    assert Benchmark.from_run_folder(tmp_path / "home").spec.cache_url == url  # the records remember the URL

    secrets = [value.encode() for key, value in CREDENTIALS.items() if key != "AWS_DEFAULT_REGION"]
    written = [*_files(mirrors), *_files(tmp_path / "elsewhere"), *_files(tmp_path / "remote" / "out"),
               *_files(tmp_path / "home"), output.encode(), first.encode(), again.encode()]
    assert not [s for s in secrets for blob in written if s in blob]


def test_a_lost_mirror_is_pulled_back_and_nothing_is_extracted_again(s3_bucket, mirrors, tmp_path):
    import shutil

    url = f"{s3_bucket}/c"
    spec = _spec(tmp_path / "run", url)
    first = _invoke("extract", str(spec), "-q")
    assert "0 to go" not in first.splitlines()[1]
    shutil.rmtree(load_spec(spec).cache)
    again = _invoke("extract", str(spec), "-q")
    lines = again.splitlines()
    assert lines[0].startswith(f"cache pull: {url}") and "0 already there" in lines[0], again
    assert "0 to go" in lines[1], again  # the plan, after the pull
    assert "every encoder was cached; no forward pass ran" in again
    pushed = next(line for line in lines if line.startswith("cache push:"))
    assert ": 0 object(s) copied" in pushed, again  # nothing new to send


def test_a_cache_flag_url_is_served_as_the_spec_setting_is(s3_bucket, mirrors, tmp_path):
    spec = write_tiny_spec(tmp_path / "run", encoders=("pixel_stats",), n_images=120, chunk_rows=16)
    url = f"{s3_bucket}/flag"
    output = _invoke("extract", str(spec), "--cache", url, "-q")
    assert f"-> {url}:" in output
    assert not (tmp_path / "run" / "cache").exists()  # the spec's folder is not used: the URL's mirror is
    assert any(mirrors.iterdir())


def test_a_run_killed_after_its_first_data_set_resumes_on_another_machine_from_the_bucket(
        s3_bucket, s3_env, mirrors, tmp_path, monkeypatch):
    """Each data set is pushed once extracted: kill the run after the first push, resume with an empty
    mirror (another machine), and the bucket ends with the features of an uninterrupted local run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import boto3

    url = f"{s3_bucket}/killed"
    spec = _spec(tmp_path / "run", url)
    bucket = s3_bucket.removeprefix("s3://")
    client = boto3.client("s3", endpoint_url=s3_env)
    runner = subprocess.Popen([sys.executable, "-m", "crs", "extract", str(spec), "-q"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and runner.poll() is None:
            keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
            if "killed/derm.zarr/zarr.json" in keys:  # the first data set's push ended (group metadata last)
                break
            time.sleep(0.02)
        runner.send_signal(signal.SIGKILL)
        output = runner.communicate(timeout=30)[0]
    finally:
        runner.kill()
    assert "every encoder" not in output and "images decoded" not in output, "the run ended before the kill"

    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "other-machine"))
    resumed = _invoke("extract", str(spec), "-q")
    plan = next(line for line in resumed.splitlines() if line.startswith("plan:"))
    assert "692 forward passes" in plan and " 0 already cached" not in plan and " 0 to go" not in plan, plan
    kept = next(line for line in resumed.splitlines() if line.startswith("extract: kept"))
    assert int(kept.split()[2].replace(",", "")) >= 212  # at least derm's forward passes came from the bucket

    local = _spec(tmp_path / "local", str(tmp_path / "local" / "cache"))
    _invoke("extract", str(local), "-q")
    _invoke("cache", "pull", url, str(tmp_path / "pulled"))
    chunks = {str(p.relative_to(tmp_path / "local" / "cache")): p.read_bytes()
              for p in (tmp_path / "local" / "cache").rglob("*") if p.is_file() and "/c/" in str(p)
              and "journal" not in p.parts and ".crs-locks" not in p.parts}
    assert chunks
    assert {name: (tmp_path / "pulled" / name).read_bytes() for name in chunks} == chunks  # bit-identical
