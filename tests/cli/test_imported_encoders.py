"""A spec naming imported encoders passes `crs check`, `crs extract` and `crs run`, also beside a registry
encoder (issue 46, item 11); a name neither registered nor imported still gets "did you mean"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cache.imports import import_features, write_table_from_spec
from crs.cli.main import cli
from crs.data import load_dataset

SPEC = """
name = "mixed"
cache = "{tmp}/cache"
output = "{tmp}/out"
encoders = [{encoders}]
[encoder_defaults]
weights = "random"
[extract]
corruptions = "none"
[probe]
label_fractions = [0.5, 1.0]
seeds = [0]
Cs = [0.1, 1.0]
jobs = 1
[score]
reference_encoder = "pixel_stats"
n_boot = 20
[[datasets]]
name = "derm"
loader = "synthetic"
root = "{tmp}/data"
options = {{ modality = "dermoscopy", n_images = 240, image_size = 16 }}
"""


@pytest.fixture()
def imported(tmp_path):
    """A spec with pixel_stats (registry) and external_projection (features imported into its cache)."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(tmp=tmp_path, encoders='"pixel_stats", "external_projection"'))
    write_table_from_spec(spec, "derm")
    dataset = load_dataset("synthetic", tmp_path / "data", modality="dermoscopy", n_images=240, image_size=16)
    features = np.random.default_rng(0).standard_normal((len(dataset.ids), 8)).astype(np.float32)
    features[:, 0] += np.asarray(dataset.labels, dtype=np.float32)  # something for the probe to find
    np.savez(tmp_path / "features.npz", features=features, ids=dataset.ids)
    import_features(tmp_path / "cache", "derm", "external_projection", tmp_path / "features.npz")
    return spec


def test_check_extract_and_run_take_an_imported_encoder_beside_a_registry_one(imported):
    runner = CliRunner()
    checked = runner.invoke(cli, ["check", str(imported)])
    assert checked.exit_code == 0, checked.output
    assert "check: external_projection: imported features in the cache (derm); nothing to extract" in checked.output
    extracted = runner.invoke(cli, ["extract", str(imported), "-q"])
    assert extracted.exit_code == 0, extracted.output
    assert "extract: external_projection: imported features in the cache (derm); nothing to extract" in extracted.output
    assert "forward passes per encoder: pixel_stats 240" in extracted.output  # the registry encoder is extracted
    ran = runner.invoke(cli, ["run", str(imported), "-q"])
    assert ran.exit_code == 0, ran.output
    records = pd.read_parquet(imported.parent / "out" / "records.parquet")
    assert sorted(records["encoder"].unique()) == ["external_projection", "pixel_stats"]
    crs = pd.read_parquet(imported.parent / "out" / "score" / "crs.parquet")
    assert "external_projection" in set(crs.index.astype(str)) | set(crs.get("encoder", []))
    assert (imported.parent / "out" / "report.html").is_file()


def test_an_imported_encoder_missing_from_a_store_it_runs_on_is_a_check_problem(imported):
    text = imported.read_text() + (f'\n[[datasets]]\nname = "fundus"\nloader = "synthetic"\nroot = "{imported.parent / "data"}"\n'
                                   'options = { modality = "fundus", n_images = 240, image_size = 16 }\n')
    imported.write_text(text)
    checked = CliRunner().invoke(cli, ["check", str(imported)])
    assert checked.exit_code == 1, checked.output
    assert ("encoder 'external_projection': no cache store for data set 'fundus' under "
            f"{imported.parent / 'cache'}; import them: crs import-features FILE --dataset fundus "
            f"--encoder external_projection --spec {imported}") in checked.output


def test_a_name_neither_registered_nor_imported_is_still_unknown(imported):
    imported.write_text(imported.read_text().replace('"external_projection"', '"external_projecton"'))
    checked = CliRunner().invoke(cli, ["check", str(imported)])
    assert checked.exit_code == 1
    assert ("unknown encoder 'external_projecton': not in the registry nor imported into "
            f"{imported.parent / 'cache'}; did you mean 'external_projection' (imported features in the cache)?"
            ) in checked.output
    imported.write_text(imported.read_text().replace('"external_projecton"', '"resnet81"'))
    checked = CliRunner().invoke(cli, ["check", str(imported)])
    assert checked.exit_code == 1 and "unknown encoder 'resnet81'; did you mean resnet18" in checked.output
