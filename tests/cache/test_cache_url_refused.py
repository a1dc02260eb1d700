"""A cache given as a URL crs cannot serve is refused in one line that names the fix, before anything is
written: ``Path("s3://bucket/prefix")`` would otherwise be a local folder named ``s3:`` (issue 48)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cli.main import cli
from crs.spec import SpecError, load_spec

from tiny import write_tiny_spec


def _spec_with_cache(folder: Path, cache: str) -> Path:
    """The tiny spec with ``cache = <cache>`` written verbatim (not resolved as a path)."""
    spec = write_tiny_spec(folder, encoders=("pixel_stats",), n_images=40)
    text = spec.read_text()
    start = text.index('cache = "')
    end = text.index("\n", start)
    spec.write_text(text[:start] + f'cache = "{cache}"' + text[end:])
    return spec


@pytest.mark.parametrize("url, fix", [
    ("gs://bucket/prefix", "cannot serve"),
    ("https://example.org/cache", "cannot serve"),
    ("file:///tmp/cache", "cannot serve"),
])
def test_an_unknown_scheme_is_refused_and_nothing_is_written(tmp_path, monkeypatch, url, fix):
    monkeypatch.chdir(tmp_path)
    spec = _spec_with_cache(tmp_path, url)
    result = CliRunner().invoke(cli, ["extract", str(spec)])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert url in lines[0] and fix in lines[0]
    scheme = url.split(":")[0]
    assert not (tmp_path / f"{scheme}:").exists()  # no local folder named after the scheme


def test_s3_without_s3fs_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "s3fs", None)  # `import s3fs` fails as where it is not installed
    spec = _spec_with_cache(tmp_path, "s3://bucket/prefix")
    with pytest.raises(SpecError, match=r"s3fs is not installed; pip install 'crs\[s3\]'"):
        load_spec(spec)
    result = CliRunner().invoke(cli, ["extract", str(spec)])
    assert result.exit_code != 0 and "pip install 'crs[s3]'" in result.output
    assert not (tmp_path / "s3:").exists()


@pytest.mark.parametrize("command", [
    ["cache", "ls"], ["cache", "gc"], ["cache", "verify"], ["check", "SPEC"], ["extract", "SPEC"], ["probe", "SPEC"],
])
def test_the_cache_flag_refuses_a_url_as_the_spec_does(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    spec = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=40)
    args = [str(spec) if word == "SPEC" else word for word in command]
    result = CliRunner().invoke(cli, [*args, "--cache", "gs://bucket/prefix"])
    assert result.exit_code != 0
    assert "gs://bucket/prefix" in result.output and "cannot serve" in result.output
    assert not (tmp_path / "gs:").exists()


def test_the_python_api_refuses_a_url_cache(tmp_path):
    spec = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=40)
    with pytest.raises(SpecError, match="cannot serve"):
        Benchmark(spec, cache="gs://bucket/prefix")


def test_a_windows_drive_and_a_folder_with_a_colon_stay_paths(tmp_path):
    spec = _spec_with_cache(tmp_path, "C:/features")
    assert load_spec(spec, base=tmp_path).cache == tmp_path / "C:/features"
    spec = _spec_with_cache(tmp_path, "run:2/cache")  # a colon not followed by a slash is no URL
    assert load_spec(spec, base=tmp_path).cache == tmp_path / "run:2/cache"


def test_s3_never_becomes_a_local_folder(tmp_path, monkeypatch):
    """With s3fs installed an s3:// cache is served through a local mirror (decision 0178): the spec keeps
    the URL as written and works in a folder named by its digest, never in a folder named ``s3:``."""
    pytest.importorskip("s3fs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRS_CACHE_MIRROR", str(tmp_path / "mirrors"))
    spec = load_spec(_spec_with_cache(tmp_path, "s3://bucket/prefix"))
    assert spec.cache_url == "s3://bucket/prefix"
    assert spec.cache.parent == tmp_path / "mirrors" and "bucket" not in str(spec.cache)
    bench = Benchmark(spec, cache="s3://other/prefix")  # --cache URL: served the same way
    assert bench.spec.cache_url == "s3://other/prefix" and bench.spec.cache != spec.cache
    assert Benchmark(spec, cache=tmp_path / "here").spec.cache_url is None  # a folder override drops the URL
    assert not (tmp_path / "s3:").exists()


@pytest.mark.parametrize("command", [  # ls, gc and verify take the URL (decision 0191: tests/cache/s3/)
    ["cache", "export-h5", "pixel_stats", "out.h5"],
    ["import-features", "features.npy", "--dataset", "derm", "--encoder", "mine"],
])
def test_commands_that_need_a_folder_refuse_an_s3_url_naming_the_pull(tmp_path, monkeypatch, command):
    pytest.importorskip("s3fs")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*command, "--cache", "s3://bucket/prefix"])
    assert result.exit_code != 0
    assert "needs a folder" in result.output and "crs cache pull s3://bucket/prefix FOLDER" in result.output
    assert not (tmp_path / "s3:").exists()
