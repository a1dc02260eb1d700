"""Score and report at 2 encoders and at 15 replicated ones, side by side (A B B A), on a copy of a kept
``crs bench paper-scale`` work folder's run folder (decision 0114; docs/performance.md):

    flock /work/heavy.lock env PYTHONPATH=$PWD python scripts/fifteen_replicas.py /work/paper_w /work/scratch/me/copy

The copy gets the source's spec with its own output, the run folder's predictions hard-linked (``cp -al``)
and its other files copied (the stages rewrite them), the zero-shot folder left out (the bench measures the
report before the zero-shot stages). The cache stays the source's: only the report reads it, read-only.
Prints one JSON line per stage (wall, CPU, peak, load), then the 15-encoder figures measured and scaled
per A pair. Delete COPY after.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from crs.bench.paper_scale import fifteen_encoders, measure_stage
from crs.bench.paper_scale_replicas import replicate_run


def copy_work(source: Path, work: Path) -> Path:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    old, new = f'output = "{source / "out"}"', f'output = "{work / "out"}"'
    text = (source / "spec.toml").read_text()
    if old not in text:
        raise SystemExit(f"{source / 'spec.toml'} has no line {old}")
    (work / "spec.toml").write_text(text.replace(old, new))
    (work / "out").mkdir()
    for entry in (source / "out").iterdir():
        if entry.name == "zero_shot":
            continue
        if entry.name == "predictions":
            subprocess.run(["cp", "-al", str(entry), str(work / "out" / entry.name)], check=True)
        elif entry.is_dir():
            shutil.copytree(entry, work / "out" / entry.name)
        else:
            shutil.copy2(entry, work / "out" / entry.name)
    return work / "spec.toml"


def main(source: Path, work: Path) -> None:
    spec = copy_work(source, work)
    log = []

    def run(stage, spec_path, label):
        cost = measure_stage(stage, spec_path, None)
        print(json.dumps({"label": label, "stage": stage, "wall_s": round(cost.wall_s, 2), "cpu_s": round(cost.cpu_s, 2),
                          "peak_tree_gib": round(cost.peak_tree_rss_bytes / 2**30, 2), "import_s": round(cost.import_s, 2),
                          "rc": cost.returncode, "error": cost.error, "utc": time.strftime("%H:%M:%S", time.gmtime()),
                          "load": os.getloadavg()[0]}), flush=True)
        log.append((label, cost))
        return cost

    startup = run("startup", spec, "startup")
    started = time.perf_counter()
    spec_15 = replicate_run(spec, 15, work / "fifteen")
    print(json.dumps({"replicate_s": round(time.perf_counter() - started, 2)}), flush=True)
    for label in ("A2", "B15", "B15", "A2"):
        for stage in ("score", "report"):
            run(stage, spec if label == "A2" else spec_15, label)
    two = [cost for label, cost in log if label == "A2"]
    fifteen = [cost for label, cost in log if label == "B15"]
    for pair in (0, 1):
        totals = fifteen_encoders(two[2 * pair: 2 * pair + 2], startup, 2, (), fifteen[2 * pair: 2 * pair + 2])
        print(json.dumps({"pair": pair, **{key: round(value, 1) for key, value in totals.items()}}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
