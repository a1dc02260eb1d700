"""Who does it fail? Per patient subgroup: AUROC, the scored calibration error and the positive rate,
on the clean test split and on each shift target, for the full-fraction probes; per attribute the
worst-group AUROC and the largest AUROC and calibration gaps, each with an interval from the score's
own patient-level replicates (docs/decisions/0041-0043, docs/subgroups.md).

* Replicates: the task's :class:`crs.scoring.layouts.TaskLayout` draws (the CRS's own:
  same entropy, same patients), each replicate's row counts restricted to a group's rows. Every
  encoder sees the same draws, so the intervals are paired across encoders.
* Groups and sizes: fairlearn's :class:`~fairlearn.metrics.MetricFrame` does the by-group
  bookkeeping (the groups of an attribute, each group's size and the positives of its rarest label,
  which decide scored or too small), on one row per joint group (a distinct combination of the
  attributes' values) whose counts its metric functions add. The measures go through the weighted
  metrics (:mod:`crs.axes.weighted`) under every replicate at once, every group of every attribute
  in one pass over the rows (decision 0044; a group's value is its value on its own rows); row 0
  (every case once) is the point estimate (decision 0041 says why not MetricFrame per replicate).
* Intervals of the group AUROCs, the worst group and the AUROC gap come from one simultaneous box
  per condition over every scored group of every encoder, task and attribute (studentised max-|t| on
  the logit scale, :func:`apply_group_box`, decisions 0135-0136): the worst group's interval is the
  minimum at the box's lower and upper corners, the gap's the picked pair's difference at its corners.
  The minimum and a difference are monotone in every group AUROC, so they cover through ties between
  groups (the percentile interval of the replicate minimum covered 0.43-0.82 where groups were equal,
  issue 40); under equal signal a gap is a finding in well under alpha of attributes.
* Gaps are between the groups named by the point estimate (best minus worst AUROC; worst minus
  best calibration error). The calibration gap's interval is simultaneous over every pair of groups
  (max-|t| bootstrap, :func:`crs.scoring.intervals.simultaneous_gap_interval`, decision 0062).
* Groups with fewer than ``min_images`` test images, or with fewer than ``min_positives``
  positives of a label that has positives in the test split, are listed as too small, never scored.
* Gaps are reported, never scored (they fall when the best group improves); the worst-group AUROC
  is an absolute utility and may enter the CRS as the optional ``equity`` axis (:mod:`crs.scoring.equity`).

Seeds: at the full label fraction every seed usually trains on the same rows; a group's measure is
the mean over the full-fraction seeds (each distinct prediction scored once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from crs.axes.weighted import (
    ReplicateWeights,
    nanmean_classes,
    prepare_weights,
    weighted_auroc_by_group,
    weighted_cell_sums,
    weighted_debiased_ece,
    weighted_debiased_ece_by_group,
)
from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder
from crs.scoring.case_bootstrap import _class_labels, _distinct_rows, default_workers
from crs.scoring.intervals import (
    GroupBox,
    box_gap,
    box_minimum,
    centre_on_squares,
    simultaneous_gap_interval,
    simultaneous_group_box,
)
from crs.scoring.layouts import TaskLayout, read_unit, task_layout
from crs.scoring.resample import GroupBootstrap

SCORED_CALIBRATION: Callable[..., np.ndarray] = weighted_debiased_ece
"""The scored calibration error (the records' ``ece_debiased``) under replicate weights, (B,): the one
line to change when the scored estimator changes (crs.axes.calibration)."""
SCORED_CALIBRATION_BY_GROUP: Callable[..., list[np.ndarray]] = weighted_debiased_ece_by_group
""":data:`SCORED_CALIBRATION` of every group of several groupings in one pass, (B, G) per grouping: what the
subgroup tables call. Changed together with :data:`SCORED_CALIBRATION` (a test holds them equal)."""

MIN_IMAGES = 50
"""Fewest test images of a group that is scored."""
MIN_POSITIVES = 10
"""Fewest positives per label (class, for single-label tasks) of a group that is scored."""

GROUP_COLUMNS = (
    "encoder", "task", "condition", "attribute", "group", "n_images", "min_positives", "scored",
    "auroc", "auroc_low", "auroc_high", "calibration", "calibration_low", "calibration_high",
    "positive_rate", "positive_rate_low", "positive_rate_high",
)  # fmt: skip
GAP_COLUMNS = (
    "encoder", "task", "condition", "attribute", "n_groups", "worst_group", "worst_auroc", "worst_auroc_low",
    "worst_auroc_high", "best_group", "auroc_gap", "auroc_gap_low", "auroc_gap_high", "worst_calibrated_group",
    "best_calibrated_group", "calibration_gap", "calibration_gap_low", "calibration_gap_high", "too_small",
)  # fmt: skip


@dataclass(frozen=True)
class SubgroupRows:
    """One condition's rows of one task: labels, categories per attribute and the replicate counts."""

    condition: str  # "clean" or "shift:<target>"
    labels: np.ndarray
    categories: Mapping[str, np.ndarray]
    weights: np.ndarray | ReplicateWeights  # (B + 1, N) counts: row 0 every case once, then the score's replicates


def positive_counts(labels: np.ndarray, kind: str, n_outputs: int) -> np.ndarray:
    """Positives of each one-vs-rest problem (NaN labels, unknown, not counted)."""
    return np.array([np.nansum(column) for _, column in _class_labels(labels, kind, n_outputs)])


def _positive_columns(labels: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(positive, known) 0/1 float columns whose weighted share is the positive rate: multilabel and
    binary each label; ordinal above grade 0 (one column)."""
    if kind == "ordinal":
        positive = (np.asarray(labels) > 0).astype(np.float64)[:, None]
    else:
        positive = np.asarray(labels, dtype=np.float64).reshape(len(labels), -1)
    known = (~np.isnan(positive)).astype(np.float64)
    return np.nan_to_num(positive), known


def _rate(positive: np.ndarray, known: np.ndarray) -> np.ndarray:
    """(B,) mean over the labels of each replicate's weighted positive share (weighted sums (B, K))."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _nanmean_rows(positive / known)


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Mean of each row's finite values; NaN (no warning) for a row without any."""
    finite = np.isfinite(values)
    count = finite.sum(axis=1)
    total = np.where(finite, values, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _nanmin_rows(values: np.ndarray) -> np.ndarray:
    """Minimum of each row's finite values; NaN (no warning) for a row without any."""
    finite = np.isfinite(values)
    return np.where(finite.any(axis=1), np.where(finite, values, np.inf).min(axis=1), np.nan)


def _interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return float("nan"), float("nan")
    low, high = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)


def _metric_frame(metrics: dict[str, Callable], rows: np.ndarray, sensitive: np.ndarray) -> pd.DataFrame:
    """fairlearn's by-group table of ``metrics`` (functions of row positions)."""
    from fairlearn.metrics import MetricFrame

    frame = MetricFrame(metrics=metrics, y_true=rows, y_pred=rows, sensitive_features=pd.Series(sensitive, name="group"))
    return frame.by_group


@dataclass(frozen=True)
class GroupPlan:
    """One group of one attribute on one condition: what every encoder shares (made once per task)."""

    group: str
    n_images: int
    min_positives: int
    scored: bool
    rows: np.ndarray  # the group's row positions
    positive_rate: np.ndarray  # (B + 1,)


@dataclass(frozen=True)
class ConditionPlan:
    """One condition's groups of every attribute, and what every encoder's measures share.

    ``scored_codes``: per attribute, each row's scored group (its position among the attribute's scored
    groups, in ``groups`` order) or -1; ``weights``: the condition's replicate counts laid out once for
    the weighted metrics. A group is measured on the whole condition with every other row left out
    (no side for the AUROC, weight 0 for the calibration sums), which is the group on its own rows
    (tested), so no per-group copy of the weights is made.
    """

    groups: Mapping[str, list[GroupPlan]]
    scored_codes: Mapping[str, np.ndarray]
    labels: np.ndarray
    weights: ReplicateWeights


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and each row's position among them."""
    names, codes = np.unique(np.asarray(values), return_inverse=True)
    return names, codes.ravel()


def plan_groups(
    rows: SubgroupRows, kind: str, n_outputs: int, min_images: int = MIN_IMAGES, min_positives: int = MIN_POSITIVES,
) -> ConditionPlan:
    """Per attribute, its groups (sorted), sized and judged by fairlearn's MetricFrame, with their positive rates.

    The rows are first split into joint groups (each distinct combination of the attributes' values);
    sizes, positives and the replicates' weighted positive and known counts are summed per joint group
    in one pass, and each attribute's groups add up their joint groups. MetricFrame sees one row per
    joint group (its metric functions add the joint groups' integer counts), so its bookkeeping costs
    the same for 300 and for 300,000 test rows; the sums are whole numbers, so nothing changes.
    """
    labels = rows.labels
    weights = prepare_weights(rows.weights)
    attributes = list(rows.categories)
    coded = [_codes(rows.categories[a]) for a in attributes]
    if not attributes:
        return ConditionPlan({}, {}, labels, weights)
    joint_codes, joint = np.unique(np.stack([c for _, c in coded], axis=1), axis=0, return_inverse=True)
    joint = joint.ravel()
    n_joint = len(joint_codes)
    problems = _class_labels(labels, kind, n_outputs)
    needed = positive_counts(labels, kind, n_outputs) > 0
    joint_sizes = np.bincount(joint, minlength=n_joint)
    joint_positives = np.stack(
        [np.bincount(joint, weights=np.nan_to_num(column), minlength=n_joint) for _, column in problems], axis=1)
    rate_sums = None
    if kind != "multiclass":  # per joint group and label: weighted positives and known labels, (B + 1, J, K, 2)
        positive, known = _positive_columns(labels, kind)
        n_columns = positive.shape[1]
        rate_sums = weighted_cell_sums(
            joint[:, None] * n_columns + np.arange(n_columns), np.stack([positive, known], axis=-1),
            n_joint * n_columns, weights).reshape(weights.n_replicates, n_joint, n_columns, 2)
    groups: dict[str, list[GroupPlan]] = {}
    scored_codes: dict[str, np.ndarray] = {}
    for a, (attribute, (names, codes)) in enumerate(zip(attributes, coded, strict=True)):
        sizes = _metric_frame({
            "n_images": lambda j, _: int(joint_sizes[j].sum()),
            "min_positives": lambda j, _: int(joint_positives[j].sum(axis=0)[needed].min(initial=10**6)),
        }, np.arange(n_joint), names[joint_codes[:, a]])
        groups[attribute] = []
        scored_codes[attribute] = np.full(len(labels), -1, dtype=np.int64)
        for group, size in sizes.iterrows():
            code = int(np.searchsorted(names, group))
            members = np.flatnonzero(codes == code)
            scored = bool(size["n_images"] >= min_images and size["min_positives"] >= min_positives)
            if scored:
                scored_codes[attribute][members] = sum(p.scored for p in groups[attribute])
            if rate_sums is None:
                rate = np.full(weights.n_replicates, np.nan)
            else:
                summed = rate_sums[:, joint_codes[:, a] == code].sum(axis=1)
                rate = _rate(summed[..., 0], summed[..., 1])
            groups[attribute].append(
                GroupPlan(str(group), int(size["n_images"]), int(size["min_positives"]), scored, members, rate))
    return ConditionPlan(groups, scored_codes, labels, weights)


def _group_aurocs(
    keys: list[np.ndarray], labels: np.ndarray, kind: str, plan: ConditionPlan,
) -> dict[str, list[np.ndarray]]:
    """Per attribute, the (B + 1, M) macro AUROC of the M distinct score arrays ``keys`` for each of its
    scored groups, in order: per class one walk over the rows scores every group of every attribute
    (:func:`crs.axes.weighted.weighted_auroc_by_group`; a group's rows alone on the two sides)."""
    attributes = list(plan.groups)
    per_class = []
    for k, column in _class_labels(labels, kind, keys[0].shape[1]):
        scores = np.stack([np.asarray(key[:, k], dtype=np.float32) for key in keys], axis=1)
        per_class.append(weighted_auroc_by_group(scores, column, plan.weights, [plan.scored_codes[a] for a in attributes]))
    return {
        attribute: [nanmean_classes(np.stack([found[a][:, :, g] for found in per_class], axis=-1))
                    for g in range(per_class[0][a].shape[2])]
        for a, attribute in enumerate(attributes)
    }


def _centred_seed_mean(per_distinct: np.ndarray, index: np.ndarray, centre: bool) -> np.ndarray:
    """(B + 1,) the mean over the seeds (``index``: each seed's distinct prediction) of (B + 1, M) values;
    calibration replicates centred on the point estimate on the squared scale, as the score's
    (case_bootstrap.centre_calibration, decision 0061)."""
    values = per_distinct[:, index].mean(axis=1)
    return centre_on_squares(values) if centre else values


def encoder_subgroups(
    encoder: str, task: str, kind: str, arrays: Mapping[str, np.ndarray], condition: str,
    plan: ConditionPlan, probs_key: str, seeds: Sequence[int], alpha: float,
) -> tuple[list[dict], list[dict], dict[str, np.ndarray], dict[str, tuple[list[str], np.ndarray]]]:
    """One encoder's group rows and gap rows on one condition of one task, per attribute with a
    scored group the worst-group AUROC under every replicate (B + 1,), and per attribute the (B + 1, G)
    AUROCs of its scored groups (with their names) for the simultaneous box: the
    AUROC, worst-group and gap intervals are filled by :func:`apply_group_box`, over every encoder at once.

    The calibration errors of every scored group of every attribute come from one pass over the rows
    (:data:`SCORED_CALIBRATION_BY_GROUP`), and their AUROCs from one walk per class and distinct
    prediction (:func:`crs.axes.weighted.weighted_auroc_by_group`)."""
    full_seeds = np.asarray(arrays[artifacts.FULL_SEEDS])
    full_rows = [int(np.flatnonzero(full_seeds == seed)[0]) for seed in seeds]
    probs_all = np.asarray(arrays[probs_key])[full_rows]
    keys_all = artifacts.auroc_scores(arrays, probs_key)[full_rows]
    probs, index = _distinct_rows(probs_all)
    keys = [np.asarray(keys_all[int(np.flatnonzero(index == d)[0])], dtype=np.float32) for d in range(len(probs))]
    attributes = list(plan.groups)
    calibration_by_distinct = [
        SCORED_CALIBRATION_BY_GROUP(plan.labels, p, kind, plan.weights, [plan.scored_codes[a] for a in attributes])
        for p in probs
    ]  # per distinct prediction, per attribute (B + 1, scored groups)
    group_rows: list[dict] = []
    gap_rows: list[dict] = []
    worst_by_attribute: dict[str, np.ndarray] = {}
    box_inputs: dict[str, tuple[list[str], np.ndarray]] = {}
    aurocs_by_attribute = _group_aurocs(keys, plan.labels, kind, plan)
    for a, (attribute, groups) in enumerate(plan.groups.items()):
        aurocs = aurocs_by_attribute[attribute]
        replicates: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        scored_position = 0
        rate_box = positive_rate_box([group_plan.positive_rate for group_plan in groups], alpha)
        for g, group_plan in enumerate(groups):
            row = {"encoder": encoder, "task": task, "condition": condition, "attribute": attribute,
                   "group": group_plan.group, "n_images": group_plan.n_images,
                   "min_positives": group_plan.min_positives, "scored": group_plan.scored,
                   "positive_rate": float(group_plan.positive_rate[0]),
                   "positive_rate_low": float(rate_box.low[g]), "positive_rate_high": float(rate_box.high[g])}
            if group_plan.scored:
                auroc = _centred_seed_mean(aurocs[scored_position], index, centre=False)
                calibration = _centred_seed_mean(
                    np.stack([found[a][:, scored_position] for found in calibration_by_distinct], axis=1), index,
                    centre=True)
                scored_position += 1
                replicates[group_plan.group] = (auroc, calibration)
                row.update(auroc=float(auroc[0]), calibration=float(calibration[0]))
                row.update(zip(("calibration_low", "calibration_high"), _interval(calibration[1:], alpha), strict=True))
            group_rows.append(row)
        too_small = ", ".join(group_plan.group for group_plan in groups if not group_plan.scored)
        gap = {"encoder": encoder, "task": task, "condition": condition, "attribute": attribute,
               "n_groups": len(replicates), "too_small": too_small}
        if replicates:
            names = sorted(replicates)
            auroc = np.stack([replicates[g][0] for g in names], axis=1)  # (B + 1, G)
            calibration = np.stack([replicates[g][1] for g in names], axis=1)
            worst, best = int(np.argmin(auroc[0])), int(np.argmax(auroc[0]))
            worst_cal, best_cal = int(np.argmax(calibration[0])), int(np.argmin(calibration[0]))
            worst_by_attribute[attribute] = _nanmin_rows(auroc)
            box_inputs[attribute] = (names, auroc)
            auroc_gap = auroc[:, best] - auroc[:, worst]
            calibration_gap = calibration[:, worst_cal] - calibration[:, best_cal]
            gap.update(worst_group=names[worst], worst_auroc=float(auroc[0, worst]), best_group=names[best],
                       auroc_gap=float(auroc_gap[0]), worst_calibrated_group=names[worst_cal],
                       best_calibrated_group=names[best_cal], calibration_gap=float(calibration_gap[0]))
            if len(names) > 1:  # simultaneous over every pair of groups: the pair was picked by the point (0062)
                gap.update(zip(("calibration_gap_low", "calibration_gap_high"),
                               simultaneous_gap_interval(calibration, worst_cal, best_cal, alpha)[:2], strict=True))
        gap_rows.append(gap)
    return group_rows, gap_rows, worst_by_attribute, box_inputs


def positive_rate_box(rates: Sequence[np.ndarray], alpha: float) -> GroupBox:
    """The intervals of an attribute's per-group positive rates (each (B + 1,), row 0 the point): one
    studentised max-|t| box over its groups on the logit scale (:func:`simultaneous_group_box`), so every
    group's interval holds at once. The percentile interval of a group's replicate rates covered 0.83-0.94
    for the worst group in the coverage bench (small groups, clustered patients); the box 0.975-0.992 (decision 0150)."""
    if not rates:
        return GroupBox(np.zeros(0), np.zeros(0), float("nan"))
    return simultaneous_group_box(np.stack([np.asarray(rate, dtype=np.float64) for rate in rates], axis=1), alpha)


def apply_group_box(
    group_rows: list[dict], gap_rows: list[dict],
    box_inputs: Mapping[tuple[str, str, str], tuple[list[str], np.ndarray]], alpha: float,
) -> float:
    """Fill the per-group AUROC intervals and each attribute's worst-group interval of one condition from one
    simultaneous box over every scored group of every encoder, task and attribute (decision 0135).

    ``box_inputs``: (encoder, task, attribute) -> (its scored groups' names, their (B + 1, G) AUROCs).
    The box (:func:`crs.scoring.intervals.simultaneous_group_box`, studentised max-|t| on the logit scale)
    holds every true group AUROC at once with probability about 1 - alpha; the worst group's interval is
    the minimum at its lower and upper corners (the minimum is monotone in every group AUROC), so it
    covers the true worst group through ties between groups, where the percentile interval of the
    replicate minimum missed (issue 40). Returns the box's critical value (NaN without a scored group)."""
    keys = sorted(box_inputs)
    if not keys:
        return float("nan")
    box = simultaneous_group_box(np.concatenate([box_inputs[key][1] for key in keys], axis=1), alpha)
    bounds: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    by_group: dict[tuple[str, str, str, str], tuple[float, float]] = {}
    start = 0
    for key in keys:
        names = box_inputs[key][0]
        bounds[key] = box.low[start:start + len(names)], box.high[start:start + len(names)]
        by_group.update({(*key, name): (float(bounds[key][0][g]), float(bounds[key][1][g]))
                         for g, name in enumerate(names)})
        start += len(names)
    for row in group_rows:
        found = by_group.get((row["encoder"], row["task"], row["attribute"], row["group"]))
        if row["scored"] and found is not None:
            row.update(auroc_low=found[0], auroc_high=found[1])
    for gap in gap_rows:
        key = (gap["encoder"], gap["task"], gap["attribute"])
        if key in bounds:
            gap.update(zip(("worst_auroc_low", "worst_auroc_high"), box_minimum(*bounds[key]), strict=True))
            names = box_inputs[key][0]
            if len(names) > 1:  # the picked pair's gap at the box's corners (decision 0136)
                gap.update(zip(("auroc_gap_low", "auroc_gap_high"), box_gap(
                    *bounds[key], names.index(gap["best_group"]), names.index(gap["worst_group"])), strict=True))
    return box.critical


def _replicate_weights(draws: GroupBootstrap, n_boot: int) -> ReplicateWeights:
    """Row 0 every case once, then the score's replicate counts, laid out for the weighted metrics from the
    draws' per-patient counts (uint16 mostly: a quarter of float64's memory at paper size)."""
    counts = draws.group_counts(range(n_boot))
    return prepare_weights(np.vstack([np.ones((1, counts.shape[1]), dtype=counts.dtype), counts]),
                           columns=draws.row_group)


def task_rows(layout: TaskLayout, first: Mapping[str, np.ndarray], n_boot: int) -> list[tuple[SubgroupRows, str]]:
    """The clean test rows and each shift target's rows of one task, with the score's replicate counts
    and the probabilities key of each (conditions without stored categories are left out)."""
    out = []
    clean = {a: np.asarray(first[artifacts.subgroup_key(a)]).astype(str) for a in artifacts.subgroup_attributes(first)}
    if clean:
        weights = _replicate_weights(layout.draws, n_boot)
        out.append((SubgroupRows(artifacts.CLEAN, layout.labels, clean, weights), artifacts.probs_key(artifacts.CLEAN)))
    for shift in layout.shifts:
        found = {a: np.asarray(first[artifacts.subgroup_key(a, shift.target)]).astype(str)
                 for a in artifacts.subgroup_attributes(first, shift.target)}
        if found:
            weights = _replicate_weights(shift.draws, n_boot)
            key = artifacts.probs_key(artifacts.condition_key(artifacts.SHIFT, target=shift.target))
            out.append((SubgroupRows(f"shift:{shift.target}", shift.labels, found, weights), key))
    return out


class _ReadOnDemand(RunFolder):
    """The run folder with each predictions array read when first asked for: the subgroup tables need the
    clean and shift predictions and categories of a file that holds every condition (a CheXpert-sized
    file took 3.5-4.4 s to read whole, and was read three times per task). The score's own readers
    (:func:`crs.scoring.layouts.task_layout`, ``read_unit``) only look arrays up by name."""

    def read_predictions(self, encoder: str, task: str) -> dict[str, np.ndarray]:
        return cast(dict[str, np.ndarray], self.read_predictions_on_demand(encoder, task))


@dataclass(frozen=True)
class SubgroupResult:
    """Per group (``groups``) and per attribute (``gaps``) tables of every encoder, task and condition."""

    groups: pd.DataFrame
    gaps: pd.DataFrame
    min_images: int = MIN_IMAGES
    min_positives: int = MIN_POSITIVES
    worst: Mapping[tuple[str, str, str], np.ndarray] | None = None
    """(encoder, task, attribute) -> clean worst-group AUROC under every replicate (B + 1,), row 0 the point."""

    @property
    def empty(self) -> bool:
        return self.groups.empty


def subgroup_scores(
    folder: RunFolder, encoders: Sequence[str], kinds: Mapping[str, str], targets: Mapping[str, Sequence[str]],
    n_boot: int, seed: int, alpha: float, full_fraction: float = 1.0,
    min_images: int = MIN_IMAGES, min_positives: int = MIN_POSITIVES, workers: int | None = 1,
    layouts: Mapping[str, TaskLayout] | None = None,
) -> SubgroupResult:
    """Every encoder's subgroup table from the run folder's predictions, under the score's replicates.

    ``kinds``: task -> kind (each task's draws are keyed on its name and ``seed``, as the score's);
    ``targets``: task -> its shift targets in the records. The groups, their sizes, positive rates and
    weights are made once per task (``workers`` threads plan the tasks side by side); the threads then
    take one (task, encoder) each (the weighted metrics release the GIL), as the score's own replicates do.
    ``workers`` None: the score's default (:func:`crs.scoring.case_bootstrap.default_workers`).
    ``layouts``: each task's rows and draws as the CRS's replicates use them
    (:func:`crs.scoring.layouts.task_layouts`: made once for both); made here when not given.
    """
    folder = _ReadOnDemand(folder.root)
    tasks = sorted(kinds)
    workers = default_workers() if workers is None else max(1, int(workers))

    def plan_task(task: str) -> tuple[tuple[int, ...], Mapping[str, np.ndarray], list]:
        layout = (layouts[task] if layouts is not None
                  else task_layout(folder, task, kinds[task], encoders[0], seed, full_fraction, targets.get(task) or None))
        first = read_unit(folder, encoders[0], task)
        n_outputs = int(np.asarray(first[artifacts.probs_key(artifacts.CLEAN)]).shape[-1])
        conditions = [(rows, probs_key, plan_groups(rows, kinds[task], n_outputs, min_images, min_positives))
                      for rows, probs_key in task_rows(layout, first, n_boot)]
        return layout.seeds, first, conditions

    def one(job: tuple[str, str]) -> list[tuple]:
        task, encoder = job
        seeds, first, conditions = planned[task]
        arrays = first if encoder == encoders[0] else read_unit(folder, encoder, task)
        return [(rows.condition, encoder_subgroups(encoder, task, kinds[task], arrays, rows.condition, plan,
                                                   probs_key, seeds, alpha))
                for rows, probs_key, plan in conditions]

    # the tasks are planned side by side, then every (task, encoder) pair is a job; results keep this order
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    try:
        mapper = pool.map if pool is not None else map
        planned = dict(zip(tasks, mapper(plan_task, tasks), strict=True))
        jobs = [(task, encoder) for task in tasks if planned[task][2] for encoder in encoders]
        found_by_job = list(mapper(one, jobs))
    finally:
        if pool is not None:
            pool.shutdown()
    group_rows: list[dict] = []
    gap_rows: list[dict] = []
    worst: dict[tuple[str, str, str], np.ndarray] = {}
    by_condition: dict[str, tuple[list[dict], list[dict], dict]] = {}
    for (task, encoder), found_conditions in zip(jobs, found_by_job, strict=True):
        for condition, found in found_conditions:
            group_rows += found[0]
            gap_rows += found[1]
            rows, gaps, inputs = by_condition.setdefault(condition, ([], [], {}))
            rows += found[0]
            gaps += found[1]
            inputs.update({(encoder, task, a): values for a, values in found[3].items()})
            if condition == artifacts.CLEAN:
                worst.update({(encoder, task, a): values for a, values in found[2].items()})
    for rows, gaps, inputs in by_condition.values():  # one box a condition: every encoder, task and attribute
        apply_group_box(rows, gaps, inputs, alpha)
    groups = pd.DataFrame(group_rows).reindex(columns=list(GROUP_COLUMNS))
    gaps = pd.DataFrame(gap_rows).reindex(columns=list(GAP_COLUMNS))
    return SubgroupResult(groups, gaps, min_images, min_positives, worst)
