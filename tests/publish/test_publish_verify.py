"""Issue 42 item 1: a published run is a bundle anyone can verify (manifest, Ed25519 signature, re-score).

From the user's side: `crs publish`, `crs verify`, `crs keygen` on the tiny synthetic run. Each
tamper a reader could meet (a changed record, a changed score, an added file, a forged signature)
must fail verification with a line naming it; the untouched bundle must pass.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

pytest.importorskip("cryptography")


@pytest.fixture(scope="module")
def bundle(tiny_run, tmp_path_factory):
    spec, *_ = tiny_run
    where = tmp_path_factory.mktemp("bundle")
    keys = CliRunner().invoke(cli, ["keygen", str(where / "lab")])
    assert keys.exit_code == 0, keys.output
    out = CliRunner().invoke(cli, ["publish", str(spec.output), str(where / "b"), "--sign", str(where / "lab")])
    assert out.exit_code == 0, out.output
    return spec, where / "b", where / "lab.pub", where


def _copy(bundle_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle_dir, copy)
    return copy


def test_published_bundle_verifies_with_its_key_and_rescores_identically(bundle):
    spec, path, public, _ = bundle
    result = CliRunner().invoke(cli, ["verify", str(path), "--key", str(public)])
    assert result.exit_code == 0, result.output
    assert "signature: valid" in result.output
    assert "re-score: reproduced" in result.output and "largest difference 0" in result.output
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["kind"] == "full" and manifest["provenance"]["encoders"] == spec.encoder_names
    assert set(manifest["files"]) >= {"run/records.parquet", "cases.json", "images.json", "spec.json"}


def test_bundle_keys_predictions_by_image_id_and_holds_every_image_digest(bundle):
    spec, path, *_ = bundle
    from crs.cache.images import file_digest
    from crs.data import load_dataset

    cases = json.loads((path / "cases.json").read_text())
    images = json.loads((path / "images.json").read_text())
    for entry in spec.datasets:
        dataset = load_dataset(entry.loader, entry.root, **entry.options)
        prediction = np.load(path / "run" / "predictions" / f"{spec.encoder_names[0]}__{entry.name}.npz")
        assert len(cases[entry.name]["clean"]) == len(prediction["clean_labels"])
        assert set(cases[entry.name]["clean"]) <= set(map(str, dataset.ids))
        files = images[entry.name]["files"]
        assert len(files) == len(dataset)  # every image the run read, not a sample
        row = len(dataset) // 2
        assert files[str(dataset.ids[row])] == file_digest(dataset.root / dataset.paths[row])


def test_no_bundle_file_holds_features_or_pixels(bundle):
    spec, path, *_ = bundle
    for npz in (path / "run" / "predictions").glob("*.npz"):
        with np.load(npz) as arrays:
            classes = arrays["clean_probs"].shape[-1]
            for name in arrays.files:
                array = arrays[name]
                # probabilities and keys have one column per class; features (64+ wide) or pixels would not
                assert array.ndim < 2 or array.shape[-1] <= classes, (npz.name, name, array.shape)
                assert array.dtype != np.uint8, (npz.name, name)
    suffixes = {p.suffix for p in path.rglob("*") if p.is_file()}
    assert suffixes <= {".json", ".parquet", ".npz", ".sig", ".txt", ".csv"}, suffixes


@pytest.mark.parametrize("tamper", ["record", "score", "added", "removed"])
def test_a_tampered_bundle_fails_naming_the_file(bundle, tmp_path, tamper):
    _, path, public, _ = bundle
    copy = _copy(path, tmp_path)
    if tamper == "record":
        records = pd.read_parquet(copy / "run" / "records.parquet")
        records.loc[0, "auroc"] = records.loc[0, "auroc"] + 0.01
        records.to_parquet(copy / "run" / "records.parquet")
        named = "changed: run/records.parquet"
    elif tamper == "score":
        (copy / "run" / "score" / "score.txt").write_text("resnet18 wins\n")
        named = "changed: run/score/score.txt"
    elif tamper == "added":
        (copy / "run" / "note.txt").write_text("extra")
        named = "not in the manifest: run/note.txt"
    else:
        (copy / "images.json").unlink()
        named = "missing: images.json"
    result = CliRunner().invoke(cli, ["verify", str(copy), "--key", str(public)])
    assert result.exit_code == 1
    assert named in result.output and "verify: FAILED" in result.output


def test_a_rewritten_score_with_a_fresh_manifest_fails_the_rescore(bundle, tmp_path):
    """Someone edits a score table and rewrites the manifest: the hashes hold, the signature and the re-score do not."""
    from crs.publish.manifest import write_manifest

    _, path, public, _ = bundle
    copy = _copy(path, tmp_path)
    crs_table = copy / "run" / "score" / "crs.parquet"
    table = pd.read_parquet(crs_table)
    table["crs"] = table["crs"][::-1].to_numpy()
    table.to_parquet(crs_table)
    manifest = json.loads((copy / "manifest.json").read_text())
    write_manifest(copy, manifest["kind"], {"provenance": manifest["provenance"]})
    result = CliRunner().invoke(cli, ["verify", str(copy), "--key", str(public)])
    assert result.exit_code == 1
    assert "signature: invalid" in result.output
    assert "re-score: NOT reproduced" in result.output and "score_crs.crs" in result.output


def test_another_key_does_not_verify_and_publish_refuses_an_unscored_or_used_folder(bundle, tmp_path):
    spec, path, _, where = bundle
    assert CliRunner().invoke(cli, ["keygen", str(tmp_path / "other")]).exit_code == 0
    wrong = CliRunner().invoke(cli, ["verify", str(path), "--key", str(tmp_path / "other.pub"), "--no-score"])
    assert wrong.exit_code == 1 and "signature: invalid" in wrong.output
    again = CliRunner().invoke(cli, ["publish", str(spec.output), str(path)])
    assert again.exit_code != 0 and "not empty" in again.output
    unscored = tmp_path / "unscored"
    shutil.copytree(spec.output, unscored)
    shutil.rmtree(unscored / "score")
    refused = CliRunner().invoke(cli, ["publish", str(unscored), str(tmp_path / "b2")])
    assert refused.exit_code != 0 and "crs score" in refused.output
    reused = CliRunner().invoke(cli, ["keygen", str(where / "lab")])
    assert reused.exit_code != 0 and "never overwritten" in reused.output
