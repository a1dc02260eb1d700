"""The corruption benchmark's MedMNIST-C baseline: present when the package imports, None when it does not."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from PIL import Image

from crs.bench.corruptions import MEDMNISTC_INSTALL, _medmnistc_table, markdown, run, text
from crs.corruptions import suite


def _positive(x) -> bool:
    return isinstance(x, float) and x > 0


def test_medmnistc_figures_are_positive_when_installed(capsys):
    pytest.importorskip(
        "medmnistc.corruptions.noise", reason="medmnistc (the published baseline) is not installed"
    )
    result = run(json_out=True, images=2, size=32, repeats=1)
    assert _positive(result.medmnistc_variants_per_s) and _positive(result.speedup_vs_medmnistc)
    for t in result.per_corruption:
        assert t.medmnistc_us is not None and len(t.medmnistc_us) == 5
        assert all(_positive(v) for v in t.medmnistc_us) and _positive(t.speedup_vs_medmnistc)
    printed = json.loads(capsys.readouterr().out)
    assert printed["medmnistc_variants_per_s"] == result.medmnistc_variants_per_s
    assert "MedMNIST-C 0.1.0 per-image loop" in text(result) and "n/a" not in markdown(result)


def test_medmnistc_loop_gives_one_grey_uint8_film_per_corruption_and_severity():
    pytest.importorskip(
        "medmnistc.corruptions.noise", reason="medmnistc (the published baseline) is not installed"
    )
    table = _medmnistc_table()
    assert table is not None and set(table) == set(suite("chest_xray"))
    film = Image.fromarray(np.tile(np.arange(0, 256, 8, dtype=np.uint8), (32, 1)))
    for name, variant in table.items():
        for severity in (1, 5):
            out = variant(film, severity)
            assert out.shape == (32, 32) and out.dtype == np.uint8, name
    # strengths follow our parameters: severity 5 darkens more than severity 1
    assert table["brightness_down"](film, 5).mean() < table["brightness_down"](film, 1).mean()


def test_missing_medmnistc_gives_none_and_says_how_to_install(monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "medmnistc" or m.startswith("medmnistc.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "medmnistc", None)  # blocks the import even when never imported
    result = run(json_out=True, images=2, size=32, repeats=1)
    captured = capsys.readouterr()
    assert result.medmnistc_variants_per_s is None and result.speedup_vs_medmnistc is None
    assert all(t.medmnistc_us is None and t.speedup_vs_medmnistc is None for t in result.per_corruption)
    assert _positive(result.batched_variants_per_s) and _positive(result.speedup)
    assert json.loads(captured.out)["medmnistc_variants_per_s"] is None  # the notice stays off stdout
    assert MEDMNISTC_INSTALL in captured.err
    assert "not installed" in text(result) and "n/a" in markdown(result)
