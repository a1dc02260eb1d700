"""Extending a published run against a full re-run, side by side (A B B A), CPU seconds of each `crs` process.

The demo's spec with its four encoders is run and published once; then A = `crs run` of the spec with a
fifth encoder (resnet50 at the demo's 64 px) from an empty cache, B = `crs run --extend` the bundle with
the same five-encoder spec. Usage: python scripts/extend_cost.py WORK_FOLDER (deleted at the end).
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def spec(root: Path, folder: Path, encoders: list[str]) -> Path:
    base = (HERE / "examples" / "quickstart.toml").read_text()
    folder.mkdir(parents=True, exist_ok=True)
    text = base.replace('cache = "cache"', f'cache = "{folder}/cache"')
    text = text.replace('output = "crs-out/quickstart"', f'output = "{folder}/out"')
    text = text.replace('root = "cache/synthetic-data"', f'root = "{root}/data"')
    text = re.sub(r"^encoders = .*$", "encoders = [" + ", ".join(f'"{e}"' for e in encoders) + "]", text,
                  count=1, flags=re.M)
    text = text.replace('name = "quickstart"', f'name = "{folder.name}"')
    (folder / "spec.toml").write_text(text)
    return folder / "spec.toml"


def child(args: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "crs", *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, time.perf_counter() - started


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    four = ["resnet18", "efficientnet_b0", "vit_tiny", "pixel_stats"]
    child(["run", str(spec(root, root / "publisher", four)), "-q"])
    child(["publish", str(root / "publisher" / "out"), str(root / "bundle")])
    results = []
    for i, kind in enumerate("ABBA"):
        path = spec(root, root / f"{kind}{i}", four + ["resnet50"])
        extra = [] if kind == "A" else ["--extend", str(root / "bundle")]
        cpu, wall = child(["run", str(path), *extra, "-q"])
        results.append((kind, cpu))
        print(f"{kind}: {cpu:.1f} CPU s, {wall:.1f} s wall", flush=True)
    a = [cpu for kind, cpu in results if kind == "A"]
    b = [cpu for kind, cpu in results if kind == "B"]
    print("extend / full re-run, CPU, per pair:", [round(y / x, 3) for x, y in zip(a, b[::-1], strict=True)])
    shutil.rmtree(root)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
