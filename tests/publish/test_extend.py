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
from headless import CHROMIUM, chromium

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
    path = write_tiny_spec(folder, encoders=encoders, data=data, cache=folder / "cache", output=folder / "out")
    path.write_text(path.read_text().replace('name = "tiny"', f'name = "{name}"', 1))
    return path


@pytest.fixture(scope="module")
def extended(published):
    spec, bundle, data, where = published
    local = _local_spec(where, data)
    result = CliRunner().invoke(cli, ["run", str(local), "--extend", str(bundle), "-q"])
    assert result.exit_code == 0, result.output
    return result


def test_extend_runs_only_the_new_encoder_and_keeps_the_published_rows_bit_for_bit(published, extended):
    spec, bundle, data, where = published
    result = extended
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




def test_leaderboard_site_shows_both_bundles_the_chain_and_a_card_per_encoder_offline(published, extended, tmp_path):
    """Issue 42 item 4: static pages, verification status, the chain of bundles; Chromium renders them offline."""
    import re

    spec, bundle, data, where = published
    if not (where / "bundle2").exists():
        assert CliRunner().invoke(cli, ["publish", str(where / "mine" / "out"), str(where / "bundle2")]).exit_code == 0
    tampered = tmp_path / "tampered"
    shutil.copytree(bundle, tampered)
    (tampered / "cases.json").write_text("{}")
    site = tmp_path / "site"
    made = CliRunner().invoke(cli, ["leaderboard", str(bundle), str(where / "bundle2"), str(tampered), "-o", str(site)])
    assert made.exit_code == 0, made.output
    index = (site / "index.html").read_text()
    assert index.count("<table>") == 3
    assert "Extends: <a href=\"#tiny\">tiny</a>" in index  # the extended run names the bundle it extends
    assert "NOT verified</span>: changed: cases.json" in index
    mine = index.split('id="mine"')[1].split("<h2")[0]
    assert "efficientnet_b0" in mine and mine.count(">tiny</td>") == 2 and mine.count(">mine</td>") == 1
    for name in ("pixel_stats", "resnet18", "efficientnet_b0"):
        card = (site / "encoders" / f"{name}.html").read_text()
        assert f"<h1>{name}</h1>" in card and "CRS " in card
    pages = [index, *(p.read_text() for p in (site / "encoders").glob("*.html"))]
    for page in pages:  # nothing is fetched from anywhere: no absolute URL in any src or href
        assert not re.search(r'(src|href)="(https?:)?//', page)
    if CHROMIUM is None:
        pytest.skip("chromium not installed (apt-get install chromium); .ci/run installs it")
    shown = chromium(tmp_path, "--dump-dom", (site / "index.html").as_uri())
    assert "efficientnet_b0" in shown and shown.count("<tr>") >= 3 + 2 + 3 + 2


def test_the_site_ranks_the_contestants_and_shows_the_reference_as_its_baseline_row(published, extended, tmp_path):
    """Issue 46 item 6: the site showed the reference pixel_stats at rank "1" in the tiny bundle, and the extended
    one ranked the contestants behind it; ranks are now among the contestants (crs.evaluate.contest), as in the
    report and the terminal, and the reference's row and card say it is the baseline."""
    import re

    from crs.evaluate.contest import contest_of

    spec, bundle, data, where = published
    if not (where / "bundle2").exists():
        assert CliRunner().invoke(cli, ["publish", str(where / "mine" / "out"), str(where / "bundle2")]).exit_code == 0
    site = tmp_path / "site"
    made = CliRunner().invoke(cli, ["leaderboard", str(bundle), str(where / "bundle2"), "-o", str(site)])
    assert made.exit_code == 0, made.output
    index = (site / "index.html").read_text()
    for section, out in (("tiny", Path(spec.output)), ("mine", where / "mine" / "out")):
        part = index.split(f'id="{section}"')[1].split("<h2")[0]
        shown = dict(re.findall(r'<a href="encoders/[^"]+">([^<]+)</a></td><td>([^<]*)</td>', part))
        table = pd.read_parquet(out / "score" / "crs.parquet")
        contest = contest_of(table, "pixel_stats")
        assert shown["pixel_stats"] == "baseline" and contest.baseline == "pixel_stats"
        assert {name: shown[name] for name in contest.contestants} == {
            name: contest.rank_label(name) for name in contest.contestants}
        assert sorted(shown[name] for name in contest.contestants)[0].startswith("1")
    card = (site / "encoders" / "pixel_stats.html").read_text()
    assert "the reference's baseline row (not ranked)" in card and "rank 1 of" not in card
