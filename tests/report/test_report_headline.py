"""The report's headline and provenance box (issue 34 item 9): a leading tier of several encoders is
named as a tier, a named reference is a baseline row and never the leader (issue 40), a competing reference
that leads or a leader that most reference choices change is a caution, the page says the CRS is relative, links "Who does it fail?" and shows
which crs, spec, cache, machine and BLAS kernel made it."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from crs.report.headline import headline, headline_details
from crs.report.run_provenance import provenance_rows, spec_hash
from crs.report.tables import leaderboard


def _score(real, reference: str, leader_changes: int = 0, n_references: int = 3, competes: bool = True,
           tier: list[str] | None = None):
    """The real tiny score with another reference name, every encoder competing (as under the median reference
    or reference_competes), the leading tier of our choosing and a stability summary of our choosing."""
    summary = dict(real.stability.summary(), n_references=n_references,
                   leader_unchanged_under_references=n_references - leader_changes)
    stability = SimpleNamespace(references=real.stability.references, summary=lambda: summary)
    crs = real.crs.assign(competes=True)
    if tier is not None:
        crs["in_leading_tier"] = [str(name) in tier for name in crs.index]
    return SimpleNamespace(crs=crs, bootstrap=real.bootstrap, reversals=real.reversals, reference=reference,
                           stability=stability, reversal_uncertainty=None, comparisons=real.comparisons,
                           settings=SimpleNamespace(reference_competes=competes, median_reference=reference == "median"))


def test_a_tier_of_several_leads_with_the_tier(tiny_run):
    _, _, _, real = tiny_run
    names = [str(name) for name in real.crs.sort_values("crs", ascending=False).index]
    text = headline(_score(real, "median", tier=names))
    assert text.startswith(f"Build on any of {names[0]} or {names[1]}: the data do not separate them")
    assert headline(_score(real, "median", tier=names[:1])).startswith(f"Build on {names[0]}")


def test_the_reference_is_a_baseline_row_and_never_the_leader(tiny_run):
    """issue 40: the tiny run's reference, pixel_stats, has the highest point CRS (0.5 on every axis); by
    default it is the baseline row and the decision builds on the other encoder with no caution; issue 46
    item 7: the headline first says that no candidate beats the reference."""
    _, _, _, real = tiny_run
    board = leaderboard(real)
    assert str(board.iloc[0]["encoder"]) == real.reference == "pixel_stats"  # first by point CRS
    text = headline(real, board)
    assert text.startswith("No candidate") and "reference pixel_stats" in text.split(".")[0]
    assert "Among the candidates, build on resnet18" in text and "Caution" not in text
    assert "pixel_stats is the reference: a baseline row at 0.5" in headline_details(real)  # under the table
    assert "pixel_stats has the highest" not in text
    row = board.iloc[0]
    assert not row["competes"] and row["tier"] == "" and board.iloc[1]["tier"] == "leading"


def test_a_competing_reference_that_leads_is_a_caution(tiny_run):
    _, _, _, real = tiny_run
    order = [str(name) for name in real.crs.sort_values("crs", ascending=False).index]
    first, other = order[0], order[1]
    text = headline(_score(real, first))
    assert f"Caution: the first-ranked encoder, {first}, is the reference itself" in text
    assert "is the reference itself" not in headline(_score(real, other))
    assert f"{other} is the reference (0.5 on every axis by definition) and competes" in headline_details(
        _score(real, other))


def test_a_leader_that_changes_under_most_references_is_a_caution(tiny_run):
    _, _, _, real = tiny_run
    assert "the leader changes under 4 of 5 reference choices" in headline(_score(real, "median", 4, 5))
    assert "reference choices (each" not in headline(_score(real, "median", 2, 5))  # 2 of 5: not most


def test_provenance_rows_read_the_run_records(tiny_run):
    spec, *_ = tiny_run
    from crs.evaluate.artifacts import RunFolder

    provenance = RunFolder(spec.output).provenance()
    rows = dict(provenance_rows(provenance))
    assert rows["spec hash"] == f"sha256 {spec_hash(provenance['spec'])}"
    assert re.search(r"pixel_stats: cxr [0-9a-f]{10}, derm [0-9a-f]{10}, fundus [0-9a-f]{10}", rows["cache fingerprints"])
    assert rows["BLAS kernel (stage 2)"] != "not recorded (run records of an older crs)"
    assert "cores" in rows["machine (stage 2)"] and rows["crs version"]
    moved = dict(provenance["spec"], output="/elsewhere", cache="/other")
    assert spec_hash(moved) == spec_hash(provenance["spec"])  # where a run lies is not what it computed
    old = dict(provenance_rows({}))
    assert old["cache fingerprints"].startswith("not recorded")


def test_the_page_links_who_does_it_fail_and_shows_the_provenance_box(tiny_run, tmp_path):
    from crs.report import write_report

    spec, _, records, score = tiny_run
    path = write_report(score, records, tmp_path, spec=spec, predictions_dir=Path(spec.output) / "predictions",
                        draw_corruption_grids=False)
    page = path.read_text()
    nav = page.split("<nav>", 1)[1].split("</nav>", 1)[0]
    assert '<a href="#subgroups">Who does it fail?</a>' in nav and 'id="subgroups"' in page
    from crs.report.tables import interval_label, is_case_level
    from crs.scoring.intervals import SUBGROUP_INTERVALS, coverage_sentence

    if getattr(score, "subgroups", None) is not None and is_case_level(score.bootstrap):  # issue 30 item 6
        assert coverage_sentence(score.bootstrap.alpha, SUBGROUP_INTERVALS) in page
        if score.subgroups["scored"].astype(bool).any():  # a plot per scored attribute, its caption labelled
            assert f"with {interval_label(score.bootstrap, SUBGROUP_INTERVALS)} patient-level intervals" in page
    box = page.split('<aside class="provenance" id="provenance">', 1)[1].split("</aside>", 1)[0]
    for label in ("crs version", "spec hash", "cache fingerprints", "machine (stage 2)", "BLAS kernel (stage 2)"):
        assert f"<dt>{label}</dt>" in box
    for data_set in ("derm", "fundus", "cxr", "cxr-b"):  # how each test set was drawn and resampled (decision 0085)
        assert f"<dt>test set {data_set}</dt>" in box
    assert "another reference can reorder the encoders" in page
    opening = page.split('<p class="lede">', 1)[1].split("</p>", 1)[0]
    # issue 46 item 7: the reference's win is said first, as firmly as the headline's one family allows (0166)
    below = set(score.summary()["headline_family"]["below_reference"])
    assert opening.startswith("No candidate beats the reference pixel_stats" if "resnet18" in below
                              else "No candidate&#39;s point Clinical Reliability Score reaches the reference pixel_stats")
    assert "build on resnet18" in opening and "pixel_stats has the highest" not in page  # issue 40
    assert "build on resnet18" in (Path(path).parent / "report.md").read_text()
    markdown = (tmp_path / "report.md").read_text()
    assert "## Provenance" in markdown and isinstance(pd.DataFrame, type)
