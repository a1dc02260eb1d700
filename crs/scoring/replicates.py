"""Measurements x draws -> the axis errors of every bootstrap replicate: (B + 1, E, A), row 0 the point.

The third step of the score's way (docs/crs.md, "The way through crs/scoring"): the run records'
measurements (:mod:`crs.scoring.measurements`) under the draws (:mod:`crs.scoring.draws`) become axis
errors through the one mapping, :func:`crs.scoring.formula.axis_errors_from_metrics`:

* seed level (:func:`seed_replicates`): each replicate's seed multiset weights the run records'
  measurements; row 0 counts every seed once;
* seed and case level (:func:`case_replicates`): each task's measurements are recomputed from the
  stored per-case predictions under every replicate's patient counts
  (:func:`crs.scoring.case_bootstrap.task_metrics`), the calibration replicates centred on the squared
  scale (:func:`crs.scoring.case_bootstrap.centre_calibration`), then weighted by the replicate's seed
  multiset; row 0 (every seed and case once) gives the CRS from the predictions. Axis errors measured
  elsewhere on the same draws (the ``equity`` axis, :mod:`crs.scoring.subgroups`) are appended after
  the four.

What comes next reads only these arrays: the box and its projection, the comparisons, the rank sets
and the percentile intervals (:mod:`crs.scoring.bootstrap` assembles them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from crs.evaluate.artifacts import RunFolder
from crs.scoring.case_bootstrap import centre_calibration, default_workers, task_metrics
from crs.scoring.draws import draw_seed_counts
from crs.scoring.formula import PointEstimate, ScoreInputError, axis_errors_from_metrics
from crs.scoring.layouts import CaseBootstrapError, TaskLayout, task_layouts
from crs.scoring.measurements import Measurements


@dataclass(frozen=True)
class Replicates:
    """The axis errors of every replicate and the draws that made them.

    ``errors`` (B + 1, E, A): row 0 every seed (and case) once, rows 1.. the replicates, axes in
    :data:`crs.scoring.formula.ALL_AXES` order; ``seed_counts`` (B, S): each replicate's seed multiset;
    ``level``: "seed" or "seed+case". Case level only: ``case_draws`` per task its test rows'
    :class:`crs.scoring.resample.GroupBootstrap`, ``shift_case_draws`` per task with shift targets one per
    target name, ``sampling_designs`` one row per data set resampled (decision 0085).
    """

    errors: np.ndarray
    seed_counts: np.ndarray
    seeds: list[int]
    level: str = "seed"
    case_draws: Mapping[str, Any] | None = None
    shift_case_draws: Mapping[str, Any] | None = None
    sampling_designs: Sequence[Mapping[str, str]] | None = None

    @property
    def drawn(self) -> np.ndarray:
        """(B, E, A): the replicates alone (row 0 left out)."""
        return self.errors[1:]


def check_encoders(measurements: Measurements, point: PointEstimate) -> None:
    if list(measurements.encoders) != point.encoders:
        raise ScoreInputError(
            f"the measurements cover encoders {list(measurements.encoders)} but the point estimate {point.encoders}; "
            "make both from the same run records"
        )


def seed_replicates(measurements: Measurements, point: PointEstimate) -> Replicates:
    """Seed level: each replicate's seed multiset applied to every encoder and task (the pairing that shared
    label subsets create); row 0 the run records' measurements with every seed once."""
    settings = point.settings
    check_encoders(measurements, point)
    counts = draw_seed_counts(len(measurements.seeds), settings.n_boot, settings.seed)
    tasks = measurements.task_list()
    errors = np.concatenate([axis_errors_from_metrics(tasks)[None], axis_errors_from_metrics(tasks, counts)])
    return Replicates(errors, counts, [int(s) for s in measurements.seeds])


def case_replicates(
    measurements: Measurements,
    folder: RunFolder,
    point: PointEstimate,
    kinds: Mapping[str, str],
    workers: int | None = None,
    extra_axes: np.ndarray | None = None,
    layouts: Mapping[str, TaskLayout] | None = None,
) -> Replicates:
    """Seed and case level: per task the measurements under every replicate's patient counts, then the
    replicate's seed multiset (identical to the seed level's draw for the same ``seed``).

    ``layouts``: each task's rows and draws (:func:`crs.scoring.layouts.task_layouts`), made here when
    not given; ``extra_axes`` (n_boot + 1, E, k): axis errors measured elsewhere on the same draws."""
    settings = point.settings
    encoders = point.encoders
    seeds = [int(s) for s in measurements.seeds]
    tasks = sorted(kinds)
    if tasks != [str(t) for t in measurements.tasks]:
        raise CaseBootstrapError(f"per-case predictions are read for tasks {tasks} but the run records hold {list(measurements.tasks)}")
    workers = default_workers() if workers is None else max(1, int(workers))
    if layouts is None:
        layouts = task_layouts(folder, measurements, kinds, encoders[0], settings.seed, settings.full_fraction)

    metrics, case_draws, shift_draws, designs = [], {}, {}, []
    for task in tasks:
        layout = layouts[task]
        if list(layout.seeds) != seeds:
            raise CaseBootstrapError(
                f"task {task!r}: predictions have seeds {list(layout.seeds)} but the run records {seeds}"
            )
        case_draws[task] = layout.draws
        designs += layout.design_rows()
        if layout.shifts:
            shift_draws[task] = {shift.target: shift.draws for shift in layout.shifts}
        metrics.append(centre_calibration(task_metrics(folder, layout, encoders, settings.n_boot, workers)))

    seed_counts = draw_seed_counts(len(seeds), settings.n_boot, settings.seed)
    errors = axis_errors_from_metrics(metrics, np.vstack([np.ones((1, len(seeds))), seed_counts]))
    if extra_axes is not None:
        errors = np.concatenate([errors, np.asarray(extra_axes, dtype=np.float64)], axis=-1)
    return Replicates(errors, seed_counts, seeds, "seed+case", case_draws, shift_draws, designs)
