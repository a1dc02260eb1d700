"""A specialist beside general encoders, end to end through `crs run` (docs/decisions/0038).

RETFound (random weights, 32 px) runs on the tiny fundus set only; pixel_stats and resnet18 run on
all three. Stage 1 caches RETFound in the fundus store only, stage 2 fits its fundus probes only,
the score ranks it in the fundus leaderboard and not overall, and the report says so.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.benchmark import Benchmark
from crs.cache.store import FeatureStore, store_path
from crs.cli.main import cli
from crs.scoring.result import score_records
from crs.scoring.settings import ScoreSettings

from tiny import write_tiny_spec

GENERAL = ("pixel_stats", "resnet18")
TASKS = ("derm", "fundus", "cxr")


@pytest.fixture(scope="module")
def specialist_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("specialists")
    path = write_tiny_spec(folder, encoders=(*GENERAL, "retfound"))
    text = path.read_text()
    text = text.replace('"retfound"]', '{ name = "retfound", datasets = ["fundus"] }]', 1)
    text = text.replace('reference_encoder = "pixel_stats"', 'reference_encoder = "median"', 1)
    path.write_text(text)
    result = CliRunner().invoke(cli, ["run", str(path), "-q"])
    assert result.exit_code == 0, result.output
    bench = Benchmark(path)
    score, where = bench.stored_score()
    assert where.startswith("stored score read")  # `crs run` stored the score, with its leaderboards
    return bench, score


def test_stages_run_only_the_declared_pairs(specialist_run):
    bench, _ = specialist_run
    spec = bench.spec
    for task in TASKS:
        cached = FeatureStore(store_path(spec.cache, task)).encoder_names()
        assert sorted(cached) == sorted([*GENERAL, "retfound"] if task == "fundus" else GENERAL)
    assert FeatureStore(store_path(spec.cache, "cxr-b")).encoder_names() == sorted(GENERAL)
    records = bench.records()
    pairs = set(map(tuple, records[["encoder", "task"]].drop_duplicates().to_numpy()))
    assert pairs == {(e, t) for t in TASKS for e in GENERAL} | {("retfound", "fundus")}


def test_the_specialist_is_ranked_in_its_task_and_not_overall(specialist_run):
    bench, score = specialist_run
    assert sorted(score.crs.index) == sorted(GENERAL)
    assert list(score.leaderboards) == list(TASKS)
    assert sorted(score.leaderboards["fundus"].crs.index) == sorted([*GENERAL, "retfound"])
    for task in ("derm", "cxr"):
        assert sorted(score.leaderboards[task].crs.index) == sorted(GENERAL)
    # the fundus leaderboard is the score of the fundus records alone; its ranks are competition ranks of its CRS
    records = bench.records()
    settings = ScoreSettings.from_config(bench.spec.score)
    alone = score_records(records[records["task"] == "fundus"], settings, run_folder=bench.folder)
    board = score.leaderboards["fundus"]
    pd.testing.assert_frame_equal(board.crs[["crs", "rank"]], alone.crs[["crs", "rank"]], check_dtype=False)
    crs = board.crs["crs"]
    assert all(board.crs.loc[name, "rank"] == 1 + int((crs > crs[name]).sum()) for name in crs.index)
    where = score.placement
    assert where.loc["retfound", "why"].startswith("fundus only: ranked in the fundus leaderboard, not overall")
    assert where.loc["retfound", "task_ranks"] == f"fundus: {int(board.crs.loc['retfound', 'rank'])}"
    assert not where.loc["retfound", "overall"]


def test_the_report_shows_each_leaderboard_and_who_is_ranked_where(specialist_run):
    from crs.evaluate.contest import contest_of_score

    bench, score = specialist_run
    output = bench.spec.output
    markdown = (output / "report.md").read_text()
    overall = markdown.split("## Leaderboard\n", 1)[1].split("\n## ", 1)[0]
    assert "retfound" not in overall and all(f"| {name} |" in overall for name in GENERAL)
    assert "Not ranked overall, by the spec's design: retfound (fundus only)" in markdown
    per_task = markdown.split("## Leaderboards per task\n", 1)[1].split("\n## ", 1)[0]
    for task in TASKS:
        table = per_task.split(f"### Leaderboard: {task}\n", 1)[1].split("\n### ", 1)[0]
        rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| CRS rank")]
        ranked = {row.split(" | ")[1]: row.split(" | ")[0].strip("| ") for row in rows}
        contest = contest_of_score(score.leaderboards[task])  # ranks among the contestants, "1–k" for a shared lead
        expected = {str(name): contest.rank_label(str(name)) for name in score.leaderboards[task].crs.index}
        assert ranked == expected
    who = per_task.split("### Who is ranked where\n", 1)[1].split("\n### ", 1)[0]
    assert "| retfound | fundus | not ranked | fundus: " in who
    assert "fundus only: ranked in the fundus leaderboard, not overall" in who
    fundus_rank = contest_of_score(score.leaderboards["fundus"]).rank_label("retfound")
    assert f"### {fundus_rank}. retfound, fundus leaderboard (" in markdown  # its card, with its fundus rank
    html = (output / "report.html").read_text()
    assert 'href="#tasks"' in html and "<h3>Leaderboard: fundus</h3>" in html and "Who is ranked where" in html
    # summary.json carries the same leaderboards and placement
    summary = json.loads(bench.folder.score_summary_path.read_text())
    assert [board["task"] for board in summary["leaderboards"]] == list(TASKS)
    fundus = next(board for board in summary["leaderboards"] if board["task"] == "fundus")
    assert {row["encoder"]: row["rank"] for row in fundus["ranking"]} == {
        str(name): int(rank) for name, rank in score.leaderboards["fundus"].crs["rank"].items()}
    retfound = next(row for row in summary["placement"] if row["encoder"] == "retfound")
    assert retfound["overall"] is False and retfound["overall_rank"] is None
    assert np.isfinite(score.leaderboards["fundus"].crs.loc["retfound", "crs"])
