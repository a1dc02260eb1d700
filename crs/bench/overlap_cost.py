"""What the duplicate check adds to stage 1, side by side with stage 1's decode of the same images.

``python -m crs.bench.overlap_cost [--images 30] [--size 1024] [--rounds 3] [--pairs 25331x10015]``

Per format (JPEG, RGB PNG, grey PNG) it generates ``--images`` structured pictures of ``--size`` px,
then, in each round, times (process CPU seconds) stage 1's decode of every image
(:func:`crs.data.images.load_image` at 224 px, crop, one window as the runner decodes it) and what the
check adds to it: the prints of that window (:func:`crs.data.overlap.image_prints`) and keeping them
in a store (:func:`crs.cache.prints.write_prints`). The check's exact print is the image record's
sha256 (decision 0046), read once whatever the check does; its cost is shown beside, not in the
check. Keeping prints has a fixed cost per flush (one per data set and run), so it is also timed for
``--keep-rows`` rows in one flush. The comparison of two data sets' prints grows with the product of their sizes: it is timed on
random prints at ``--pairs`` (default: ISIC 2019 x HAM10000) and set against the decode of both.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from crs.cache.images import file_digest
from crs.cache.prints import write_prints
from crs.cache.store import FeatureStore
from crs.data import load_dataset
from crs.data.images import load_image
from crs.data.overlap import THUMB, Prints, find_overlaps, image_prints

FORMATS = ("jpeg", "rgb_png", "grey_png")


def picture(seed: int, size: int) -> np.ndarray:
    """A structured RGB picture (gradient, ellipses, stripes, fine noise), as the overlap tests' images."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size].astype(np.float32) / size
    angle = rng.uniform(0, 2 * np.pi)
    pixels = np.repeat((0.5 + 0.4 * (np.cos(angle) * xx + np.sin(angle) * yy - 0.5))[..., None], 3, axis=2)
    pixels = pixels * rng.uniform(0.5, 1.0, 3)
    for _ in range(int(rng.integers(2, 6))):
        cy, cx, ry, rx = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.05, 0.4), rng.uniform(0.05, 0.4)
        pixels[((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1] = rng.uniform(0, 1, 3)
    pixels += 0.08 * np.sin(rng.uniform(20, 90) * (xx * np.cos(2 * angle) + yy * np.sin(2 * angle)))[..., None]
    pixels += rng.normal(0, 0.03, pixels.shape)
    return (np.clip(pixels, 0, 1) * 255).round().astype(np.uint8)


def write_images(folder: Path, kind: str, n: int, size: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        pixels = picture(i, size)
        if kind == "jpeg":
            path = folder / f"{i:03d}.jpg"
            Image.fromarray(pixels).save(path, quality=90)
        elif kind == "rgb_png":
            path = folder / f"{i:03d}.png"
            Image.fromarray(pixels).save(path)
        else:
            path = folder / f"{i:03d}.png"
            Image.fromarray(pixels).convert("L").save(path)
        paths.append(path)
    (folder / "labels.csv").write_text("path,label\n" + "".join(f"{p.name},{'ab'[i % 2]}\n" for i, p in enumerate(paths)))
    return paths


def _cpu(action: Any) -> tuple[float, Any]:
    started = time.process_time()
    result = action()
    return time.process_time() - started, result


def format_cost(folder: Path, kind: str, n: int, size: int, rounds: int) -> dict[str, Any]:
    """CPU seconds per image of stage 1's decode, the check's prints and store write, and the sha256 record."""
    paths = write_images(folder / kind, kind, n, size)
    dataset = load_dataset("folder", folder / kind, modality="dermoscopy", image_size=224, fit="crop")
    totals = {"decode": 0.0, "prints": 0.0, "keep": 0.0, "sha256": 0.0}
    for round_ in range(rounds):
        store = FeatureStore(folder / f"{kind}-{round_}.zarr", mode="a")
        seconds, images = _cpu(lambda: np.stack([load_image(p, 224, "crop").numpy() for p in paths]))
        totals["decode"] += seconds
        seconds, (phash, thumb) = _cpu(lambda: image_prints(images))  # noqa: B023 (called at once)
        totals["prints"] += seconds
        seconds, _ = _cpu(lambda: write_prints(store, dataset, np.arange(n), phash, thumb))  # noqa: B023
        totals["keep"] += seconds
        seconds, _ = _cpu(lambda: [file_digest(p) for p in paths])
        totals["sha256"] += seconds
    per_image = {key: value / (rounds * n) * 1000 for key, value in totals.items()}
    check = per_image["prints"] + per_image["keep"]
    return {"format": kind, "images": n, "size": size, "rounds": rounds,
            **{f"{key}_ms": round(value, 3) for key, value in per_image.items()},
            "check_ms": round(check, 3), "check_over_decode": round(check / per_image["decode"], 4),
            "sha256_over_decode": round(per_image["sha256"] / per_image["decode"], 4)}


def compare_cost(n_a: int, n_b: int) -> dict[str, Any]:
    """CPU seconds of :func:`find_overlaps` on random prints of ``n_a`` x ``n_b`` images."""
    rng = np.random.default_rng(0)

    def prints(n: int, tag: str) -> Prints:
        thumbs = rng.integers(0, 65536, size=(n, THUMB * THUMB), dtype=np.uint16)
        return Prints(np.array([f"{tag}{i}" for i in range(n)]), np.array([f"{tag}{i}" for i in range(n)]),
                      rng.integers(0, 2**63, n, dtype=np.uint64), thumbs)

    a, b = prints(n_a, "a"), prints(n_b, "b")
    seconds, found = _cpu(lambda: find_overlaps(a, b))
    return {"pairs": f"{n_a}x{n_b}", "compare_s": round(seconds, 3), "found": len(found)}


class _Rows:
    """A stand-in data set of ``n`` rows for :func:`write_prints` (it reads the ids' digest, geometry, length)."""

    def __init__(self, n: int):
        self.n, self.image_size, self.fit = n, 224, "crop"

    def __len__(self) -> int:
        return self.n

    def id_digest(self) -> str:
        return f"bench-{self.n}"


def keep_cost(folder: Path, n: int) -> dict[str, Any]:
    """CPU milliseconds per image of keeping ``n`` images' prints in a store in one flush (as stage 1 does)."""
    rng = np.random.default_rng(1)
    phash = rng.integers(0, 2**63, n, dtype=np.uint64)
    thumb = rng.integers(0, 65536, size=(n, THUMB * THUMB), dtype=np.uint16)
    store = FeatureStore(folder / "keep.zarr", mode="a")
    seconds, _ = _cpu(lambda: write_prints(store, _Rows(n), np.arange(n), phash, thumb))  # type: ignore[arg-type]
    return {"rows": n, "keep_ms": round(seconds / n * 1000, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=30)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", default="25331x10015")
    parser.add_argument("--keep-rows", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = [format_cost(Path(folder), kind, args.images, args.size, args.rounds) for kind in FORMATS]
        keep = keep_cost(Path(folder), args.keep_rows)
    n_a, n_b = (int(v) for v in args.pairs.split("x"))
    comparison = compare_cost(n_a, n_b)
    decode_ms = float(np.mean([row["decode_ms"] for row in rows]))
    comparison["over_decode_of_both"] = round(comparison["compare_s"] * 1000 / (decode_ms * (n_a + n_b)), 4)
    for row in rows:  # the check at data-set scale: prints, plus one flush of keep["rows"] prints, per decode
        row["check_over_decode_at_scale"] = round((row["prints_ms"] + keep["keep_ms"]) / row["decode_ms"], 4)
    print(json.dumps({"formats": rows, "keep": keep, "comparison": comparison}, indent=2))


if __name__ == "__main__":
    main()
