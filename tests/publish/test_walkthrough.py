"""Issue 42's Done-when: the walk-through of docs/publish.md, executed command by command from the page.

The commands are read out of the page's ``bash`` blocks under "## Walk-through" (so the page and this
test cannot drift) and run through the CLI in a fresh folder, in order. One substitution, said on the
page: ``crs demo`` (minutes) becomes ``crs run demo.toml``, the tiny spec with the demo's output folder.
``mine/spec.toml`` is what the page's ``crs init --from-bundle`` writes, its placeholders filled in as the
page's comment says (relative paths: they resolve against the spec's folder); the hospitals' specs
(``site-a/spec.toml``, ``site-b/spec.toml``) are written here from the same tiny spec; the extender's
images are a copy of the demo's, made just before the command that first reads them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec

pytest.importorskip("cryptography")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "publish.md"
DEMO_SUBSTITUTE = ["crs", "run", "demo.toml"]
NEW_ENCODER = "efficientnet_b0"
"""The encoder the extender adds: one the tiny run (pixel_stats, resnet18) did not run."""


def walkthrough_commands(page: Path = PAGE) -> list[list[str]]:
    """Every command of the page's walk-through blocks, split as a shell would, comments dropped."""
    text = page.read_text()
    section = text.split("## Walk-through", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(words)
    return commands


def _specs(root: Path) -> None:
    """The demo's and the hospitals' specs, from the tiny spec (absolute paths: the runs read them from anywhere)."""
    demo = write_tiny_spec(root / "demo-spec", cache=root / "cache", data=root / "cache" / "synthetic-data",
                           output=root / "crs-out" / "quickstart")
    (root / "demo.toml").write_text(demo.read_text().replace('name = "tiny"', 'name = "quickstart"', 1))
    for site, seed in (("site-a", 0), ("site-b", 2)):  # each hospital its own patients (the loader's seed)
        path = write_tiny_spec(root / site)
        text = path.read_text().replace('name = "tiny"', f'name = "{site}"', 1)
        path.write_text(text.replace("image_size = 32", f"image_size = 32, seed = {seed}"))


def fill_in(spec: Path) -> None:
    """The page's comment done by hand: local roots, cache and output (relative to the spec), one more encoder."""
    text = spec.read_text()
    text = re.sub(r'root = "FILL IN: [^"]*"', 'root = "data"', text)
    text = re.sub(r'^cache = "FILL IN: [^"]*"', 'cache = "cache"', text, flags=re.M)
    text = re.sub(r'^output = "FILL IN: [^"]*"', 'output = "out"', text, flags=re.M)
    text = re.sub(r'^name = "[^"]*"', 'name = "mine"', text, count=1, flags=re.M)
    text = re.sub(r"^(encoders = \[\n(?:    .*\n)*)\]", rf'\1    "{NEW_ENCODER}",\n]', text, count=1, flags=re.M)
    assert "\"FILL IN" not in text, text
    spec.write_text(text)


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    root = tmp_path_factory.mktemp("walkthrough")
    _specs(root)
    commands = walkthrough_commands()
    outputs: dict[str, str] = {}
    import os

    here = os.getcwd()
    os.chdir(root)
    try:
        for words in commands:
            assert words[0] == "crs", words
            if words[:2] == ["crs", "demo"]:
                words = DEMO_SUBSTITUTE + words[2:]
            if words[:3] == ["crs", "run", "mine/spec.toml"]:  # the extender's own copy of the public images
                shutil.copytree(root / "cache" / "synthetic-data", root / "mine" / "data")
            result = CliRunner().invoke(cli, words[1:])
            assert result.exit_code == 0, (" ".join(words), result.output[-3000:])
            outputs[" ".join(words)] = result.output
            if words[:3] == ["crs", "init", "--from-bundle"]:
                outputs["mine/spec.toml as written"] = (root / "mine" / "spec.toml").read_text()
                fill_in(root / "mine" / "spec.toml")
    finally:
        os.chdir(here)
    return root, commands, outputs


def _output(outputs: dict[str, str], start: str) -> str:
    found = [text for command, text in outputs.items() if command.startswith(start)]
    assert len(found) == 1, (start, list(outputs))
    return found[0]


def test_the_page_walks_through_publish_verify_extend_site_and_two_sites_merged():
    words = [" ".join(c[:2]) + (" --extend" if "--extend" in c else "") + (" --aggregates-only" if "--aggregates-only" in c else "")
             for c in walkthrough_commands()]
    for needed in ("crs demo", "crs keygen", "crs publish", "crs verify", "crs run --extend", "crs leaderboard",
                   "crs publish --aggregates-only", "crs merge"):
        assert needed in words, needed
    assert words.index("crs run --extend") < words.index("crs leaderboard") < words.index("crs merge")


def test_verify_passes_on_the_published_and_the_extended_bundle(walked):
    _, _, outputs = walked
    published = _output(outputs, "crs verify bundle --key")
    assert "signature: valid" in published and "re-score: reproduced" in published and "verify: verified (bundle)" in published
    extended = _output(outputs, "crs verify bundle-mine")
    assert "re-score: reproduced" in extended and "verify: not verified, nothing failed: unsigned (bundle-mine)" in extended
    site_a = _output(outputs, "crs verify agg-a")
    assert "signature: valid" in site_a and "re-score: reproduced" in site_a


def test_the_extended_run_keeps_the_published_encoders_records_and_predictions_byte_for_byte(walked):
    root, _, outputs = walked
    assert f"{NEW_ENCODER} added beside the bundle's pixel_stats, resnet18" in _output(outputs, "crs run mine/spec.toml")
    from crs.cache.store import FeatureStore, store_path

    assert FeatureStore(store_path(root / "mine" / "cache", "derm")).encoder_names() == [NEW_ENCODER]
    records = pd.read_parquet(root / "mine" / "out" / "records.parquet")
    kept = records[records["encoder"].isin(["pixel_stats", "resnet18"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, pd.read_parquet(root / "bundle" / "run" / "records.parquet"), check_exact=True)
    published = sorted((root / "bundle" / "run" / "predictions").glob("*.npz"))
    assert len(published) == 2 * 3
    for path in published:
        assert (root / "mine" / "out" / "predictions" / path.name).read_bytes() == path.read_bytes()
    manifest = json.loads((root / "bundle-mine" / "manifest.json").read_text())
    assert manifest["provenance"]["extends"]["manifest_sha256"] == hashlib.sha256(
        (root / "bundle" / "manifest.json").read_bytes()).hexdigest()


def test_the_site_names_every_encoder_the_chain_and_the_verification(walked):
    root, _, _ = walked
    index = (root / "site" / "index.html").read_text()
    for encoder in ("pixel_stats", "resnet18", NEW_ENCODER):
        assert f'href="encoders/{encoder}.html"' in index
        assert f"<h1>{encoder}</h1>" in (root / "site" / "encoders" / f"{encoder}.html").read_text()
    mine = index.split('id="mine"')[1]
    assert 'Extends: <a href="#quickstart">quickstart</a>' in mine
    quickstart = index.split('id="quickstart"')[1].split("<h2")[0]
    assert ('class="ok">verified</span> (manifest holds; every file accounted for; re-score reproduced; '
            "signature valid with lab.pub)") in quickstart
    assert 'class="partial">unsigned</span>' in mine.split("<h2")[0]  # no key for bundle-mine: not green


def test_two_sites_publish_aggregates_only_and_merge_into_one_leaderboard(walked):
    root, _, outputs = walked
    merged = _output(outputs, "crs merge agg-a agg-b")
    assert "multi-site CRS: 2 sites (agg-a, agg-b), 6 tasks" in merged
    assert "agg-a: verified (" in merged and "signature valid with key-a.pub)" in merged
    assert "agg-b: verified (" in merged and "signature valid with key-b.pub)" in merged
    board = pd.read_csv(root / "merged" / "leaderboard.csv", index_col="encoder")
    assert sorted(board.index) == ["pixel_stats", "resnet18"]
    assert {"crs_agg-a", "crs_agg-b", "rank_agg-a", "rank_agg-b", "holds_rank"} <= set(board.columns)
    for site in ("site-a", "site-b"):  # each site's own CRS, as its run scored it
        own = pd.read_parquet(root / site / "out" / "score" / "crs.parquet")
        own = own.set_index("encoder") if "encoder" in own.columns else own
        site_name = site.replace("site", "agg")
        assert board[f"crs_{site_name}"].to_dict() == own["crs"].reindex(board.index).to_dict()
    every = (root / "site-all" / "index.html").read_text()
    assert "multi-site result: merged" in every and every.count("aggregates only (no per-case data)") >= 3
    for name in ("quickstart", "mine", "agg-a", "agg-b"):
        assert f'id="{name}"' in every


def test_init_from_bundle_writes_the_bundles_spec_with_placeholders_for_the_local_folders(walked, tmp_path):
    root, _, outputs = walked
    written = outputs["mine/spec.toml as written"]
    said = _output(outputs, "crs init --from-bundle")
    assert "fill in 6 placeholder(s)" in said and "datasets[2].shift_target root (cxr-b)" in said, said
    assert str(root) not in written  # no folder of the publisher's machine is copied
    assert written.count('root = "FILL IN: the folder of data set') == 3
    assert written.count('root = "FILL IN: the folder of shift target') == 1
    assert 'encoders = [\n    "pixel_stats",\n    "resnet18",\n]' in written  # as published: random weights, 32 px
    assert '[encoder_defaults]' in written and 'weights = "random"\ninput_size = 32' in written
    published = json.loads((root / "bundle" / "spec.json").read_text())
    from crs.spec import SpecError, load_spec

    unfilled = tmp_path / "unfilled.toml"
    unfilled.write_text(written)
    with pytest.raises(SpecError) as refused:  # every placeholder left is named at once
        load_spec(unfilled)
    assert len(refused.value.problems) == 6 and "cache is still a placeholder" in str(refused.value)
    filled = tmp_path / "filled.toml"
    filled.write_text(written)
    fill_in(filled)
    spec = load_spec(filled)
    assert spec.probe.label_fractions == tuple(published["probe"]["label_fractions"])
    assert spec.score.n_boot == published["score"]["n_boot"] and spec.datasets[0].root == tmp_path / "data"
    assert spec.output == tmp_path / "out" and spec.cache == tmp_path / "cache"
