"""What the complete content check (decision 0118) costs per file, side by side in one process.

Writes N real JPEGs of a given side (default 10,000 at 512 px, about 1 GB of noise; noise JPEGs are
larger than photographs of the same size, so the hash figure is an upper bound) into a folder, then
times, wall and process CPU, each pass `crs check` and `crs extract` may make over them: the stat
pass (every check), the end check (`crs check`, files an extraction has yet to read), the sha256
pass (files whose stat changed; every file on first record) and, on a 200-file subsample, stage 1's
decode (`load_image`, 224 px, crop), the reference. Prints ms per file and each pass / decode.

    python scripts/content_check_cost.py FOLDER [--files N] [--side PX] [--workers W]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from PIL import Image

from crs.cache.images import file_digests, file_stats
from crs.data.file_ends import cut_short_files
from crs.data.images import load_image


def write_files(folder: Path, n: int, side: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    paths = []
    for i in range(n):
        relative = f"{i:06d}.jpg"
        if not (folder / relative).is_file():
            pixels = np.roll(base, i, axis=1)  # different bytes per file, one noise draw
            Image.fromarray(pixels).save(folder / relative, quality=90)
        paths.append(relative)
    return paths


def timed(run) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    paths = write_files(args.folder, args.files, args.side)
    size = sum((args.folder / p).stat().st_size for p in paths)
    print(f"{len(paths):,} JPEGs of {args.side} px, {size / len(paths) / 1024:.0f} KiB each on average")
    subsample = paths[:: max(1, len(paths) // 200)][:200]
    passes = {
        "stat pass": (lambda: file_stats(args.folder, paths, args.workers), len(paths)),
        "end check": (lambda: cut_short_files(args.folder, paths, args.workers), len(paths)),
        "sha256 pass": (lambda: file_digests(args.folder, paths, args.workers), len(paths)),
        "decode (stage 1)": (lambda: [load_image(args.folder / p, 224, "crop") for p in subsample], len(subsample)),
    }
    results = {}
    for name, (run, n) in passes.items():
        wall, cpu = timed(run)
        results[name] = (wall / n * 1e3, cpu / n * 1e3)
    decode_wall, decode_cpu = results["decode (stage 1)"]
    for name, (wall, cpu) in results.items():
        print(f"{name:>17}: {wall:8.4f} ms wall, {cpu:8.4f} ms CPU per file; / decode: {wall / decode_wall:.4f} wall, "
              f"{cpu / decode_cpu:.4f} CPU; per 10k files {wall * 10:.2f} s wall")


if __name__ == "__main__":
    main()
