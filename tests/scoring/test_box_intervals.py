"""From the user's side (issue 40 items 1 and 5): ``[score] interval = "box"`` gives the projected box for every
interval (the axes' also under the default "adaptive", decision 0181), and ``[score] interval = "percentile"``
gives the paper's percentile interval, labelled as measured."""

from __future__ import annotations

import numpy as np
import pytest

from crs.scoring.result import score_records
from crs.scoring.settings import ScoreInputError, ScoreSettings
from crs.spec import SpecError, load_spec


def test_the_box_crs_interval_is_the_projected_box(tiny_run):
    spec, _stats, records, default = tiny_run
    score = score_records(records, ScoreSettings.from_config(spec.score, interval="box"), run_folder=spec.output)
    boot = score.bootstrap.table
    # the same replicates and box as the default score, which prints only its CRS interval otherwise
    assert np.allclose(default.bootstrap.table["crs_box_low"], boot["crs_box_low"])
    assert score.summary()["interval"]["method"] == "box"
    assert np.array_equal(score.crs["crs_low"], boot["crs_box_low"].reindex(score.crs.index))
    assert np.array_equal(score.crs["crs_high"], boot["crs_box_high"].reindex(score.crs.index))
    assert (score.crs["crs_low"] <= score.crs["crs"] + 1e-12).all() and (score.crs["crs"] <= score.crs["crs_high"] + 1e-12).all()
    # the box holds the point errors, and its projection the point's worst axis and dominance
    for axis in score.point.axes:
        assert (boot[f"{axis}_error_box_low"] <= score.point.errors[axis] + 1e-12).all()
        assert (score.point.errors[axis] <= boot[f"{axis}_error_box_high"] + 1e-12).all()
    for part in ("dominance", "worst_axis", "balance"):
        assert (boot[f"{part}_box_low"] <= score.point.table[part] + 1e-12).all()
        assert (score.point.table[part] <= boot[f"{part}_box_high"] + 1e-12).all()
    found = score.reversal_uncertainty
    assert found.count_low <= score.reversals.n_reversed <= found.count_high
    text = score.format()
    assert "extreme corners of a simultaneous box" in text and "percentile bounds in crs_percentile_low" in text


def test_the_percentile_interval_stays_available_and_is_labelled_as_measured(tiny_run):
    from crs.report.tables import interval_label

    spec, _stats, records, score = tiny_run
    settings = ScoreSettings.from_config(spec.score, interval="percentile")
    percentile = score_records(records, settings, run_folder=spec.output)
    boot = percentile.bootstrap.table
    assert percentile.summary()["interval"]["method"] == "percentile"
    assert np.allclose(percentile.crs["crs_low"], boot["crs_percentile_low"].reindex(percentile.crs.index))
    # the same replicates as the default score: its percentile columns are these bounds
    assert np.allclose(score.bootstrap.table["crs_percentile_low"], boot["crs_low"])
    assert "measured" in interval_label(percentile.bootstrap) and "measured" not in interval_label(score.bootstrap)
    measured = percentile.summary()["interval"]["measured_coverage"]["crs"]["worst_encoder"]
    assert measured < 0.93 and score.summary()["interval"]["measured_coverage"]["crs"]["worst_encoder"] >= 0.93


def test_the_spec_chooses_the_interval_and_a_wrong_one_is_named(tmp_path):
    from tiny import write_tiny_spec

    path = write_tiny_spec(tmp_path)
    text = path.read_text()
    path.write_text(text.replace("[score]\n", '[score]\ninterval = "percentile"\n', 1))
    assert ScoreSettings.from_config(load_spec(path).score).interval == "percentile"
    path.write_text(text.replace("[score]\n", '[score]\ninterval = "bca"\n', 1))
    with pytest.raises(SpecError, match="interval must be 'adaptive', 'box' or 'percentile'"):
        load_spec(path)
    assert ScoreSettings.from_config(load_spec(write_tiny_spec(tmp_path / "again")).score).interval == "adaptive"
    with pytest.raises(ScoreInputError, match="interval must be one of"):
        ScoreSettings(interval="bca")
