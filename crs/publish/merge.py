"""``crs merge BUNDLE... -o OUT``: a multi-site leaderboard from aggregates-only bundles (issue 42 item 3).

Each site scored its own patients with the same replicate seed and n_boot, so replicate r of every
site is one draw of that site's patients (sites are resampled independently: different patients).
Every task of every site is a task of the merged cohort (named ``site/task``). An axis error of the
whole cohort is the mean over the tasks that measure the axis (:func:`crs.scoring.formula.axis_errors_from_metrics`),
so it is the mean of the sites' axis errors weighted by the number of their tasks that measure it;
replicate r of it is the same mean of the sites' replicate r. Its standard error follows
:func:`crs.scoring.formula.axis_standard_errors` (tasks are independent): sqrt(sum (n_s se_s)^2) / sum n_s.
The merged CRS, its floor and reference are then :func:`crs.scoring.formula.point_estimate`'s, and its
interval is the default projected box (:func:`crs.scoring.projection.box_intervals`) over the merged replicates.

Every bundle is checked before it is read as ``crs verify`` checks it (its re-score: the CRS table derived
again from its axis errors and replicates): its manifest, files and re-score always, its Ed25519 signature when a public key is given
for it (``keys``); a bundle that fails is refused in one line, and the output gives each bundle's verdict
(:mod:`crs.publish.verdict`: ``verified`` only with a signature checked against a named key). The optional ``equity`` axis (1 - the worst-group AUROC, a mean over (task,
attribute) pairs) merges like the four, weighted by the sites' numbers of pairs (decision 0148).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd

from crs.publish.aggregates import SUBGROUPS_FILE
from crs.publish.sites import (
    MergeError,
    Site,
    aggregates_manifest,
    cohort_score,
    read_site_files,
)
from crs.publish.verdict import Verdict
from crs.publish.verify import verify_bundle
from crs.scoring.formula import EQUITY

LEADERBOARD_FILE = "leaderboard.csv"
SUBGROUPS_CSV = "subgroups.csv"
MERGED_FILE = "merged.json"
TEXT_FILE = "leaderboard.txt"


def _checked(path: Path, public_key: Path | None) -> Verdict:
    """The bundle's verdict (:mod:`crs.publish.verdict`, as ``crs verify`` and the site say it); MergeError when a check
    failed: a changed, missing, added or unaccounted file, an unsigned bundle given a key, a signature that does not hold."""
    try:
        verification = verify_bundle(path, public_key=public_key)
    except ValueError as error:
        raise MergeError(f"{path}: {error}") from None
    problems = verification.manifest_problems + verification.contents_problems
    if verification.rescore is not None and not verification.rescore.holds:
        problems += (f"its CRS does not follow from its axis errors: {verification.rescore.verdict()}",)
    if problems:
        raise MergeError(f"{path} does not verify ({problems[0]}); run `crs verify {path}` and fetch it again")
    if verification.signature.startswith("missing"):
        raise MergeError(f"{path} is not signed, but a key was given for it ({public_key}); ask the site for a "
                         f"signed bundle (`crs publish RUN BUNDLE --aggregates-only --sign KEY`) or merge without --key")
    if verification.signature == "invalid":
        raise MergeError(f"{path}: the signature does not hold with {public_key} (the bundle changed after signing, "
                         "or the key is another site's); fetch the bundle and the site's public key again")
    return verification.verdict


def read_site(path: str | Path, name: str | None = None, public_key: str | Path | None = None) -> Site:
    """The aggregates bundle at ``path`` (MergeError when it is not one or does not verify; with
    ``public_key``, also when it is unsigned or its signature does not hold)."""
    path = Path(path)
    aggregates_manifest(path)
    verdict = _checked(path, None if public_key is None else Path(public_key))
    return dataclasses.replace(read_site_files(path, name), verified=verdict.line(), state=verdict.state)


def check_sites(sites: list[Site]) -> None:
    """One line refusing the first difference that makes replicates or encoders incomparable."""
    first = sites[0]
    for site in sites[1:]:
        for what, mine, theirs in (("replicate seed", site.seed, first.seed), ("n_boot", site.n_boot, first.n_boot),
                                   ("encoders", site.encoders, first.encoders),
                                   ("encoder settings", sorted(site.encoder_settings, key=str),
                                    sorted(first.encoder_settings, key=str))):
            if mine != theirs:
                raise MergeError(f"{site.path}: {what} {mine} differ from {first.path}'s {theirs}; every site must "
                                 "score the same encoders with the same [score] seed and n_boot before merging")
        for key in sorted(set(site.settings) | set(first.settings)):
            if site.settings.get(key) != first.settings.get(key):
                raise MergeError(f"{site.path}: [score] {key} = {site.settings.get(key)!r} differs from {first.path}'s "
                                 f"{first.settings.get(key)!r}; score every site with the same [score] settings")
    if first.settings.get("equity"):
        for site in sites:
            if not site.task_counts.get(EQUITY):
                raise MergeError(f"{site.path}: the equity axis is on but the bundle names no (task, attribute) pair "
                                 "behind it; publish it again with this crs")
    names = [site.name for site in sites]
    if len(set(names)) != len(names):
        raise MergeError(f"two bundles are named alike ({names}); give each site's bundle its own folder name")


def merged_subgroups(sites: list[Site]) -> pd.DataFrame:
    """Every site's subgroup rows, its tasks named ``site/task``: a subgroup of the merged cohort is a subgroup of
    one site's task, so its size and point values are that site's (a joint run's too); the intervals are each
    site's own box. Suppressed cells stay suppressed (no size, no value)."""
    rows = []
    for site in sites:
        path = site.path / SUBGROUPS_FILE
        for row in json.loads(path.read_text()) if path.is_file() else []:
            rows.append({"site": site.name, **row, "task": f"{site.name}/{row['task']}"})
    columns = ["site", "encoder", "task", "condition", "attribute", "group", "images"]
    frame = pd.DataFrame(rows)
    return frame.reindex(columns=columns + [c for c in frame.columns if c not in columns])


def _keys_for(bundles: list[str | Path], keys: dict[str, str | Path] | str | Path | None) -> list[Path | None]:
    """Per bundle its public key. ``keys``: one key for every bundle (a path), or bundle path -> key, where the
    entry ``"*"`` is the key of every bundle not named (bundles without a key are checked by manifest only)."""
    if keys is None:
        return [None] * len(bundles)
    if not isinstance(keys, dict):
        return [Path(keys)] * len(bundles)
    named = {str(Path(k)) if k != "*" else k: Path(v) for k, v in keys.items()}
    unknown = sorted(set(named) - {str(Path(b)) for b in bundles} - {"*"})
    if unknown:
        raise MergeError(f"--key names {unknown[0]}, which is not among the bundles merged; give BUNDLE=PUBLIC_KEY "
                         "with BUNDLE as on the command line")
    return [named.get(str(Path(b)), named.get("*")) for b in bundles]


def merge(bundles: list[str | Path], out: str | Path, *, keys: dict[str, str | Path] | str | Path | None = None) -> pd.DataFrame:
    """Merge aggregates bundles into ``out`` (leaderboard.csv, leaderboard.txt, merged.json, subgroups.csv);
    return the leaderboard. ``keys``: one public key every bundle must be signed with, or bundle -> its site's
    public key (``"*"``: every other bundle's); every bundle is checked as ``crs verify`` checks it (manifest, files,
    its CRS from its axis errors), a bundle given a key must be signed and its signature must hold, and merged.json
    and leaderboard.txt give each bundle's verdict (verified only with a key)."""
    if len(bundles) < 2:
        raise MergeError("give at least two aggregates bundles to merge")
    sites = [read_site(path, public_key=key) for path, key in zip(bundles, _keys_for(bundles, keys), strict=True)]
    check_sites(sites)
    encoders = sites[0].encoders
    table, critical, axes, errors = cohort_score(sites)
    board = pd.DataFrame(index=table.index)
    for site in sites:
        board[f"crs_{site.name}"] = site.crs["crs"].reindex(encoders)
        board[f"rank_{site.name}"] = site.crs["rank"].reindex(encoders).astype(int)
    for column in ("crs", "rank", "crs_low", "crs_high", "p_rank1"):
        board[column] = table[column]
    site_ranks = board[[f"rank_{site.name}" for site in sites]]
    board["holds_rank"] = site_ranks.eq(board["rank"], axis=0).all(axis=1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    board.to_csv(out / LEADERBOARD_FILE)
    merged_subgroups(sites).to_csv(out / SUBGROUPS_CSV, index=False)
    (out / TEXT_FILE).write_text(leaderboard_text(board, sites) + "\n")
    summary = {"sites": [{"name": s.name, "bundle": str(s.path), "manifest_sha256": s.manifest_sha256,
                          "verified": s.verified, "state": s.state, "tasks": [f"{s.name}/{t}" for t in s.tasks]} for s in sites],
               "replicates": {"seed": sites[0].seed, "n_boot": sites[0].n_boot}, "box_critical": float(critical),
               "axes": axes, "unit_counts": {axis: int(sum(s.task_counts.get(axis, 0) for s in sites)) for axis in axes},
               "axis_errors": {enc: {axis: (None if np.isnan(v) else float(v)) for axis, v in zip(axes, errors[0, e], strict=True)}
                               for e, enc in enumerate(encoders)}}
    (out / MERGED_FILE).write_text(json.dumps(summary, sort_keys=True, indent=1) + "\n")
    return board


def leaderboard_text(board: pd.DataFrame, sites: list[Site]) -> str:
    """The multi-site leaderboard as plain text, best merged CRS first."""
    lines = [f"multi-site CRS: {len(sites)} sites ({', '.join(s.name for s in sites)}), "
             f"{sum(len(s.tasks) for s in sites)} tasks, {sites[0].n_boot} replicates (seed {sites[0].seed})"]
    lines += [f"{s.name}: {s.verified}" for s in sites]
    lines.append("rank encoder  CRS [box interval]  " + "  ".join(f"{s.name} (rank)" for s in sites) + "  holds rank")
    for encoder, row in board.sort_values(["rank", "crs"], ascending=[True, False]).iterrows():
        per_site = "  ".join(f"{row[f'crs_{s.name}']:.3f} ({int(row[f'rank_{s.name}'])})" for s in sites)
        lines.append(f"{int(row['rank'])} {encoder}  {row['crs']:.3f} [{row['crs_low']:.3f}, {row['crs_high']:.3f}]  "
                     f"{per_site}  {'yes' if row['holds_rank'] else 'no'}")
    return "\n".join(lines)
