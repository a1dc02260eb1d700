"""The shifted sites, each apart: per task, the clean AUROC, the AUROC on each shift target, and
the mean over the targets that the robustness axis scores (docs/crs.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.cache import FeatureStore, store_path
from crs.report.stability import Table


def _cell(values: pd.Series) -> str:
    """'0.812 ± 0.004' (mean ± SD over seeds), '0.812' for one seed, 'n/a' when there is none."""
    values = values.dropna()
    if values.empty:
        return "n/a"
    if len(values) == 1:
        return f"{values.mean():.3f}"
    return f"{values.mean():.3f} \u00b1 {values.std(ddof=1):.3f}"


def shift_targets(records: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """Each task's shift targets in the run records, sorted by name (as the scores order them)."""
    shift = records[records["condition"] == "shift"]
    if "target" not in shift:
        return {str(task): ("",) for task in shift["task"].unique()}
    return {str(task): tuple(sorted(map(str, rows["target"].unique()))) for task, rows in shift.groupby("task")}


def scored_classes(targets: Sequence[str], cache_root: Path | str | None) -> dict[str, str]:
    """Per shift target relabelled by a label map, which classes its shift was scored on (from its cache
    store, where stage 1 recorded the map's report); targets without a map are left out."""
    if cache_root is None:
        return {}
    notes = {}
    for target in targets:
        try:
            path = store_path(cache_root, target)
            report = FeatureStore(path).root.attrs.get("label_map") if path.exists() else None
        except Exception:  # a damaged store must not stop the report
            report = None
        if isinstance(report, dict) and report.get("scored"):
            absent = list(report.get("no_counterpart", [])) + list(report.get("absent", []))
            notes[target] = (f"scored on {', '.join(report['scored'])}"
                             + (f" (not scored: {', '.join(absent)})" if absent else "")
                             + f", label map {report.get('label_map', '')}")
    return notes


def shift_table(records: pd.DataFrame, encoders: Sequence[str], cache_root: Path | str | None = None) -> Table | None:
    """Rows per task: clean test, each shift target, and (with two or more) their mean; a column per encoder.

    Macro AUROC at the full label fraction, mean ± SD over seeds. None when no task has a shift target.
    A target relabelled by a label map names the classes it was scored on (:func:`scored_classes`).
    """
    targets = shift_targets(records)
    if not targets:
        return None
    fractions = records["label_fraction"].astype(float)
    full = records[np.isclose(fractions, fractions.max())]
    full = full.assign(target=full["target"].astype(str) if "target" in full else "")
    rows = []
    for task in sorted(targets):
        mine = full[full["task"].astype(str) == task]
        clean = mine[mine["condition"] == "clean"]
        shift = mine[mine["condition"] == "shift"]
        rows.append((task, "clean test", *(_cell(clean[clean["encoder"] == e]["auroc"]) for e in encoders)))
        for target in targets[task]:
            at = shift[shift["target"] == target]
            rows.append((task, f"shift: {target}", *(_cell(at[at["encoder"] == e]["auroc"]) for e in encoders)))
        if len(targets[task]) > 1:  # per seed the mean over targets, then mean ± SD over seeds: what is scored
            per_seed = shift.groupby(["encoder", "seed"])["auroc"].mean().reset_index()
            rows.append((task, f"shift: mean of {len(targets[task])} targets (scored)",
                         *(_cell(per_seed[per_seed["encoder"] == e]["auroc"]) for e in encoders)))
    scored = scored_classes([t for names in targets.values() for t in names], cache_root)
    classes = "".join(f" {target}: {note}." for target, note in scored.items())
    return Table(
        "Macro AUROC at 100\u00a0% labels on the clean test split and on each shifted site, mean \u00b1 SD over "
        "seeds. Each site is reported apart; the robustness axis takes the mean over a task's sites as its "
        "shift half (the other half: the mean over corruptions)." + classes,
        ("task", "evaluated on", *encoders), tuple(rows),
    )
