"""Figures of the run records and predictions: label-efficiency curves, severity curves, reliability.

Each function returns the PNG path it wrote, or None when the run has nothing to show (no
corruptions, no predictions), so the page can say what is missing instead of drawing an empty box.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crs.evaluate import artifacts
from crs.report.reliability import reliability_curve
from crs.report.style import REFERENCE_GREY, EncoderStyle, report_style, save

FAMILY_ORDER = ("noise", "blur", "photometric", "digital", "occlusion", "other")


def _legend_below(fig, handles, labels) -> None:
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), frameon=False,
               bbox_to_anchor=(0.5, -0.01))


def label_efficiency_curves(records: pd.DataFrame, styles: dict[str, EncoderStyle], path: Path,
                            zero_shot: pd.DataFrame | None = None) -> Path:
    """Clean macro AUROC against label fraction (log scale), one panel per task; band = ±1 SD over seeds.

    ``zero_shot`` (zero-shot records): each vision-language encoder's zero-label point, drawn as a dashed
    line in its colour at its shipped zero-shot AUROC; where its probe curve crosses it is the crossover."""
    clean = records[records["condition"] == "clean"]
    tasks = sorted(clean["task"].unique())
    fractions = sorted(clean["label_fraction"].astype(float).unique())
    columns = min(len(tasks), 3)
    rows = math.ceil(len(tasks) / columns)
    with report_style():
        fig, panels = plt.subplots(rows, columns, figsize=(3.4 * columns, 3.2 * rows + 0.6), squeeze=False)
        for ax, task in zip(panels.flat, tasks, strict=False):
            mine = clean[clean["task"] == task]
            for encoder, style in styles.items():
                curve = mine[mine["encoder"] == encoder].groupby("label_fraction")["auroc"].agg(["mean", "std"])
                if curve.empty:
                    continue
                x = curve.index.to_numpy(dtype=float) * 100
                ax.plot(x, curve["mean"], marker=style.marker, color=style.colour, label=encoder)
                ax.fill_between(x, curve["mean"] - curve["std"].fillna(0), curve["mean"] + curve["std"].fillna(0),
                                color=style.colour, alpha=0.15, linewidth=0)
                if zero_shot is not None:
                    shipped = zero_shot[(zero_shot["encoder"] == encoder) & (zero_shot["task"] == task)
                                        & (zero_shot["condition"] == "clean") & (zero_shot["calibration"] == "shipped")]
                    if len(shipped):
                        first = shipped[shipped["prompt_digest"] == shipped["prompt_digest"].iloc[0]]
                        ax.axhline(float(first["auroc"].mean()), color=style.colour, linewidth=1.0, linestyle="--")
            ax.axhline(0.5, color=REFERENCE_GREY, linewidth=0.8, linestyle=":")
            ax.set_xscale("log")
            ax.set_xticks([f * 100 for f in fractions], [f"{f * 100:g}" for f in fractions])
            ax.minorticks_off()
            ax.set_xlabel("labelled training images used (%)")
            ax.set_ylabel("macro AUROC, clean test")
            ax.set_title(task)
        for ax in list(panels.flat)[len(tasks):]:
            ax.set_visible(False)
        handles, labels = panels.flat[0].get_legend_handles_labels()
        fig.suptitle("Label efficiency: AUROC as labels grow (dotted = chance"
                     + (", dashed = zero-shot, zero labels)" if zero_shot is not None else ")"), fontsize=11)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        _legend_below(fig, handles, labels)
        return save(fig, path)


def corruption_family(name: str, modality: str = "") -> str:
    """The corruption's family from the suite definitions ('other' when no suite knows it)."""
    from crs.corruptions import MODALITIES, corruption  # the suites' records (no torch)

    for candidate in ([modality] if modality else []) + list(MODALITIES):
        try:
            return corruption(candidate, name).family
        except Exception:  # not in this modality's suite
            continue
    return "other"


def severity_curves(records: pd.DataFrame, styles: dict[str, EncoderStyle], path: Path,
                    modalities: dict[str, str] | None = None) -> Path | None:
    """AUROC (full labels) against severity, one row per task and one column per corruption family.

    Severity 0 is the clean test split; each point averages the family's corruptions and the seeds.
    """
    fractions = records["label_fraction"].astype(float)
    full = records[np.isclose(fractions, fractions.max())]
    corrupt = full[full["condition"] == "corrupt"]
    if corrupt.empty:
        return None
    modalities = modalities or {}
    family = {(task, name): corruption_family(str(name), modalities.get(task, ""))
              for task, name in corrupt[["task", "corruption"]].drop_duplicates().itertuples(index=False)}
    corrupt = corrupt.assign(family=[family[(t, c)] for t, c in zip(corrupt["task"], corrupt["corruption"], strict=True)])
    families = [f for f in FAMILY_ORDER if f in set(corrupt["family"])]
    tasks = sorted(full["task"].unique())
    members = corrupt.groupby("family")["corruption"].unique()
    with report_style():
        fig, panels = plt.subplots(len(tasks), len(families), figsize=(2.9 * len(families) + 0.6, 2.9 * len(tasks) + 0.9),
                                   squeeze=False, sharex=True)
        for row, task in enumerate(tasks):
            mine = full[full["task"] == task]
            for column, name in enumerate(families):
                ax = panels[row, column]
                shown = False
                for encoder, style in styles.items():
                    rows = mine[mine["encoder"] == encoder]
                    clean = rows[rows["condition"] == "clean"]["auroc"].mean()
                    in_family = corrupt[(corrupt["task"] == task) & (corrupt["encoder"] == encoder)
                                        & (corrupt["family"] == name)]
                    if in_family.empty:
                        continue
                    by_severity = in_family.groupby("severity")["auroc"].mean()
                    xs = [0, *by_severity.index.astype(int).tolist()]
                    ax.plot(xs, [clean, *by_severity.tolist()], marker=style.marker, color=style.colour, label=encoder)
                    shown = True
                if not shown:
                    ax.text(0.5, 0.5, "not run for this task", ha="center", va="center", transform=ax.transAxes,
                            color=REFERENCE_GREY)
                ax.axhline(0.5, color=REFERENCE_GREY, linewidth=0.8, linestyle=":")
                if row == 0:
                    names = ", ".join(str(n).replace("_", " ") for n in members[name])
                    ax.set_title(f"{name}\n({names})", fontsize=9)
                if column == 0:
                    ax.set_ylabel(f"{task}\nmacro AUROC")
                if row == len(tasks) - 1:
                    ax.set_xlabel("severity (0 = clean)")
                ax.set_xticks([0, *sorted(int(v) for v in corrupt["severity"].unique())])
        handles, labels = [], []
        for ax in panels.flat:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                if label not in labels:
                    handles.append(handle)
                    labels.append(label)
        fig.suptitle("AUROC against corruption severity, per corruption family (100 % labels; dotted = chance)",
                     fontsize=11)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        _legend_below(fig, handles, labels)
        return save(fig, path)


def load_predictions(predictions_dir: Path | None, encoders: list[str], tasks: list[str]) -> dict:
    """{(encoder, task): arrays} of each unit's predictions file in ``predictions_dir``, each array read
    when first asked for (:class:`crs.evaluate.artifacts.LazyPredictions`): the report uses the clean
    and shift arrays, a few of a CheXpert-sized file's ~200 (reading every file whole held about
    0.5 GB per CheXpert unit, about 10 GB at 15 encoders). Missing files are skipped."""
    found: dict[tuple[str, str], Mapping[str, np.ndarray]] = {}
    if predictions_dir is None or not Path(predictions_dir).is_dir():
        return found
    for encoder in encoders:
        for task in tasks:
            path = artifacts.predictions_file(predictions_dir, encoder, task)
            if path.is_file():
                found[(encoder, task)] = artifacts.LazyPredictions(path)
    return found


def _condition_keys(arrays: dict, recorded_targets: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """{panel: (probs key, labels key)} of one unit: ``clean`` and one ``shift:<target>`` per shift target.

    An older predictions file's unnamed target takes the records' one target name; a file that
    cannot be read so is drawn without its shift panels (the report never fails on a figure).
    """
    keys = {"clean": (artifacts.probs_key(artifacts.CLEAN), artifacts.labels_key(artifacts.CLEAN))}
    try:
        shifts = artifacts.shift_keys(arrays, recorded_targets)
    except artifacts.ShiftKeysError:
        shifts = []
    keys.update({f"shift:{found.target}": (found.probs, found.labels) for found in shifts})
    return {panel: pair for panel, pair in keys.items() if pair[0] in arrays}


def reliability_diagrams(predictions: dict, styles: dict[str, EncoderStyle], path: Path,
                         shift_targets: dict[str, tuple[str, ...]] | None = None, n_bins: int = 10) -> Path | None:
    """One panel per task on clean test images and one per shift target of it; a line per encoder.

    ``shift_targets``: each task's shift-target names in the run records (they name an older
    predictions file's one unnamed target). Points are bin means over every seed's full-label
    probe; on the diagonal the probabilities mean what they say. Marker area grows with the number
    of predictions in the bin.
    """
    if not predictions:
        return None
    shift_targets = shift_targets or {}
    tasks = sorted({task for _, task in predictions})
    unit_keys = {unit: _condition_keys(arrays, tuple(shift_targets.get(unit[1], ())))
                 for unit, arrays in predictions.items()}
    panels_wanted = []
    for task in tasks:
        panels_wanted.append((task, "clean"))
        found = {panel for (_, t), keys in unit_keys.items() if t == task for panel in keys if panel != "clean"}
        panels_wanted += [(task, panel) for panel in sorted(found)]
    columns = 2 if len(panels_wanted) == 4 else min(len(panels_wanted), 3)
    rows = math.ceil(len(panels_wanted) / columns)
    with report_style():
        fig, panels = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.6 * rows + 0.6), squeeze=False)
        for ax, (task, condition) in zip(panels.flat, panels_wanted, strict=False):
            multilabel = False
            for encoder, style in styles.items():
                arrays = predictions.get((encoder, task))
                if arrays is None or condition not in unit_keys[(encoder, task)]:
                    continue
                probs_key, labels_key = unit_keys[(encoder, task)][condition]
                labels = arrays[labels_key]
                multilabel = labels.ndim == 2
                curve = reliability_curve(arrays[probs_key], labels, n_bins)
                sizes = 12 + 60 * curve.count / max(curve.count.max(), 1)
                ax.plot(curve.confidence, curve.observed, color=style.colour, linewidth=1.4, label=encoder)
                ax.scatter(curve.confidence, curve.observed, s=sizes, color=style.colour, marker=style.marker,
                           edgecolor="black", linewidth=0.4, zorder=3)
            ax.plot([0, 1], [0, 1], color=REFERENCE_GREY, linestyle="--", linewidth=1, label="perfect calibration")
            ax.set_xlim(-0.02, 1.02)
            ax.set_ylim(-0.03, 1.03)
            ax.set_xlabel("predicted probability" if multilabel else "confidence (top-class probability)")
            ax.set_ylabel("observed label frequency" if multilabel else "observed accuracy")
            where = f"shifted site {condition.partition(':')[2]}".strip() if condition != "clean" else "clean test"
            ax.set_title(f"{task}\n{where}", fontsize=10)
        for ax in list(panels.flat)[len(panels_wanted):]:
            ax.set_visible(False)
        handles, labels = panels.flat[0].get_legend_handles_labels()
        fig.suptitle(f"Reliability diagrams ({n_bins} equal-width bins, all seeds pooled, 100 % labels)", fontsize=11)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        _legend_below(fig, handles, labels)
        return save(fig, path)
