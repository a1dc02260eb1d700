"""Two specs on one cache (issue 34 items 3 and 4): the demo, then a specialists spec.

The demo-like spec caches severities 1, 2 and 3; the specialists-like spec names 1 and 3 and adds a
specialist (vit_tiny, fundus only). Stage 2 and the score of the second spec must use exactly its
own conditions, whatever else the shared cache holds (docs/decisions/0050), and ``crs plan`` must
plan exactly what ``crs extract`` runs: only the declared (encoder, data set) pairs, and nothing to
go after a complete run (docs/decisions/0051).
"""

from __future__ import annotations

import pytest

from crs.benchmark import Benchmark
from crs.spec import load_spec

from tiny import write_tiny_spec

GENERAL = ("pixel_stats", "resnet18")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared_cache")
    cache, data = root / "cache", root / "data"
    demo_path = write_tiny_spec(root / "demo", encoders=GENERAL, cache=cache, data=data)
    demo_path.write_text(demo_path.read_text().replace("severities = [1, 3]", "severities = [1, 2, 3]", 1))
    demo = Benchmark(demo_path)
    demo.extract(progress=False)
    demo.probe(progress=False)
    demo.score()

    special_path = write_tiny_spec(root / "special", encoders=(*GENERAL, "vit_tiny"), cache=cache, data=data)
    text = special_path.read_text()
    text = text.replace('"vit_tiny"]', '{ name = "vit_tiny", datasets = ["fundus"] }]', 1)
    text = text.replace('reference_encoder = "pixel_stats"', 'reference_encoder = "median"', 1)
    special_path.write_text(text)
    special = Benchmark(load_spec(special_path))
    plan_before = special.plan()
    stats = special.extract(progress=False)
    plan_after = special.plan()
    return demo, special, plan_before, stats, plan_after


def test_the_second_spec_probes_and_scores_only_its_own_conditions(shared_cache):
    _, special, *_ = shared_cache
    records = special.probe(progress=False).records
    corrupted = records[records["condition"] == "corrupt"]
    assert set(corrupted["severity"]) == {1, 3}  # the demo's severity 2 is in the cache, not in this spec
    assert set(corrupted["corruption"]) == {"gaussian_noise", "jpeg"}
    score = special.score()  # failed before: "no run record for encoder 'vit_tiny' at gaussian_noise/2"
    assert sorted(score.leaderboards["fundus"].crs.index) == sorted([*GENERAL, "vit_tiny"])


def test_the_demo_still_scores_its_own_severities_after_the_second_spec(shared_cache):
    demo, special, *_ = shared_cache
    special.probe(progress=False)
    records = demo.probe(progress=False).records
    assert set(records.loc[records["condition"] == "corrupt", "severity"]) == {1, 2, 3}
    demo.score()


def test_a_condition_the_spec_names_but_the_cache_lacks_is_refused_in_one_line(shared_cache, tmp_path):
    demo, *_ = shared_cache
    path = tmp_path / "spec.toml"
    path.write_text(demo.spec.source.read_text().replace("severities = [1, 2, 3]", "severities = [1, 5]", 1))
    wider = Benchmark(path, output=tmp_path / "out")
    with pytest.raises(ValueError, match=r"no features for .*corrupt/gaussian_noise/5.*crs extract") as error:
        wider.probe(progress=False)
    assert "\n" not in str(error.value)


def test_the_plan_holds_exactly_the_pairs_extract_runs(shared_cache):
    _, special, plan_before, stats, _ = shared_cache
    pairs = {(row.dataset, row.encoder) for row in plan_before.rows}
    declared = {(task, encoder) for task, encoders in special.spec.coverage.items() for encoder in encoders}
    declared |= {("cxr-b", encoder) for encoder in special.spec.encoders_on("cxr")}
    assert pairs == declared  # before: vit_tiny planned on derm, cxr and cxr-b too
    assert plan_before.passes == stats.passes_planned
    assert plan_before.cached_passes == stats.passes_cached_at_start
    assert plan_before.passes - plan_before.cached_passes == stats.total_forward


def test_nothing_to_go_after_a_complete_run(shared_cache):
    demo, _, _, _, plan_after = shared_cache
    assert plan_after.passes > 0
    assert plan_after.passes == plan_after.cached_passes  # before: the specialist's undeclared pairs "to go"
    assert all(row.passes_to_go == 0 for row in plan_after.rows)
    assert demo.plan().cached_passes == demo.plan().passes


def test_compare_of_two_specs_says_so_in_its_first_line(shared_cache):
    """Issue 34 item 11: the first line of `crs compare` on runs of different specs was 4,185 characters
    of broken columns; it now says the specs differ, where, and names at most three broken parts."""
    from crs.evaluate.compare import compare_run_folders

    demo, special, *_ = shared_cache
    demo.probe(progress=False)
    special.probe(progress=False)
    comparison = compare_run_folders(demo.folder, special.folder, score=False)
    line = comparison.verdict()
    assert line.startswith("the two runs were made with different specs (")
    assert "encoders" in line and "extract.severities" in comparison.spec_differences
    assert "output" not in comparison.spec_differences and "cache" not in comparison.spec_differences
    assert len(line) < 400 and "\n" not in line
    same = compare_run_folders(demo.folder, demo.folder, score=False)
    assert same.spec_differences == () and same.verdict().startswith("reproduced:")
