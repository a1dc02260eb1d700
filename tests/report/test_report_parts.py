"""The report's pieces on inputs small enough to check by hand, and against scikit-learn."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.calibration import calibration_curve

from crs.report.cards import worst_label_efficiency, worst_robustness
from crs.report.grids import montage
from crs.report.plots import _front
from crs.report.provenance import Provenance, ShiftInfo, TaskInfo, describe_weights, exposure_flags
from crs.report.reliability import reliability_curve
from crs.report.tables import axis_intervals, format_interval, rank_shift


def test_reliability_top_label_by_hand():
    # Confidences 0.95 (right), 0.85 (wrong), 0.75 (right) fall in bins 9, 8 and 7 of ten.
    probs = np.array([[0.95, 0.05], [0.85, 0.15], [0.25, 0.75]])
    labels = np.array([0, 1, 1])
    curve = reliability_curve(probs, labels, n_bins=10)
    np.testing.assert_allclose(curve.confidence, [0.75, 0.85, 0.95])
    np.testing.assert_allclose(curve.observed, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(curve.count, [1, 1, 1])


def test_reliability_multilabel_matches_sklearn_and_drops_ignored_labels():
    rng = np.random.default_rng(0)
    probs = rng.uniform(size=(3, 40, 4))  # 3 seeds
    labels = (rng.uniform(size=(40, 4)) < 0.4).astype(np.float32)
    labels[::7, 1] = np.nan
    curve = reliability_curve(probs, labels, n_bins=8)
    known = ~np.isnan(np.broadcast_to(labels, probs.shape))
    y = np.broadcast_to(labels, probs.shape)[known]
    p = probs[known]
    observed, confidence = calibration_curve(y, p, n_bins=8, strategy="uniform")
    np.testing.assert_allclose(curve.observed, observed)
    np.testing.assert_allclose(curve.confidence, confidence)
    assert curve.count.sum() == known.sum()


def test_reliability_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="do not match"):
        reliability_curve(np.ones((2, 5, 3)) / 3, np.zeros(4, dtype=int))


def _records(rows):
    columns = ["encoder", "task", "label_fraction", "seed", "condition", "corruption", "severity", "target", "auroc"]
    return pd.DataFrame(rows, columns=columns)


def test_worst_robustness_sentence_by_hand():
    # Clean AUROC 0.9 -> 0.4 above chance. Motion blur at severity 4 gives 0.776 -> 0.276 above chance,
    # retention 0.69, so it loses 31 %; noise at severity 1 (0.88) loses only 5 %.
    records = _records([
        ("a", "derm", 1.0, 0, "clean", "", 0, "", 0.9),
        ("a", "derm", 1.0, 0, "corrupt", "motion_blur", 4, "", 0.776),
        ("a", "derm", 1.0, 0, "corrupt", "gaussian_noise", 1, "", 0.88),
        ("a", "derm", 0.1, 0, "corrupt", "gaussian_noise", 1, "", 0.5),  # not at full labels: ignored
    ])  # fmt: skip
    assert worst_robustness(records, "a") == (
        "falls from AUROC 0.900 to 0.776 under motion blur at severity 4 (derm), 31\u00a0% of its above-chance AUROC lost"
    )


def test_worst_robustness_names_the_shifted_site_when_it_costs_most():
    records = _records([
        ("a", "cxr", 1.0, 0, "clean", "", 0, "", 0.8),
        ("a", "cxr", 1.0, 0, "corrupt", "jpeg", 2, "", 0.77),
        ("a", "cxr", 1.0, 0, "shift", "", 0, "cxr-b", 0.65),  # 0.15 / 0.3 above chance kept: loses 50 %
    ])  # fmt: skip
    assert worst_robustness(records, "a") == (
        "falls from AUROC 0.800 to 0.650 on the shifted site cxr-b (cxr probe), 50\u00a0% of its above-chance AUROC lost"
    )


def test_worst_label_efficiency_by_hand():
    # At 10 % labels AUROC 0.6 against 0.9 at 100 %: keeps 0.1 / 0.4 = 25 % of the above-chance AUROC.
    records = _records([
        ("a", "derm", 1.0, 0, "clean", "", 0, "", 0.9),
        ("a", "derm", 0.1, 0, "clean", "", 0, "", 0.6),
    ])  # fmt: skip
    assert worst_label_efficiency(records, "a") == (
        "has AUROC 0.600 with 10\u00a0% of the labels on derm (0.900 with all; 25\u00a0% of its above-chance AUROC kept)"
    )


def test_axis_intervals_are_percentiles_of_the_kept_replicate_errors():
    # Three replicates of the discrimination error .2, .4, .3 -> AUROC .8, .6, .7; numpy's linear
    # percentiles at 2.5 and 97.5 of [0.6, 0.7, 0.8] are 0.605 and 0.795. Calibration is kept as the
    # error itself; robustness was not measured (all NaN): no interval, not a made-up one.
    kept = {
        "discrimination": pd.DataFrame({"a": [0.2, 0.4, 0.3]}),
        "calibration": pd.DataFrame({"a": [0.01, 0.01, 0.01]}),
        "label_efficiency": pd.DataFrame({"a": [0.3, 0.3, 0.3]}),
        "robustness": pd.DataFrame({"a": [np.nan] * 3}),
    }
    score = SimpleNamespace(
        axis_errors=pd.DataFrame(index=pd.Index(["a"], name="encoder")),
        bootstrap=SimpleNamespace(alpha=0.05, n_boot=3, axis_error_replicates=kept),
    )
    intervals = axis_intervals(score)
    assert intervals.loc["a", "auroc_low"] == pytest.approx(0.605)
    assert intervals.loc["a", "auroc_high"] == pytest.approx(0.795)
    assert intervals.loc["a", ["calibration_error_low", "calibration_error_high"]].tolist() == pytest.approx([0.01, 0.01])
    assert np.isnan(intervals.loc["a", "robust_auroc_low"])
    none_kept = SimpleNamespace(**{**score.__dict__, "bootstrap": SimpleNamespace(alpha=0.05, n_boot=3)})
    assert np.isnan(axis_intervals(none_kept).loc["a", "auroc_low"])


def test_rank_shift_and_interval_text():
    assert rank_shift(3, 1) == "▲2"
    assert rank_shift(1, 2) == "▼1"
    assert rank_shift(2, 2) == "="
    assert format_interval(0.5, 0.41, 0.6) == "0.500 [0.410, 0.600]"
    assert format_interval(0.5, np.nan, np.nan) == "0.500"
    assert format_interval(np.nan, 0.1, 0.2) == "n/a"


def test_exposure_flags_name_the_data_set_and_the_kind_of_exposure():
    chest = TaskInfo("cxr", modality="chest_xray", loader="chexpert",
                     shift_targets=(ShiftInfo("mimic", "mimic_cxr"), ShiftInfo("site-c", "folder")))
    derm = TaskInfo("derm", modality="dermoscopy", loader="isic2019")
    saw_both = Provenance("cxr-model", pretraining_data=("MIMIC-CXR", "CheXpert", "NIH ChestX-ray14"))
    flags = exposure_flags(saw_both, {"cxr": chest, "derm": derm})
    assert [(f.task, f.kind, f.matched) for f in flags] == [
        ("cxr", "shift target", "MIMIC-CXR"), ("cxr", "test data set", "CheXpert")
    ]
    assert "shift to mimic on cxr is not out-of-distribution" in flags[0].text()
    assert "cxr \u2192 mimic" in flags[0].short()
    skin = Provenance("skin-model", pretraining_data=("2M dermatology images",))
    assert [(f.task, f.kind) for f in exposure_flags(skin, {"cxr": chest, "derm": derm})] == [("derm", "same modality")]
    assert exposure_flags(Provenance("imagenet", pretraining_data=("ImageNet-1k",)), {"cxr": chest, "derm": derm}) == []


def test_exposure_flags_for_registered_chest_encoders():
    """Every registry entry whose pretraining data name MIMIC-CXR is flagged on a MIMIC shift target."""
    from crs.encoders import all_specs
    from crs.report.provenance import encoder_provenance

    chest = {"cxr": TaskInfo("cxr", modality="chest_xray", loader="chexpert",
                             shift_targets=(ShiftInfo("mimic", "mimic_cxr"),))}
    named = [spec.name for spec in all_specs() if any("MIMIC-CXR" in text for text in spec.pretraining_data)]
    assert named, "the registry has no encoder pretrained on MIMIC-CXR to check against"
    for name in named:
        kinds = {flag.kind for flag in exposure_flags(encoder_provenance(name), chest)}
        assert "shift target" in kinds, name


def test_describe_weights():
    assert describe_weights("random:0").startswith("random initialisation (seed 0)")
    assert describe_weights("sha256:" + "ab" * 32) == "sha256 abababababab…"
    assert describe_weights("") == "unknown"


def test_pareto_front_by_hand():
    # (1, 1) and (0, 2) are not beaten on both axes; (0.5, 0.5) is beaten by (1, 1); (1, 0.5) by (1, 1).
    x = np.array([1.0, 0.0, 0.5, 1.0])
    y = np.array([1.0, 2.0, 0.5, 0.5])
    assert _front(x, y).tolist() == [1, 0]


def test_montage_places_tiles_with_white_gaps():
    black = np.zeros((2, 2, 3), np.uint8)
    grey = np.full((2, 2, 3), 100, np.uint8)
    canvas = montage([[black, grey]], gap=1)
    assert canvas.shape == (2, 5, 3)
    assert (canvas[:, 2] == 255).all() and (canvas[:, :2] == 0).all() and (canvas[:, 3:] == 100).all()


def test_rank_share_labels_never_round_a_rare_rank_to_never_or_always():
    from crs.report.plots import share_label

    # 1 of 500 replicates is 0.2 %: '0%' beside '100%' would say "never" and "always"
    # 0.005 formats as '0%' (round half to even), so it must read '<1%' too
    assert [share_label(x) for x in (0.002, 0.998, 0.005, 0.006, 0.77, 1.0, 0.0)] == [
        "<1%", ">99%", "<1%", "1%", "77%", "100%", "0%"
    ]


def test_percent_keeps_rare_shares_off_zero_and_hundred():
    from crs.report.tables import percent

    assert [percent(x) for x in (0.31, 0.0, 0.002, 0.998, 1.0)] == ["31\u00a0%", "0\u00a0%", "<1\u00a0%", ">99\u00a0%", "100\u00a0%"]


def test_the_auroc_sentence_says_ties_and_confident_reversals():
    """What clean AUROC alone would have picked among the candidates (issue 46 item 7, issue 47 item 5)."""
    from crs.evaluate.contest import contest_of
    from crs.report.headline import auroc_sentence
    from crs.scoring.reversals import contest_reversals

    crs = pd.DataFrame({"crs": [0.8, 0.6, 0.4], "crs_low": [0.75, 0.5, 0.3], "crs_high": [0.85, 0.7, 0.45],
                        "auroc": [0.80, 0.90, 0.85], "in_leading_tier": [True, False, False],
                        "discrimination_error_box_low": [0.19, 0.09, 0.14],
                        "discrimination_error_box_high": [0.21, 0.11, 0.195]}, index=pd.Index(["a", "b", "c"]))
    contest = contest_of(crs)
    text = auroc_sentence(contest_reversals(crs, contest.contestants, None, crs), contest)
    assert text.startswith("Ranking by clean AUROC alone would have picked b; 2 of 3 pairs of candidates swap order")
    # b/a is held both ways (AUROC intervals [0.89, 0.91] and [0.79, 0.81] apart, CRS [0.5, 0.7] below [0.75, 0.85]);
    # c/a only in the point estimate: c's AUROC interval [0.805, 0.86] overlaps a's
    assert text.endswith("1 with confidence (b above a on AUROC, below on CRS).")
    tied = crs.assign(auroc=[0.9, 0.9, 0.9])
    text = auroc_sentence(contest_reversals(tied, contest.contestants, None, tied.drop(columns=[
        "discrimination_error_box_low", "discrimination_error_box_high"])), contest)
    assert text.startswith("Clean AUROC cannot pick a leader: a, b and c tie at the highest AUROC")
    assert contest_reversals(tied, contest.contestants).tau_text() == "\u2014 (undefined: every clean AUROC is tied)"
    same = crs.assign(auroc=[0.9, 0.8, 0.7])
    assert auroc_sentence(contest_reversals(same, contest.contestants), contest) == (
        "Clean AUROC picks the same lead; no pair of candidates swaps order between AUROC and CRS.")


def test_stability_tables_read_the_scoring_tables():
    from crs.report.stability import leave_one_out_table, reference_table

    references = pd.DataFrame({
        "leader": ["a", "a", "b"], "leader_changes": [False, False, True], "n_reversed": [0, 1, 2], "n_pairs": [3, 3, 3],
        "kendall_tau": [1.0, 1 / 3, -1 / 3], "max_rank_move": [0, 1, 2], "most_moved": ["", "c", "a"],
        "reference_rank": [1.0, 2.0, np.nan], "is_default": [False, False, True],
    }, index=pd.Index(["a", "c", "median"], name="reference"))  # fmt: skip
    loo = pd.DataFrame({"leader": ["b", None], "leader_changes": [True, None], "n_reversed": [1, None],
                        "n_pairs": [1, None], "kendall_tau": [-1.0, None], "max_rank_move": [1, None],
                        "most_moved": ["c", None], "note": ["", "the reference: not left out"]},
                       index=pd.Index(["a", "r"], name="left_out"))  # fmt: skip
    stability = SimpleNamespace(references=references, leave_one_out=loo)
    table = reference_table(stability)
    assert table.rows[0] == ("a", "a", "0 of 3", "1.00", "1")
    assert table.rows[2] == ("cohort median (this page)", "b", "2 of 3", "-0.33", "\u2014")
    rows = leave_one_out_table(stability).rows
    assert rows[0] == ("a", "b", "1 of 1", "1 (c)") and rows[1][3] == "the reference: not left out"


def test_corruption_grid_decodes_with_each_data_sets_own_fit(tmp_path, monkeypatch):
    """The grid shows the image as stage 1 decoded it: the data set's fit mode, not always padding."""
    from pathlib import Path

    from crs.data.images import load_image
    from crs.report import grids
    from crs.spec import DatasetEntry

    seen = []

    def recording_load(path, size, fit="pad"):
        seen.append(fit)
        return load_image(path, size, fit)

    monkeypatch.setattr(grids, "load_image", recording_load)
    data = tmp_path / "data"
    spec = SimpleNamespace(datasets=[
        DatasetEntry("derm", "synthetic", data, {"modality": "dermoscopy", "n_images": 20, "image_size": 16}),
        DatasetEntry("cxr", "synthetic", data, {"modality": "chest_xray", "n_images": 20, "image_size": 16,
                                                "fit": "squash"}),
    ])
    result = grids.corruption_grids(spec, Path(tmp_path / "figures"), {"derm": ["jpeg"], "cxr": ["jpeg"]})
    assert seen == ["crop", "squash"]  # dermoscopy's default, and the spec's own choice
    assert len(result.grids) == 2 and not result.notes


def test_the_report_reads_only_the_prediction_arrays_it_draws(tmp_path):
    """The reliability diagrams use the clean (and shift) arrays of each unit: the report reads those
    and leaves the corrupted conditions' arrays (most of a CheXpert-sized file) on disk."""
    from crs.evaluate.artifacts import RunFolder
    from crs.report import plots_runs
    from crs.report.style import encoder_styles

    folder = RunFolder(tmp_path / "run")
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=(2, 40)).astype(np.float32)
    labels = rng.integers(0, 3, 40)
    with folder.open_predictions("enc", "task") as writer:
        writer.add("clean_probs", probs)
        writer.add("clean_labels", labels)
        writer.add("corrupt__noise__1_probs", probs)
        writer.add("corrupt__noise__1_labels", labels)
    folder.commit_predictions("enc", "task")
    predictions = plots_runs.load_predictions(folder.predictions_dir, ["enc", "absent"], ["task"])
    assert list(predictions) == [("enc", "task")]
    path = plots_runs.reliability_diagrams(predictions, encoder_styles(["enc"]), tmp_path / "reliability.png")
    assert path is not None and path.is_file()
    arrays = predictions[("enc", "task")]
    assert sorted(arrays._read) == ["clean_labels", "clean_probs"]  # read when drawn, nothing else
    np.testing.assert_array_equal(arrays["clean_probs"], probs)
