"""A named reference is the yardstick, not a contestant (issue 40 items 3 and 4), from the Python API: it
stays in the table as a baseline row at its CRS but leaves P(rank 1), the rank sets, the tier and the
leader; ``reference_competes`` restores the paper's table; the headline says whom to build on and only
what the simultaneous comparisons support."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from crs.scoring.result import ScoreResult, score_records

from cohorts import cohort_records


@pytest.fixture(scope="module")
def scored():
    """Five encoders; e00, the named reference, has the highest point CRS (0.5 on every axis by definition,
    so a perfect balance and a worst axis of 0.5), as resnet18 had in `make demo`."""
    records = cohort_records(5, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paper = score_records(records, "e00", n_boot=200, reference_competes=True)
        found = score_records(records, "e00", n_boot=200)
        median = score_records(records, n_boot=200)
    return paper, found, median


def test_the_paper_table_crowns_the_reference_the_default_does_not(scored):
    paper, found, _ = scored
    assert paper.bootstrap.leader == "e00" and paper.crs.loc["e00", "rank"] == 1  # the planted symptom
    assert found.bootstrap.leader != "e00" and "e00" not in found.bootstrap.leading_tier
    row = found.crs.loc["e00"]
    assert row["crs"] == paper.crs.loc["e00", "crs"] and row["rank"] == 1  # still a row at its CRS
    assert not row["competes"] and not row["in_leading_tier"] and np.isnan(row["p_rank1"])
    assert pd.isna(row["contest_rank"]) and pd.isna(row["rank_low"]) and pd.isna(row["rank_high"])
    others = found.crs.drop(index="e00")
    assert others["competes"].all() and others["p_rank1"].sum() == pytest.approx(1.0)
    assert sorted(others["contest_rank"].astype(int)) == [1, 2, 3, 4]
    assert found.bootstrap.leader == others["contest_rank"].astype(int).idxmin()
    assert (others["rank_low"] <= others["contest_rank"]).all() and (others["contest_rank"] <= others["rank_high"]).all()
    for column in ("crs", "crs_low", "crs_high", "dominance", "balance", "worst_axis"):  # only the contest moves
        pd.testing.assert_series_equal(found.crs[column], paper.crs[column])


def test_reference_competes_and_the_median_keep_every_encoder_in_the_contest(scored):
    paper, _, median = scored
    for result in (paper, median):
        assert result.crs["competes"].all()
        assert (result.crs["contest_rank"].astype(int) == result.crs["rank"]).all()
        assert result.crs["p_rank1"].sum() == pytest.approx(1.0)
    assert "competes as in the paper's table" in paper.format()


def test_the_headline_names_the_leader_and_only_supported_comparisons(scored):
    _, found, _ = scored
    text = found.format()
    lines = text.splitlines()
    leader = found.bootstrap.leader
    if found.crs.loc["e00", "crs"] > found.crs.loc[leader, "crs"]:  # issue 46 item 7: said first, then the decision
        assert lines[0].startswith("No candidate") and "reference e00" in lines[0]
        first = next(line for line in lines if line.startswith("Among the candidates"))
        assert first.startswith(f"Among the candidates, build on {leader}") or \
            first.startswith(f"Among the candidates, build on any of {leader}")
        assert "e00" not in first
    else:
        # the leader first: alone, or heading the tier the simultaneous statements leave (decision 0166)
        first = lines[0]
        assert first.startswith(f"Build on {leader}") or first.startswith(f"Build on any of {leader}")
        assert "e00" not in first
    assert "e00 is the reference: a baseline row at 0.5" in text
    table = found.tables()["comparisons"]
    rivals = [name for name in found.crs.index if name not in ("e00", leader)]
    mine = table[(table["first"] == leader) | (table["second"] == leader)]
    decided = mine[mine["better"] != ""]
    if "worse than no other encoder on any axis" in first:  # check the claim against the intervals
        for rival in rivals:
            pair = decided[(decided["first"] == rival) | (decided["second"] == rival)]
            assert (pair["better"] == leader).any() and not (pair["better"] == rival).any()
    for _, row in decided[decided["better"] == leader].iterrows():  # every confident win has an interval off 0
        assert row["high"] < 0 if row["first"] == leader else row["low"] > 0


def test_comparisons_are_stored_and_read_back(scored):
    _, found, _ = scored
    tables, summary = found.tables(), found.summary()
    assert {"surely_dominates", "possibly_dominates", "confident_pareto"} <= set(found.crs.columns)
    assert summary["comparisons"]["confident_pareto_set"] == list(found.crs.index[found.crs["confident_pareto"]])
    restored = {name: table.set_index([("index" if n is None else n) for n in names]).rename_axis(names)
                for name, names in summary["stored"]["table_index"].items() for table in [tables[name]]}
    again = ScoreResult.from_stored(restored, summary)
    assert again.comparisons is not None
    np.testing.assert_allclose(again.comparisons.high, found.comparisons.high)
    np.testing.assert_array_equal(again.comparisons.surely_dominates, found.comparisons.surely_dominates)
    assert again.headline_sentences() == found.headline_sentences()


def test_a_spec_sets_reference_competes_and_a_wrong_value_says_how():
    from crs.scoring.settings import ScoreSettings
    from crs.spec import ScoreConfig, SpecError

    assert ScoreSettings.from_config(ScoreConfig(reference_encoder="e00", reference_competes=True)).reference_competes
    assert not ScoreSettings.from_config(ScoreConfig(reference_encoder="e00")).reference_competes
    with pytest.raises(SpecError, match="reference_competes"):
        ScoreConfig(reference_competes="yes")  # type: ignore[arg-type]


def test_stability_names_the_same_leader_as_the_headline(scored):
    """Each reference choice's leader is over the encoders other than that reference, so the stability
    section no longer says that every encoder leads when it is the reference."""
    paper, found, _ = scored
    assert found.stability.weights.top == found.bootstrap.leader != "e00"
    assert paper.stability.weights.top == "e00"
    leaders = found.stability.references["leader"]
    assert all(leader != choice for choice, leader in leaders.items())  # no choice crowns its own reference
    kept = found.stability.summary()["leader_unchanged_under_references"]
    assert kept > paper.stability.summary()["leader_unchanged_under_references"]
