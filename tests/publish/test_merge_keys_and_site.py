"""Issue 42: `crs merge` checks what it merges (manifest, and the signature where a key is given), and the
leaderboard site shows aggregates-only bundles and a merged multi-site result (Chromium, offline).

Site A is the tiny run, site B the tiny spec on other patients (the synthetic loader's seed 2); each
publishes aggregates only, signed with its own key.
"""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

from tiny import write_tiny_spec

pytest.importorskip("cryptography")
from headless import CHROMIUM, chromium


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def signed_sites(tiny_run, tmp_path_factory):
    spec_a, *_ = tiny_run
    where = tmp_path_factory.mktemp("signed-sites")
    path = write_tiny_spec(where / "site-b")
    path.write_text(path.read_text().replace("image_size = 32", "image_size = 32, seed = 2"))
    ran = _invoke("run", path, "-q")
    assert ran.exit_code == 0, ran.output
    for name, out in (("agg-a", spec_a.output), ("agg-b", where / "site-b" / "out")):
        assert _invoke("keygen", where / name).exit_code == 0
        published = _invoke("publish", out, where / "bundles" / name, "--aggregates-only", "--sign", where / name)
        assert published.exit_code == 0, published.output
    return where


def _bundles(where):
    return where / "bundles" / "agg-a", where / "bundles" / "agg-b"


def test_merge_with_keys_checks_every_signature_and_says_how_each_bundle_was_verified(signed_sites):
    where = signed_sites
    a, b = _bundles(where)
    result = _invoke("merge", a, b, "--key", f"{a}={where / 'agg-a.pub'}", "--key", f"{b}={where / 'agg-b.pub'}",
                     "-o", where / "merged")
    assert result.exit_code == 0, result.output
    for name in ("agg-a", "agg-b"):  # the verdict crs verify and the site give (crs.publish.verdict)
        assert (f"{name}: verified (manifest holds; every file accounted for; re-score reproduced; "
                f"signature valid with {name}.pub)") in result.output
    merged = json.loads((where / "merged" / "merged.json").read_text())
    assert [s["verified"].split("signature ")[-1] for s in merged["sites"]] == ["valid with agg-a.pub)",
                                                                               "valid with agg-b.pub)"]
    assert [s["state"] for s in merged["sites"]] == ["verified", "verified"]
    unkeyed = _invoke("merge", a, b, "-o", where / "merged-unkeyed")
    assert unkeyed.exit_code == 0, unkeyed.output
    assert unkeyed.output.count(": signature not checked (manifest holds;") == 2 and "verified (" not in unkeyed.output
    # the keyed and unkeyed merges rank alike: checking changes nothing of the score
    pd.testing.assert_frame_equal(pd.read_csv(where / "merged" / "leaderboard.csv"),
                                  pd.read_csv(where / "merged-unkeyed" / "leaderboard.csv"))


def _one_line_refusal(result, *needles):
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_merge_refuses_an_unsigned_a_resigned_or_another_sites_bundle_when_keys_are_asked_for(signed_sites, tmp_path):
    from crs.publish.manifest import write_manifest

    where = signed_sites
    a, b = _bundles(where)
    # one key for every bundle: B is signed by another site's key
    _one_line_refusal(_invoke("merge", a, b, "--key", where / "agg-a.pub", "-o", tmp_path / "m"),
                      f"{b}: the signature does not hold with {where / 'agg-a.pub'}")
    # B's measures changed and its manifest rewritten: the manifest holds and the CRS still follows from the axis
    # errors (measures are the site's word alone), the signature does not
    forged = tmp_path / "forged"
    shutil.copytree(b, forged)
    measures = (forged / "measures.json").read_text()
    assert '": 0.' in measures
    (forged / "measures.json").write_text(measures.replace('": 0.', '": 0.1', 1))
    manifest = json.loads((forged / "manifest.json").read_text())
    write_manifest(forged, manifest["kind"], {k: v for k, v in manifest.items() if k not in ("format", "kind", "files")})
    _one_line_refusal(_invoke("merge", a, forged, "--key", f"{a}={where / 'agg-a.pub'}",
                              "--key", f"{forged}={where / 'agg-b.pub'}", "-o", tmp_path / "m"),
                      f"{forged}: the signature does not hold")
    # without a key for it, the forged bundle's manifest holds: it merges, and the output says it was not signed-checked
    loose = _invoke("merge", a, forged, "--key", f"{a}={where / 'agg-a.pub'}", "-o", tmp_path / "loose")
    assert loose.exit_code == 0, loose.output
    assert "forged: signature not checked (manifest holds;" in loose.output
    # replicates changed so that the stored CRS interval no longer follows: refused with or without a key
    moved = tmp_path / "moved"
    shutil.copytree(b, moved)
    replicates = json.loads((moved / "replicates.json").read_text())
    first = next(iter(replicates["discrimination"]))
    replicates["discrimination"][first] = [v + 0.05 for v in replicates["discrimination"][first]]
    (moved / "replicates.json").write_text(json.dumps(replicates))
    write_manifest(moved, manifest["kind"], {k: v for k, v in manifest.items() if k not in ("format", "kind", "files")})
    _one_line_refusal(_invoke("merge", a, moved, "-o", tmp_path / "m"), "its CRS does not follow from its axis errors")
    # an unsigned bundle with a key
    unsigned = tmp_path / "unsigned"
    shutil.copytree(b, unsigned)
    (unsigned / "manifest.sig").unlink()
    _one_line_refusal(_invoke("merge", a, unsigned, "--key", where / "agg-a.pub", "-o", tmp_path / "m"),
                      f"{unsigned} is not signed, but a key was given for it")
    # a tampered file is refused by the manifest, with or without keys
    tampered = tmp_path / "tampered"
    shutil.copytree(b, tampered)
    (tampered / "aggregates.json").write_text("{}")
    _one_line_refusal(_invoke("merge", a, tampered, "-o", tmp_path / "m"), "does not verify (changed: aggregates.json")
    # a key for a bundle that is not merged
    _one_line_refusal(_invoke("merge", a, b, "--key", f"{tmp_path / 'other'}={where / 'agg-a.pub'}", "-o", tmp_path / "m"),
                      "is not among the bundles merged")


def test_a_signed_bundle_checked_without_its_key_fails_nothing_and_says_the_signature_was_not_checked(signed_sites):
    a, _ = _bundles(signed_sites)
    result = _invoke("verify", a)
    assert result.exit_code == 0, result.output
    assert "signature: not checked (signed; give the publisher's public key)" in result.output
    assert "verify: not verified, nothing failed: signature not checked" in result.output


def test_the_site_shows_aggregates_bundles_and_the_merged_result_offline(signed_sites, tmp_path):
    where = signed_sites
    a, b = _bundles(where)
    assert _invoke("merge", a, b, "--key", f"{a}={where / 'agg-a.pub'}", "--key", f"{b}={where / 'agg-b.pub'}",
                   "-o", tmp_path / "merged").exit_code == 0
    tampered = tmp_path / "agg-c"
    shutil.copytree(b, tampered)
    (tampered / "measures.json").write_text("[]\n")
    site = tmp_path / "site"
    made = _invoke("leaderboard", a, b, tampered, "--key", f"{a}={where / 'agg-a.pub'}", "--merged", tmp_path / "merged",
                   "-o", site)
    assert made.exit_code == 0, made.output
    index = (site / "index.html").read_text()
    assert index.count("aggregates only (no per-case data)") >= 3
    section_a = index.split('id="agg-a"')[1].split("<h2")[0]
    assert "signature valid" in section_a and "3 tasks (cxr, derm, fundus)" in section_a
    stored = json.loads((a / "aggregates.json").read_text())["crs"]
    for encoder, row in stored.items():  # the leaderboard is the site's stored score: CRS and interval
        assert f"{row['crs']:.3f}</td><td>{row['crs_low']:.3f} to {row['crs_high']:.3f}" in section_a, encoder
    section_b = index.split('id="agg-b"')[1].split("<h2")[0]  # signed, no key given: not green, says so
    assert 'class="partial">signature not checked</span> (manifest holds;' in section_b and 'class="ok"' not in section_b
    assert "<td>1</td>" in section_b and "<td>1.0</td>" not in section_b  # ranks as whole numbers
    assert "NOT verified</span>: changed: measures.json" in index.split('id="agg-c"')[1]
    merged = index.split('id="merged-merged"')[1].split('<h2 id="agg-a"')[0]
    assert "2 sites (agg-a, agg-b)" in merged and "6 tasks" in merged
    assert 'class="ok">verified (' in merged and "signature valid with agg-a.pub" in merged and "agg-b CRS (rank)" in merged
    board = pd.read_csv(tmp_path / "merged" / "leaderboard.csv", index_col="encoder")
    for encoder, row in board.iterrows():
        assert f"{row['crs']:.3f}</td><td>{row['crs_low']:.3f} to {row['crs_high']:.3f}" in merged, encoder
        card = (site / "encoders" / f"{encoder}.html").read_text()
        assert "in the multi-site result merged" in card and "error (lower is better)" in card
    pages = [index, *(p.read_text() for p in (site / "encoders").glob("*.html"))]
    for page in pages:  # nothing is fetched from anywhere: no absolute URL in any src or href
        assert not re.search(r'(src|href)="(https?:)?//', page)
    if CHROMIUM is None:
        pytest.skip("chromium not installed (apt-get install chromium); .ci/run installs it")
    shown = chromium(tmp_path, "--dump-dom", (site / "index.html").as_uri())
    assert "multi-site result: merged" in shown and "aggregates only (no per-case data)" in shown
    # rendered: four tables (merged, three bundles), a row per encoder in each plus its head
    assert shown.count("<table>") == 4 and shown.count("<tr>") == 4 * (len(board) + 1)
