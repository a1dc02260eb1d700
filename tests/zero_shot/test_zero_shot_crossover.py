"""End to end: a planted crossover found by ``Benchmark.probe()`` and ``.score()`` on a tiny spec.

Two classes, D = 64 features ``x = +-mu e1 + N(0, I)`` (mu = 1.2: the best linear rule has AUROC
Phi(sqrt(2) mu) = 0.955). The imported prototypes of the "hosted" vision-language model point along
``e1 + 1.77 e2`` (cos 0.49 to the truth): zero-shot AUROC Phi(sqrt(2) mu 0.49) = 0.80. A probe from n
labels estimates the class-mean difference with noise of variance ~4/n per dimension, so its direction
has cos ~ mu / sqrt(mu^2 + 4 (D - 1) / n) to the truth: AUROC 0.71 at n = 20 and 0.89 at n = 200,
crossing zero-shot's 0.80 near n = 56 (checked at D = 256, where the same rule puts the probe at 0.61
and 0.79 and the crossover beyond 200 labels: measured 0.605 and 0.791). With 2,000 training rows and label fractions 1 %, 10 %, 100 % (20, 200,
2,000 labels) the crossover must therefore be 10 %: the first fraction whose probe beats zero-shot.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from crs.benchmark import Benchmark
from crs.cache.imports import import_features, write_table_from_spec
from crs.cache.prototypes import import_prototypes

D, MU, N_TRAIN, N_VAL, N_TEST = 64, 1.2, 2000, 1000, 1500

SPEC = """
name = "crossover"
cache = "{root}/cache"
output = "{root}/out"
encoders = ["hosted_vlm"]

[extract]
corruptions = "none"

[probe]
backend = "torch"
label_fractions = [0.01, 0.1, 1.0]
seeds = [0, 1]
Cs = [0.01, 0.1, 1.0]
min_per_class = 3
jobs = 1

[score]
reference_encoder = "hosted_vlm"
n_boot = 50
zero_shot = true

[[datasets]]
name = "planted"
loader = "folder"
root = "{root}/data"
options = {{ csv = "labels.csv", id_column = "id", image_column = "path", label_columns = "label", kind = "multiclass", modality = "dermoscopy", group_column = "group", split_column = "split", class_names = ["benign", "malignant"] }}
"""


def test_benchmark_finds_the_planted_crossover_fraction(tmp_path):
    rng = np.random.default_rng(2026)
    n = N_TRAIN + N_VAL + N_TEST
    y = rng.integers(0, 2, n)
    features = rng.standard_normal((n, D))
    features[:, 0] += np.where(y == 1, MU, -MU)
    ids = np.array([f"img{i:05d}" for i in range(n)])
    splits = np.array(["train"] * N_TRAIN + ["val"] * N_VAL + ["test"] * N_TEST)
    (tmp_path / "data").mkdir()
    pd.DataFrame({"id": ids, "path": [f"{i}.png" for i in ids], "label": np.array(["benign", "malignant"])[y],
                  "group": ids, "split": splits}).to_csv(tmp_path / "data" / "labels.csv", index=False)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(root=tmp_path))
    write_table_from_spec(spec, "planted")
    np.savez(tmp_path / "features.npz", features=features.astype(np.float32), ids=ids)
    import_features(tmp_path / "cache", "planted", "hosted_vlm", tmp_path / "features.npz")
    direction = np.zeros(D)
    direction[0], direction[1] = 1.0, 1.77
    direction /= np.linalg.norm(direction)
    np.savez(tmp_path / "prototypes.npz", positive=np.stack([-direction, direction]).astype(np.float32), scale=100.0,
             link="softmax", prompt_set="planted")
    import_prototypes(tmp_path / "cache", "planted", "hosted_vlm", tmp_path / "prototypes.npz")

    bench = Benchmark(spec)
    bench.probe(progress=False)
    bench.score()

    score = json.loads((tmp_path / "out" / "zero_shot" / "score.json").read_text())
    (row,) = score["comparison"]
    assert 0.75 < row["zero_shot_auroc"] < 0.85  # planted 0.80
    assert row["probe_auroc_0.01"] < row["zero_shot_auroc"] < row["probe_auroc_0.1"] < row["probe_auroc_1"]
    assert row["crossover_fraction"] == 0.1 and row["crossover_labels"] == 200
    assert 0.01 < row["crossover_low"] <= 0.1 <= row["crossover_high"] < 1.0
