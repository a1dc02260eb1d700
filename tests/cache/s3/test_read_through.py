"""Stage 2 from a URL cache through the bounded read-through (decision 0187), against a real local S3
server: the records of a local cache, each feature chunk fetched from the bucket once and only when
read, nothing fetched on a warm run, a budget below the working set evicts and still gives the same
records, a damaged object in the bucket is refused in one line and never read, no credential written."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli
from crs.spec import SpecError, cache_budget_bytes, load_spec, spec_to_dict

from s3_server import CREDENTIALS
from tiny import write_tiny_spec

FETCHED = re.compile(r"cache read-through: fetched ([\d,]+) bytes in (\d+) chunk\(s\) this stage; "
                     r"holds ([\d,]+) bytes in (\d+) chunk\(s\) of a ([\d,]+)-byte budget")


def _spec(folder: Path, cache: str, data: Path, encoders: tuple[str, ...], budget: str = "") -> Path:
    """The tiny spec (16-row chunks) with ``cache = <cache>`` written verbatim, and a budget line if given."""
    spec = write_tiny_spec(folder, encoders=encoders, n_images=120, chunk_rows=16, data=data)
    text = spec.read_text()
    start = text.index('cache = "')
    line = f'cache = "{cache}"' + (f"\ncache_budget = {budget}" if budget else "")
    spec.write_text(text[:start] + line + text[text.index("\n", start):])
    return spec


def _invoke(*args: str, ok: bool = True) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert (result.exit_code == 0) == ok, result.output
    return result.output


def _records(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "records.parquet")


def _chunk_files(cache: Path, encoder: str) -> dict[str, bytes]:
    """The feature chunk files of ``encoder`` (not its flags or checksums), by path inside the cache."""
    return {str(p.relative_to(cache)): p.read_bytes() for p in cache.glob(f"*.zarr/encoders/{encoder}/**/c/**/*")
            if p.is_file() and "__" not in str(p.relative_to(cache))}


def _fetched(output: str) -> tuple[int, int, int, int, int]:
    found = FETCHED.search(output)
    assert found is not None, output
    return tuple(int(group.replace(",", "")) for group in found.groups())  # type: ignore[return-value]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """Two encoders extracted into a local folder, and the records of pixel_stats probed from it."""
    folder = tmp_path_factory.mktemp("read_through")
    both = _spec(folder / "both", str(folder / "cache"), folder / "data", ("pixel_stats", "resnet18"))
    _invoke("extract", str(both), "-q")
    one = _spec(folder / "one", str(folder / "cache"), folder / "data", ("pixel_stats",))
    _invoke("probe", str(one), "-q")
    return folder, _records(folder / "one" / "out")


@pytest.fixture
def pushed(local, s3_bucket, tmp_path, monkeypatch):
    """The local cache pushed to a fresh bucket; this machine's mirrors in a fresh folder."""
    folder, _ = local
    url = f"{s3_bucket}/team/cache"
    _invoke("cache", "push", str(folder / "cache"), url)
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "mirrors"))
    return url


def test_stage_2_fetches_each_chunk_it_reads_once_and_nothing_when_warm(local, pushed, s3_bucket, tmp_path):
    folder, records = local
    spec = _spec(tmp_path / "run", pushed, folder / "data", ("pixel_stats",))
    mirror = load_spec(spec).cache
    assert "none on this machine yet" in _invoke("cache", "readthrough", pushed)
    cold = _invoke("probe", str(spec), "--out", str(tmp_path / "cold"), "-q")
    assert "(read-through)" in cold and "fetched when first read" in cold, cold
    pd.testing.assert_frame_equal(_records(tmp_path / "cold"), records)
    wanted = _chunk_files(folder / "cache", "pixel_stats")
    fetched, chunks, held, held_chunks, _ = _fetched(cold)
    assert chunks == len(wanted) and fetched == sum(map(len, wanted.values())), cold  # each chunk once
    assert (held, held_chunks) == (fetched, chunks)
    shown = _invoke("cache", "readthrough", str(spec))  # `crs cache` shows the budget, what is held and fetched
    assert f"held: {held:,} bytes in {held_chunks} feature chunk(s)" in shown and "budget: " in shown, shown
    assert f"fetched: {fetched:,} bytes" in shown and shown == _invoke("cache", "readthrough", pushed)
    assert _chunk_files(mirror, "pixel_stats") == wanted  # the bytes of the local cache, verified on fetch
    assert _chunk_files(folder / "cache", "resnet18")  # the bucket holds the other encoder's chunks ...
    assert not _chunk_files(mirror, "resnet18")  # ... and stage 2 never read them: none was fetched
    assert (mirror / "cxr.zarr" / "encoders" / "resnet18").is_dir()  # its metadata came with the pull

    warm = _invoke("probe", str(spec), "--out", str(tmp_path / "warm"), "-q")
    assert _fetched(warm)[:2] == (0, 0), warm
    assert " 0 object(s) copied (0 bytes)" in warm, warm  # the metadata was there too
    pd.testing.assert_frame_equal(_records(tmp_path / "warm"), records)
    report = _invoke("report", str(spec), "--out", str(tmp_path / "warm"))
    assert " 0 object(s) copied (0 bytes)" in report

    secrets = [value.encode() for key, value in CREDENTIALS.items() if key != "AWS_DEFAULT_REGION"]
    written = [p.read_bytes() for root in (mirror, tmp_path / "cold", tmp_path / "warm")
               for p in root.rglob("*") if p.is_file()] + [cold.encode(), warm.encode(), report.encode()]
    assert not [s for s in secrets for blob in written if s in blob]


def test_a_budget_below_the_working_set_evicts_and_gives_the_same_records(local, pushed, tmp_path):
    folder, records = local
    working_set = sum(map(len, _chunk_files(folder / "cache", "pixel_stats").values()))
    budget = working_set // 3  # room for two of its largest row blocks (8 chunks each)
    spec = _spec(tmp_path / "run", pushed, folder / "data", ("pixel_stats",), budget=str(budget))
    output = _invoke("probe", str(spec), "--out", str(tmp_path / "out"), "-q")
    pd.testing.assert_frame_equal(_records(tmp_path / "out"), records)
    fetched, _, held, _, shown_budget = _fetched(output)
    assert shown_budget == budget and fetched == working_set, output
    largest_array = 120 * 128 * 2  # the chunks held stay within the budget plus the block being read
    assert held <= budget + largest_array and held < working_set, output
    assert sum(map(len, _chunk_files(load_spec(spec).cache, "pixel_stats").values())) == held  # the rest evicted

    again = _invoke("probe", str(spec), "--out", str(tmp_path / "again"), "-q")
    pd.testing.assert_frame_equal(_records(tmp_path / "again"), records)
    refetched, _, held_again, _, _ = _fetched(again)
    assert working_set - held <= refetched < working_set, again  # evicted chunks come back from the bucket,
    # the ones kept do not: the second run reads in the first one's order, and its earliest chunks stayed
    assert held_again <= budget + largest_array, again


def test_a_damaged_object_in_the_bucket_is_refused_in_one_line_and_never_read(local, pushed, s3_env, tmp_path):
    import boto3

    folder, _ = local
    name = sorted(_chunk_files(folder / "cache", "pixel_stats"))[0]
    bucket, prefix = pushed.removeprefix("s3://").split("/", 1)
    client = boto3.client("s3", endpoint_url=s3_env)
    body = client.get_object(Bucket=bucket, Key=f"{prefix}/{name}")["Body"].read()
    client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=bytes([body[0] ^ 0xFF]) + body[1:])
    spec = _spec(tmp_path / "run", pushed, folder / "data", ("pixel_stats",))
    output = _invoke("probe", str(spec), "--out", str(tmp_path / "out"), "-q", ok=False)
    lines = [line for line in output.splitlines() if "does not match the sha256" in line]
    assert len(lines) == 1 and name in lines[0] and "Traceback" not in output, output
    assert not (load_spec(spec).cache / name).exists()  # never written where a reader could see it
    assert not (tmp_path / "out" / "records.parquet").exists()


def test_the_budget_is_a_spec_setting_in_bytes_or_units(tmp_path):
    assert cache_budget_bytes("2 GiB") == 2 << 30 and cache_budget_bytes("500MB") == 500 * 10**6
    assert cache_budget_bytes(4096) == 4096 and cache_budget_bytes("auto") is None and cache_budget_bytes(None) is None
    with pytest.raises(SpecError, match=r"cache_budget must be .*got '2 parsecs'"):
        cache_budget_bytes("2 parsecs")
    spec = write_tiny_spec(tmp_path, encoders=("pixel_stats",))
    assert "cache_budget" not in spec_to_dict(load_spec(spec))  # records of a spec without one are unchanged
    spec.write_text(spec.read_text().replace('output = "', 'cache_budget = "1 GB"\noutput = "', 1))
    assert load_spec(spec).cache_budget == "1 GB" and spec_to_dict(load_spec(spec))["cache_budget"] == "1 GB"
    spec.write_text(spec.read_text().replace('"1 GB"', '"lots"'))
    with pytest.raises(SpecError, match="cache_budget"):
        load_spec(spec)


READER = """
import hashlib, sys
from pathlib import Path
import numpy as np
from crs.cache.direct import read_block
from crs.cache.store import FeatureStore
digest = hashlib.sha256()
for _ in range(3):  # passes over every array: with a small budget, chunks are evicted and fetched again
    for store_path in sorted(Path(sys.argv[1]).glob("*.zarr")):
        store = FeatureStore(store_path)
        for name in store.feature_array_names("pixel_stats"):
            array = store.feature_array("pixel_stats", name)
            for start in range(0, array.shape[0], 16):
                digest.update(read_block(array, start, start + 16).tobytes())
            digest.update(np.asarray(array[...]).tobytes())
print(digest.hexdigest())
"""


def test_worker_processes_share_a_small_read_through_and_read_every_row_right(local, pushed, tmp_path):
    """Four processes read every feature array three times, row block by row block and through zarr, through a
    read-through whose budget holds a few chunks: each reads exactly what the local folder holds."""
    import os
    import subprocess
    import sys

    from crs.cache.readthrough import prepare, status

    folder, _ = local
    mirror = tmp_path / "mirror"
    chunk = max(map(len, _chunk_files(folder / "cache", "pixel_stats").values()))
    prepare(pushed, mirror, budget=3 * chunk)
    expected = subprocess.run([sys.executable, "-c", READER, str(folder / "cache")], capture_output=True, text=True,
                              check=True).stdout
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(mirror)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=os.environ.copy()) for _ in range(4)]
    answers = [reader.communicate(timeout=600) for reader in readers]
    assert [out for out, _ in answers] == [expected] * 4, [err[-2000:] for _, err in answers]
    found = status(mirror)
    assert found is not None and found.fetched_bytes > sum(map(len, _chunk_files(folder / "cache",
                                                                                  "pixel_stats").values()))
    assert found.held_bytes <= 3 * chunk + 2 * 16 * 128 * 2 * 4  # the budget, plus blocks being read at the moment


@pytest.mark.slow
def test_the_bench_runs_stage_2_local_cold_warm_and_budgeted_side_by_side(s3_env, tmp_path):
    """`crs bench readthrough` on a small cache: every URL run gives the local run's records, the cold run
    fetches every feature chunk once, the warm run nothing, the budgeted runs evict and fetch again."""
    import json

    output = _invoke("bench", "readthrough", "--scale", "0.003", "--encoders", "1", "--max-corruptions", "1",
                     "--dim", "64", "--repeats", "1", "--json", "--workdir", str(tmp_path / "work"))
    result = json.loads(output[output.index("{"):])
    runs = {run["name"]: run for run in result["runs"]}
    assert list(runs) == ["local", "url-cold", "url-warm", "url-budget-quarter", "url-budget-quarter-again"]
    assert all(run["records_equal"] for run in runs.values())
    chunks = result["feature_chunk_bytes"]
    assert runs["local"]["fetched_bytes"] == 0 and runs["url-cold"]["fetched_bytes"] == chunks
    assert runs["url-warm"]["fetched_bytes"] == 0 and runs["url-warm"]["held_bytes"] == chunks
    assert runs["url-budget-quarter"]["fetched_bytes"] == chunks  # stage 2 reads each chunk once per run
    assert runs["url-budget-quarter-again"]["fetched_bytes"] <= chunks  # evicted chunks fetched again
    assert 0 < runs["url-budget-quarter-again"]["held_bytes"] < chunks
    assert not (tmp_path / "work").exists()  # the work folder is removed unless --keep


def test_a_read_through_mirror_keeps_local_work_and_a_whole_pull_takes_what_only_the_url_changed(
        local, pushed, tmp_path):
    # decision 0190 on the read path: the read-through's pull records what it took from the URL, so a later whole
    # pull (an extraction, `crs cache pull`) replaces metadata only the URL changed, and keeps what was written here
    import json
    import shutil

    import zarr

    folder, records = local
    spec = _spec(tmp_path / "run", pushed, folder / "data", ("pixel_stats",))
    mirror = load_spec(spec).cache
    _invoke("probe", str(spec), "--out", str(tmp_path / "first"), "-q")
    other = tmp_path / "other"  # another machine changes the store's metadata in the bucket
    shutil.copytree(folder / "cache", other)
    zarr.open_group(str(other / "cxr.zarr"), mode="a").attrs["note"] = "from elsewhere"
    _invoke("cache", "push", str(other), pushed)
    pulled = _invoke("cache", "pull", pushed, str(mirror))
    assert "kept" not in pulled.split("already there", 1)[1].split("store(s) verified", 1)[0], pulled
    assert json.loads((mirror / "cxr.zarr" / "zarr.json").read_text())["attributes"]["note"] == "from elsewhere"

    zarr.open_group(str(mirror / "cxr.zarr"), mode="a").attrs["note"] = "mine"  # work done here, not pushed
    again = _invoke("probe", str(spec), "--out", str(tmp_path / "again"), "-q")
    assert "kept 1 file(s)" in again and "cxr.zarr/zarr.json" in again, again
    assert json.loads((mirror / "cxr.zarr" / "zarr.json").read_text())["attributes"]["note"] == "mine"
    pd.testing.assert_frame_equal(_records(tmp_path / "again"), records)
