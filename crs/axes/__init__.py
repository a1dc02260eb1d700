"""The four axes as pure functions on arrays, and their seed-level table from run records."""

from crs.axes._inputs import KINDS, AxisInputError
from crs.axes.calibration import (
    brier,
    calibrated_ece_moments,
    calibration_error_moments,
    classwise_ece,
    debiased_ece,
    ece,
    ece_standard_error,
    mce,
    nll,
    smooth_ece,
)
from crs.axes.discrimination import (
    auroc,
    auroc_standard_error,
    binary_auroc,
    ordinal_auroc,
    per_class_auroc,
    quadratic_kappa,
)
from crs.axes.label_efficiency import label_efficiency, relative_label_retention
from crs.axes.robustness import RETENTION_FLOOR, effective_robustness, mean_corruption_error, retention
from crs.axes.seed_axes import SEED_AXES_COLUMNS, seed_axes

__all__ = [
    "KINDS",
    "RETENTION_FLOOR",
    "SEED_AXES_COLUMNS",
    "AxisInputError",
    "auroc",
    "auroc_standard_error",
    "binary_auroc",
    "brier",
    "calibrated_ece_moments",
    "calibration_error_moments",
    "classwise_ece",
    "debiased_ece",
    "ece",
    "ece_standard_error",
    "effective_robustness",
    "label_efficiency",
    "mce",
    "mean_corruption_error",
    "nll",
    "ordinal_auroc",
    "per_class_auroc",
    "quadratic_kappa",
    "relative_label_retention",
    "retention",
    "seed_axes",
    "smooth_ece",
]
