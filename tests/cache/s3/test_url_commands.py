"""``crs cache ls | verify | gc``, ``crs check`` and ``crs status`` given a cache URL, against a real local S3
server (decision 0191), and a pull that never overwrites unpushed work (decision 0190)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec

STALE = "0123456789abcdef"


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """The tiny spec (one encoder, 16-row chunks) extracted into a local folder; derm's store also holds a
    stale group (a complete copy of the current one under another fingerprint, as an older spec leaves)."""
    from crs.benchmark import Benchmark

    folder = tmp_path_factory.mktemp("url_commands")
    spec = write_tiny_spec(folder, encoders=("pixel_stats",), chunk_rows=16)
    Benchmark(spec).extract(progress=False)
    encoder = folder / "cache" / "derm.zarr" / "encoders" / "pixel_stats"
    current = json.loads((encoder / "zarr.json").read_text())["attributes"]["current"]
    shutil.copytree(encoder / current, encoder / STALE)
    return spec, folder / "cache"


@pytest.fixture
def mirrors(tmp_path, monkeypatch):
    """This machine's mirrors (``CRS_CACHE_MIRROR``): a fresh folder per test, as on a new machine."""
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "mirrors"))
    return tmp_path / "mirrors"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not {".crs-locks", ".crs-sync"} & set(p.parts)}


def _invoke(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.output


def _keys(s3_env: str, url: str) -> list[str]:
    import boto3

    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    pages = boto3.client("s3", endpoint_url=s3_env).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def _valid(folder: Path) -> None:
    """Readable by ``crs cache ls`` and ``verify``; no damage; every group that reads as complete is whole."""
    from crs.cache.inspect import list_cache
    from crs.cache.verify import verify_cache

    assert not [str(p) for problems in verify_cache(folder).values() for p in problems if p.damaged]
    for store in list_cache(folder):
        for group in store.groups:
            if group.complete or group.current:
                assert all(array.complete for array in group.arrays), (store.path, group.encoder)


def test_ls_and_gc_given_a_url_list_and_clean_the_bucket(extracted, s3_bucket, s3_env, mirrors, tmp_path,
                                                         monkeypatch):
    from crs.cache import transfer, url_commands

    _, cache = extracted
    url = f"{s3_bucket}/team/cache"
    _invoke("cache", "push", str(cache), url)
    stale = [k for k in _keys(s3_env, url) if f"/{STALE}/" in k]
    assert stale

    listing = _invoke("cache", "ls", "--cache", url)  # a new machine: its mirror is pulled first
    assert STALE in listing and "stale" in listing, listing
    dry = _invoke("cache", "gc", "--cache", url, "--dry-run")
    assert f"would remove derm.zarr/pixel_stats/{STALE} (stale fingerprint" in dry, dry
    assert [k for k in _keys(s3_env, url) if f"/{STALE}/" in k] == stale  # a dry run deletes nothing

    # Every deletion step leaves the bucket a valid cache: pull it after each and check it.
    steps: list[list[str]] = []
    delete = url_commands._delete_step

    def delete_then_check(remote, paths, at):
        delete(remote, paths, at)
        steps.append(sorted({path.rsplit("/", 1)[-1] for path in paths}))
        transfer.pull(url, tmp_path / f"step{len(steps)}", verify=False)
        _valid(tmp_path / f"step{len(steps)}")

    monkeypatch.setattr(url_commands, "_delete_step", delete_then_check)
    done = _invoke("cache", "gc", "--cache", url)
    monkeypatch.setattr(url_commands, "_delete_step", delete)
    assert f"removed derm.zarr/pixel_stats/{STALE}" in done and "gc: 1 feature group(s)" in done, done
    assert steps[0] == ["zarr.json"], steps  # the group's metadata first: then nothing lists it
    assert not [k for k in _keys(s3_env, url) if f"/{STALE}/" in k]

    # The bucket now holds exactly the local cache after a local gc.
    local = tmp_path / "local"
    shutil.copytree(cache, local)
    _invoke("cache", "gc", "--cache", str(local))
    _invoke("cache", "pull", url, str(tmp_path / "home"))
    assert _files(tmp_path / "home") == _files(local)
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "third-machine"))
    assert STALE not in _invoke("cache", "ls", "--cache", url)


def test_verify_given_a_url_finds_damage_in_the_bucket_though_the_mirror_is_sound(extracted, s3_bucket, s3_env,
                                                                                  mirrors):
    import boto3

    spec, cache = extracted
    url = f"{s3_bucket}/c"
    _invoke("cache", "push", str(cache), url)
    first = _invoke("cache", "verify", "--cache", url)
    assert "4 store(s) sound, nothing damaged" in first, first
    chunk = next(k for k in _keys(s3_env, url)  # a chunk of the current group: the one a repair redoes
                 if k.startswith("c/derm.zarr/encoders/") and "/clean/c/" in k and STALE not in k)
    client = boto3.client("s3", endpoint_url=s3_env)
    bucket = s3_bucket.removeprefix("s3://")
    body = client.get_object(Bucket=bucket, Key=chunk)["Body"].read()
    client.put_object(Bucket=bucket, Key=chunk, Body=bytes(b ^ 0xFF for b in body))  # same size, other bytes

    again = _invoke("cache", "verify", "--cache", url, code=1)  # the mirror's copy is sound; the bucket's is not
    assert "1 object(s) copied" in again, again
    bad = [line for line in again.splitlines() if line.startswith("BAD ")]
    assert len(bad) == 1 and "derm.zarr" in bad[0] and "clean" in bad[0], again

    repaired = _invoke("cache", "verify", "--spec", str(_url_spec(spec, url, "verify.toml")), "--repair")
    assert "re-extracted 1 chunk(s)" in repaired and "cache push:" in repaired, repaired
    assert client.get_object(Bucket=bucket, Key=chunk)["Body"].read() == body  # the bucket's copy is mended


def test_a_pull_keeps_unpushed_work_and_takes_what_only_the_url_changed(extracted, s3_bucket, s3_env, tmp_path):
    import boto3

    _, cache = extracted
    url = f"{s3_bucket}/c"
    home = tmp_path / "home"
    _invoke("cache", "push", str(cache), url)
    _invoke("cache", "pull", url, str(home))
    encoder = home / "cxr.zarr" / "encoders" / "pixel_stats" / "zarr.json"
    mine = json.loads(encoder.read_text())
    mine["attributes"]["note"] = "written here, not pushed"
    encoder.write_text(json.dumps(mine))  # local work since the last pull
    theirs = "c/derm.zarr/encoders/pixel_stats/zarr.json"  # another machine's newer push
    client = boto3.client("s3", endpoint_url=s3_env)
    bucket = s3_bucket.removeprefix("s3://")
    newer = json.loads(client.get_object(Bucket=bucket, Key=theirs)["Body"].read())
    newer["attributes"]["note"] = "pushed from elsewhere"
    client.put_object(Bucket=bucket, Key=theirs, Body=json.dumps(newer).encode())
    other = json.dumps({**mine, "attributes": {**mine["attributes"], "note": "pushed from elsewhere"}}).encode()
    client.put_object(Bucket=bucket, Key="c/cxr.zarr/encoders/pixel_stats/zarr.json", Body=other)

    pulled = _invoke("cache", "pull", url, str(home))
    assert "kept 1 file(s)" in pulled and "cxr.zarr/encoders/pixel_stats/zarr.json" in pulled, pulled
    assert f"crs cache push {home} {url}" in pulled and "--overwrite" in pulled, pulled
    assert json.loads(encoder.read_text()) == mine  # unpushed work is never overwritten
    assert json.loads((home / "derm.zarr/encoders/pixel_stats/zarr.json").read_text()) == newer  # the URL's news
    again = _invoke("cache", "pull", url, str(home))
    assert "kept 1 file(s)" in again, again  # still kept, still said
    _invoke("cache", "pull", url, str(home), "--overwrite")
    assert encoder.read_bytes() == other

    # A chunk damaged here reads as local work too: the pull says where the damage may be and the way out.
    chunk = next(p for p in sorted((home / "fundus.zarr").rglob("*")) if p.is_file() and "/clean/c/" in str(p))
    good = chunk.read_bytes()
    chunk.write_bytes(bytes(b ^ 0xFF for b in good))
    damaged = _invoke("cache", "pull", url, str(home), code=2)
    assert f"chunk(s) in {home}" in damaged and "--overwrite" in damaged, damaged
    _invoke("cache", "pull", url, str(home), "--overwrite")
    assert chunk.read_bytes() == good


def test_check_and_status_given_a_url_read_the_bucket(extracted, s3_bucket, mirrors, tmp_path):
    spec, cache = extracted
    url = f"{s3_bucket}/c"
    _invoke("cache", "push", str(cache), url)
    checked = _invoke("check", str(spec), "--cache", url)  # a new machine: only the images are local
    assert f"cache pull: {url} -> " in checked and "check: ok" in checked, checked
    status = _invoke("status", str(_url_spec(spec, url, "remote.toml")))
    assert "status: complete; stage 2 can run" in status, status


def _url_spec(spec: Path, url: str, name: str) -> Path:
    """The spec with ``cache = URL``, beside it (its relative paths read the same)."""
    text = spec.read_text()
    start = text.index('cache = "')
    remote = spec.parent / name
    remote.write_text(text[:start] + f'cache = "{url}"' + text[text.index("\n", start):])
    return remote


def test_a_push_keeps_group_metadata_only_the_url_changed_since(extracted, s3_bucket, s3_env, tmp_path):
    """Machine A pushed; machine B pulled, marked something in a group's metadata and pushed; A's next push
    (its copy unchanged since its own push) must not put the older metadata back."""
    import boto3

    _, cache = extracted
    url = f"{s3_bucket}/c"
    first = tmp_path / "a"
    shutil.copytree(cache, first)
    _invoke("cache", "push", str(first), url)
    _invoke("cache", "pull", url, str(tmp_path / "b"))
    key = "cxr.zarr/encoders/pixel_stats/zarr.json"
    newer = json.loads((tmp_path / "b" / key).read_text())
    newer["attributes"]["note"] = "marked on machine B"
    (tmp_path / "b" / key).write_text(json.dumps(newer))
    _invoke("cache", "push", str(tmp_path / "b"), url)

    again = _invoke("cache", "push", str(first), url)
    assert "kept 1 newer group metadata object(s)" in again and key in again, again
    client = boto3.client("s3", endpoint_url=s3_env)
    there = client.get_object(Bucket=s3_bucket.removeprefix("s3://"), Key=f"c/{key}")["Body"].read()
    assert json.loads(there) == newer
    mine = json.loads((first / key).read_text())
    mine["attributes"]["note"] = "then changed on A"  # A's own later change is its word: it is sent
    (first / key).write_text(json.dumps(mine))
    assert "1 object(s) copied" in _invoke("cache", "push", str(first), url)
    assert json.loads(client.get_object(Bucket=s3_bucket.removeprefix("s3://"), Key=f"c/{key}")["Body"].read()) == mine
