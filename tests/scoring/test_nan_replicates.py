"""A replicate that could not measure an axis (a small group drew no positive, so it has no worst-group AUROC)
is left out of P(rank 1), the ranks and the equity axis's standard error, instead of turning them into NaN
or a rank cast from NaN."""

from __future__ import annotations

import numpy as np

from crs.scoring.equity import finite_spread
from crs.scoring.formula import rank_descending
from crs.scoring.rank_sets import p_rank_one


def test_p_rank_one_leaves_out_replicates_with_a_nan_score():
    replicates = np.array([[0.9, 0.1], [0.2, 0.8], [np.nan, 0.5], [0.7, 0.3]])
    found = p_rank_one(replicates, tolerance=1e-12)
    np.testing.assert_allclose(found, [2 / 3, 1 / 3])
    assert found.sum() == 1.0
    assert np.isnan(p_rank_one(np.full((3, 2), np.nan), tolerance=1e-12)).all()


def test_a_nan_ranks_last_not_as_a_cast_integer():
    assert rank_descending(np.array([0.3, np.nan, 0.9])).tolist() == [2, 3, 1]
    assert rank_descending(np.array([[0.3, 0.9], [np.nan, 0.1]])).tolist() == [[2, 1], [2, 1]]


def test_the_equity_spread_is_over_the_finite_replicates():
    replicates = np.array([[0.1, np.nan], [0.2, np.nan], [np.nan, 0.3], [0.4, np.nan]])
    found = finite_spread(replicates, 2)
    assert found[0] == np.std([0.1, 0.2, 0.4], ddof=1)
    assert np.isnan(found[1])  # one finite replicate: no spread to judge
