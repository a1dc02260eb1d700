"""The four axes as pure functions on arrays, and their seed-level table from run records."""

from crs.axes._inputs import KINDS, AxisInputError
from crs.axes.calibration import brier, classwise_ece, ece, mce, nll, smooth_ece
from crs.axes.discrimination import auroc, binary_auroc, ordinal_auroc, per_class_auroc, quadratic_kappa
from crs.axes.label_efficiency import label_efficiency
from crs.axes.robustness import RETENTION_FLOOR, mean_corruption_error, retention
from crs.axes.seed_axes import SEED_AXES_COLUMNS, seed_axes

__all__ = [
    "KINDS",
    "RETENTION_FLOOR",
    "SEED_AXES_COLUMNS",
    "AxisInputError",
    "auroc",
    "binary_auroc",
    "brier",
    "classwise_ece",
    "ece",
    "label_efficiency",
    "mce",
    "mean_corruption_error",
    "nll",
    "ordinal_auroc",
    "per_class_auroc",
    "quadratic_kappa",
    "retention",
    "seed_axes",
    "smooth_ece",
]
