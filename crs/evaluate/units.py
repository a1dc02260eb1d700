"""Stage 2: fit probes on cached features and evaluate each on every condition, without refitting.

The unit of work is one (encoder, task): its clean feature matrix is read from the cache once, the
nested label-fraction subsets for every seed are drawn from the stored labels (identical for every
encoder, which makes the seed bootstrap paired), all probes of the unit are fitted in one call to
the probe backend, and each fitted probe predicts on the clean test split, every corruption x
severity and the shift target. Needs nothing but the cache.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from crs import axes
from crs.cache.store import FeatureStore, SampleTable, store_path
from crs.data.base import nested_label_fractions
from crs.evaluate import artifacts
from crs.probes import fit_probes
from crs.spec import Spec

log = logging.getLogger("crs.probe")

RECORDS_FORMAT = 4
"""Bump when what a unit writes changes (columns, predictions), so incremental runs refit stale units."""


@dataclass(frozen=True)
class ProbeUnit:
    """One (encoder, task) unit of stage 2; ``target`` names the shift target store, if any."""

    encoder: str
    task: str
    target: str = ""


@dataclass(frozen=True)
class ProbeSettings:
    label_fractions: tuple[float, ...]
    seeds: tuple[int, ...]
    Cs: tuple[float, ...]
    backend: str = "sklearn"
    family: str = "logistic"
    selection: str = "auroc"
    min_per_class: int = 3


@dataclass(frozen=True)
class UnitResult:
    records: pd.DataFrame
    predictions: dict[str, np.ndarray]


def condition_metrics(y: np.ndarray, probs: np.ndarray, kind: str) -> dict[str, float]:
    """Every per-condition metric of one probe's predictions."""
    row = {
        "auroc": axes.auroc(y, probs, kind),
        "auroc_se": axes.auroc_standard_error(y, probs, kind),  # noise level: sets the CRS error floor
        "ece": axes.ece(y, probs, kind),
        "ece_debiased": axes.debiased_ece(y, probs, kind),  # the scored calibration error
        "ece_se": axes.ece_standard_error(y, probs, kind),
        "brier": axes.brier(y, probs, kind),
        "nll": axes.nll(y, probs, kind),
        "kappa": np.nan,
        "ordinal_auroc": np.nan,
    }
    if kind == "ordinal":
        row["kappa"] = axes.quadratic_kappa(y, probs)
        row["ordinal_auroc"] = axes.ordinal_auroc(y, probs)
    return row


def training_subsets(table: SampleTable, settings: ProbeSettings) -> list[tuple[float, int, np.ndarray]]:
    """(label fraction, seed, row indices into the training split) for every probe of a task."""
    train_labels = table.labels[table.indices("train")]
    subsets: list[tuple[float, int, np.ndarray]] = []
    for seed in settings.seeds:
        drawn = nested_label_fractions(train_labels, settings.label_fractions, seed, settings.min_per_class)
        subsets.extend((fraction, seed, drawn[fraction]) for fraction in sorted(drawn))
    return subsets


def run_unit(unit: ProbeUnit, cache_root: Path, settings: ProbeSettings) -> UnitResult:
    """Fit and evaluate every probe of one (encoder, task) unit from the cache alone."""
    store = FeatureStore(store_path(cache_root, unit.task))
    table = store.read_table()
    kind = table.task.kind
    features = store.read_features(unit.encoder, "clean")
    train, val, test = (table.indices(s) for s in ("train", "val", "test"))
    subsets = training_subsets(table, settings)
    probe_set = fit_probes(
        features[train], table.labels[train], features[val], table.labels[val],
        [rows for _, _, rows in subsets], kind,
        backend=settings.backend, family=settings.family, Cs=settings.Cs,
        selection=settings.selection, n_classes=table.task.n_outputs,
    )

    conditions: list[tuple[str, str, int, str, np.ndarray, np.ndarray]] = [
        ("clean", "", 0, "", features[test], table.labels[test])
    ]
    for name in store.feature_array_names(unit.encoder):
        if name.startswith("corrupt/"):
            _, corruption, severity_name = name.split("/")
            conditions.append(
                ("corrupt", corruption, int(severity_name), "", store.read_features(unit.encoder, name), table.labels[test])
            )
    if unit.target:
        target_store = FeatureStore(store_path(cache_root, unit.target))
        target_table = target_store.read_table()
        if target_table.task.class_names != table.task.class_names:
            raise ValueError(
                f"shift target {unit.target!r} labels {target_table.task.class_names} differ from "
                f"{unit.task!r} labels {table.task.class_names}"
            )
        target_rows = target_table.indices("test")
        conditions.append(
            ("shift", "", 0, unit.target, target_store.read_features(unit.encoder, "clean")[target_rows],
             target_table.labels[target_rows])
        )

    rows = []
    predictions: dict[str, np.ndarray] = {}
    for condition, corruption, severity, target, X, y in conditions:
        probs = probe_set.predict_proba(X)
        for s, (fraction, seed, subset_rows) in enumerate(subsets):
            rows.append(
                {
                    "encoder": unit.encoder, "task": unit.task, "task_kind": kind,
                    "label_fraction": float(fraction), "seed": int(seed), "condition": condition,
                    "corruption": corruption, "severity": int(severity), "target": target,
                    "n_train": int(len(subset_rows)), "selected_C": float(probe_set.selected_C[s]),
                    "val_score": float(probe_set.val_score[s]),
                    **condition_metrics(y, probs[s], kind),
                }
            )
        # Per-case predictions at the full label fraction (every seed) for reliability diagrams and
        # the test-case level of the bootstrap; keys: clean_*, shift_*, corrupt__<name>__<severity>_*.
        key = artifacts.condition_key(condition, corruption, severity)
        full = [s for s, (fraction, _, _) in enumerate(subsets) if fraction == max(settings.label_fractions)]
        # float32: float16 turns probabilities near 0 and 1 into ties and moves AUROC (measured 0.56 -> 0.49).
        predictions[artifacts.probs_key(key)] = probs[full].astype(np.float32)
        predictions[artifacts.labels_key(key)] = y
        if condition == "clean":  # every fraction, for the case-level bootstrap of label efficiency
            predictions[artifacts.ALL_CLEAN_PROBS] = probs.astype(np.float16)
            predictions[artifacts.SUBSET_FRACTION] = np.array([f for f, _, _ in subsets], dtype=np.float64)
            predictions[artifacts.SUBSET_SEED] = np.array([seed for _, seed, _ in subsets], dtype=np.int64)
            predictions[artifacts.FULL_SEEDS] = predictions[artifacts.SUBSET_SEED][full]
    predictions[artifacts.CLEAN_GROUPS] = table.groups[test].astype(str)  # the bootstrap resamples patients
    if unit.target:
        predictions[artifacts.SHIFT_GROUPS] = target_table.groups[target_rows].astype(str)
    return UnitResult(pd.DataFrame(rows), predictions)


def probe_settings(spec: Spec) -> ProbeSettings:
    p = spec.probe
    return ProbeSettings(
        label_fractions=p.label_fractions, seeds=p.seeds, Cs=p.grid, backend=p.backend, family=p.family,
        selection=p.selection, min_per_class=p.min_per_class,
    )


def probe_units(spec: Spec) -> list[ProbeUnit]:
    """Every (encoder, task) unit of the spec, with the task's shift target where it has one."""
    return [
        ProbeUnit(encoder, entry.name, entry.shift_target.name if entry.shift_target else "")
        for entry in spec.datasets for encoder in spec.encoder_names
    ]


