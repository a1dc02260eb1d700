"""Issue 46 items 1-3: one notion of "verified" (crs verify, crs merge, the site), every bundle file accounted for,
and nothing local in a bundle.

From the user's side on the tiny synthetic run: the issue's forgery (a run folder copied, one CRS set to 0.9,
published and signed with the forger's own key) must never be shown green on the leaderboard site; a bundle
whose score tables were deleted or whose score.txt was edited, with the manifest rewritten, must fail
`crs verify`; a bundle must not carry the publisher's absolute paths, and `crs publish` must refuse one that
would carry a path, a host name or a credential.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from crs.cli.main import cli

pytest.importorskip("cryptography")


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _rewrite_manifest(bundle):
    from crs.publish.manifest import write_manifest

    manifest = json.loads((bundle / "manifest.json").read_text())
    write_manifest(bundle, manifest["kind"], {k: v for k, v in manifest.items() if k not in ("format", "kind", "files")})


@pytest.fixture(scope="module")
def published(tiny_run, tmp_path_factory):
    """An honest signed bundle of the tiny run, and the issue's forgery: the run copied, one CRS set to 0.9, signed
    with the forger's own key."""
    spec, *_ = tiny_run
    where = tmp_path_factory.mktemp("verified")
    for name in ("lab", "evil"):
        assert _invoke("keygen", where / name).exit_code == 0
    honest = _invoke("publish", spec.output, where / "honest", "--sign", where / "lab")
    assert honest.exit_code == 0, honest.output
    evilrun = where / "evilrun"
    shutil.copytree(spec.output, evilrun)
    table = pd.read_parquet(evilrun / "score" / "crs.parquet")
    table.loc[table.index[-1], "crs"] = 0.9
    table.to_parquet(evilrun / "score" / "crs.parquet", index=False)
    forged = _invoke("publish", evilrun, where / "t4", "--sign", where / "evil")
    assert forged.exit_code == 0, forged.output
    return spec, where


def _status(site):
    """The verification status line of the site's one bundle, and the index page."""
    index = (site / "index.html").read_text()
    section = index.split("<h2 id=", 1)[1]
    return section.split("</p>", 1)[0], index


def test_a_forged_bundle_signed_with_the_forgers_key_is_never_shown_verified(published, tmp_path):
    _, where = published
    t4 = where / "t4"
    # the default: the site re-scores, and the reason shown is the failing re-score
    assert _invoke("leaderboard", t4, "-o", tmp_path / "site").exit_code == 0
    status, index = _status(tmp_path / "site")
    assert 'class="bad">NOT verified</span>: re-score FAILED: score_crs.crs' in status, status
    assert 'class="ok"' not in index
    # the user names the forger's key: the signature holds, the re-score still fails
    assert _invoke("leaderboard", t4, "--key", f"{t4}={where / 'evil.pub'}", "-o", tmp_path / "keyed").exit_code == 0
    status, index = _status(tmp_path / "keyed")
    assert "NOT verified</span>: re-score FAILED: score_crs.crs" in status and 'class="ok"' not in index
    # without the re-score nothing can be verified: shown as what it is, not green
    assert _invoke("leaderboard", t4, "--no-rescore", "-o", tmp_path / "quick").exit_code == 0
    status, index = _status(tmp_path / "quick")
    assert 'class="partial">signature not checked, not re-scored</span>' in status, status
    assert 'class="ok"' not in index and "verified" not in status.replace("NOT verified", "")
    site = json.loads((tmp_path / "quick" / "site.json").read_text())
    assert site["bundles"][0]["verified"] is False


def test_only_a_rescored_bundle_checked_with_a_named_key_is_green(published, tmp_path):
    _, where = published
    honest = where / "honest"
    assert _invoke("leaderboard", honest, "--key", f"{honest}={where / 'lab.pub'}", "-o", tmp_path / "full").exit_code == 0
    status, _ = _status(tmp_path / "full")
    assert 'class="ok">verified</span>' in status and "re-score reproduced" in status and "signature valid with lab.pub" in status
    assert _invoke("leaderboard", honest, "-o", tmp_path / "nokey").exit_code == 0
    status, index = _status(tmp_path / "nokey")
    assert 'class="partial">signature not checked</span>' in status and 'class="ok"' not in index
    unsigned = tmp_path / "unsigned"
    shutil.copytree(honest, unsigned)
    (unsigned / "manifest.sig").unlink()
    assert _invoke("leaderboard", unsigned, "-o", tmp_path / "unsigned-site").exit_code == 0
    status, index = _status(tmp_path / "unsigned-site")
    assert 'class="partial">unsigned</span>' in status and 'class="ok"' not in index
    # crs verify says the same words
    said = _invoke("verify", unsigned)
    assert said.exit_code == 0 and "verify: not verified, nothing failed: unsigned" in said.output
    said = _invoke("verify", honest, "--key", where / "lab.pub")
    assert said.exit_code == 0 and said.output.strip().endswith(f"verify: verified ({honest})")


@pytest.mark.parametrize("tamper", ["deleted tables", "edited score.txt", "extra file", "edited summary"])
def test_verify_fails_a_bundle_missing_or_changing_an_output_with_the_manifest_rewritten(published, tmp_path, tamper):
    _, where = published
    copy = tmp_path / "copy"
    shutil.copytree(where / "honest", copy)
    (copy / "manifest.sig").unlink()
    score = copy / "run" / "score"
    if tamper == "deleted tables":
        (score / "crs.parquet").unlink()
        (score / "axis_errors.parquet").unlink()
        named = "missing output: run/score/axis_errors.parquet (the re-score writes it); missing output: run/score/crs.parquet"
    elif tamper == "edited score.txt":
        text = (score / "score.txt").read_text()
        line = next(line for line in text.splitlines() if line.startswith("resnet18 "))  # its leaderboard row
        crs = line.split()[1]  # the CRS column, as the reader edited it
        assert crs != "0.999" and float(crs) < 1
        (score / "score.txt").write_text(text.replace(line, line.replace(crs, "0.999", 1), 1))
        named = "run/score/score.txt: not byte-identical to the re-score's"
    elif tamper == "extra file":
        (copy / "run" / "notes.txt").write_text("nothing\n")
        named = "not part of a crs bundle: run/notes.txt"
    else:
        summary = json.loads((score / "summary.json").read_text())
        summary["reference"] = "resnet18"
        (score / "summary.json").write_text(json.dumps(summary))
        named = "run/score/summary.json: reference"
    _rewrite_manifest(copy)
    result = _invoke("verify", copy)
    assert result.exit_code == 1, result.output
    assert "manifest: every file as published" in result.output  # the hashes were rewritten: only the content check sees it
    assert named in result.output and f"verify: FAILED ({copy})" in result.output


def test_a_bundle_carries_no_local_path_of_the_publisher(published):
    spec, where = published
    places = [str(spec.cache), str(spec.output), str(spec.source)] + [str(e.root) for e in spec.datasets]
    assert len(set(places)) >= 3 and all(p.startswith("/") for p in places)
    for bundle in (where / "honest",):
        for path in bundle.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert not [p for p in places if p.encode() in data], path
    written = json.loads((where / "honest" / "spec.json").read_text())
    assert written["cache"] == "<local cache>" and written["output"] == "<local output>" and "source" not in written
    assert [d["root"] for d in written["datasets"]] == [f"<local root of {d['name']}>" for d in written["datasets"]]
    # the records still re-score and still say which run they are
    assert "re-score: reproduced" in _invoke("verify", where / "honest").output


def test_an_aggregates_bundle_with_an_edited_crs_fails_verify_merge_and_the_site(published, tmp_path):
    """An aggregates bundle holds no records, but its stored CRS must follow from its own axis errors and replicates."""
    spec, _ = published
    made = _invoke("publish", spec.output, tmp_path / "agg", "--aggregates-only")
    assert made.exit_code == 0, made.output
    for path in (tmp_path / "agg").rglob("*"):  # no local place here either
        assert str(spec.cache).encode() not in path.read_bytes() and str(spec.source).encode() not in path.read_bytes()
    honest = _invoke("verify", tmp_path / "agg")
    assert honest.exit_code == 0 and "re-score: reproduced" in honest.output, honest.output
    forged = tmp_path / "forged"
    shutil.copytree(tmp_path / "agg", forged)
    data = json.loads((forged / "aggregates.json").read_text())
    encoder = sorted(data["crs"])[-1]
    data["crs"][encoder]["crs"] = 0.9
    (forged / "aggregates.json").write_text(json.dumps(data))
    _rewrite_manifest(forged)
    result = _invoke("verify", forged)
    assert result.exit_code == 1 and "re-score: NOT reproduced: aggregates_crs.crs (1 of" in result.output, result.output
    merged = _invoke("merge", tmp_path / "agg", forged, "-o", tmp_path / "merged")
    assert merged.exit_code != 0 and "its CRS does not follow from its axis errors" in merged.output, merged.output
    assert _invoke("leaderboard", forged, "-o", tmp_path / "site").exit_code == 0
    status, index = _status(tmp_path / "site")
    assert 'class="bad">NOT verified</span>: re-score FAILED: aggregates_crs.crs' in status and 'class="ok"' not in index


@pytest.mark.parametrize("planted", ["path", "host", "token"])
def test_publish_refuses_a_bundle_that_would_carry_a_path_a_host_name_or_a_credential(published, tmp_path, monkeypatch,
                                                                                      planted):
    import socket

    spec, _ = published
    run = tmp_path / "run"
    shutil.copytree(spec.output, run)
    monkeypatch.setattr(socket, "gethostname", lambda: "ward7-gpu03")
    monkeypatch.setattr(socket, "getfqdn", lambda *a: "ward7-gpu03.hospital.example")
    note = {"path": "/mnt/pacs/export/2026", "host": "scored on ward7-gpu03 overnight",
            "token": "hf_" + "aB3" * 12}[planted]
    summary = json.loads((run / "score" / "summary.json").read_text())
    summary["note"] = note
    (run / "score" / "summary.json").write_text(json.dumps(summary))
    result = _invoke("publish", run, tmp_path / "b")
    assert result.exit_code != 0
    what = {"path": "an absolute local path", "host": "this machine's host name", "token": "a Hugging Face token"}[planted]
    assert f"not published: run/score/summary.json holds {what}" in result.output, result.output
    assert not (tmp_path / "b" / "manifest.json").exists() and not any((tmp_path / "b").iterdir())


def test_a_printed_number_rounded_the_other_way_on_another_cpu_still_verifies(published, tmp_path):
    # a value on a rounding boundary of score.txt can print one unit apart when the re-score's CPU differs in its last
    # bit (the tables agree to the contract): an honest bundle must not read "NOT verified" for it; two units must
    _, where = published
    text = (where / "honest" / "run" / "score" / "score.txt").read_text()
    line = next(line for line in text.splitlines() if line.startswith("resnet18 "))
    crs = line.split()[1]
    places = len(crs.partition(".")[2])
    for units, verified in ((1, True), (2, False)):
        copy = tmp_path / f"copy{units}"
        shutil.copytree(where / "honest", copy)
        (copy / "manifest.sig").unlink()
        moved = f"{float(crs) + units * 10 ** -places:.{places}f}"
        (copy / "run" / "score" / "score.txt").write_text(text.replace(line, line.replace(crs, moved, 1), 1))
        _rewrite_manifest(copy)
        result = _invoke("verify", copy)
        assert (result.exit_code == 0) is verified, result.output
        if verified:
            assert "1 printed number(s) one unit apart in the last digit" in result.output
        else:
            assert "run/score/score.txt: not byte-identical to the re-score's" in result.output
