"""``crs bench readthrough``: stage 2 from a URL cache through the read-through against the same stage from a
local folder, side by side in one run (issue 48 item 3, decision 0187).

A paper-scale cache at a reduced scale (:mod:`crs.bench.paper_scale`: generated features with planted
signal, imported as a user would; a few hundred MB) is written to a local folder and pushed to a local
S3 API server (moto's standalone server, started here on a free port unless ``AWS_ENDPOINT_URL`` names
one that answers). Then ``crs probe`` runs, each in a process of its own, measured with its workers:

1. from the local folder (the baseline);
2. from the URL with an empty mirror (cold: every chunk stage 2 reads comes over the network once);
3. from the URL again on that mirror (warm: nothing fetched);
4. from the URL with an empty mirror and a budget of a quarter of the feature chunks (chunks evicted),
   then again on that mirror (what was evicted is fetched again; the records still equal).

The local and warm runs alternate ``--repeats`` times and the best of each is kept (the machine's
neighbours load both alike). Each run's wall and CPU seconds as a ratio of the local run, the bytes it fetched (its
``cache read-through`` line), and whether its records equal the local run's. The network is a loopback
socket: the cold ratio measures the read-through's own cost plus a server on the same CPUs, not a
cloud link (bytes fetched times your link's seconds per byte is the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from crs.bench.paper_scale import PaperScaleConfig, measure_command, prepare

FETCHED = re.compile(r"cache read-through: fetched ([\d,]+) bytes in (\d+) chunk\(s\) this stage; holds ([\d,]+) bytes")
BENCH_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "crs-bench", "AWS_SECRET_ACCESS_KEY": "crs-bench",
                     "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass(frozen=True)
class ReadThroughRun:
    """One ``crs probe`` run: where it read from, its cost, the bytes it fetched, whether its records equal."""

    name: str
    wall_s: float
    cpu_s: float
    fetched_bytes: int
    fetched_chunks: int
    held_bytes: int
    budget: str
    records_equal: bool
    wall_ratio: float = 1.0
    cpu_ratio: float = 1.0
    runs: int = 1
    """Repeats this row is the best of (local and warm alternate ``repeats`` times)."""


@dataclass(frozen=True)
class ReadThroughResult:
    cache_bytes: int
    feature_chunk_bytes: int
    push_s: float
    runs: tuple[ReadThroughRun, ...]
    command: str


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
        return True
    except OSError:
        return False


def start_server() -> tuple[str, subprocess.Popen | None]:
    """The S3 endpoint to use: ``AWS_ENDPOINT_URL`` when a moto server answers there, else a new one."""
    given = os.environ.get("AWS_ENDPOINT_URL", "")
    if given and _answers(given):
        return given, None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _answers(url):
            return url, process
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError("no S3 server: `python -m moto.server` did not start (pip install 'moto[server]')")


def _spec_with_cache(spec: Path, cache: str, target: Path, budget: int | None = None) -> Path:
    text = spec.read_text()
    start = text.index('cache = "')
    line = f'cache = "{cache}"' + (f"\ncache_budget = {budget}" if budget is not None else "")
    target.write_text(text[:start] + line + text[text.index("\n", start):])
    return target


def _best(runs: list[ReadThroughRun]) -> ReadThroughRun:
    """The fastest of repeated runs (wall and CPU each at their least), the others' records checked too."""
    return ReadThroughRun(**{**asdict(runs[0]), "wall_s": min(r.wall_s for r in runs),
                             "cpu_s": min(r.cpu_s for r in runs), "runs": len(runs),
                             "records_equal": all(r.records_equal for r in runs)})


def _records(folder: Path) -> pd.DataFrame:
    return pd.read_parquet(folder / "records.parquet")


def run(scale: float = 0.01, encoders: int = 2, dim: int = 1024, max_corruptions: int | None = 4,
        jobs: int | str | None = None, workdir: str | None = None, keep: bool = False,
        echo: Any = print, repeats: int = 2) -> ReadThroughResult:
    work = Path(workdir or tempfile.mkdtemp(prefix="crs-readthrough-"))
    work.mkdir(parents=True, exist_ok=True)
    server = None
    saved = {key: os.environ.get(key) for key in (*BENCH_CREDENTIALS, "AWS_ENDPOINT_URL")}
    try:
        config = PaperScaleConfig(encoders=encoders, scale=scale, dim=dim, max_corruptions=max_corruptions,
                                  zero_shot=False, jobs=jobs, seed=0)
        echo(f"readthrough: writing a cache ({encoders} encoders, scale {scale}, D = {dim}) under {work}")
        prepare(config, work)
        spec = work / "spec.toml"
        cache = work / "cache"
        cache_bytes = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
        chunk_bytes = sum(p.stat().st_size for p in cache.glob("*.zarr/encoders/**/c/**/*")
                          if p.is_file() and "__" not in str(p.relative_to(cache)))
        endpoint, server = start_server()
        if server is not None or not os.environ.get("AWS_ACCESS_KEY_ID"):
            os.environ.update(BENCH_CREDENTIALS)
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        bucket = f"crs-bench-{uuid.uuid4().hex[:8]}"
        s3fs.S3FileSystem().mkdir(bucket)
        url = f"s3://{bucket}/cache"
        from crs.cache.transfer import push

        started = time.perf_counter()
        push(cache, url)
        push_s = time.perf_counter() - started
        echo(f"readthrough: pushed {cache_bytes:,} bytes to a local S3 server in {push_s:.1f} s")

        def probe(name: str, spec_path: Path, mirror: Path | None, budget: str) -> ReadThroughRun:
            out = work / f"out-{name}"
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, "-m", "crs", "probe", str(spec_path), "--out", str(out), "-q"]
            if jobs is not None:
                command += ["--jobs", str(jobs)]
            env = {"CRS_CACHE_MIRROR": str(mirror)} if mirror is not None else {}
            measured = measure_command(command, env=env)
            if measured.returncode != 0:
                raise RuntimeError(f"crs probe ({name}) failed: {measured.output.strip().splitlines()[-1:]}")
            found = FETCHED.search(measured.output)
            fetched, chunks, held = (int(g.replace(",", "")) for g in found.groups()) if found else (0, 0, 0)
            equal = name == "local" or _records(out).equals(_records(work / "out-local"))
            run = ReadThroughRun(name, round(measured.wall_s, 2), round(measured.cpu_s, 2), fetched, chunks, held,
                                 budget, equal)
            echo(f"readthrough: {name}: {run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU, fetched {fetched:,} bytes "
                 f"in {chunks} chunk(s), records {'equal' if equal else 'DIFFER'}")
            return run

        url_spec = _spec_with_cache(spec, url, work / "spec-url.toml")
        small = max(1, chunk_bytes // 4)
        budget_spec = _spec_with_cache(spec, url, work / "spec-budget.toml", budget=small)
        local_runs = [probe("local", spec, None, "-")]
        cold = probe("url-cold", url_spec, work / "mirror", "auto")
        warm_runs = [probe("url-warm", url_spec, work / "mirror", "auto")]
        for _ in range(repeats - 1):  # local and warm alternate: the neighbours' load falls on both alike
            local_runs.append(probe("local", spec, None, "-"))
            warm_runs.append(probe("url-warm", url_spec, work / "mirror", "auto"))
        runs = [_best(local_runs), cold, _best(warm_runs),
                probe("url-budget-quarter", budget_spec, work / "mirror-small", f"{small:,} bytes"),
                probe("url-budget-quarter-again", budget_spec, work / "mirror-small", f"{small:,} bytes")]
        base = runs[0]
        runs = [ReadThroughRun(**{**asdict(r), "wall_ratio": round(r.wall_s / base.wall_s, 3),
                                  "cpu_ratio": round(r.cpu_s / base.cpu_s, 3)}) for r in runs]
        command = (f"crs bench readthrough --scale {scale} --encoders {encoders} --dim {dim}"
                   + (f" --max-corruptions {max_corruptions}" if max_corruptions is not None else "")
                   + (f" --jobs {jobs}" if jobs is not None else "") + f" --repeats {repeats}")
        return ReadThroughResult(cache_bytes, chunk_bytes, round(push_s, 2), tuple(runs), command)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def format_result(result: ReadThroughResult) -> str:
    lines = [f"stage 2 (crs probe) from a local folder and from a URL cache through the read-through; "
             f"cache {result.cache_bytes:,} bytes, feature chunks {result.feature_chunk_bytes:,} bytes",
             "| run | best of | wall s | CPU s | wall / local | CPU / local | bytes fetched | chunks | held after | "
             "budget | records = local |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in result.runs:
        lines.append(f"| {r.name} | {r.runs} | {r.wall_s:.1f} | {r.cpu_s:.1f} | {r.wall_ratio:.2f} | {r.cpu_ratio:.2f} | "
                     f"{r.fetched_bytes:,} | {r.fetched_chunks} | {r.held_bytes:,} | {r.budget} | "
                     f"{'yes' if r.records_equal else 'NO'} |")
    lines.append(f"command: {result.command}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--encoders", type=int, default=2)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--max-corruptions", type=int, default=4)
    parser.add_argument("--jobs", default=None)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.scale, args.encoders, args.dim, args.max_corruptions, args.jobs, args.workdir, args.keep,
                 echo=(lambda line: print(line, file=sys.stderr)) if args.json else print, repeats=args.repeats)
    print(json.dumps(asdict(result), indent=2) if args.json else format_result(result))


if __name__ == "__main__":
    main()
