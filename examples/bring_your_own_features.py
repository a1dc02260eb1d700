"""Bring your own features: embeddings computed elsewhere join a crs benchmark.

Run:  python examples/bring_your_own_features.py [WORKDIR]

A hosted model, another cluster or an old experiment may already have embedded your images. crs
does not need the model: it needs one feature row per image id. This example

1. writes the sample table of a small synthetic data set into a cache (`crs import-features --spec`
   decodes no image),
2. computes "external" features with plain numpy (a fixed random projection of downsampled pixels,
   standing in for your model) and saves them as .npz with `features` and `ids`,
3. imports them under the encoder name `external_projection` (rows are matched by id; missing,
   extra or repeated ids and NaN values are refused),
4. imports a second encoder the same way and runs stage 2 and the score from the cache alone.

Only clean features are imported here, so the robustness axis comes from nothing but the corrupted
conditions you import (`--condition corrupt/<name>/<severity>`); with none, it is left out.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from PIL import Image

from crs.cli.main import cli

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


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    if result.exit_code != 0:
        raise SystemExit(f"crs {' '.join(args)} failed:\n{result.output}")
    return result.output


def external_features(work: Path, kind: str) -> Path:
    """Stand-in for your own model: features from the images, saved with their ids."""
    from crs.data import load_dataset

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


def main(work: Path) -> str:
    spec = work / "spec.toml"
    spec.write_text(SPEC.format(work=work))
    for name, kind in (("external_projection", "projection"), ("external_colour", "colour")):
        path = external_features(work, kind)
        invoke("import-features", str(path), "--dataset", "derm", "--encoder", name, "--spec", str(spec))
    invoke("probe", str(spec), "-q")
    return invoke("score", str(spec))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(main(Path(sys.argv[1])))
    else:
        with tempfile.TemporaryDirectory() as folder:
            print(main(Path(folder)))
