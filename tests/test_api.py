"""The public API: ``crs.__all__`` resolves, ``import crs`` stays cheap, and docs/api.md runs as written."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

import crs
from crs.benchmark import Benchmark, RunOutcome
from crs.encoders import create
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.records import crs_version
from crs.scoring.result import ScoreResult

from tiny import write_tiny_spec

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
README = DOC.parent.parent / "README.md"


def test_every_public_name_resolves_to_its_home():
    assert sorted(crs.__all__) == sorted([
        "Benchmark", "RunOutcome", "load_spec", "Spec", "create_encoder", "fit_probes", "score_records",
        "ScoreResult", "RunFolder", "__version__",
    ])
    assert crs.Benchmark is Benchmark and crs.RunOutcome is RunOutcome and crs.ScoreResult is ScoreResult
    assert crs.create_encoder is create and crs.RunFolder is RunFolder
    namespace: dict = {}
    exec("from crs import *", namespace)
    assert set(crs.__all__) <= set(namespace)


def test_unknown_attribute_is_an_attribute_error():
    try:
        crs.not_a_thing  # noqa: B018
    except AttributeError as error:
        assert "not_a_thing" in str(error)
    else:
        raise AssertionError("crs.not_a_thing must raise AttributeError")


def test_version_is_the_installed_one_everywhere():
    assert crs.__version__ == importlib.metadata.version("crs") == crs_version()


def test_import_crs_loads_neither_torch_nor_pandas():
    code = "import sys, crs; crs.__version__; print(sorted(m for m in ('torch', 'pandas', 'sklearn') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (what "the folder did not change" means)."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_api_doc_and_readme_run_as_written_on_the_tiny_spec(tiny_run, tmp_path, monkeypatch, capsys):
    """Each python block of docs/api.md, in order, in one namespace, then the README's; only the spec
    and output paths change."""
    spec, _, _, _ = tiny_run
    tiny = write_tiny_spec(tmp_path, cache=spec.cache, data=spec.datasets[0].root, output=tmp_path / "unused")
    output = tmp_path / "notebook"
    monkeypatch.chdir(tmp_path)
    text = DOC.read_text()
    blocks = _code_blocks(text)
    assert len(blocks) == 4
    assert text.count("examples/quickstart.toml") >= 1 and text.count("crs-out/notebook") >= 3
    namespace: dict = {}
    published: dict[str, bytes] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for number, block in enumerate(blocks):
            if number == 1:  # the run is published: exploring from here on must not change its folder
                published = _files(output)
            code = block.replace("examples/quickstart.toml", str(tiny)).replace("crs-out/notebook", str(output))
            exec(compile(code, str(DOC), "exec"), namespace)
    # the recipes print no raw warning from crs's own source (issue 39 item 15: score_records' seed-only one)
    assert not [str(w.message) for w in caught if f"{Path(crs.__file__).parent}" in str(w.filename)]
    printed = capsys.readouterr().out
    # exploring other weights left the published folder byte for byte as it was (issue 34 item 6)
    assert published and _files(output) == published
    explored_folder = tmp_path / "crs-out" / "worst-axis-x2"
    assert RunFolder(explored_folder).read_score_summary()["settings"]["weights"] != \
        RunFolder(output).read_score_summary()["settings"]["weights"]
    assert (explored_folder / "report.html").exists()
    with pytest.raises(ValueError, match=r"other \[score\] settings \(weights\).*overwrite") as refused:
        namespace["variant"].score()
    assert "\n" not in str(refused.value) and _files(output) == published
    # the whole run: the cache was reused, probes fitted, a page written
    assert namespace["extracted"].total_forward == 0
    assert namespace["probed"].n_probes == 2 * 3 * 2 * 2
    assert namespace["page"] == output / "report.html" and namespace["page"].exists()
    assert list(namespace["leaderboard"]["rank"]) == [1, 2]
    assert "Clinical Reliability Score" in printed
    # the folder scored again without the TOML gives the same CRS
    pd.testing.assert_frame_equal(namespace["rescored"].crs, namespace["scored"].crs)
    assert namespace["again"].spec.output == output
    # the explored score is the score of the changed weights
    assert namespace["explored"].settings.weights != namespace["scored"].settings.weights
    assert sorted(namespace["explored"].crs.index) == sorted(namespace["scored"].crs.index)
    # the pieces
    assert namespace["probes"].predict_proba(namespace["features"][namespace["val"]]).shape == (2, 100, 3)
    assert tuple(namespace["encoder"].embed(torch.rand(1, 3, 96, 96)).shape) == (1, 512)

    # the README's block: a whole run in one call (the cache and the unchanged units are reused)
    (readme_block,) = _code_blocks(README.read_text())
    readme: dict = {}
    exec(compile(readme_block.replace("examples/quickstart.toml", str(tiny)).replace("crs-out/notebook", str(output)),
                 str(README), "exec"), readme)
    outcome = readme["outcome"]
    assert isinstance(outcome, RunOutcome) and outcome.extract.total_forward == 0
    assert outcome.probe.units_reused == 2 * 3 and outcome.probe.units_fitted == 0
    assert outcome.report == output / "report.html"
    pd.testing.assert_frame_equal(readme["later"].crs, outcome.score.crs)


def test_the_command_table_names_every_command_and_the_readme_leads_there():
    """Issue 34 item 11: the command table names every top-level command (`crs init` for one's own image
    folder was missing). Issue 46 item 15 moved the table from the README to docs/commands.md, which the
    README's first screen links."""
    import click

    from crs.cli.main import cli

    commands = DOC.parent / "commands.md"
    table = commands.read_text().split("## The commands at a glance", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`crs ([a-z-]+)", table))
    assert set(cli.list_commands(click.Context(cli))) <= named
    assert "your own images" in table
    first_screen = README.read_text().split("## How it works", 1)[0]
    assert "(docs/commands.md)" in first_screen and "crs init IMAGE_FOLDER" in first_screen
