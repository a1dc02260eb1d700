"""The optional fifth axis, ``equity``: 1 - the mean over (task, attribute) of the worst scored group's clean AUROC.

Made from the subgroup tables (:mod:`crs.scoring.subgroups`), under the score's own replicates (the same
draws as the CRS, :mod:`crs.scoring.draws`): the point error (:func:`equity_error`), its replicates
(:func:`equity_replicates`, appended after the four axes' in :mod:`crs.scoring.replicates`), its interval from the
subgroup box (:func:`equity_interval`), and the table that shows the axis's effect on the ranking
(:func:`equity_stability`). A pure function of the group AUROCs: raising any group's AUROC never raises
the error (the minimum and the mean are monotone), so the CRS stays monotone with equity on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from crs.evaluate import artifacts
from crs.scoring.formula import AXES, EQUITY, PointEstimate, ScoreInputError, point_estimate
from crs.scoring.subgroups import SubgroupResult


class EquityError(ValueError):
    """The equity axis cannot be measured; the message says why and what to change."""


def equity_error(groups: pd.DataFrame, encoders: Sequence[str]) -> pd.Series:
    """The ``equity`` axis error per encoder: 1 - the mean over (task, attribute) of the worst scored group's
    clean AUROC. A pure function of the group table: raising any group's AUROC never raises it (the
    minimum and the mean are monotone), so the CRS stays monotone with equity on."""
    clean = groups[(groups["condition"] == artifacts.CLEAN) & groups["scored"].astype(bool)]
    if clean.empty:
        raise EquityError(
            "equity = true, but no subgroup is large enough to score on any clean test split (see the groups "
            "too small in the subgroup table); lower subgroup_min_images / subgroup_min_positives, or drop equity"
        )
    worst = clean.groupby(["encoder", "task", "attribute"])["auroc"].min()
    error = 1.0 - worst.groupby("encoder").mean()
    return error.reindex([str(e) for e in encoders]).rename("equity")


def equity_interval(gaps: pd.DataFrame, encoders: Sequence[str]) -> pd.DataFrame:
    """Per encoder the ``equity`` axis error's interval (``equity_low``, ``equity_high``) from the subgroup box:
    1 - the mean over (task, attribute) of the worst group's upper and lower corner on the clean split. The
    error is monotone in every group AUROC and the box holds them all at once, so its value at the corners
    covers the true error (decision 0135); the same (task, attribute) pairs as :func:`equity_error`."""
    clean = gaps[(gaps["condition"] == artifacts.CLEAN) & (gaps["n_groups"] > 0)]
    by_encoder = clean.groupby("encoder")
    return pd.DataFrame({"equity_low": 1.0 - by_encoder["worst_auroc_high"].mean(),
                         "equity_high": 1.0 - by_encoder["worst_auroc_low"].mean()}).reindex([str(e) for e in encoders])


def equity_replicates(result: SubgroupResult, encoders: Sequence[str]) -> np.ndarray:
    """(B + 1, E) equity error under every replicate (row 0: :func:`equity_error`), same pairs as the point."""
    if not result.worst:
        raise EquityError("equity = true, but no subgroup is large enough to score on any clean test split")
    pairs = sorted({(task, attribute) for _, task, attribute in result.worst})
    columns = []
    for encoder in encoders:
        found = [result.worst[(str(encoder), task, attribute)] for task, attribute in pairs]
        columns.append(1.0 - np.mean(found, axis=0))
    return np.stack(columns, axis=1)


def with_equity(
    found: SubgroupResult, errors: pd.DataFrame, standard_errors: pd.DataFrame | None, encoders: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame | None, np.ndarray]:
    """The point estimate's axis errors (and standard errors) with the ``equity`` column added, and its
    (B + 1, E, 1) replicates (row 0 the point); a ScoreInputError says why the axis cannot be measured."""
    try:
        extra = equity_replicates(found, encoders)[:, :, None]
        equity = equity_error(found.groups, encoders)
    except EquityError as error:
        raise ScoreInputError(str(error)) from None
    errors = errors.set_axis(errors.index.astype(str)).assign(**{EQUITY: equity})
    if standard_errors is not None:
        spread = finite_spread(extra[1:, :, 0], len(encoders))
        standard_errors = standard_errors.set_axis(standard_errors.index.astype(str)).assign(
            **{EQUITY: pd.Series(spread, index=encoders)})
    return errors, standard_errors, extra


def finite_spread(replicates: np.ndarray, n_encoders: int) -> np.ndarray:
    """Per encoder the SD of its finite replicate equity errors (NaN with fewer than two): a replicate that drew
    no positive in some small group has no worst-group AUROC there and is left out, as the box leaves it out of
    its maximum, rather than turning the axis's standard error (and so the noise floor) into NaN."""
    finite = np.isfinite(replicates).sum(axis=0)
    if len(replicates) < 2 or not (finite >= 2).any():
        return np.full(n_encoders, np.nan)
    with np.errstate(invalid="ignore"):
        spread = np.nanstd(np.where(finite >= 2, replicates, 0.0), axis=0, ddof=1)
    return np.where(finite >= 2, spread, np.nan)


def equity_stability(point: PointEstimate, table: pd.DataFrame, gaps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per encoder: worst-group AUROC (with its interval from the subgroup box, decision 0135), CRS and rank
    with the equity axis, and CRS and rank of the four-axis point estimate (same errors, floors and reference
    without the fifth axis)."""
    four_axes = [axis for axis in AXES if axis in point.errors.columns]
    standard_errors = None if point.standard_errors is None else point.standard_errors[four_axes]
    four = point_estimate(point.errors[four_axes], standard_errors, point.settings).table
    found = pd.DataFrame({
        "worst_group_auroc": 1.0 - point.errors[EQUITY],
        "crs_with_equity": table["crs"], "rank_with_equity": table["rank"],
        "crs_without_equity": four["crs"], "rank_without_equity": four["rank"],
    }).rename_axis("encoder")
    if gaps is not None:
        interval = 1.0 - equity_interval(gaps, [str(e) for e in found.index])
        found.insert(1, "worst_group_auroc_low", interval["equity_high"].to_numpy())
        found.insert(2, "worst_group_auroc_high", interval["equity_low"].to_numpy())
    return found
