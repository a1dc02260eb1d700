"""examples/paper.toml: every data-set entry's loader and options work on tiny official-layout trees."""

from __future__ import annotations

from pathlib import Path

from crs.data import load_dataset
from crs.encoders.registry import available
from crs.spec import load_spec

from data_trees import build_aptos, build_chexpert, build_isic, build_mimic

PAPER = Path(__file__).resolve().parents[2] / "examples" / "paper.toml"


def test_paper_spec_entries_load_with_their_options(tmp_path):
    spec = load_spec(PAPER)
    builders = {"isic2019": build_isic, "aptos2019": build_aptos, "chexpert": build_chexpert, "mimic_cxr": build_mimic}
    entries = [*spec.datasets, *(target for d in spec.datasets for target in d.shift_targets)]
    assert sorted(e.loader for e in entries) == sorted(builders)
    loaded = {}
    for entry in entries:
        root = tmp_path / entry.name
        root.mkdir()
        builders[entry.loader](root)
        loaded[entry.name] = load_dataset(entry.loader, root, **entry.options)
        assert len(loaded[entry.name]) > 0
    # The shift target shares the source's task and canonical size, and is evaluation-only.
    assert loaded["mimic_cxr"].task == loaded["chexpert"].task
    assert loaded["mimic_cxr"].image_size == loaded["chexpert"].image_size
    assert set(loaded["mimic_cxr"].splits) == {"test"}


def test_paper_spec_names_registered_encoders_and_the_protocol():
    spec = load_spec(PAPER)
    names = [e.name for e in spec.encoders]
    assert set(names) <= set(available())
    assert spec.score.reference_encoder == "resnet50"
    assert spec.probe.label_fractions == (0.01, 0.05, 0.1, 0.25, 1.0) and spec.probe.seeds == (0, 1, 2, 3, 4)
