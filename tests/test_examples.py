"""Every shipped example runs (the spec files are validated in tests/test_spec.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bring_your_own_features_example_scores_imported_encoders(tmp_path):
    output = _load("bring_your_own_features").main(tmp_path)
    assert "Clinical Reliability Score" in output
    assert "external_projection" in output and "external_colour" in output
    # stage 2 ran from imported features only: no encoder of the registry was extracted
    from crs.cache.store import FeatureStore

    assert FeatureStore(tmp_path / "cache" / "derm.zarr").encoder_names() == ["external_colour", "external_projection"]
