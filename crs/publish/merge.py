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

Every bundle is checked before it is read as ``crs verify --no-score`` checks it (an aggregates bundle holds
no records to re-score): its manifest and files always, its Ed25519 signature when a public key is given
for it (``keys``); a bundle that fails is refused in one line, and the output gives each bundle's verdict
(:mod:`crs.publish.verdict`: ``verified`` only with a signature checked against a named key). The optional ``equity`` axis (1 - the worst-group AUROC, a mean over (task,
attribute) pairs) merges like the four, weighted by the sites' numbers of pairs (decision 0148).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.publish.aggregates import AGGREGATES, AGGREGATES_FILE, REPLICATES_FILE, SUBGROUPS_FILE
from crs.publish.manifest import MANIFEST_FILE, read_manifest
from crs.publish.verdict import Verdict
from crs.publish.verify import verify_bundle
from crs.scoring.equity import finite_spread
from crs.scoring.formula import ALL_AXES, EQUITY, point_estimate, rank_descending
from crs.scoring.projection import box_intervals
from crs.scoring.settings import ScoreSettings

LEADERBOARD_FILE = "leaderboard.csv"
SUBGROUPS_CSV = "subgroups.csv"
MERGED_FILE = "merged.json"
TEXT_FILE = "leaderboard.txt"


class MergeError(ValueError):
    """Bundles that cannot be merged; the message names the bundle and the fix."""


@dataclass(frozen=True)
class Site:
    """One aggregates bundle, read: per axis (B + 1, E) errors with row 0 the point estimate."""

    name: str
    path: Path
    seed: int
    n_boot: int
    encoders: list[str]
    encoder_settings: list[dict[str, Any]]
    settings: dict[str, Any]
    tasks: list[str]
    task_counts: dict[str, int]
    errors: np.ndarray
    """(B + 1, E, 5): the axes of :data:`ALL_AXES` (``equity`` NaN when the site did not score it)."""
    standard_errors: np.ndarray | None
    crs: pd.DataFrame
    verified: str = ""
    """The bundle's verdict line (:meth:`crs.publish.verdict.Verdict.line`): ``verified (...)``, or what it lacks."""
    manifest_sha256: str = ""
    state: str = ""
    """The verdict's state: verified, or incomplete (unsigned, signature not checked)."""


def _nan(value: Any) -> float:
    return np.nan if value is None else float(value)


def _checked(path: Path, public_key: Path | None) -> Verdict:
    """The bundle's verdict (:mod:`crs.publish.verdict`, as ``crs verify`` and the site say it); MergeError when a check
    failed: a changed, missing, added or unaccounted file, an unsigned bundle given a key, a signature that does not hold."""
    try:
        verification = verify_bundle(path, public_key=public_key, score=False)
    except ValueError as error:
        raise MergeError(f"{path}: {error}") from None
    problems = verification.manifest_problems + verification.contents_problems
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
    import hashlib

    path = Path(path)
    try:
        manifest = read_manifest(path)
    except ValueError as error:
        raise MergeError(str(error)) from None
    if manifest.get("kind") != AGGREGATES:
        raise MergeError(f"{path} is a {manifest.get('kind')!r} bundle; crs merge takes aggregates bundles "
                         "(`crs publish RUN BUNDLE --aggregates-only`)")
    verdict = _checked(path, None if public_key is None else Path(public_key))
    data = json.loads((path / AGGREGATES_FILE).read_text())
    replicates = json.loads((path / REPLICATES_FILE).read_text())
    encoders = sorted(data["axis_errors"])
    n_boot = int(manifest["replicates"]["n_boot"])
    errors = np.full((n_boot + 1, len(encoders), len(ALL_AXES)), np.nan)
    standard = None if data.get("standard_errors") is None else np.full((len(encoders), len(ALL_AXES)), np.nan)
    for e, encoder in enumerate(encoders):
        for a, axis in enumerate(ALL_AXES):
            errors[0, e, a] = _nan(data["axis_errors"][encoder].get(axis))
            if standard is not None:
                standard[e, a] = _nan(data["standard_errors"][encoder].get(axis))
            if axis in replicates:
                values = replicates[axis][encoder]
                if len(values) != n_boot:
                    raise MergeError(f"{path}: {len(values)} {axis} replicates of {encoder}, but n_boot {n_boot}; "
                                     "publish the site's bundle again")
                errors[1:, e, a] = [_nan(v) for v in values]
    crs = pd.DataFrame.from_dict(data["crs"], orient="index").astype(float)
    if data["settings"].get("equity") and EQUITY not in replicates:
        raise MergeError(f"{path}: the site scored the equity axis but its bundle holds no equity replicates (an older "
                         "crs); publish it again with `crs publish RUN BUNDLE --aggregates-only`")
    return Site(name or path.name, path, int(manifest["replicates"]["seed"]), n_boot, encoders, data["encoders"],
                data["settings"], [t["name"] for t in data["tasks"]], {a: int(n) for a, n in data["task_counts"].items()},
                errors, standard, crs, verdict.line(), hashlib.sha256((path / MANIFEST_FILE).read_bytes()).hexdigest(),
                verdict.state)


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


def merged_errors(sites: list[Site]) -> tuple[np.ndarray, np.ndarray | None]:
    """(B + 1, E, 5) errors of the merged cohort and its (E, 5) standard errors (None if a site has none).

    Each axis is a mean over units (tasks; (task, attribute) pairs for ``equity``), so the merged value is the
    sites' values weighted by their numbers of units, replicate by replicate. The four axes' standard errors
    combine as independent tasks; ``equity``'s is the spread of its merged replicates, the score's own rule
    (``crs.scoring.result``: the standard deviation of the equity replicates)."""
    counts = np.array([[site.task_counts.get(axis, 0) for axis in ALL_AXES] for site in sites], dtype=np.float64)
    total = counts.sum(axis=0)
    errors = np.full(sites[0].errors.shape, np.nan)
    for a in range(len(ALL_AXES)):
        if total[a]:
            errors[..., a] = sum(counts[s, a] * sites[s].errors[..., a] for s in range(len(sites)) if counts[s, a]) / total[a]
    if any(site.standard_errors is None for site in sites):
        return errors, None
    standard = np.full(errors.shape[1:], np.nan)
    for a, axis in enumerate(ALL_AXES):
        if axis == EQUITY:
            if total[a] and len(errors) > 2:
                standard[:, a] = finite_spread(errors[1:, :, a], int(standard.shape[0]))  # the score's own rule
        elif total[a]:
            squares = sum((counts[s, a] * sites[s].standard_errors[:, a]) ** 2  # type: ignore[index]
                          for s in range(len(sites)) if counts[s, a])
            standard[:, a] = np.sqrt(squares) / total[a]
    return errors, standard


def _settings(values: dict[str, Any]) -> ScoreSettings:
    fields: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in values.items()}
    return ScoreSettings(**fields)


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
    public key (``"*"``: every other bundle's); a bundle given a key must be signed and its signature must hold,
    the others are checked by their manifest only, and merged.json and leaderboard.txt say which was which."""
    if len(bundles) < 2:
        raise MergeError("give at least two aggregates bundles to merge")
    sites = [read_site(path, public_key=key) for path, key in zip(bundles, _keys_for(bundles, keys), strict=True)]
    check_sites(sites)
    encoders = sites[0].encoders
    errors, standard = merged_errors(sites)
    axes = [axis for a, axis in enumerate(ALL_AXES) if not np.isnan(errors[..., a]).all()]
    columns = [ALL_AXES.index(axis) for axis in axes]
    errors = errors[..., columns]
    frame = pd.DataFrame(errors[0], index=pd.Index(encoders, name="encoder"), columns=axes)
    se = None if standard is None else pd.DataFrame(standard[:, columns], index=frame.index, columns=axes)
    settings = _settings(sites[0].settings)
    point = point_estimate(frame, se, settings)
    replicate_crs = point.score(errors[1:])["crs"]
    bounds, critical = box_intervals(point, errors[1:], float(settings.alpha))
    board = pd.DataFrame(index=frame.index)
    for site in sites:
        board[f"crs_{site.name}"] = site.crs["crs"].reindex(encoders)
        board[f"rank_{site.name}"] = site.crs["rank"].reindex(encoders).astype(int)
    board["crs"] = point.table["crs"].reindex(encoders)
    board["rank"] = point.table["rank"].reindex(encoders).astype(int)
    board["crs_low"], board["crs_high"] = bounds["crs_box_low"], bounds["crs_box_high"]
    ranks = rank_descending(replicate_crs)
    board["p_rank1"] = (ranks == 1).mean(axis=0)
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
