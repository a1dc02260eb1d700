"""Each task's rows and their draws, read once from the first encoder's predictions: what the CRS replicates
and the subgroup tables both resample.

A task's layout (:class:`TaskLayout`) holds what every encoder's predictions of the task share: the
test rows' labels, their groups (patients or lesions) and how they were drawn (decision 0085), the seeds,
label fractions and corrupted conditions, each shift target's rows, and the group resamples of the test
rows and of each shift target from :mod:`crs.scoring.draws` (keyed on the task's name and the score's
seed). :func:`task_layouts` makes every task's once per score; :mod:`crs.scoring.replicates` (through
:func:`crs.scoring.case_bootstrap.task_metrics`) and :mod:`crs.scoring.subgroups` take them from there, so
both see the same patients in every replicate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder, RunFolderError
from crs.scoring.draws import draws_of_shift_target, draws_of_test_rows, task_key
from crs.scoring.formula import ScoreInputError
from crs.scoring.measurements import Measurements
from crs.scoring.resample import RESAMPLED_AS, GroupBootstrap

log = logging.getLogger(__name__)


class CaseBootstrapError(ScoreInputError):
    """Per-case predictions are missing or do not fit the run records; the message says the fix."""


@dataclass(frozen=True)
class ShiftLayout:
    """One shift target of a task: its labels and its own group bootstrap of its rows."""

    target: str
    labels: np.ndarray
    draws: GroupBootstrap
    design: tuple[str, str] = ("official", "inferred")  # (design, "recorded" | "inferred"), see sampling_design


@dataclass(frozen=True)
class TaskLayout:
    """What every encoder's predictions of one task share: rows, labels, groups, seeds, conditions.

    ``draws``: the group bootstrap of the task's test rows; ``shifts``: its shift targets, sorted by
    name (the order of :class:`crs.scoring.measurements.TaskLayout` ``targets``), each with its own draws.
    """

    task: str
    kind: str
    seeds: tuple[int, ...]
    fractions: tuple[float, ...]
    labels: np.ndarray
    corrupt_stems: tuple[str, ...]
    draws: GroupBootstrap
    shifts: tuple[ShiftLayout, ...] = ()
    corrupt_rows: np.ndarray | None = None  # positions in the test rows of a corruption subsample (None: all)
    design: tuple[str, str] = ("stratified", "inferred")  # how the test rows were drawn, see sampling_design

    def design_rows(self) -> list[dict[str, str]]:
        """One row per data set resampled for this task (its test rows, then each shift target): the
        design, how it is known and how the bootstrap resamples it (summary.json, the report)."""
        rows = [(self.task, "test split", self.design)]
        rows += [(shift.target, f"shift target of {self.task}", shift.design) for shift in self.shifts]
        return [{"data_set": name, "rows": rows_name, "design": design, "known": known,
                 "resampled": RESAMPLED_AS[design]} for name, rows_name, (design, known) in rows]

    @property
    def corrupt_labels(self) -> np.ndarray:
        """Labels of the rows the corrupted conditions were evaluated on."""
        return self.labels if self.corrupt_rows is None else self.labels[self.corrupt_rows]

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(shift.target for shift in self.shifts)

    @property
    def corruptions(self) -> tuple[str, ...]:
        """Conditions named ``"<corruption>/<severity>"``."""
        return tuple("/".join(map(str, artifacts.parse_corrupt_stem(stem))) for stem in self.corrupt_stems)


_NEEDED = (
    artifacts.probs_key(artifacts.CLEAN),
    artifacts.labels_key(artifacts.CLEAN),
    artifacts.ALL_CLEAN_PROBS,
    artifacts.SUBSET_FRACTION,
    artifacts.SUBSET_SEED,
    artifacts.FULL_SEEDS,
)


def read_unit(folder: RunFolder, encoder: str, task: str, lazy: bool = False) -> Mapping[str, np.ndarray]:
    """One (encoder, task)'s stored predictions, checked for the keys the bootstrap needs; with
    ``lazy`` each array is read when first asked for (what needs only the labels and groups)."""
    try:
        arrays = folder.read_predictions_on_demand(encoder, task) if lazy else folder.read_predictions(encoder, task)
    except RunFolderError as error:
        raise CaseBootstrapError(str(error)) from None
    missing = [key for key in _NEEDED if key not in arrays]
    if missing:
        raise CaseBootstrapError(
            f"{folder.predictions_path(encoder, task)} lacks {missing} (written by an older crs); "
            "rerun `crs probe` to rewrite the predictions"
        )
    return arrays


def _groups_or_images(arrays: Mapping[str, np.ndarray], key: str, where: str) -> np.ndarray | None:
    if key in arrays:
        return arrays[key]
    log.warning(
        "%s has no %s: resampling images, not patients or lesions (intervals too narrow where a patient "
        "has several images); rerun `crs probe` to store the group ids", where, key,
    )  # fmt: skip
    return None


def sampling_design(arrays: Mapping[str, np.ndarray], key: str, where: str, shift: bool) -> tuple[str, str]:
    """(design, "recorded" | "inferred") of the rows under ``key`` (decision 0085). A file written before
    the design was stored is read as the design its rows had: crs's own stratified split for the test
    rows, the whole cohort (``official``) for a shift target's, with a logged warning."""
    if key in arrays:
        design, known = (str(v) for v in np.asarray(arrays[key]).tolist())
        return design, known
    design = "official" if shift else "stratified"
    log.warning("%s has no %s: resampled as %s (%s); rerun `crs probe` to record how the rows were drawn",
                where, key, design, RESAMPLED_AS[design])
    return design, "inferred"


def unit_shift_keys(
    arrays: Mapping[str, np.ndarray], targets: Sequence[str] | None, where: str
) -> list[artifacts.ShiftKeys]:
    """One unit's shift targets by name (an older file's one unnamed target named from the records)."""
    try:
        return artifacts.shift_keys(arrays, targets)
    except artifacts.ShiftKeysError as error:
        raise CaseBootstrapError(f"{where}: {error}") from None


def task_layout(
    folder: RunFolder, task: str, kind: str, first_encoder: str, seed: int, full_fraction: float,
    targets: Sequence[str] | None = None,
) -> TaskLayout:
    """The task's rows, labels, seeds and conditions (from ``first_encoder``'s file) and its draws
    (:mod:`crs.scoring.draws`: keyed on the task's name and ``seed``).

    ``targets``: the task's shift targets in the run records (None: take the file's); the
    predictions must hold the same ones.
    """
    first = read_unit(folder, first_encoder, task, lazy=True)  # labels and groups: not the ~200 conditions
    where = str(folder.predictions_path(first_encoder, task))
    seeds = tuple(int(s) for s in sorted(first[artifacts.FULL_SEEDS]))
    fractions = tuple(float(f) for f in sorted(set(first[artifacts.SUBSET_FRACTION].tolist())))
    if not np.isclose(fractions[-1], full_fraction):
        raise CaseBootstrapError(
            f"task {task!r}: the largest label fraction is {fractions[-1]}, but axes are read at {full_fraction}"
        )
    labels = first[artifacts.labels_key(artifacts.CLEAN)]
    groups = _groups_or_images(first, artifacts.CLEAN_GROUPS, where)
    design = sampling_design(first, artifacts.design_key(), where, shift=False)
    key = task_key(task, groups, labels)  # the name and the rows: each site's own stream (decision 0144)
    draws = draws_of_test_rows(groups, labels, kind, seed, key, design[0])
    shifts = []
    keys = unit_shift_keys(first, targets, where)
    if targets is not None and [k.target for k in keys] != sorted(targets):
        raise CaseBootstrapError(
            f"task {task!r}: {where} holds shift targets {[k.target for k in keys]} but the run records "
            f"{sorted(targets)}; rerun `crs probe`"
        )
    for g, found in enumerate(keys):  # sorted by name: target g draws from its own stream g
        shift_labels = first[found.labels]
        shift_groups = _groups_or_images(first, found.groups, where)
        shift_design = sampling_design(first, artifacts.design_key(found.target), where, shift=True)
        shift_draws = draws_of_shift_target(shift_groups, shift_labels, kind, seed, key, g, shift_design[0])
        shifts.append(ShiftLayout(found.target, shift_labels, shift_draws, shift_design))
    corrupt_rows = first.get(artifacts.CORRUPT_ROWS)
    if corrupt_rows is not None and (corrupt_rows.ndim != 1 or len(corrupt_rows) == 0
                                     or corrupt_rows.min() < 0 or corrupt_rows.max() >= len(labels)):
        raise CaseBootstrapError(f"{where}: {artifacts.CORRUPT_ROWS} are not positions of its {len(labels)} test rows; "
                                 "rerun `crs probe`")
    return TaskLayout(
        task=task, kind=kind, seeds=seeds, fractions=fractions, labels=labels,
        corrupt_stems=tuple(sorted(artifacts.corrupt_stems(first))), draws=draws, shifts=tuple(shifts),
        corrupt_rows=None if corrupt_rows is None else np.asarray(corrupt_rows, dtype=np.int64), design=design,
    )  # fmt: skip


def task_kinds(records: pd.DataFrame) -> dict[str, str]:
    kinds = records.groupby(records["task"].astype(str))["task_kind"].first()
    return {str(task): str(kinds[task]) for task in sorted(kinds.index)}


def task_layouts(
    folder: RunFolder, measurements: Measurements, kinds: Mapping[str, str], first_encoder: str, seed: int,
    full_fraction: float,
) -> dict[str, TaskLayout]:
    """Every task's rows and draws (:func:`task_layout`, tasks by name), with the shift targets its run
    records name: what the CRS replicates and the subgroup tables both resample."""
    layouts = {}
    for task in sorted(kinds):
        recorded = measurements.layouts[task].targets if task in measurements.layouts else None
        layouts[task] = task_layout(folder, task, kinds[task], first_encoder, seed, full_fraction, recorded)
    return layouts
