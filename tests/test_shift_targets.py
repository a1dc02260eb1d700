"""Several shift targets per task, end to end at tiny size: one chest task, two other sites (synthetic
sites b and c), two encoders. Each site is extracted, probed, reported apart; robustness averages them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.benchmark import Benchmark
from crs.cache.store import FeatureStore, store_path
from crs.evaluate import artifacts
from crs.report import plots_runs
from crs.report.provenance import task_infos
from crs.scoring.draws import SHIFT_STREAM, task_entropy, task_key
from crs.scoring.resample import group_bootstrap
from crs.spec import load_spec

TARGETS = ("cxr-b", "cxr-c")

SPEC = """
name = "two-sites"
cache = "{folder}/cache"
output = "{folder}/out"
encoders = ["pixel_stats", "resnet18"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
corruptions = ["gaussian_noise"]
severities = [1, 3]

[probe]
label_fractions = [0.25, 1.0]
seeds = [0, 1]
Cs = [0.01, 1.0]
jobs = 1

[score]
reference_encoder = "pixel_stats"
n_boot = 30

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "{folder}/data"
options = {{ modality = "chest_xray", n_images = 120, image_size = 32 }}

[[datasets.shift_target]]
name = "cxr-c"
loader = "synthetic"
root = "{folder}/data"
options = {{ modality = "chest_xray", site = "c", n_images = 50, image_size = 32, shift_target = true }}

[[datasets.shift_target]]
name = "cxr-b"
loader = "synthetic"
root = "{folder}/data"
options = {{ modality = "chest_xray", site = "b", n_images = 60, image_size = 32, shift_target = true }}
"""


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory):
    folder = tmp_path_factory.mktemp("two_sites")
    (folder / "spec.toml").write_text(SPEC.format(folder=folder))
    spec = load_spec(folder / "spec.toml")
    bench = Benchmark(spec)
    bench.extract(progress=False)
    records = bench.probe(progress=False).records
    score = bench.score()
    report = bench.report(score)
    return spec, bench, records, score, report


def test_each_target_has_its_own_store_records_and_predictions(two_sites):
    spec, bench, records, _, _ = two_sites
    assert spec.datasets[0].shift_target_names == ("cxr-c", "cxr-b")  # spec order
    sizes = {name: len(FeatureStore(store_path(spec.cache, name)).read_table().indices("test")) for name in TARGETS}
    assert sizes == {"cxr-b": 60, "cxr-c": 50}
    shift = records[records["condition"] == "shift"]
    # every full-fraction probe (encoder x seed) has one row per target (robustness_fractions = "full")
    per_probe = shift.groupby(["encoder", "label_fraction", "seed"])["target"].apply(lambda names: tuple(sorted(names)))
    assert len(per_probe) == 2 * 1 * 2 and set(per_probe) == {TARGETS}
    assert set(shift["label_fraction"]) == {1.0}
    for encoder in spec.encoder_names:
        arrays = bench.folder.read_predictions(encoder, "cxr")
        keys = artifacts.shift_keys(arrays)
        assert [k.target for k in keys] == list(TARGETS)
        for found in keys:
            assert arrays[found.probs].shape[:2] == (2, sizes[found.target])  # seeds x the target's rows
            assert len(arrays[found.groups]) == len(arrays[found.labels]) == sizes[found.target]
        assert artifacts.probs_key(artifacts.SHIFT) not in arrays
    audit = bench.folder.read_audit()
    assert audit["shift_targets"] == {"cxr": ["cxr-c", "cxr-b"]}
    assert set(audit["skipped_images"]) == {"cxr", *TARGETS}


def test_robustness_is_half_corruption_half_the_mean_over_targets(two_sites):
    """By hand from the records: per encoder, robust AUROC = corrupt/2 + (site b + site c)/4."""
    _, _, records, score, _ = two_sites
    full = records[records["label_fraction"] == 1.0]
    per_target = full[full["condition"] == "shift"].groupby(["encoder", "target"])["auroc"].mean().unstack()
    corrupt = full[full["condition"] == "corrupt"].groupby("encoder")["auroc"].mean()
    by_hand = 1.0 - (corrupt / 2 + per_target["cxr-b"] / 4 + per_target["cxr-c"] / 4)
    scored = score.axis_errors["robustness"]
    assert scored.to_dict() == pytest.approx(by_hand.to_dict(), abs=1e-12)
    first_only = 1.0 - (corrupt + per_target["cxr-b"]) / 2  # what counting one site would give
    assert np.abs(scored - first_only).max() > 1e-4
    seed_axes = score.seed_axes.set_index(["encoder", "seed"])["shift_auroc"]
    seed_means = full[full["condition"] == "shift"].groupby(["encoder", "seed"])["auroc"].mean()
    assert seed_axes.sort_index().to_numpy() == pytest.approx(seed_means.sort_index().to_numpy(), abs=1e-12)


def test_case_bootstrap_draws_each_target_apart(two_sites):
    spec, bench, _, score, _ = two_sites
    result = score.bootstrap
    assert result.level == "seed+case"
    assert set(result.shift_case_draws) == {"cxr"} and set(result.shift_case_draws["cxr"]) == set(TARGETS)
    first = bench.folder.read_predictions("pixel_stats", "cxr")
    # the task's key: its name and its test rows (decision 0144)
    cxr_key = task_key("cxr", first[artifacts.CLEAN_GROUPS], first[artifacts.labels_key(artifacts.CLEAN)])
    for g, target in enumerate(TARGETS):  # sorted by name; the first keeps the one-target stream
        keys = {k.target: k for k in artifacts.shift_keys(first)}[target]
        design = str(first[artifacts.design_key(target)][0])  # (design, recorded or inferred)
        assert design == "official"  # a second site's every image is test: resampled as whole patients (0085)
        expected = group_bootstrap(first[keys.groups], first[keys.labels], "multilabel",
                                   seed=task_entropy(spec.score.seed, cxr_key, SHIFT_STREAM + g), design=design)
        drawn = result.shift_case_draws["cxr"][target]
        assert np.array_equal(drawn.counts(range(5)), expected.counts(range(5)))
    counts = [result.shift_case_draws["cxr"][t].counts([3])[0] for t in TARGETS]
    assert len(counts[0]) == 60 and len(counts[1]) == 50
    # every case once: the CRS from the stored predictions is the records' CRS (up to the float16
    # storage of the lower fractions' predictions)
    assert result.table["crs_from_predictions"].to_dict() == pytest.approx(score.crs["crs"].to_dict(), abs=1e-3)
    assert np.isfinite(result.axis_error_replicates["robustness"].to_numpy()).all()


def test_report_names_both_targets(two_sites):
    spec, bench, records, _, report = two_sites
    text = (report.parent / "report.md").read_text()
    for target in TARGETS:
        assert f"shift: {target}" in text
    assert "shift: mean of 2 targets (scored)" in text
    assert "| shift targets | cxr: cxr-b, cxr-c |" in text
    assert (report.parent / "figures" / "reliability.png").is_file()
    predictions = plots_runs.load_predictions(bench.folder.predictions_dir, spec.encoder_names, ["cxr"])
    panels = plots_runs._condition_keys(predictions[("pixel_stats", "cxr")], TARGETS)
    assert sorted(panels) == ["clean", "shift:cxr-b", "shift:cxr-c"]
    infos = task_infos(["cxr"], spec)
    assert infos["cxr"].shift_target_names == ("cxr-c", "cxr-b")


def test_an_older_single_target_predictions_file_is_named_from_the_records():
    labels = np.array([0, 1, 1])
    old = {"shift_probs": np.zeros((1, 3, 2)), "shift_labels": labels, "shift_groups": np.array(["a", "b", "c"])}
    (keys,) = artifacts.shift_keys(old, ["site-b"])
    assert (keys.target, keys.probs, keys.labels, keys.groups) == ("site-b", "shift_probs", "shift_labels", "shift_groups")
    assert artifacts.shift_keys(old)[0].target == ""
    with pytest.raises(artifacts.ShiftKeysError, match=r"records name \['b', 'c'\]"):
        artifacts.shift_keys(old, ["c", "b"])
    panels = plots_runs._condition_keys({**old, "clean_probs": np.zeros((1, 3, 2)), "clean_labels": labels}, ("site-b",))
    assert panels["shift:site-b"] == ("shift_probs", "shift_labels")
    new = {f"shift__{t}_probs": np.zeros(1) for t in ("z", "a_probs")}
    assert [k.target for k in artifacts.shift_keys(new)] == ["a_probs", "z"]


def test_records_and_table_only_shift_targets(two_sites):
    """The per-target table rows of the report, against the records directly."""
    from crs.report.shifts import shift_table

    _, _, records, _, _ = two_sites
    table = shift_table(records, ["pixel_stats", "resnet18"])
    frame = table.frame()
    assert list(frame["evaluated on"]) == ["clean test", "shift: cxr-b", "shift: cxr-c", "shift: mean of 2 targets (scored)"]
    at = records[(records["condition"] == "shift") & (records["target"] == "cxr-c") & (records["encoder"] == "resnet18")
                 & (records["label_fraction"] == 1.0)]
    assert frame.loc[2, "resnet18"].startswith(f"{at['auroc'].mean():.3f} \u00b1")
    assert shift_table(records[records["condition"] != "shift"], ["pixel_stats"]) is None
    assert isinstance(frame, pd.DataFrame)
