"""Every shipped example runs (the spec files are validated in tests/test_spec.py and run by `crs demo`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from crs.cache.store import FeatureStore
from crs.evaluate.artifacts import RunFolder
from crs.scoring.result import ScoreResult

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# Each Python example and the test below that runs it; a new example without a test fails the first test.
RUN_BY = {
    "add_encoder.py": "test_add_encoder_example_builds_and_embeds_with_its_own_encoder",
    "bring_your_own_features.py": "test_bring_your_own_features_example_scores_imported_encoders",
    "who_does_it_fail.py": "test_who_does_it_fail_example_names_the_planted_group",
}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_python_example_has_a_test_that_runs_it():
    assert sorted(path.name for path in EXAMPLES.glob("*.py")) == sorted(RUN_BY)
    for test in RUN_BY.values():
        assert callable(globals()[test])


def test_bring_your_own_features_example_scores_imported_encoders(tmp_path, capsys):
    # A folder that does not exist yet (`python examples/bring_your_own_features.py NEW_FOLDER`) is made.
    work = tmp_path / "new-folder" / "work"
    result = _load("bring_your_own_features").main(work)
    assert isinstance(result, ScoreResult)
    assert set(result.crs.index) == {"external_projection", "external_colour"}
    assert sorted(result.crs["rank"]) == [1, 2]
    assert result.reference == "external_colour"
    # the reference scores u = 0.5 on every axis it has; robustness is absent (no corrupted features imported)
    assert np.isclose(result.crs.loc["external_colour", "u_discrimination"], 0.5)
    assert "Clinical Reliability Score" in result.format()
    printed = capsys.readouterr().out
    assert printed.count("-> fingerprint") == 2 and "evaluation records" in printed
    # stage 2 ran from imported features only: no encoder of the registry was extracted
    assert FeatureStore(work / "cache" / "derm.zarr").encoder_names() == ["external_colour", "external_projection"]
    # and the run folder holds the records and the score tables the example's Benchmark wrote
    folder = RunFolder(work / "out")
    assert set(folder.read_records()["encoder"]) == {"external_projection", "external_colour"}
    assert folder.read_score_summary()["leader"] in {"external_projection", "external_colour"}


def test_add_encoder_example_builds_and_embeds_with_its_own_encoder():
    # A fresh process: the example registers an encoder, which must not leak into this test session.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(EXAMPLES / "add_encoder.py")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "features (4, 32) torch.float32" in done.stdout
    assert "my_small_convnet" in done.stdout


def test_specialists_example_declares_one_specialist_per_modality():
    # The example's spec is validated with every shipped spec (tests/test_spec.py); its layout (a
    # specialist on one data set, general encoders on all) runs end to end in tests/test_specialists.py
    # on the tiny data, which keeps this suite fast: the example's ViT-L towers take minutes on CPU.
    from crs.encoders import get_spec
    from crs.evaluate.units import probe_units
    from crs.spec import load_spec

    spec = load_spec(EXAMPLES / "specialists.toml")
    general = ["resnet18", "efficientnet_b0", "vit_tiny", "pixel_stats"]
    assert spec.coverage == {
        "synthetic-derm": (*general, "panderm"), "synthetic-fundus": (*general, "retfound"),
        "synthetic-cxr": (*general, "chexzero"),
    }
    assert all(get_spec(name).group == "specialty" for name in ("panderm", "retfound", "chexzero"))
    assert len(probe_units(spec)) == 3 * 5  # not 3 x 7: no specialist is probed off its modality


def test_who_does_it_fail_example_names_the_planted_group(tmp_path, capsys):
    result = _load("who_does_it_fail").main(tmp_path)
    gaps = result.subgroup_gaps
    sex = gaps[(gaps["attribute"] == "sex") & (gaps["condition"] == "clean")].set_index("encoder")
    assert sex["worst_auroc"].idxmin() == "planted" and sex.loc["planted", "worst_group"] == "female"
    printed = capsys.readouterr().out
    assert "planted      by sex : worst group female" in printed
    assert "Who does it fail?" in (tmp_path / "out" / "report.md").read_text()
