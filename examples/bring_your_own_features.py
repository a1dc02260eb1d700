"""Bring your own features: embeddings computed elsewhere join a crs benchmark.

Run:  python examples/bring_your_own_features.py [WORKDIR]

A hosted model, another cluster or an old experiment may already have embedded your images. crs
does not need the model: it needs one feature row per image id. This example, in Python (the same
steps on the command line are `crs import-features FILE --dataset derm --encoder NAME --spec SPEC`,
then `crs run SPEC`, which checks the imported features in the cache, has nothing to extract for them,
and probes and scores them beside any registry encoder the spec also names):

1. writes the sample table of a small synthetic data set into the spec's cache
   (`write_table_from_spec` decodes no image),
2. computes "external" features with plain numpy (a fixed random projection of downsampled pixels,
   standing in for your model) and saves them as .npz with `features` and `ids`,
3. imports them under the encoder name `external_projection` (rows are matched by id; missing,
   extra or repeated ids and NaN values are refused),
4. imports a second encoder the same way and runs stage 2 and the score with `Benchmark`, from the
   cache alone.

Only clean features are imported here, so the robustness axis comes from nothing but the corrupted
conditions you import (`condition="corrupt/<name>/<severity>"`, named in the spec's `[extract]
corruptions` and `severities`: stage 2 evaluates exactly those); with none, it is left out.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from crs import Benchmark, ScoreResult
from crs.cache.imports import import_features, write_table_from_spec
from crs.data import load_dataset

SPEC = """
name = "byof"
cache = "{work}/cache"
output = "{work}/out"
encoders = ["external_projection", "external_colour"]
[extract]
corruptions = "none"
[probe]
label_fractions = [0.25, 1.0]
seeds = [0, 1]
Cs = [0.01, 0.1, 1.0]
[score]
reference_encoder = "external_colour"
n_boot = 200
[[datasets]]
name = "derm"
loader = "synthetic"
root = "{work}/data"
options = {{ modality = "dermoscopy", n_images = 240, image_size = 32 }}
"""


def external_features(work: Path, kind: str) -> Path:
    """Stand-in for your own model: features from the images, saved with their ids."""
    dataset = load_dataset("synthetic", work / "data", modality="dermoscopy", n_images=240, image_size=32)
    pixels = np.stack([np.asarray(Image.open(dataset.root / p).resize((16, 16)), np.float32) / 255 for p in dataset.paths])
    if kind == "projection":
        projection = np.random.default_rng(0).standard_normal((16 * 16 * 3, 64)).astype(np.float32)
        features = pixels.reshape(len(pixels), -1) @ projection
    else:  # mean colour of a 4 x 4 grid
        features = pixels.reshape(len(pixels), 4, 4, 4, 4, 3).mean(axis=(2, 4)).reshape(len(pixels), -1)
    path = work / f"{kind}.npz"
    np.savez(path, features=features, ids=dataset.ids)
    return path


def main(work: Path) -> ScoreResult:
    work.mkdir(parents=True, exist_ok=True)  # a new folder named on the command line is made, not a traceback
    spec_path = work / "spec.toml"
    spec_path.write_text(SPEC.format(work=work))
    bench = Benchmark(spec_path)
    write_table_from_spec(spec_path, "derm")  # ids, labels, splits and groups; no image is decoded
    for name, kind in (("external_projection", "projection"), ("external_colour", "colour")):
        imported = import_features(bench.spec.cache, "derm", name, external_features(work, kind))
        print(imported.format())
    probed = bench.probe(progress=False)  # stage 2 reads only the cache
    print(f"probe: {probed.n_probes} probes, {len(probed.records)} evaluation records")
    return bench.score()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(main(Path(sys.argv[1])).format())
    else:
        with tempfile.TemporaryDirectory() as folder:
            print(main(Path(folder)).format())
