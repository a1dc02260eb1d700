"""Adding a fifth encoder to a benchmark of four extracts and probes only that encoder.

Issue 3, "Done when": forward passes are counted by stage 1 itself (``ExtractStats.forward_images``);
probe fits are counted by wrapping ``fit_probes`` where stage 2 calls it and telling encoders apart by their
feature dimension (pixel_stats 120, resnet18 512, vit_tiny 192, efficientnet_b0 1280, resnet50 2048).
Cohort-level results (CRS, dominance, tiers) are recomputed over all encoders every time, and
removing an encoder from the spec drops it from the score while its cache group stays current.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crs.benchmark import Benchmark
from crs.cache.imports import import_features
from crs.cache.inspect import list_cache, listing_json
from crs.cache.store import FeatureStore, store_path
from crs.evaluate import records as records_io
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.incremental import UNIT_KEYS, run_incremental
from crs.evaluate.parallel import run_units
from crs.evaluate.units import ProbeUnit, probe_settings
from crs.spec import Spec, load_spec

FOUR = ("pixel_stats", "resnet18", "vit_tiny", "efficientnet_b0")
FIFTH = "resnet50"
DIMS = {"pixel_stats": 120, "resnet18": 512, "vit_tiny": 192, "efficientnet_b0": 1280, "resnet50": 2048}

SPEC = """
name = "incremental"
cache = "{folder}/cache"
output = "{folder}/out"
encoders = {encoders}

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
batch_size = 40
corruptions = ["gaussian_noise"]
severities = [3]

[probe]
label_fractions = [0.5, 1.0]
seeds = [0, 1]
Cs = [0.1, 1.0]
jobs = 1

[score]
reference_encoder = "resnet18"
n_boot = 30

[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{folder}/data"
options = {{ modality = "fundus", n_images = 80, image_size = 32 }}
"""


def spec_with(folder: Path, encoders: tuple[str, ...]) -> Spec:
    path = folder / f"spec-{len(encoders)}-{encoders[-1]}.toml"
    path.write_text(SPEC.format(folder=folder, encoders="[" + ", ".join(f'"{e}"' for e in encoders) + "]"))
    return load_spec(path)


def probe_incrementally(spec: Spec):
    """Stage 2 as ``crs.evaluate.stage.probe_spec`` runs it with the incremental call wired in."""
    settings = probe_settings(spec)
    units = [ProbeUnit(encoder, entry.name) for entry in spec.datasets for encoder in spec.encoder_names]
    folder = RunFolder(spec.output).ensure_writable()
    outcome = run_incremental(
        units, spec.cache, settings, folder,
        lambda todo: run_units(todo, spec.cache, settings, jobs=1, progress=False, folder=folder),
    )
    records = records_io.combine(outcome.records)
    for unit in outcome.fresh:
        folder.commit_predictions(unit.encoder, unit.task)
    records_io.write_parquet(records, folder.records_path, {UNIT_KEYS: outcome.unit_keys})
    return records, outcome


class FitCounter:
    """Wraps the ``fit_probes`` stage 2 calls; records which encoder (by feature dim) each call fitted."""

    def __init__(self, monkeypatch):
        import crs.evaluate.units

        self.fitted: list[str] = []
        original = crs.evaluate.units.fit_probes
        by_dim = {dim: name for name, dim in DIMS.items()}

        def counting(X_train, *args, **kwargs):
            self.fitted.append(by_dim[X_train.shape[1]])
            return original(X_train, *args, **kwargs)

        monkeypatch.setattr(crs.evaluate.units, "fit_probes", counting)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """Four encoders extracted and probed, then a fifth added; every count kept for the tests."""
    folder = tmp_path_factory.mktemp("incremental")
    monkeypatch = pytest.MonkeyPatch()
    try:
        counter = FitCounter(monkeypatch)
        four = spec_with(folder, FOUR)
        extract_four = Benchmark(four).extract(progress=False)
        records_four, _ = probe_incrementally(four)
        fitted_four = list(counter.fitted)

        five = spec_with(folder, (*FOUR, FIFTH))
        extract_five = Benchmark(five).extract(progress=False)
        counter.fitted.clear()
        records_five, outcome_five = probe_incrementally(five)
        fitted_five = list(counter.fitted)
    finally:
        monkeypatch.undo()
    return {
        "folder": folder, "four": four, "five": five, "extract_four": extract_four, "extract_five": extract_five,
        "records_four": records_four, "records_five": records_five, "outcome_five": outcome_five,
        "fitted_four": fitted_four, "fitted_five": fitted_five,
    }


def test_the_fifth_encoder_alone_runs_forward_passes(scenario):
    table = FeatureStore(store_path(scenario["four"].cache, "fundus")).read_table()
    n_images, n_test = len(table.ids), int((table.splits == "test").sum())
    # First run: every encoder embeds every image once clean and its test split once corrupted.
    assert scenario["extract_four"].forward_images == {name: n_images + n_test for name in FOUR}
    # Second run: the four cached encoders run no forward pass, the fifth runs the same count.
    counts = scenario["extract_five"].forward_images
    assert {name: n for name, n in counts.items() if n} == {FIFTH: n_images + n_test}
    assert scenario["extract_five"].total_forward == n_images + n_test


def test_the_fifth_encoder_alone_gets_probes_fitted(scenario):
    assert sorted(scenario["fitted_four"]) == sorted(FOUR)  # one fit_probes call per unit
    assert scenario["fitted_five"] == [FIFTH]
    assert scenario["outcome_five"].reused == [ProbeUnit(name, "fundus") for name in FOUR]


def test_reused_records_equal_a_full_recomputation(scenario):
    """Incremental stage 2 must give exactly the records a full run gives."""
    five = scenario["five"]
    settings = probe_settings(five)
    units = [ProbeUnit(name, "fundus") for name in five.encoder_names]
    full = records_io.combine([r.records for r in run_units(units, five.cache, settings, jobs=1, progress=False)])
    pd.testing.assert_frame_equal(scenario["records_five"], full)


def test_cohort_scores_cover_all_five_encoders(scenario):

    five = scenario["five"]
    result = Benchmark(five).score(Benchmark(five).records())
    assert sorted(result.crs.index) == sorted((*FOUR, FIFTH))
    # The cohort changed, so dominance is recomputed: the same records scored with four encoders
    # give the four a table of their own, without the fifth.
    four_only = Benchmark(scenario["four"]).score(Benchmark(scenario["four"]).records())
    assert sorted(four_only.crs.index) == sorted(FOUR)


def test_removing_an_encoder_drops_it_from_the_score_not_from_the_cache(scenario):

    folder = scenario["folder"]
    before = listing_json(list_cache(scenario["five"].cache))
    without_vit = spec_with(folder, ("pixel_stats", "resnet18", "efficientnet_b0", FIFTH))
    without_vit = Spec(**{**without_vit.__dict__, "output": scenario["five"].output})
    records = Benchmark(without_vit).records()
    assert sorted(records["encoder"].unique()) == sorted(without_vit.encoder_names)
    result = Benchmark(without_vit).score(records)
    assert "vit_tiny" not in result.crs.index and len(result.crs) == 4
    after = listing_json(list_cache(scenario["five"].cache))
    assert after == before
    store = FeatureStore(store_path(scenario["five"].cache, "fundus"))
    assert store.current_fingerprint("vit_tiny")  # still current, still readable by a later spec


def test_a_changed_fingerprint_refits_only_that_encoder(scenario, monkeypatch, tmp_path):
    """New features under an existing name (an import) change its fingerprint: only it is refitted."""
    # Work on a copy: the module's scenario stays as the other tests expect it.
    shutil.copytree(scenario["five"].cache, tmp_path / "cache")
    shutil.copytree(scenario["five"].output, tmp_path / "out")
    five = Spec(**{**scenario["five"].__dict__, "cache": tmp_path / "cache", "output": tmp_path / "out"})
    store = FeatureStore(store_path(five.cache, "fundus"))
    table = store.read_table()
    changed = store.read_features("pixel_stats") * 2.0
    np.savez(tmp_path / "pixel_stats_v2.npz", features=changed, ids=table.ids)
    import_features(five.cache, "fundus", "pixel_stats", tmp_path / "pixel_stats_v2.npz")
    counter = FitCounter(monkeypatch)
    records, outcome = probe_incrementally(five)
    assert counter.fitted == ["pixel_stats"]
    assert sorted(u.encoder for u in outcome.reused) == sorted(("resnet18", "vit_tiny", "efficientnet_b0", FIFTH))
    # Its records are now those of the imported features: no corrupt rows (only clean was imported).
    assert set(records.loc[records["encoder"] == "pixel_stats", "condition"]) == {"clean"}
