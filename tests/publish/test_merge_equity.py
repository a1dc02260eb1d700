"""Issue 42, the equity axis across sites (decision 0148): aggregates bundles carry it and `crs merge` merges it.

Two synthetic hospitals (the synthetic loader's seed 0 and 2: other patients) score the tiny spec with ``[score] equity = true`` (groups of 10 images and more
scored, so the worst group of each (task, attribute) pair is measured); each publishes aggregates only;
the joint run scores both sites' data sets in one spec (B names its own ``zb-<task>``, alone and jointly). The equity error is a
mean over (task, attribute) pairs, so the merged error is the sites' errors weighted by their numbers of
pairs: it must equal the joint run's, and so must the merged CRS and ranks. The merged subgroup table is
every site's rows under ``site/task`` names, with the joint run's sizes and AUROCs.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec

EQUITY_SCORE = "n_boot = 50\nequity = true\nsubgroup_min_images = 10\nsubgroup_min_positives = 1"


def _equity_spec(folder, seed, prefix=""):
    """The tiny spec with equity on; ``seed`` draws the site's own patients (the synthetic loader's seed);
    ``prefix`` names its data sets (and shift target) apart, as sites should (a task's draws are keyed on its name)."""
    path = write_tiny_spec(folder)
    text = path.read_text().replace("n_boot = 50", EQUITY_SCORE, 1)
    text = re.sub(r'name = "(derm|fundus|cxr|cxr-b)"', rf'name = "{prefix}\1"', text)
    path.write_text(text.replace("image_size = 32", f"image_size = 32, seed = {seed}"))
    return path


def _run(path):
    result = CliRunner().invoke(cli, ["run", str(path), "-q"])
    assert result.exit_code == 0, result.output


def _joint_spec(folder, site_a, site_b):
    """Site A's spec with site B's data sets appended (named zb-<name> by site B itself)."""
    text = site_a.read_text()
    text = re.sub(r'^output = ".*"$', f'output = "{folder / "out"}"', text, flags=re.M)
    text = re.sub(r'^cache = ".*"$', f'cache = "{folder / "cache"}"', text, flags=re.M)
    extra = "[[datasets]]" + site_b.read_text().split("[[datasets]]", 1)[1]  # named zb-<name> by its own site
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.toml"
    path.write_text(text + "\n" + extra)
    return path


@pytest.fixture(scope="module")
def equity_sites(tmp_path_factory):
    where = tmp_path_factory.mktemp("equity-sites")
    specs = {"hospital-a": _equity_spec(where / "site-a", 0), "hospital-b": _equity_spec(where / "site-b", 2, "zb-")}
    for name, spec in specs.items():
        _run(spec)
        out = CliRunner().invoke(cli, ["publish", str(spec.parent / "out"), str(where / name), "--aggregates-only"])
        assert out.exit_code == 0, out.output
    joint = _joint_spec(where / "joint", specs["hospital-a"], specs["hospital-b"])
    _run(joint)
    merged = CliRunner().invoke(cli, ["merge", str(where / "hospital-a"), str(where / "hospital-b"),
                                      "-o", str(where / "merged")])
    assert merged.exit_code == 0, merged.output
    return where, specs, joint.parent / "out"


def _table(path, name):
    frame = pd.read_parquet(path / "score" / f"{name}.parquet")
    return frame.set_index("encoder") if "encoder" in frame.columns else frame


def test_an_aggregates_bundle_carries_the_equity_axis_and_its_replicates(equity_sites):
    where, specs, _ = equity_sites
    out = specs["hospital-a"].parent / "out"
    data = json.loads((where / "hospital-a" / "aggregates.json").read_text())
    replicates = json.loads((where / "hospital-a" / "replicates.json").read_text())
    errors = _table(out, "axis_errors")
    pairs = data["equity_pairs"]
    assert data["task_counts"]["equity"] == len(pairs) > 0
    assert {attribute for _, attribute in pairs} <= {"sex", "age"}
    groups = _table(out, "subgroups").reset_index()
    scored = groups[(groups["condition"] == "clean") & groups["scored"].astype(bool)]
    assert sorted(map(list, {(t, a) for t, a in zip(scored["task"], scored["attribute"], strict=True)})) == pairs
    for encoder, row in errors.iterrows():
        assert data["axis_errors"][encoder]["equity"] == float(row["equity_error"])
        vector = np.asarray(replicates["equity"][encoder], dtype=float)
        # a replicate that drew no positive in a small group (subgroup_min_positives = 1 here) has no worst group:
        # null in the bundle, left out of the spread as the score leaves it out
        assert len(vector) == 50 and np.isfinite(vector).sum() >= 45
        # the score's equity standard error is the spread of these very replicates
        assert np.nanstd(vector, ddof=1) == pytest.approx(data["standard_errors"][encoder]["equity"], abs=1e-12)
        # and the worst group's AUROC per pair, averaged, is the shipped error (subgroups.json holds the groups)
        shown = [r for r in json.loads((where / "hospital-a" / "subgroups.json").read_text())
                 if r["encoder"] == encoder and r["condition"] == "clean" and r.get("scored")]
        worst = pd.DataFrame(shown).groupby(["task", "attribute"])["auroc"].min()
        assert 1 - worst.mean() == pytest.approx(data["axis_errors"][encoder]["equity"], abs=1e-12)


def test_merged_equity_error_crs_and_ranks_are_the_joint_runs(equity_sites):
    where, _, joint = equity_sites
    merged = json.loads((where / "merged" / "merged.json").read_text())
    assert merged["axes"][-1] == "equity"
    counts = [json.loads((where / s / "aggregates.json").read_text())["task_counts"]["equity"]
              for s in ("hospital-a", "hospital-b")]
    assert merged["unit_counts"]["equity"] == sum(counts)
    errors = _table(joint, "axis_errors")
    board = pd.read_csv(where / "merged" / "leaderboard.csv", index_col="encoder")
    for encoder in board.index:
        for axis, value in merged["axis_errors"][encoder].items():
            assert value == pytest.approx(errors.loc[encoder, f"{axis}_error"], abs=1e-12), (encoder, axis)
    own = _table(joint, "crs")
    np.testing.assert_allclose(board["crs"].to_numpy(), own["crs"].reindex(board.index).to_numpy(), atol=1e-12)
    np.testing.assert_array_equal(board["rank"].to_numpy(), own["rank"].reindex(board.index).to_numpy())
    assert (board["crs_low"] <= board["crs"] + 1e-12).all() and (board["crs"] <= board["crs_high"] + 1e-12).all()


def test_merged_subgroup_table_is_every_sites_groups_with_the_joint_runs_sizes_and_aurocs(equity_sites):
    where, _, joint = equity_sites
    table = pd.read_csv(where / "merged" / "subgroups.csv")
    assert set(table["site"]) == {"hospital-a", "hospital-b"}
    assert table["task"].str.startswith(("hospital-a/", "hospital-b/")).all()
    groups = _table(joint, "subgroups").reset_index()
    shown = table[table["images"] != "suppressed"]
    assert len(shown) and (table["images"] == "suppressed").any()
    keys = ["encoder", "task", "condition", "attribute", "group"]
    indexed = groups.assign(group=groups["group"].astype(str)).set_index(keys)
    for row in shown.to_dict("records"):
        site, task = row["task"].split("/", 1)
        found = indexed.loc[(row["encoder"], task, row["condition"], row["attribute"], str(row["group"]))]
        assert int(row["images"]) == int(found["n_images"])
        assert row["auroc"] == pytest.approx(found["auroc"], abs=1e-12, nan_ok=True)
    for row in table[table["images"] == "suppressed"].to_dict("records"):
        assert pd.isna(row.get("auroc"))


def test_publish_refuses_equity_when_its_groups_may_be_smaller_than_the_smallest_cell(equity_sites, tmp_path):
    _, specs, _ = equity_sites
    refused = CliRunner().invoke(cli, ["publish", str(specs["hospital-a"].parent / "out"), str(tmp_path / "b"),
                                       "--aggregates-only", "--min-cell", "20"])
    assert refused.exit_code != 0
    assert "subgroup_min_images = 10 images, below --min-cell 20" in refused.output
    assert len(refused.output.strip().splitlines()) == 1


def test_merged_equity_replicates_are_the_joint_runs(equity_sites):
    from crs.evaluate.artifacts import RunFolder
    from crs.publish.aggregates import equity_replicate_vectors
    from crs.scoring.result import read_score

    where, _, joint = equity_sites
    folder = RunFolder(joint)
    vectors = equity_replicate_vectors(folder, folder.read_records(), read_score(folder))
    sites = [json.loads((where / s / f).read_text()) for s in ("hospital-a", "hospital-b")
             for f in ("replicates.json", "aggregates.json")]
    (rep_a, agg_a), (rep_b, agg_b) = sites[0:2], sites[2:4]
    n_a, n_b = agg_a["task_counts"]["equity"], agg_b["task_counts"]["equity"]
    for encoder, values in vectors.items():
        site_a, site_b = (np.asarray(rep[encoder], dtype=float) for rep in (rep_a["equity"], rep_b["equity"]))  # null: NaN
        merged = (n_a * site_a + n_b * site_b) / (n_a + n_b)
        np.testing.assert_allclose(merged, np.asarray(values, dtype=float), atol=1e-12)
