"""Zero-shot as a user meets it (issue 39, items 3, 4, 5 and 18): `crs probe`, `crs score`, `crs report`.

Two planted binary tasks, D = 64 features ``x = +-mu e1 + N(0, I)`` (mu = 1.2: the best linear rule,
along e1, has AUROC Phi(sqrt(2) mu) = 0.955), 600 training rows, fractions 1 %, 10 %, 100 % (6, 60 and
600 labels). A probe from n labels has AUROC about Phi(sqrt(2) mu c), c = mu / sqrt(mu^2 + 4 (D - 1) / n):
0.63, 0.80 and 0.93. Imported encoders (all on the same features), each with its own prototypes:

- ``vlm_mid`` (both tasks): prototypes along e1 + 1.77 e2 (cos 0.49 to the truth): AUROC 0.80;
- ``vlm_bad`` (both tasks): prototypes reversed along e1: AUROC 1 - 0.955 = 0.045, worse than chance,
  so the probe wins already at the smallest fraction (the crossover is "at most 1 %");
- ``vlm_best`` (task ``two`` only, a specialist): prototypes along e1, the best rule: no probe fraction
  beats it (the crossover is "never"), and it is not ranked overall (decision 0038);
- ``img_only`` (both tasks): no prototypes, image-only: probed, not scored zero-shot.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cache.imports import import_features, write_table_from_spec
from crs.cache.prototypes import import_prototypes
from crs.cli.main import cli

D, MU, N_TRAIN, N_VAL, N_TEST = 64, 1.2, 600, 400, 1000
TASKS = ("one", "two")

SPEC = """
name = "zero-shot-user"
cache = "{root}/cache"
output = "{root}/out"
encoders = ["vlm_mid", "vlm_bad", {{ name = "vlm_best", datasets = ["two"] }}, "img_only"]

[extract]
corruptions = "none"

[probe]
backend = "torch"
label_fractions = [0.01, 0.1, 1.0]
seeds = [0]
Cs = [0.1, 1.0]
min_per_class = 3
jobs = 1

[score]
reference_encoder = "img_only"
n_boot = 50
zero_shot = true
"""

DATASET = """
[[datasets]]
name = "{name}"
loader = "folder"
root = "{root}/{name}"
options = {{ csv = "labels.csv", id_column = "id", image_column = "path", label_columns = "label", kind = "multiclass", modality = "dermoscopy", group_column = "group", split_column = "split", class_names = ["benign", "malignant"] }}
"""


def _direction(*coordinates: float) -> np.ndarray:
    direction = np.zeros(D)
    direction[: len(coordinates)] = coordinates
    return direction / np.linalg.norm(direction)


def _prototypes(path, direction: np.ndarray) -> None:
    np.savez(path, positive=np.stack([-direction, direction]).astype(np.float32), scale=100.0, link="softmax",
             prompt_set="planted")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("zero_shot_user")
    spec = root / "spec.toml"
    spec.write_text(SPEC.format(root=root) + "".join(DATASET.format(name=t, root=root) for t in TASKS))
    for seed, task in enumerate(TASKS):
        rng = np.random.default_rng(2026 + seed)
        n = N_TRAIN + N_VAL + N_TEST
        y = rng.integers(0, 2, n)
        features = rng.standard_normal((n, D))
        features[:, 0] += np.where(y == 1, MU, -MU)
        ids = np.array([f"img{i:05d}" for i in range(n)])
        splits = np.array(["train"] * N_TRAIN + ["val"] * N_VAL + ["test"] * N_TEST)
        (root / task).mkdir()
        pd.DataFrame({"id": ids, "path": [f"{i}.png" for i in ids], "label": np.array(["benign", "malignant"])[y],
                      "group": ids, "split": splits}).to_csv(root / task / "labels.csv", index=False)
        write_table_from_spec(spec, task)
        np.savez(root / f"{task}.npz", features=features.astype(np.float32), ids=ids)
        protos = {"vlm_mid": _direction(1.0, 1.77), "vlm_bad": -_direction(1.0)}
        if task == "two":
            protos["vlm_best"] = _direction(1.0)
        for encoder in ("vlm_mid", "vlm_bad", "vlm_best", "img_only"):
            if encoder == "vlm_best" and task != "two":
                continue
            import_features(root / "cache", task, encoder, root / f"{task}.npz")
        for encoder, direction in protos.items():
            _prototypes(root / f"{encoder}_{task}.npz", direction)
            import_prototypes(root / "cache", task, encoder, root / f"{encoder}_{task}.npz")
    runner = CliRunner()
    probed = runner.invoke(cli, ["probe", str(spec), "-q"])
    scored = runner.invoke(cli, ["score", str(spec)]) if probed.exit_code == 0 else None
    reported = runner.invoke(cli, ["report", str(spec)]) if scored is not None and scored.exit_code == 0 else None
    return {"root": root, "probe": probed, "score": scored, "report": reported}


def _score_json(run) -> dict:
    assert run["score"] is not None and run["score"].exit_code == 0, run["score"] and run["score"].output
    return json.loads((run["root"] / "out" / "zero_shot" / "score.json").read_text())


def _comparison(run, encoder: str, task: str) -> dict:
    return next(r for r in _score_json(run)["comparison"] if r["encoder"] == encoder and r["task"] == task)


def test_an_imported_image_only_encoder_is_probed_and_left_out_of_zero_shot_in_one_line(run):
    result = run["probe"]
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "img_only" in line]
    assert len(lines) == 1 and "image-only" in lines[0], result.output
    records = pd.read_parquet(run["root"] / "out" / "zero_shot" / "records.parquet")
    assert set(records["encoder"]) == {"vlm_mid", "vlm_bad", "vlm_best"}
    probes = pd.read_parquet(run["root"] / "out" / "records.parquet")
    assert "img_only" in set(probes["encoder"])  # still probed


def test_never_stays_never_in_score_json_and_the_report(run):
    row = _comparison(run, "vlm_best", "two")
    assert row["zero_shot_auroc"] > row["probe_auroc_1"]  # planted: the best rule; the probe estimates it
    assert row["crossover_fraction"] == "never" and row["crossover_labels"] == "never"
    assert "never" in {row["crossover_low"], row["crossover_high"]}
    csv = pd.read_csv(run["root"] / "out" / "zero_shot" / "comparison.csv").set_index(["encoder", "task"])
    assert np.isinf(csv.loc[("vlm_best", "two"), "crossover_fraction"])
    report = (run["root"] / "out" / "report.md").read_text()
    section = report[report.index("Zero-shot against the probes"):]
    line = next(line for line in section.splitlines() if line.startswith("| vlm_best | two"))
    assert "never" in line and "n/a [n/a, n/a]" not in line, line


def test_a_one_task_specialist_is_not_ranked_in_the_zero_shot_leaderboard(run):
    score = _score_json(run)
    assert [row["encoder"] for row in score["leaderboard"]] == ["vlm_mid", "vlm_bad"]
    (left,) = score["not_ranked"]
    assert left["encoder"] == "vlm_best" and left["tasks"] == "two"
    report = (run["root"] / "out" / "report.md").read_text()
    section = report[report.index("Zero-shot or a probe?"):]
    assert "Not ranked overall, by the spec's design: vlm_best" in section
    board = section[section.index("Zero-shot leaderboard"):section.index("Zero-shot against the probes")]
    assert "| vlm_best |" not in board


def test_the_terminal_says_how_zero_shot_did(run):
    output = run["score"].output
    assert "zero-shot" in output
    lines = [line for line in output.splitlines() if line.strip().startswith("zero-shot")]
    text = "\n".join(lines)
    assert "vlm_mid" in text and "vlm_bad" in text and "vlm_best" in text, output
    assert "worse than chance" in text and "at most 1 %" in text and "never" in text, output
    assert "not ranked overall" in text, output


def test_the_page_reads_crossovers_labels_and_chance_in_auroc(run):
    report = (run["root"] / "out" / "report.md").read_text()
    section = report[report.index("Zero-shot or a probe?"):]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    assert "1 - AUROC" not in section and "1 - robust AUROC" not in section
    bad = _comparison(run, "vlm_bad", "one")
    assert bad["zero_shot_auroc"] < 0.5 and bad["crossover_fraction"] == 0.01
    line = next(line for line in section.splitlines() if line.startswith("| vlm_bad | one"))
    assert "worse than chance" in line and "at most 1 %" in line and "0.010" not in line, line
    assert f"{int(bad['crossover_labels'])} labels" in line, line
    mid = _comparison(run, "vlm_mid", "one")
    line = next(line for line in section.splitlines() if line.startswith("| vlm_mid | one"))
    assert "worse than chance" not in line
    assert f"{int(mid['crossover_labels'])} labels" in line, line
    board = section[section.index("Zero-shot leaderboard"):section.index("Zero-shot against the probes")]
    bad_row = next(line for line in board.splitlines() if line.startswith("| vlm_bad"))
    assert "worse than chance" in bad_row, bad_row
