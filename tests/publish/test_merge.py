"""Issue 42 item 3: two synthetic hospitals publish aggregates only and `crs merge` ranks them together.

Site A is the tiny run; site B the same spec on other patients (90 images a data set, its own data
folder), its data sets named ``zb-<name>``. The joint run scores both sites' data sets in one spec, each
under its own site's name, as if one hospital held every patient: merging the two aggregates bundles must
give its score, replicate by replicate (a task's resample is keyed on its name, decision 0144).
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec


def _run(spec_path):
    from crs.benchmark import Benchmark
    from crs.spec import load_spec

    spec = load_spec(spec_path)
    bench = Benchmark(spec)
    bench.extract(progress=False)
    bench.probe(progress=False)
    bench.score()
    return spec


def _site_b_spec(folder):
    """The tiny spec on 90 images a data set, its data sets (and shift target) named zb-<name>."""
    path = write_tiny_spec(folder, n_images=90)
    text = re.sub(r'name = "(derm|fundus|cxr|cxr-b)"', r'name = "zb-\1"', path.read_text())
    path.write_text(text)
    return path


def _joint_spec(folder, site_a, site_b):
    """Site A's spec with site B's data sets appended, each under the name its own site gives it."""
    text = site_a.read_text()
    text = re.sub(r'^output = ".*"$', f'output = "{folder / "out"}"', text, flags=re.M)
    text = re.sub(r'^cache = ".*"$', f'cache = "{folder / "cache"}"', text, flags=re.M)
    extra = "[[datasets]]" + site_b.read_text().split("[[datasets]]", 1)[1]
    path = folder / "spec.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n" + extra)
    return path


@pytest.fixture(scope="module")
def sites(tiny_run, tmp_path_factory):
    spec_a, *_ = tiny_run
    where = tmp_path_factory.mktemp("sites")
    spec_b = _run(_site_b_spec(where / "site-b"))
    for name, spec in (("hospital-a", spec_a), ("hospital-b", spec_b)):
        out = CliRunner().invoke(cli, ["publish", str(spec.output), str(where / name), "--aggregates-only"])
        assert out.exit_code == 0, out.output
    return spec_a, spec_b, where


def test_merge_writes_a_multi_site_leaderboard(sites):
    spec_a, spec_b, where = sites
    result = CliRunner().invoke(cli, ["merge", str(where / "hospital-a"), str(where / "hospital-b"),
                                      "-o", str(where / "merged")])
    assert result.exit_code == 0, result.output
    assert "2 sites (hospital-a, hospital-b), 6 tasks, 50 replicates (seed 0)" in result.output
    board = pd.read_csv(where / "merged" / "leaderboard.csv", index_col="encoder")
    assert list(board.index) == sorted(spec_a.encoder_names)
    for site, spec in (("hospital-a", spec_a), ("hospital-b", spec_b)):
        own = pd.read_parquet(spec.output / "score" / "crs.parquet")
        own = own.set_index(own.columns[0]) if "encoder" in own.columns else own
        np.testing.assert_array_equal(board[f"crs_{site}"].to_numpy(), own["crs"].reindex(board.index).to_numpy())
    assert (board["crs_low"] <= board["crs"] + 1e-12).all() and (board["crs"] <= board["crs_high"] + 1e-12).all()
    expected = (board["rank_hospital-a"] == board["rank"]) & (board["rank_hospital-b"] == board["rank"])
    assert (board["holds_rank"] == expected).all()
    merged = json.loads((where / "merged" / "merged.json").read_text())
    assert merged["sites"][1]["tasks"] == ["hospital-b/zb-cxr", "hospital-b/zb-derm", "hospital-b/zb-fundus"]


def test_merge_refuses_bundles_that_do_not_share_replicates_or_encoders(sites, tmp_path):
    _, _, where = sites
    from crs.publish.manifest import write_manifest

    def republish(copy):
        manifest = json.loads((copy / "manifest.json").read_text())
        write_manifest(copy, manifest["kind"], {k: v for k, v in manifest.items() if k not in ("format", "kind", "files")})

    for key, value, named in (("seed", 7, "replicate seed"), ("n_boot", 20, "n_boot")):
        copy = tmp_path / f"other-{key}"
        shutil.copytree(where / "hospital-b", copy)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["replicates"][key] = value
        (copy / "manifest.json").write_text(json.dumps(manifest))
        data = json.loads((copy / "aggregates.json").read_text())
        data["settings"][key] = value
        (copy / "aggregates.json").write_text(json.dumps(data))
        if key == "n_boot":
            replicates = json.loads((copy / "replicates.json").read_text())
            replicates = {axis: {enc: v[:value] for enc, v in by.items()} for axis, by in replicates.items()}
            (copy / "replicates.json").write_text(json.dumps(replicates))
        republish(copy)
        result = CliRunner().invoke(cli, ["merge", str(where / "hospital-a"), str(copy), "-o", str(tmp_path / "m")])
        assert result.exit_code != 0 and named in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    tampered = tmp_path / "tampered"
    shutil.copytree(where / "hospital-b", tampered)
    (tampered / "replicates.json").write_text("{}")
    result = CliRunner().invoke(cli, ["merge", str(where / "hospital-a"), str(tampered), "-o", str(tmp_path / "m")])
    assert result.exit_code != 0 and "does not verify (changed: replicates.json" in result.output
    renamed = tmp_path / "renamed"
    shutil.copytree(where / "hospital-b", renamed)
    data = json.loads((renamed / "aggregates.json").read_text())
    data["encoders"][0]["input_size"] = 64
    (renamed / "aggregates.json").write_text(json.dumps(data))
    republish(renamed)
    result = CliRunner().invoke(cli, ["merge", str(where / "hospital-a"), str(renamed), "-o", str(tmp_path / "m")])
    assert result.exit_code != 0 and "encoder settings" in result.output


@pytest.fixture(scope="module")
def joint(sites):
    """Both sites' data sets scored together in one run with the same seeds and replicates, merged and not."""
    spec_a, spec_b, where = sites
    spec = _run(_joint_spec(where / "joint", spec_a.output.parent / "spec.toml", spec_b.output.parent / "spec.toml"))
    merged = CliRunner().invoke(cli, ["merge", str(where / "hospital-a"), str(where / "hospital-b"),
                                      "-o", str(where / "merged-joint")])
    assert merged.exit_code == 0, merged.output
    return spec, where


def test_merged_point_score_is_the_joint_runs(joint):
    """Axis errors, floor and CRS of the merged sites equal those of one run over both sites' data sets."""
    spec, where = joint
    board = pd.read_csv(where / "merged-joint" / "leaderboard.csv", index_col="encoder")
    merged = json.loads((where / "merged-joint" / "merged.json").read_text())["axis_errors"]
    errors = pd.read_parquet(spec.output / "score" / "axis_errors.parquet")
    errors = errors.set_index("encoder") if "encoder" in errors.columns else errors
    for encoder in board.index:
        for axis, value in merged[encoder].items():
            assert value == pytest.approx(errors.loc[encoder, f"{axis}_error"], abs=1e-12), (encoder, axis)
    own = pd.read_parquet(spec.output / "score" / "crs.parquet")
    own = own.set_index("encoder") if "encoder" in own.columns else own
    np.testing.assert_allclose(board["crs"].to_numpy(), own["crs"].reindex(board.index).to_numpy(), atol=1e-12)
    np.testing.assert_array_equal(board["rank"].to_numpy(), own["rank"].reindex(board.index).to_numpy())


def test_merged_replicates_are_the_joint_runs(joint):
    """Replicate r of the merged score is replicate r of the joint run: the intervals agree exactly.

    Holds because each task's patient resample is keyed on its name (crs.scoring.draws): hospital B's
    tasks sit at places 3-5 of the joint run and 0-2 alone, and draw the same patients in both."""
    spec, where = joint
    board = pd.read_csv(where / "merged-joint" / "leaderboard.csv", index_col="encoder")
    for axis in ("discrimination", "calibration", "label_efficiency", "robustness"):
        joint_reps = pd.read_parquet(spec.output / "score" / f"bootstrap_axis_{axis}.parquet")
        site_reps = [json.loads((where / name / "replicates.json").read_text())[axis] for name in ("hospital-a", "hospital-b")]
        for encoder in board.index:
            mean = (np.asarray(site_reps[0][encoder]) + np.asarray(site_reps[1][encoder])) / 2
            np.testing.assert_allclose(mean, joint_reps[encoder].to_numpy(), atol=1e-12)
    # the merged result prints the box (simultaneous over the cohort); the joint run keeps its box beside the
    # adaptive CRS interval it prints by default (decision 0181)
    own = pd.read_parquet(spec.output / "score" / "bootstrap.parquet")
    own = own.set_index("encoder") if "encoder" in own.columns else own
    for column in ("crs_low", "crs_high"):
        np.testing.assert_allclose(board[column].to_numpy(), own[column.replace("crs_", "crs_box_")].reindex(
            board.index).to_numpy(), atol=1e-12)
