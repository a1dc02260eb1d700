"""Issue 42 item 2: extend a published run with an encoder it lacks, from the user's side (`crs run --extend`).

The tiny run (pixel_stats, resnet18) is published; a fresh folder with its own copy of the data and
its own cache extends it with efficientnet_b0. The published encoders are never extracted or probed
again: their records are the bundle's row for row and bit for bit, their predictions byte-identical;
the three encoders are scored together; the extended run publishes and verifies, naming the bundle
it extends. A changed image is listed and refused unless allowed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec


@pytest.fixture(scope="module")
def published(tiny_run, tmp_path_factory):
    spec, *_ = tiny_run
    where = tmp_path_factory.mktemp("extend")
    out = CliRunner().invoke(cli, ["publish", str(spec.output), str(where / "bundle")])
    assert out.exit_code == 0, out.output
    data = where / "my-data"
    shutil.copytree(spec.datasets[0].root, data)  # the same public files, in the extender's own folder
    return spec, where / "bundle", data, where


def _local_spec(where, data, encoders=("efficientnet_b0",), name="mine"):
    folder = where / name
    return write_tiny_spec(folder, encoders=encoders, data=data, cache=folder / "cache", output=folder / "out")


def test_extend_runs_only_the_new_encoder_and_keeps_the_published_rows_bit_for_bit(published):
    spec, bundle, data, where = published
    local = _local_spec(where, data)
    result = CliRunner().invoke(cli, ["run", str(local), "--extend", str(bundle), "-q"])
    assert result.exit_code == 0, result.output
    assert "efficientnet_b0 added beside the bundle's pixel_stats, resnet18" in result.output
    out = where / "mine" / "out"
    cache = where / "mine" / "cache"
    # stage 1 ran only the new encoder
    from crs.cache.store import FeatureStore, store_path

    assert FeatureStore(store_path(cache, "derm")).encoder_names() == ["efficientnet_b0"]
    records = pd.read_parquet(out / "records.parquet")
    assert sorted(records["encoder"].unique()) == ["efficientnet_b0", "pixel_stats", "resnet18"]
    bundle_records = pd.read_parquet(bundle / "run" / "records.parquet")
    kept = records[records["encoder"].isin(["pixel_stats", "resnet18"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, bundle_records, check_exact=True)
    for path in (bundle / "run" / "predictions").glob("*.npz"):
        assert (out / "predictions" / path.name).read_bytes() == path.read_bytes()
    ranked = pd.read_parquet(out / "score" / "crs.parquet")
    assert len(ranked) == 3
    from crs.evaluate.records import read_provenance

    extends = read_provenance(out / "records.parquet")["extends"]
    manifest = (bundle / "manifest.json").read_bytes()
    import hashlib

    assert extends["manifest_sha256"] == hashlib.sha256(manifest).hexdigest()

    # the extended run publishes, verifies, and its manifest names the bundle it extends
    again = CliRunner().invoke(cli, ["publish", str(out), str(where / "bundle2")])
    assert again.exit_code == 0, again.output
    checked = CliRunner().invoke(cli, ["verify", str(where / "bundle2")])
    assert checked.exit_code == 0, checked.output
    chain = json.loads((where / "bundle2" / "manifest.json").read_text())["provenance"]["extends"]
    assert chain["manifest_sha256"] == extends["manifest_sha256"]


def test_a_changed_local_image_is_listed_and_refused_unless_allowed(published):
    spec, bundle, data, where = published
    changed = where / "changed-data"
    shutil.copytree(data, changed)
    from crs.data import load_dataset

    entry = spec.datasets[0]
    dataset = load_dataset(entry.loader, changed, **entry.options)
    victim = Path(dataset.root) / dataset.paths[3]
    victim.write_bytes(victim.read_bytes() + b"\0")
    local = _local_spec(where, changed, name="changed")
    refused = CliRunner().invoke(cli, ["run", str(local), "--extend", str(bundle), "-q"])
    assert refused.exit_code != 0
    assert "1 image file(s) differ from the bundle's" in refused.output and str(dataset.ids[3]) in refused.output
    assert "(option --allow-data-mismatch)" in refused.output
    assert not (where / "changed" / "out" / "records.parquet").exists()


def test_extend_refuses_a_spec_with_no_new_encoder_or_a_missing_data_set(published, tmp_path):
    spec, bundle, data, where = published
    same = _local_spec(tmp_path, data, encoders=("pixel_stats",), name="same")
    refused = CliRunner().invoke(cli, ["run", str(same), "--extend", str(bundle), "-q"])
    assert refused.exit_code != 0 and "already in the bundle" in refused.output
    text = same.read_text().replace('encoders = ["pixel_stats"]', 'encoders = ["efficientnet_b0"]')
    cut = text.split("[[datasets]]")
    fewer = tmp_path / "fewer.toml"
    fewer.write_text("[[datasets]]".join(cut[:3]).replace('reference_encoder = "pixel_stats"', 'reference_encoder = "median"'))
    missing = CliRunner().invoke(cli, ["run", str(fewer), "--extend", str(bundle), "-q"])
    assert missing.exit_code != 0 and "'cxr'" in missing.output and "does not name" in missing.output
