"""``ScoreSettings``: every choice that turns run records into a CRS, in one frozen, checked object.

Built from a spec's ``[score]`` table in one place (:meth:`ScoreSettings.from_config`) or from
keywords in Python; every scoring function takes it instead of a row of keywords.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from crs.spec import COMPONENTS, MEDIAN_REFERENCE, ScoreConfig

INTERVAL_METHODS = ("adaptive", "box", "percentile")
"""``interval``: the adaptive CRS interval with the box's axis intervals (default, decisions 0180, 0181: the
smooth part's interval plus the dominance range, per encoder), the projected simultaneous box for all
(decision 0128), or the replicates' percentile."""
HEADLINE_METHODS = ("smooth", "bound", "stepdown", "pretest")
"""``headline``: how "surely above" is read off the headline's one family (decisions 0166, 0180): ``"smooth"``
(default) the CRS-difference bound plus the smooth part's pairwise differences in the family; ``"bound"`` the
bound alone (decision 0166); ``"stepdown"`` sure dominance from the Romano-Wolf step-down; ``"pretest"`` the
smooth part with axis orders settled by |t| >= 2 for the dominance range (moment selection: not valid by
construction, measured only)."""
NOISE_FLOOR = "noise"
"""Error-floor rule: each axis error floored at the standard error of the reference's error."""
DOMINANCE_TOLERANCE = 1e-9
"""u differences within this are float noise: never decide a dominance (0.1499999999999999 vs 0.15000000000000002)."""


class ScoreInputError(ValueError):
    """The inputs to the CRS are inconsistent; the message names the input and the fix."""


def component_weights(weights: Mapping[str, float] | Sequence[float] | None) -> np.ndarray:
    """Weights of (dominance, balance, worst_axis), normalised to sum to 1 (equal if None)."""
    if weights is None:
        return np.full(len(COMPONENTS), 1.0 / len(COMPONENTS))
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(COMPONENTS))
        if unknown:
            raise ScoreInputError(f"unknown CRS weight names {unknown}; use {COMPONENTS}")
        values = np.array([float(weights.get(name, 0.0)) for name in COMPONENTS])
    else:
        values = np.asarray(list(weights), dtype=np.float64)
        if values.shape != (len(COMPONENTS),):
            raise ScoreInputError(
                f"CRS weights need {len(COMPONENTS)} values for {COMPONENTS}, got {values.tolist()}"
            )
    if np.any(values < 0) or not np.isfinite(values).all() or values.sum() <= 0:
        raise ScoreInputError(
            f"CRS weights must be finite, non-negative and not all zero, got {values.tolist()}"
        )
    return values / values.sum()


@dataclass(frozen=True)
class ScoreSettings:
    """How run records become a CRS (docs/crs.md explains each choice).

    Args:
        reference: encoder whose errors set u = 0.5, or ``"median"`` (default): the virtual
            cohort-median encoder, per-axis median error, so no real encoder gets 0.5 by fiat.
        weights: (dominance, balance, worst_axis), normalised to sum 1; a mapping by name is accepted.
        error_floor: ``"noise"`` (default): each axis error is floored at the standard error of
            the reference's error on that axis (the median encoder's: the median standard error),
            from the run records' ``auroc_se`` and ``ece_se``; or a positive number for every axis.
        dominance_tolerance: u differences within it are ties (float noise), never a dominance.
        dominance_margin: optional: a dominance needs one u gain above it (0 = any real gain).
        n_boot, seed, alpha: bootstrap replicates, random seed, 1 - confidence level.
        full_fraction: the label fraction at which discrimination, calibration and robustness are read.
        retention_floor: denominator floor of the retention ratios reported beside the axes.
        n_weight_samples: Dirichlet draws of the weight-sensitivity analysis.
        case_level: resample test cases as well as seeds (needs the stored per-case predictions).
        subgroup_min_images, subgroup_min_positives: the smallest patient subgroup that is scored (test
            images; positives per label); smaller ones are listed as too small (crs.scoring.subgroups).
        equity: add the optional fifth axis ``equity``: 1 - the worst-group AUROC, mean over tasks and
            subgroup attributes (crs.scoring.subgroups); off by default (the four-axis CRS). Needs case_level.
        interval: how crs_low / crs_high and the axis intervals are made: ``"adaptive"`` (default), the
            CRS's smooth part's studentised interval widened by the dominance term's range where a Pareto
            relation or a floor is unsettled (crs.scoring.projection.adaptive_crs_bounds, decisions 0180,
            0181; per encoder, measured level), the axes the simultaneous box's; ``"box"``, the CRS too at
            the extreme corners of a simultaneous box over every axis error (crs.scoring.projection,
            decision 0128); ``"percentile"``, the percentile of the replicates (the paper's; its
            measured coverage is printed beside it). Whatever is chosen, the statements about several
            encoders at once (reversals with confidence, the reference sentence without its family) read
            the box's CRS bounds ``crs_box_low`` / ``_high``.
        headline: how the headline's "surely above" (the tier, the rank sets, the reference sentence) is read
            off its one family: one of :data:`HEADLINE_METHODS` (default ``"smooth"``, decision 0180).
        reference_competes: a named reference competes for the lead (the paper's table); off by default, it
            is a baseline row, left out of P(rank 1), the rank sets, the tier and the leader
            (crs.scoring.baseline). No effect with the median reference, which is not an encoder.
    """

    reference: str = MEDIAN_REFERENCE
    weights: Sequence[float] | Mapping[str, float] = (1 / 3, 1 / 3, 1 / 3)
    """Stored as a normalised (dominance, balance, worst_axis) tuple."""
    error_floor: str | float = NOISE_FLOOR
    dominance_tolerance: float = DOMINANCE_TOLERANCE
    dominance_margin: float = 0.0
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    full_fraction: float = 1.0
    retention_floor: float = 0.05
    n_weight_samples: int = 1000
    case_level: bool = False
    subgroup_min_images: int = 50
    subgroup_min_positives: int = 10
    equity: bool = False
    interval: str = "adaptive"
    reference_competes: bool = False
    headline: str = "smooth"

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", tuple(float(w) for w in component_weights(self.weights)))
        if not isinstance(self.reference, str) or not self.reference:
            raise ScoreInputError(f"reference must be an encoder name or {MEDIAN_REFERENCE!r}, got {self.reference!r}")
        if isinstance(self.error_floor, str):
            if self.error_floor != NOISE_FLOOR:
                raise ScoreInputError(f"error_floor must be {NOISE_FLOOR!r} or a positive number, got {self.error_floor!r}")
        elif not (np.isfinite(self.error_floor) and self.error_floor > 0):
            raise ScoreInputError(f"error_floor must be {NOISE_FLOOR!r} or a positive number, got {self.error_floor!r}")
        if not (0 <= self.dominance_tolerance < 0.01):
            raise ScoreInputError(f"dominance_tolerance must lie in [0, 0.01), got {self.dominance_tolerance}")
        if not (0 <= self.dominance_margin < 1):
            raise ScoreInputError(f"dominance_margin must lie in [0, 1), got {self.dominance_margin}")
        if self.n_boot < 1:
            raise ScoreInputError(f"n_boot must be at least 1, got {self.n_boot}")
        if not 0.0 < self.alpha < 1.0:
            raise ScoreInputError(f"alpha must lie in (0, 1), got {self.alpha}")
        if not 0.0 < self.full_fraction <= 1.0:
            raise ScoreInputError(f"full_fraction must lie in (0, 1], got {self.full_fraction}")
        if not self.retention_floor > 0:
            raise ScoreInputError(f"retention_floor must be positive, got {self.retention_floor}")
        if self.equity and not self.case_level:
            raise ScoreInputError("equity = True needs case_level = True: the worst-group AUROC is measured on the "
                                  "per-case predictions (docs/subgroups.md)")
        if self.subgroup_min_images < 1 or self.subgroup_min_positives < 1:
            raise ScoreInputError(
                f"subgroup_min_images and subgroup_min_positives must be at least 1, got "
                f"{self.subgroup_min_images} and {self.subgroup_min_positives}"
            )
        if self.interval not in INTERVAL_METHODS:
            raise ScoreInputError(f"interval must be one of {INTERVAL_METHODS}, got {self.interval!r}")
        if self.headline not in HEADLINE_METHODS:
            raise ScoreInputError(f"headline must be one of {HEADLINE_METHODS}, got {self.headline!r}")
        if not isinstance(self.reference_competes, bool | np.bool_):
            raise ScoreInputError(f"reference_competes must be true or false, got {self.reference_competes!r}")
        if self.n_weight_samples < 1:
            raise ScoreInputError(f"n_weight_samples must be at least 1, got {self.n_weight_samples}")

    @property
    def median_reference(self) -> bool:
        return self.reference == MEDIAN_REFERENCE

    @property
    def strict_margin(self) -> float:
        """The gain one axis needs for a dominance: the margin, and never less than float noise."""
        return max(self.dominance_margin, self.dominance_tolerance)

    def replace(self, **changes: Any) -> ScoreSettings:
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy (stored with the score tables and shown on the report)."""
        plain = dataclasses.asdict(self)
        plain["weights"] = list(self.weights)
        return plain

    @classmethod
    def from_config(cls, config: ScoreConfig, **changes: Any) -> ScoreSettings:
        """The one place a spec's ``[score]`` table becomes scoring settings."""
        return cls(
            reference=config.reference_encoder or MEDIAN_REFERENCE,
            weights=tuple(component_weights(config.weights).tolist()),
            n_boot=config.n_boot,
            seed=config.seed,
            case_level=config.case_bootstrap,
            subgroup_min_images=config.subgroup_min_images,
            subgroup_min_positives=config.subgroup_min_positives,
            equity=config.equity,
            **{"interval": config.interval, "reference_competes": config.reference_competes,
               "headline": config.headline, **changes},
        )
