"""``crs leaderboard BUNDLE... -o SITE``: static, self-contained pages from published bundles.

``index.html`` holds one leaderboard per bundle (its verification status, who published it and the
chain of bundles it extends) and links one card per encoder (``encoders/<name>.html``: its CRS, axes
and rank in every bundle that scores it). An aggregates-only bundle (a hospital's) shows the CRS and
intervals of its stored score and its axis errors, marked "aggregates only (no per-case data)"; a
merged multi-site result (``crs merge``'s folder) shows its leaderboard, every site's CRS and rank and
how each site's bundle was verified. Plain HTML and inline CSS: no script, font or image is
fetched from anywhere, so the site opens from a file system or any static host.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from crs.evaluate.artifacts import RunFolder
from crs.evaluate.contest import Contest, contest_of
from crs.publish.aggregates import AGGREGATES, AGGREGATES_FILE
from crs.publish.bundle import EXTENDS, RUN_DIR
from crs.publish.manifest import MANIFEST_FILE, read_manifest
from crs.publish.merge import LEADERBOARD_FILE, MERGED_FILE
from crs.publish.verdict import FAILED, VERIFIED
from crs.publish.verify import Verification, verify_bundle

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:64rem;padding:1rem;color:#1d2733}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{padding:.35rem .5rem;border-bottom:1px solid #d8dee6;text-align:right}th:first-child,td:first-child{text-align:left}
.ok{color:#116b2e}.bad{color:#a3141b;font-weight:600}.partial{color:#7a4b00;font-weight:600}.muted{color:#5b6775}.tier{font-weight:600}
.scroll{overflow-x:auto}code{font-size:.85rem}
"""
AXES = ("discrimination", "calibration", "label_efficiency", "robustness", "equity")
AGGREGATES_NOTE = "aggregates only (no per-case data)"


@dataclass(frozen=True)
class PublishedRun:
    """One bundle as the site shows it."""

    path: Path
    name: str
    manifest_sha256: str
    provenance: dict[str, Any]
    verification: Verification
    crs: pd.DataFrame
    kind: str = "full"
    aggregates: dict[str, Any] | None = None
    """An aggregates bundle's ``aggregates.json`` (tasks, axis errors, its stored CRS table); None for a full one."""
    replicates: dict[str, Any] | None = None
    """An aggregates bundle's manifest ``replicates`` (seed, n_boot) and ``min_cell``."""

    @property
    def extends(self) -> dict[str, Any] | None:
        return self.provenance.get(EXTENDS)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


def read_bundle(path: Path, public_key: Path | None = None, rescore: bool = True) -> PublishedRun:
    import hashlib

    manifest = read_manifest(path)
    verification = verify_bundle(path, public_key=public_key, score=rescore)
    kind = str(manifest.get("kind", "full"))
    aggregates = replicates = None
    if kind == AGGREGATES and (path / AGGREGATES_FILE).is_file():
        aggregates = json.loads((path / AGGREGATES_FILE).read_text())
        crs = pd.DataFrame.from_dict(aggregates.get("crs", {}), orient="index").rename_axis("encoder").reset_index()
        for column in ("rank", "auroc_rank"):  # stored as JSON numbers: whole ranks read back as floats
            if column in crs and crs[column].notna().all():
                crs[column] = crs[column].astype(int)
        replicates = {**manifest.get("replicates", {}), "min_cell": manifest.get("min_cell")}
    elif (RunFolder(path / RUN_DIR).score_dir / "crs.parquet").is_file():  # a bundle may lack it: then NOT verified
        crs = RunFolder(path / RUN_DIR).read_score_table("crs")
    else:
        crs = pd.DataFrame()
    provenance = dict(manifest.get("provenance", {}))
    name = path.name if kind == AGGREGATES else str(provenance.get("run_name") or path.name)  # a site: as crs merge names it
    return PublishedRun(path, name,
                        hashlib.sha256((path / MANIFEST_FILE).read_bytes()).hexdigest(), provenance, verification, crs,
                        kind, aggregates, replicates)


def _chain(run: PublishedRun, by_sha: dict[str, PublishedRun]) -> str:
    """The bundles ``run`` extends, newest first, each named when the site holds it."""
    parts, link = [], run.extends
    while link:
        known = by_sha.get(str(link.get("manifest_sha256")))
        label = html.escape(known.name if known else str(link.get("run_name") or "a bundle not on this site"))
        parts.append(f'<a href="#{_slug(known.name)}">{label}</a>' if known else label)
        link = link.get("chain")
    return " &larr; ".join(parts)


def _css(state: str) -> str:
    """Green for verified only, red for failed, amber for anything not fully checked."""
    return {VERIFIED: "ok", FAILED: "bad"}.get(state, "partial")


def _status(verification: Verification) -> str:
    """The bundle's verdict (:mod:`crs.publish.verdict`): what failed, or what held."""
    verdict = verification.verdict
    badge = f'<span class="{_css(verdict.state)}">{html.escape(verdict.label)}</span>'
    detail = html.escape(verdict.detail)
    return f"{badge}: {detail}" if verdict.state == FAILED else f"{badge} ({detail})"


def _number(value: Any, digits: int = 3) -> str:
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return html.escape(str(value))


def _contest(run: PublishedRun) -> Contest | None:
    """Who competes in ``run`` and where each stands (crs.evaluate.contest, the rule every view reads)."""
    if "encoder" not in run.crs or "crs" not in run.crs or run.crs.empty:
        return None
    settings = (run.aggregates or {}).get("settings") or {}  # a full bundle's table says who competes itself
    return contest_of(run.crs, settings.get("reference"), bool(settings.get("reference_competes", False)))


def _rank(contest: Contest | None, record: dict[str, Any], key: str = "rank") -> str:
    """The rank shown: among the contestants ('1–k' for a shared lead, 'baseline' for the reference's row)."""
    if contest is None:
        return str(record.get(key, ""))
    encoder = str(record["encoder"])
    if key == "auroc_rank":
        return "\u2014" if encoder == contest.baseline else str(contest.auroc_rank.get(encoder, ""))
    return contest.rank_label(encoder)


def _card_rank(contest: Contest | None, record: dict[str, Any], total: int) -> str:
    """'rank 2 of 3 candidates', 'the reference's baseline row (not ranked)' or the stored rank of an older bundle."""
    if contest is None:
        return f"rank {record.get('rank', '?')} of {total}"
    if str(record["encoder"]) == contest.baseline:
        return "the reference's baseline row (not ranked)"
    return f"rank {contest.rank_label(str(record['encoder']))} of {len(contest.contestants)} candidates"


def _leaderboard(run: PublishedRun, introduced: dict[str, str]) -> str:
    rows = []
    table = run.crs.sort_values("rank") if "rank" in run.crs else run.crs
    contest = _contest(run)
    for record in table.to_dict("records"):
        encoder = str(record["encoder"])
        in_tier = encoder in contest.tier if contest is not None else bool(record.get("in_leading_tier"))
        tier = "yes" if in_tier else ""
        origin = introduced.get(encoder, run.name)
        rows.append(
            f'<tr><td><a href="encoders/{_slug(encoder)}.html">{html.escape(encoder)}</a></td>'
            f"<td>{_rank(contest, record)}</td><td>{_number(record.get('crs'))}</td>"
            f"<td>{_number(record.get('crs_low'))} to {_number(record.get('crs_high'))}</td>"
            f'<td class="tier">{tier}</td><td>{_rank(contest, record, "auroc_rank")}</td>'
            f'<td class="muted">{html.escape(origin)}</td></tr>')
    head = ("<tr><th>encoder</th><th>rank</th><th>CRS</th><th>95 % interval</th><th>leading tier</th>"
            "<th>AUROC rank</th><th>first published in</th></tr>")
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


def _introduced(runs: list[PublishedRun], by_sha: dict[str, PublishedRun]) -> dict[str, dict[str, str]]:
    """Per bundle: encoder -> the name of the earliest bundle in its chain that scores it."""
    out: dict[str, dict[str, str]] = {}
    for run in runs:
        chain = [run]
        link = run.extends
        while link and str(link.get("manifest_sha256")) in by_sha:
            parent = by_sha[str(link.get("manifest_sha256"))]
            chain.append(parent)
            link = parent.extends
        first: dict[str, str] = {}
        for member in reversed(chain):
            for encoder in member.crs.get("encoder", pd.Series(dtype=str)).astype(str):
                first.setdefault(encoder, member.name)
        out[run.name] = first
    return out


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width,initial-scale=1"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


@dataclass(frozen=True)
class MergedResult:
    """A ``crs merge`` output folder as the site shows it."""

    path: Path
    name: str
    sites: list[dict[str, Any]]
    summary: dict[str, Any]
    board: pd.DataFrame


def read_merged(path: Path) -> MergedResult:
    """The merged multi-site result in ``path`` (``merged.json`` and ``leaderboard.csv`` of ``crs merge``)."""
    if not (path / MERGED_FILE).is_file() or not (path / LEADERBOARD_FILE).is_file():
        raise ValueError(f"{path} holds no {MERGED_FILE} and {LEADERBOARD_FILE}: not a `crs merge` folder "
                         "(make one with `crs merge BUNDLE... -o DIR`)")
    summary = json.loads((path / MERGED_FILE).read_text())
    board = pd.read_csv(path / LEADERBOARD_FILE)
    return MergedResult(path, path.name, list(summary.get("sites", [])), summary, board)


def _truth(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _merged_section(result: MergedResult, by_sha: dict[str, PublishedRun]) -> str:
    sites = result.sites
    checked = []
    for site in sites:
        known = by_sha.get(str(site.get("manifest_sha256")))
        label = (f'<a href="#{_slug(known.name)}">{html.escape(str(site["name"]))}</a>' if known
                 else html.escape(str(site["name"])))
        checked.append(f'<li>{label}: <span class="{_css(str(site.get("state")))}">{html.escape(str(site.get("verified", "?")))}</span> when merged; '
                       f"{len(site.get('tasks', []))} tasks</li>")
    replicates = result.summary.get("replicates", {})
    rows = []
    names = [str(site["name"]) for site in sites]
    for record in result.board.sort_values(["rank", "crs"], ascending=[True, False]).to_dict("records"):
        encoder = str(record["encoder"])
        per_site = "".join(f"<td>{_number(record.get(f'crs_{name}'))} ({record.get(f'rank_{name}', '?')})</td>"
                           for name in names)
        rows.append(f'<tr><td><a href="encoders/{_slug(encoder)}.html">{html.escape(encoder)}</a></td>'
                    f"<td>{record.get('rank', '')}</td><td>{_number(record.get('crs'))}</td>"
                    f"<td>{_number(record.get('crs_low'))} to {_number(record.get('crs_high'))}</td>"
                    f"<td>{_number(record.get('p_rank1'), 2)}</td>{per_site}"
                    f"<td>{'yes' if _truth(record.get('holds_rank')) else 'no'}</td></tr>")
    head = ("<tr><th>encoder</th><th>rank</th><th>merged CRS</th><th>box interval</th><th>P(rank 1)</th>"
            + "".join(f"<th>{html.escape(str(s['name']))} CRS (rank)</th>" for s in sites)
            + "<th>holds rank</th></tr>")
    return (f'<h2 id="merged-{_slug(result.name)}">multi-site result: {html.escape(result.name)}</h2>'
            f"<p>{len(sites)} sites ({html.escape(', '.join(str(s['name']) for s in sites))}), merged from "
            f"{AGGREGATES_NOTE}: {sum(len(s.get('tasks', [])) for s in sites)} tasks, "
            f"{replicates.get('n_boot', '?')} replicates (seed {replicates.get('seed', '?')}); axes "
            f"{html.escape(', '.join(result.summary.get('axes', [])))}.</p><ul>{''.join(checked)}</ul>"
            f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>')


def _card(encoder: str, runs: list[PublishedRun], merged: list[MergedResult] | None = None) -> str:
    sections = [f'<p><a href="../index.html">&larr; all bundles</a></p><h1>{html.escape(encoder)}</h1>']
    for run in runs:
        rows = run.crs[run.crs["encoder"].astype(str) == encoder] if "encoder" in run.crs else run.crs.iloc[:0]
        if rows.empty:
            continue
        record = rows.iloc[0].to_dict()
        if run.aggregates is not None:  # the stored axis errors (u is not shipped)
            errors = run.aggregates.get("axis_errors", {}).get(encoder, {})
            axes = "".join(f"<tr><td>{axis.replace('_', ' ')}</td><td>{_number(errors.get(axis))}</td></tr>"
                           for axis in AXES if errors.get(axis) is not None)
            head, note = "<tr><th>axis</th><th>error (lower is better)</th></tr>", f" {AGGREGATES_NOTE}."
        else:
            axes = "".join(f"<tr><td>{axis.replace('_', ' ')}</td><td>{_number(record.get(f'u_{axis}'))}</td></tr>"
                           for axis in AXES if f"u_{axis}" in record)
            head, note = "<tr><th>axis</th><th>u (0.5 = the reference)</th></tr>", ""
        sections.append(
            f"<h2>in {html.escape(run.name)}</h2><p>CRS {_number(record.get('crs'))} "
            f"(95 % interval {_number(record.get('crs_low'))} to {_number(record.get('crs_high'))}), "
            f"{_card_rank(_contest(run), record, len(run.crs))}; {_status(run.verification)}.{note}</p>"
            f"<table>{head}{axes}</table>")
    for result in merged or []:
        row = result.board[result.board["encoder"].astype(str) == encoder]
        if row.empty:
            continue
        record = row.iloc[0].to_dict()
        sections.append(
            f"<h2>in the multi-site result {html.escape(result.name)}</h2><p>merged CRS {_number(record.get('crs'))} "
            f"(box interval {_number(record.get('crs_low'))} to {_number(record.get('crs_high'))}), rank "
            f"{record.get('rank', '?')} of {len(result.board)} over {len(result.sites)} sites; "
            f"{'holds its rank at every site' if _truth(record.get('holds_rank')) else 'does not hold its rank at every site'}.</p>")
    return _page(f"crs: {encoder}", "".join(sections))


def _about(run: PublishedRun, chain: str) -> str:
    """The line under a bundle's heading: verification, who published it, what it holds."""
    published = html.escape(str(run.provenance.get("published", "")))
    version = html.escape(str(run.provenance.get("crs_version", "?")))
    if run.aggregates is not None:
        tasks = run.aggregates.get("tasks", [])
        replicates = run.replicates or {}
        return (f"<p>{_status(run.verification)}. <strong>{AGGREGATES_NOTE}</strong>: a site's axis errors, "
                f"replicate vectors and group sizes, {len(tasks)} tasks "
                f"({html.escape(', '.join(str(t.get('name')) for t in tasks))}), cells under "
                f"{html.escape(str(replicates.get('min_cell', '?')))} images suppressed; "
                f"{html.escape(str(replicates.get('n_boot', '?')))} replicates (seed "
                f"{html.escape(str(replicates.get('seed', '?')))}). Published {published} with crs {version}."
                f' <span class="muted">manifest sha256 <code>{run.manifest_sha256[:16]}</code></span></p>')
    return (f"<p>{_status(run.verification)}. Published {published} with crs {version}; data sets: "
            f"{html.escape(', '.join(map(str, run.provenance.get('datasets', []))))}."
            + (f" Extends: {chain}." if chain else "")
            + f' <span class="muted">manifest sha256 <code>{run.manifest_sha256[:16]}</code></span></p>')


def write_site(bundles: list[str | Path], out: str | Path, *, public_keys: dict[str, Path] | None = None,
               rescore: bool = True, merged: list[str | Path] | None = None) -> Path:
    """Write the leaderboard site for ``bundles`` into ``out``; return ``index.html``'s path.

    ``public_keys``: bundle path -> its publisher's public key (signatures are checked where given);
    ``rescore``: re-score each full bundle (the default; without it no full bundle is shown as verified);
    ``merged``: ``crs merge`` output folders, each shown as a multi-site leaderboard.
    """
    results = [read_merged(Path(m)) for m in merged or []]
    keys = {str(Path(k)): v for k, v in (public_keys or {}).items()}
    runs = [read_bundle(Path(b), keys.get(str(Path(b))), rescore) for b in bundles]
    seen: set[str] = set()
    for index, run in enumerate(runs):  # a second bundle of the same name is told apart by its folder
        if run.name in seen:
            runs[index] = dataclasses.replace(run, name=f"{run.name} ({run.path.name})")
        seen.add(runs[index].name)
    by_sha: dict[str, PublishedRun] = {}
    order = {VERIFIED: 0, FAILED: 2}
    for run in sorted(runs, key=lambda r: order.get(r.verification.verdict.state, 1)):  # a verified copy names the link
        by_sha.setdefault(run.manifest_sha256, run)
    introduced = _introduced(runs, by_sha)
    out = Path(out)
    (out / "encoders").mkdir(parents=True, exist_ok=True)
    sections = ["<h1>crs leaderboard</h1><p class=\"muted\">Published runs of the Clinical Reliability Score. "
                "A bundle is shown as verified only when its manifest holds, every file is accounted for, its re-score "
                "reproduces (a full bundle) and its signature holds with a key named for it; anything less is shown as "
                "what it is (docs/publish.md). An extended run scores its encoders "
                "together with those of the bundle it extends, on the same patients, draws and seeds.</p>"]
    for result in results:
        sections.append(_merged_section(result, by_sha))
    for run in runs:
        sections.append(f'<h2 id="{_slug(run.name)}">{html.escape(run.name)}</h2>' + _about(run, _chain(run, by_sha))
                        + _leaderboard(run, introduced[run.name]))
    (out / "index.html").write_text(_page("crs leaderboard", "".join(sections)))
    encoders = sorted({str(e) for run in runs for e in run.crs.get("encoder", pd.Series(dtype=str))}
                      | {str(e) for result in results for e in result.board["encoder"]})
    for encoder in encoders:
        (out / "encoders" / f"{_slug(encoder)}.html").write_text(_card(encoder, runs, results))
    (out / "site.json").write_text(json.dumps(
        {"bundles": [{"name": r.name, "path": str(r.path), "kind": r.kind, "manifest_sha256": r.manifest_sha256,
                      "verified": r.verification.verdict.verified, "verdict": r.verification.verdict.line()}
                     for r in runs],
         "merged": [{"name": m.name, "path": str(m.path), "sites": [s.get("name") for s in m.sites]} for m in results]},
        indent=1) + "\n")
    return out / "index.html"
