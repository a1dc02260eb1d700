"""``crs publish --aggregates-only``: what a hospital can share of a scored run without a patient in it.

Layout of ``<bundle>/`` (every file JSON text, so a byte search finds any id that slipped in)::

    manifest.json     format, kind "aggregates", the replicate seed and n_boot every site must share,
                      the smallest cell shown, provenance, the sha256 of every other file
    aggregates.json   settings, encoders (names and settings), tasks (kind, axes measured, test size),
                      per encoder the axis errors, their standard errors and the number of tasks
                      behind each, per encoder and task the task's axis errors, and the site's own CRS table
    measures.json     per encoder, task and condition: the mean AUROC over seeds and severities
                      (the measurements the axis errors come from) and its test size
    replicates.json   per axis, the bootstrap replicate vector of every encoder's axis error: the
                      score's own per-replicate tables (``bootstrap_axis_<axis>``), no second bootstrap;
                      with the ``equity`` axis, its replicates under the score's own draws (recomputed:
                      the score does not store them), checked against the score's point and spread
    subgroups.json    per encoder, task, condition, attribute and group: size, AUROC and calibration
                      with their intervals; groups below the smallest cell keep only "suppressed"

No image id, per-case row, prediction, record, pixel or feature is written. A cell (a task's test
set, a condition, a subgroup) with fewer images than ``min_cell`` shows neither its size nor its values.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.evaluate.artifacts import RunFolder
from crs.publish.bundle import BundleError, refuse_leaks
from crs.publish.manifest import SIGNATURE_FILE, write_manifest
from crs.publish.places import public_spec
from crs.publish.signing import sign
from crs.scoring.formula import AXES, EQUITY
from crs.scoring.result import ScoreResult, read_score

AGGREGATES = "aggregates"
AGGREGATES_FILE = "aggregates.json"
MEASURES_FILE = "measures.json"
REPLICATES_FILE = "replicates.json"
SUBGROUPS_FILE = "subgroups.json"
DEFAULT_MIN_CELL = 10
"""Cells (test sets, conditions, subgroups) with fewer images than this are suppressed by default."""
SUPPRESSED = "suppressed"


def _number(value: Any) -> float | None:
    """A float for JSON (NaN as null); floats keep every bit (json writes repr)."""
    value = float(value)
    return None if math.isnan(value) else value


def _write(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, sort_keys=True, indent=1, allow_nan=False) + "\n")


def task_axes(records: pd.DataFrame, full_fraction: float) -> dict[str, list[str]]:
    """Per task, the axes it measures (the tasks :func:`crs.scoring.formula.axis_errors_from_metrics` averages)."""
    out = {}
    for task, rows in records.groupby(records["task"].astype(str)):
        axes = ["discrimination", "calibration"]
        if (rows["label_fraction"].astype(float) < full_fraction).any():
            axes.append("label_efficiency")
        if rows["condition"].isin(["corrupt", "shift"]).any():
            axes.append("robustness")
        out[str(task)] = axes
    return out


def _test_sizes(folder: RunFolder, encoder: str, tasks: list[str]) -> dict[str, dict[str, int]]:
    """Per task and predictions condition (``clean``, ``shift__<target>``), the number of test images."""
    sizes: dict[str, dict[str, int]] = {}
    for task in tasks:
        arrays = folder.read_predictions_on_demand(encoder, task)
        sizes[task] = {key[: -len("_labels")]: int(len(arrays[key])) for key in arrays
                       if key.endswith("_labels") and not key.startswith("corrupt")}
    return sizes


def _cell(n: int, min_cell: int) -> int | str:
    return n if n >= min_cell else SUPPRESSED


def _measures(records: pd.DataFrame, sizes: dict[str, dict[str, int]], min_cell: int,
              full_fraction: float) -> list[dict[str, Any]]:
    """Mean AUROC per encoder, task and condition (clean at the full fraction, each label fraction, corrupt, each shift target)."""
    rows = []
    records = records.assign(task=records["task"].astype(str), encoder=records["encoder"].astype(str))
    for (encoder, task), unit in records.groupby(["encoder", "task"], sort=True):
        clean_n = sizes[task].get("clean", 0)
        clean = unit[unit["condition"] == "clean"]
        parts: list[tuple[str, pd.DataFrame, int]] = []
        for fraction, at in clean.groupby(clean["label_fraction"].astype(float)):
            name = "clean" if fraction >= full_fraction else f"clean@{fraction:g}"
            parts.append((name, at, clean_n))
        parts.append(("corrupt", unit[unit["condition"] == "corrupt"], clean_n))
        shift = unit[unit["condition"] == "shift"]
        for target, at in shift.groupby(shift["target"].astype(str)):
            parts.append((f"shift__{target}", at, sizes[task].get(f"shift__{target}", 0)))
        for name, at, n in parts:
            if at.empty:
                continue
            shown = _cell(n, min_cell)
            auroc = _number(at["auroc"].mean()) if shown != SUPPRESSED else None
            rows.append({"encoder": encoder, "task": task, "condition": name, "images": shown, "auroc": auroc})
    return rows


def task_axis_errors(seed_axes: pd.DataFrame, sizes: dict[str, dict[str, int]],
                     min_cell: int) -> dict[str, dict[str, dict[str, float | None] | str]]:
    """Per encoder and task, the task's four axis errors (seeds averaged, then conditions: the parts
    :func:`crs.scoring.formula.axis_errors_from_metrics` averages over tasks); a task whose test set is
    below ``min_cell`` images shows "suppressed"."""
    columns = ["auroc", "ece_debiased", "label_efficiency", "corruption_auroc", "shift_auroc"]
    table = seed_axes.reindex(columns=["encoder", "task", *columns])
    means = table.assign(encoder=table["encoder"].astype(str), task=table["task"].astype(str)).groupby(
        ["encoder", "task"])[columns].mean()
    errors = pd.DataFrame({"discrimination": 1.0 - means["auroc"], "calibration": means["ece_debiased"],
                           "label_efficiency": 1.0 - means["label_efficiency"],
                           "robustness": 1.0 - means[["corruption_auroc", "shift_auroc"]].mean(axis=1)})
    out: dict[str, dict[str, dict[str, float | None] | str]] = {}
    for (encoder, task), row in errors.iterrows():
        shown = sizes.get(str(task), {}).get("clean", 0) >= min_cell
        out.setdefault(str(encoder), {})[str(task)] = (
            {axis: _number(value) for axis, value in row.items()} if shown else SUPPRESSED)
    return out


def _subgroups(table: pd.DataFrame | None, min_cell: int) -> list[dict[str, Any]]:
    if table is None:
        return []
    values = ["auroc", "auroc_low", "auroc_high", "calibration", "calibration_low", "calibration_high",
              "positive_rate", "positive_rate_low", "positive_rate_high"]
    rows = []
    for row in table.reset_index(drop=True).to_dict("records"):
        n = int(row["n_images"])
        out: dict[str, Any] = {key: str(row[key]) for key in ("encoder", "task", "condition", "attribute", "group")}
        out["images"] = _cell(n, min_cell)
        if n >= min_cell:
            out.update({key: _number(row[key]) for key in values if key in row})
            out["scored"] = bool(row.get("scored", False))
        rows.append(out)
    return rows


def _frame_rows(frame: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    return {str(name): {str(col): _number(value) for col, value in row.items()} for name, row in frame.iterrows()}


def equity_pairs(groups: pd.DataFrame | None, encoders: list[str]) -> list[list[str]]:
    """The (task, attribute) pairs the ``equity`` error averages (a scored group on the clean split), the same for
    every encoder (:func:`crs.scoring.subgroups.equity_error`)."""
    if groups is None or groups.empty:
        return []
    clean = groups[(groups["condition"].astype(str) == "clean") & groups["scored"].astype(bool)]
    pairs = {str(e): sorted({(str(t), str(a)) for t, a in zip(rows["task"], rows["attribute"], strict=True)})
             for e, rows in clean.groupby(clean["encoder"].astype(str))}
    first = pairs.get(str(encoders[0]), [])
    for encoder in encoders:
        if pairs.get(str(encoder), []) != first:
            raise BundleError(f"the equity axis averages other (task, attribute) pairs for {encoder} than for "
                              f"{encoders[0]}; aggregates cannot carry it (score with equity = false to publish)")
    return [list(pair) for pair in first]


def equity_replicate_vectors(folder: RunFolder, records: pd.DataFrame, score: ScoreResult) -> dict[str, list[float | None]]:
    """Per encoder the ``equity`` error under every replicate of the score (its patient draws: same seed, task
    numbers and settings as ``crs.scoring.result``'s subgroup tables), checked against the score's own point
    error and standard error (the spread of these replicates) to 1e-12."""
    from crs.scoring.equity import equity_replicates
    from crs.scoring.subgroups import subgroup_scores

    settings = score.settings
    encoders = [str(e) for e in score.point.encoders]
    frame = records.assign(task=records["task"].astype(str))
    kinds = {task: str(rows["task_kind"].iloc[0]) for task, rows in frame.groupby("task", sort=True)}
    full = np.isclose(frame["label_fraction"].astype(float).to_numpy(), settings.full_fraction)
    shift = frame[full & (frame["condition"] == "shift").to_numpy()]
    targets = {task: sorted(rows["target"].astype(str).unique()) for task, rows in shift.groupby("task", sort=True)}
    found = subgroup_scores(folder, encoders, kinds, targets, settings.n_boot, settings.seed, settings.alpha,
                            settings.full_fraction, settings.subgroup_min_images, settings.subgroup_min_positives, 1)
    values = equity_replicates(found, encoders)  # (B + 1, E), row 0 the point
    point = score.point.errors.set_axis(score.point.errors.index.astype(str))[EQUITY].reindex(encoders).to_numpy()
    spread = None if score.point.standard_errors is None else score.point.standard_errors.set_axis(
        score.point.standard_errors.index.astype(str))[EQUITY].reindex(encoders).to_numpy(dtype=np.float64)
    if not np.allclose(values[0], point, rtol=0, atol=1e-12) or (
            spread is not None and len(values) > 2
            and not np.allclose(np.nanstd(values[1:], axis=0, ddof=1), spread, rtol=0, atol=1e-12, equal_nan=True)):
        raise BundleError(f"{folder.root}: the equity replicates drawn again differ from the score's; score the run "
                          "again with this crs (`crs score`) and publish it then")
    return {encoder: [_number(v) for v in values[1:, e]] for e, encoder in enumerate(encoders)}


def publish_aggregates(run_folder: str | Path, bundle: str | Path, *, min_cell: int = DEFAULT_MIN_CELL,
                       sign_key: str | Path | None = None) -> Path:
    """Write the aggregates of the scored ``run_folder`` to ``bundle`` (kind "aggregates"); return the manifest's path."""
    from crs import __version__

    if min_cell < 1:
        raise BundleError(f"--min-cell {min_cell}: give a number of images, at least 1 (default {DEFAULT_MIN_CELL})")
    bundle = Path(bundle)
    if bundle.exists() and any(bundle.iterdir()):
        raise BundleError(f"{bundle} exists and is not empty; publish into a new folder")
    folder = RunFolder(run_folder)
    if not folder.has_score():
        raise BundleError(f"{folder.root} has no score yet; aggregates come from the score: run `crs score` first")
    score = read_score(folder)
    if score.leaderboards:
        raise BundleError(f"{folder.root}: some encoders run on some tasks only; aggregates need every encoder on "
                          "every task (drop the encoders' datasets= lists, or publish the full bundle)")
    kept = score.bootstrap.axis_error_replicates or {}
    if not kept:
        raise BundleError(f"{folder.root}: the score kept no per-replicate axis errors (an older crs); run `crs score` again")
    settings = score.settings
    records = folder.read_records()
    spec = folder.provenance().get("spec") or {}
    encoders = score.point.encoders
    axes_of = task_axes(records, settings.full_fraction)
    tasks = sorted(axes_of)
    sizes = _test_sizes(folder, encoders[0], tasks)
    counts = {axis: sum(axis in axes_of[task] for task in tasks) for axis in AXES}
    pairs: list[list[str]] = []
    if settings.equity:
        if settings.subgroup_min_images < min_cell:
            raise BundleError(f"{folder.root}: the equity axis is the AUROC of groups as small as subgroup_min_images = "
                              f"{settings.subgroup_min_images} images, below --min-cell {min_cell}; score with "
                              f"[score] subgroup_min_images >= {min_cell}, or publish with --min-cell "
                              f"{settings.subgroup_min_images}")
        pairs = equity_pairs(score.subgroups, [str(e) for e in encoders])
        counts[EQUITY] = len(pairs)
    site = score.crs[[c for c in ("crs", "rank", "crs_low", "crs_high", "auroc", "auroc_rank") if c in score.crs]]
    aggregates = {
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(settings).items()},
        "encoders": [e for e in (public_spec(spec) or {}).get("encoders", []) if e.get("name") in encoders]
                    or [{"name": n} for n in encoders],
        "tasks": [{"name": task, "kind": str(records.loc[records["task"].astype(str) == task, "task_kind"].iloc[0]),
                   "axes": axes_of[task], "test_images": _cell(sizes[task].get("clean", 0), min_cell)} for task in tasks],
        "task_counts": counts,
        "equity_pairs": pairs,
        "task_axis_errors": task_axis_errors(score.seed_axes, sizes, min_cell),
        "axis_errors": _frame_rows(score.point.errors),
        "standard_errors": None if score.point.standard_errors is None else _frame_rows(score.point.standard_errors),
        "crs": _frame_rows(site.astype(float)),
    }
    replicates = {axis: {str(enc): [_number(v) for v in frame[enc].to_numpy(dtype=np.float64)] for enc in frame.columns}
                  for axis, frame in kept.items()}
    if settings.equity:
        replicates[EQUITY] = equity_replicate_vectors(folder, records, score)
    bundle.mkdir(parents=True, exist_ok=True)
    _write(bundle / AGGREGATES_FILE, aggregates)
    _write(bundle / MEASURES_FILE, _measures(records, sizes, min_cell, settings.full_fraction))
    _write(bundle / REPLICATES_FILE, replicates)
    _write(bundle / SUBGROUPS_FILE, _subgroups(score.subgroups, min_cell))
    provenance = {"crs_version": __version__, "published": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "run_name": spec.get("name"), "encoders": encoders, "tasks": tasks}
    fields = {"provenance": provenance, "min_cell": int(min_cell),
              "replicates": {"seed": int(settings.seed), "n_boot": int(settings.n_boot),
                             "note": "every site merged with this one must score with this seed and n_boot"}}
    data = write_manifest(bundle, AGGREGATES, fields)
    refuse_leaks(bundle)
    if sign_key is not None:
        (bundle / SIGNATURE_FILE).write_bytes(sign(data, sign_key))
    return bundle / "manifest.json"
