"""Issue 42 items 3 and 5: a hospital publishes aggregates only; no file of such a bundle holds a patient.

From the user's side: `crs publish RUN BUNDLE --aggregates-only [--min-cell N]` and `crs verify` on the
tiny synthetic run. Privacy is checked against every image id of every data set the run read.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli
from crs.data import load_dataset
from crs.evaluate.artifacts import RunFolder


@pytest.fixture(scope="module")
def aggregates(tiny_run, tmp_path_factory):
    spec, *_ = tiny_run
    where = tmp_path_factory.mktemp("aggregates")
    out = CliRunner().invoke(cli, ["publish", str(spec.output), str(where / "agg"), "--aggregates-only"])
    assert out.exit_code == 0, out.output
    return spec, where / "agg", where


def _every_image_id(spec) -> set[str]:
    ids: set[str] = set()
    for entry in spec.datasets:
        ids |= {str(i) for i in load_dataset(entry.loader, entry.root, **entry.options).ids}
        for target in entry.shift_targets:
            ids |= {str(i) for i in load_dataset(target.loader, target.root, **target.options).ids}
    return ids


def _lists(value, path=""):
    """Every list in a JSON value, with where it sits."""
    if isinstance(value, list):
        yield path, value
        for i, item in enumerate(value):
            yield from _lists(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, f"{path}.{key}")


def test_no_file_holds_an_image_id_a_case_row_pixels_or_features(aggregates):
    spec, path, _ = aggregates
    files = sorted(p for p in path.rglob("*") if p.is_file())
    assert {p.name for p in files} == {"manifest.json", "aggregates.json", "measures.json", "replicates.json",
                                       "subgroups.json"}
    ids = _every_image_id(spec)
    assert len(ids) > 100
    n_boot = spec.score.n_boot
    folder = RunFolder(spec.output)
    case_counts = set()
    for encoder in spec.encoder_names:
        for entry in spec.datasets:
            with np.load(folder.predictions_path(encoder, entry.name)) as arrays:
                case_counts |= {len(arrays[k]) for k in arrays.files if k.endswith("_labels")}
    assert n_boot not in case_counts  # so a replicate vector cannot pass for a per-case column
    for file in files:
        text = file.read_text()
        found = [i for i in ids if i in text]
        assert not found, (file.name, found[:3])
        for where, values in _lists(json.loads(text)):
            scalar = bool(values) and all(not isinstance(v, dict | list) for v in values)
            if scalar:  # a column of values: only replicate vectors (n_boot long) or short settings lists
                assert len(values) == n_boot if file.name == "replicates.json" else len(values) <= 4, (file.name, where)
            assert len(values) not in case_counts or not scalar, (file.name, where, len(values))
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["kind"] == "aggregates" and manifest["min_cell"] == 10
    assert manifest["replicates"]["seed"] == spec.score.seed and manifest["replicates"]["n_boot"] == n_boot


def test_replicates_are_the_scores_own_and_small_cells_are_suppressed(aggregates, tmp_path):
    spec, path, _ = aggregates
    folder = RunFolder(spec.output)
    replicates = json.loads((path / "replicates.json").read_text())
    for axis, by_encoder in replicates.items():
        stored = pd.read_parquet(spec.output / "score" / f"bootstrap_axis_{axis}.parquet")
        for encoder, values in by_encoder.items():
            np.testing.assert_array_equal(np.asarray(values, dtype=float), stored[encoder].to_numpy())
    data = json.loads((path / "aggregates.json").read_text())
    errors = pd.read_parquet(spec.output / "score" / "axis_errors.parquet")
    first = spec.encoder_names[0]
    assert data["axis_errors"][first]["discrimination"] == float(
        errors.set_index(errors.columns[0]).loc[first, "discrimination_error"])
    assert data["task_counts"]["discrimination"] == len(spec.datasets)
    for encoder, by_task in data["task_axis_errors"].items():  # the site's errors are the mean of its tasks'
        for axis in ("discrimination", "calibration", "label_efficiency", "robustness"):
            values = [errs[axis] for errs in by_task.values() if errs[axis] is not None]
            assert len(values) == data["task_counts"][axis]
            assert np.mean(values) == pytest.approx(data["axis_errors"][encoder][axis], abs=1e-12), (encoder, axis)

    subgroups = pd.read_parquet(spec.output / "score" / "subgroups.parquet")
    small = subgroups[subgroups["n_images"] < 10].iloc[0]
    shown = json.loads((path / "subgroups.json").read_text())

    def row(rows):
        return next(r for r in rows if all(r[k] == str(small[k]) for k in ("encoder", "task", "condition", "attribute", "group")))

    assert row(shown) == {**{k: str(small[k]) for k in ("encoder", "task", "condition", "attribute", "group")},
                          "images": "suppressed"}
    assert folder.has_score()
    loose = CliRunner().invoke(cli, ["publish", str(spec.output), str(tmp_path / "b"), "--aggregates-only",
                                     "--min-cell", "1"])
    assert loose.exit_code == 0, loose.output
    assert row(json.loads((tmp_path / "b" / "subgroups.json").read_text()))["images"] == int(small["n_images"])
    strict = CliRunner().invoke(cli, ["publish", str(spec.output), str(tmp_path / "c"), "--aggregates-only",
                                      "--min-cell", "1000"])
    assert strict.exit_code == 0, strict.output
    measures = json.loads((tmp_path / "c" / "measures.json").read_text())
    assert measures and all(m["images"] == "suppressed" and m["auroc"] is None for m in measures)


def test_verify_checks_an_aggregates_bundle_and_derives_its_crs_again(aggregates, tmp_path):
    import shutil

    pytest.importorskip("cryptography")
    spec, _, where = aggregates
    assert CliRunner().invoke(cli, ["keygen", str(where / "site")]).exit_code == 0
    signed = tmp_path / "signed"
    out = CliRunner().invoke(cli, ["publish", str(spec.output), str(signed), "--aggregates-only",
                                   "--sign", str(where / "site")])
    assert out.exit_code == 0, out.output
    good = CliRunner().invoke(cli, ["verify", str(signed), "--key", str(where / "site.pub")])
    assert good.exit_code == 0, good.output
    assert "signature: valid" in good.output and "re-score: reproduced" in good.output
    copy = tmp_path / "copy"
    shutil.copytree(signed, copy)
    replicates = json.loads((copy / "replicates.json").read_text())
    first = next(iter(replicates["discrimination"]))
    replicates["discrimination"][first][0] += 0.01
    (copy / "replicates.json").write_text(json.dumps(replicates))
    bad = CliRunner().invoke(cli, ["verify", str(copy), "--key", str(where / "site.pub")])
    assert bad.exit_code == 1 and "changed: replicates.json" in bad.output
    refused = CliRunner().invoke(cli, ["publish", str(spec.output), str(tmp_path / "d"), "--min-cell", "5"])
    assert refused.exit_code != 0 and "--aggregates-only" in refused.output
