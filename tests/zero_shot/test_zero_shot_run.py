"""Done-when: `crs run` with [score] zero_shot = true, two random-weight VLMs and two image-only encoders."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crs.benchmark import Benchmark

SPEC = """
name = "zs"
cache = "{root}/cache"
output = "{root}/out"
encoders = ["chexzero", "clip_vit_b16", "pixel_stats", "resnet18"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
batch_size = 64
corruptions = ["gaussian_noise"]
severities = [2]

[probe]
label_fractions = [0.25, 1.0]
seeds = [0]
Cs = [1.0]
jobs = 1

[score]
reference_encoder = "resnet18"
n_boot = 30
zero_shot = true

[[datasets]]
name = "derm"
loader = "synthetic"
root = "{root}/data"
options = {{ modality = "dermoscopy", n_images = 120, image_size = 32 }}

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "{root}/data"
options = {{ modality = "chest_xray", n_images = 120, image_size = 32 }}
shift_target = {{ name = "cxr-b", loader = "synthetic", root = "{root}/data", options = {{ modality = "chest_xray", site = "b", n_images = 60, image_size = 32, shift_target = true }} }}
"""


@pytest.mark.slow
def test_run_with_zero_shot_gives_leaderboard_report_section_and_records(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(root=tmp_path))
    bench = Benchmark(path)
    outcome = bench.run(progress=False)
    out = tmp_path / "out" / "zero_shot"
    records = pd.read_parquet(out / "records.parquet")
    assert set(records["encoder"]) == {"chexzero", "clip_vit_b16"}  # image-only encoders are not zero-shot
    assert set(records["task"]) == {"derm", "cxr"}
    assert {"clean", "corrupt", "shift"} <= set(records["condition"])
    assert set(records.loc[records["calibration"] == "shipped", "label_fraction"]) == {0.0}
    score = json.loads((out / "score.json").read_text())
    assert sorted(row["encoder"] for row in score["leaderboard"]) == ["chexzero", "clip_vit_b16"]
    assert all(row["rank_low"] <= row["rank"] <= row["rank_high"] for row in score["leaderboard"])
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Zero-shot or a probe?" in report
    assert "zero-shot AUROC with zero labels" in report  # the label curve's zero-label point
    for row in score["comparison"]:  # the crossover with its interval, from the probes' stored predictions
        assert {"crossover_fraction", "crossover_low", "crossover_high", "probe_auroc_0.25", "probe_auroc_1"} <= set(row)
        if row["crossover_low"] is not None and row["crossover_high"] is not None:
            assert row["crossover_low"] <= row["crossover_high"]
    first = score["comparison"][0]
    assert f"{first['zero_shot_auroc']:.3f}" in report  # the Markdown carries the JSON's numbers
    # the four-axis CRS is the probes' own: zero-shot encoders are ranked there as image encoders too
    assert set(outcome.score.crs.index) == {"chexzero", "clip_vit_b16", "pixel_stats", "resnet18"}
    # the prototypes are cached: a second zero-shot pass encodes no text
    from crs.cache.prototypes import stored_digests
    from crs.cache.store import FeatureStore, store_path

    store = FeatureStore(store_path(tmp_path / "cache", "derm"))
    assert len(stored_digests(store, "chexzero")) == 1
