"""The sharper box of decision 0128, the default CRS interval since decision 0167 (issue 47 item 3).

One max-|t| over the log ratios to the reference and the pairwise differences of floored errors: it holds
the point estimate's CRS, is no wider than the corners of the plain box on replicates whose noise the
encoders share (the reason it exists), and is what ``score_records`` prints.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crs.scoring.box import simultaneous_box
from crs.scoring.formula import crs_components
from crs.scoring.projection import project, sharper_bounds
from crs.scoring.result import score_records

from cohorts import cohort_records


def _replicates(seed: int, n_encoders: int = 5, n_axes: int = 4, shared: float = 0.02):
    rng = np.random.default_rng(seed)
    errors = rng.uniform(0.05, 0.3, size=(n_encoders, n_axes))
    drawn = (errors[None] + rng.normal(0, shared, size=(300, 1, n_axes))
             + rng.normal(0, 0.005, size=(300, n_encoders, n_axes)))
    return errors, np.clip(drawn, 1e-4, None)


@pytest.mark.parametrize("reference_index", [None, 0])
def test_the_sharper_box_holds_the_point_and_is_narrower_than_the_corners(reference_index):
    floor = np.full(4, 0.02)
    narrower = 0
    for seed in range(10):
        errors, drawn = _replicates(seed)
        point = crs_components(errors, reference_index, floor=floor)["crs"]
        low, high = sharper_bounds(errors, drawn, floor, reference_index)["crs"]
        assert (low <= point + 1e-12).all() and (point <= high + 1e-12).all()
        box = simultaneous_box(errors.ravel(), drawn.reshape(len(drawn), -1), 0.05, "logit")
        corners = project(box.low.reshape(errors.shape), box.high.reshape(errors.shape),
                          lambda stack: crs_components(stack, reference_index, floor=floor))["crs"]
        narrower += np.mean(high - low) < np.mean(corners[1] - corners[0])
    assert narrower >= 9  # shared noise cancels in the ratios and the differences


def test_replicates_that_never_move_give_the_point():
    errors, _ = _replicates(1)
    floor = np.full(4, 0.02)
    low, high = sharper_bounds(errors, np.repeat(errors[None], 20, axis=0), floor, None)["crs"]
    point = crs_components(errors, None, floor=floor)["crs"]
    np.testing.assert_allclose(low, point)
    np.testing.assert_allclose(high, point)


def test_the_score_prints_the_sharper_bounds():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = score_records(cohort_records(4, seed=2), n_boot=100)
    point = found.point
    drawn = np.stack([found.bootstrap.axis_error_replicates[axis][point.encoders].to_numpy() for axis in point.axes],
                     axis=-1)
    low, high = sharper_bounds(point.errors[list(point.axes)].to_numpy(), drawn,
                               point.floor.reindex(list(point.axes)).to_numpy(), point.reference_index)["crs"]
    # kept as the box's CRS bounds (printed under interval = "box"; the default prints the adaptive one, 0181)
    np.testing.assert_allclose(found.bootstrap.table.loc[point.encoders, "crs_box_low"], low)
    np.testing.assert_allclose(found.bootstrap.table.loc[point.encoders, "crs_box_high"], high)
