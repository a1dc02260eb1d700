"""Aggregates bundles read as sites, and the CRS of a cohort of sites from their aggregates alone.

Shared by ``crs merge`` (:mod:`crs.publish.merge`, many sites) and ``crs verify`` (one site: its stored CRS
table derived again from its axis errors and replicates, so an aggregates bundle is re-scored too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.evaluate.compare import Comparison, compare_tables
from crs.publish.aggregates import AGGREGATES, AGGREGATES_FILE, REPLICATES_FILE
from crs.publish.manifest import MANIFEST_FILE, read_manifest
from crs.scoring.equity import finite_spread
from crs.scoring.formula import ALL_AXES, EQUITY, point_estimate, rank_descending
from crs.scoring.projection import adaptive_intervals, box_intervals
from crs.scoring.settings import ScoreSettings


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


def aggregates_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the aggregates bundle at ``path`` (MergeError when it is none)."""
    try:
        manifest = read_manifest(path)
    except ValueError as error:
        raise MergeError(str(error)) from None
    if manifest.get("kind") != AGGREGATES:
        raise MergeError(f"{path} is a {manifest.get('kind')!r} bundle; crs merge takes aggregates bundles "
                         "(`crs publish RUN BUNDLE --aggregates-only`)")
    return manifest


def read_site_files(path: str | Path, name: str | None = None) -> Site:
    """The aggregates bundle at ``path``, read as it is (not checked: :func:`crs.publish.merge.read_site` checks first)."""
    import hashlib

    path = Path(path)
    manifest = aggregates_manifest(path)
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
                errors, standard, crs, "", hashlib.sha256((path / MANIFEST_FILE).read_bytes()).hexdigest())


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


def cohort_score(sites: list[Site]) -> tuple[pd.DataFrame, float, list[str], np.ndarray]:
    """The CRS of the cohort of ``sites`` (of one site: its own score again, from its aggregates alone).

    Returns per encoder ``crs``, ``rank``, the box interval ``crs_low`` / ``crs_high`` (simultaneous: what a
    merged result prints), the adaptive one ``crs_adaptive_low`` / ``_high`` (what one site scored with the
    default ``[score] interval = "adaptive"`` printed, decision 0181) and ``p_rank1``; the box's critical value;
    the axes scored; and their (B + 1, E, axes) errors."""
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
    table = pd.DataFrame(index=frame.index)
    table["crs"] = point.table["crs"].reindex(encoders)
    table["rank"] = point.table["rank"].reindex(encoders).astype(int)
    table["crs_low"], table["crs_high"] = bounds["crs_box_low"], bounds["crs_box_high"]
    low, high = adaptive_intervals(point, errors[1:], float(settings.alpha))
    table["crs_adaptive_low"] = pd.Series(low, index=point.encoders).reindex(table.index)
    table["crs_adaptive_high"] = pd.Series(high, index=point.encoders).reindex(table.index)
    table["p_rank1"] = (rank_descending(replicate_crs) == 1).mean(axis=0)
    return table, float(critical), axes, errors


def rescore_site(path: Path) -> Comparison:
    """An aggregates bundle's stored CRS and box interval derived again from its axis errors, standard errors and
    replicates, compared under the reproducibility contract (the interval when the site scored with the box or
    the adaptive interval; a bundle stored without the setting scored with the box, the default then)."""
    site = read_site_files(path)
    table, *_ = cohort_score([site])
    method = site.settings.get("interval", "box")
    if method == "adaptive":
        table["crs_low"], table["crs_high"] = table["crs_adaptive_low"], table["crs_adaptive_high"]
    columns = ["crs"] + (["crs_low", "crs_high"] if method in ("box", "adaptive") else [])
    stored = site.crs.reindex(site.encoders)
    missing = [c for c in columns if c not in stored]
    if missing:
        return Comparison((), (f"{AGGREGATES_FILE}: its CRS table lacks {missing}",))
    as_rows = lambda t: t[columns].rename_axis("encoder").reset_index()  # noqa: E731
    checks, problems = compare_tables("aggregates_crs", as_rows(stored), as_rows(table))
    return Comparison(tuple(checks), tuple(problems))
