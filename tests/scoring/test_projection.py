"""The projection of a simultaneous box through the CRS (crs.scoring.projection, issue 40 item 1).

The corner bounds are valid only because the CRS is monotone with known signs in the axis errors:
an encoder's CRS (and its dominance, balance and worst axis) never rises when one of its own errors
rises, and never falls when another encoder's error rises. Both directions are property-tested here
on the arithmetic itself (crs.scoring.formula.crs_components), with noise floors, the median
reference and a named reference; then every point of random boxes is checked to score inside the
projected bounds. Errors are drawn on a grid of 1/2000: u differences then sit far above the float
tolerance of dominance (1e-9), whose boundary the reference's scale can move by float noise only
(docs/crs.md section 4).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from crs.scoring.formula import crs_components
from crs.scoring.projection import PROJECTED, corners, project
from crs.scoring.reversals import reversal_count_bounds

TOLERANCE = 1e-9
SLACK = 1e-12


@st.composite
def cohorts(draw, max_encoders: int = 6):
    n_encoders = draw(st.integers(2, max_encoders))
    n_axes = draw(st.integers(1, 4))
    grid = st.integers(1, 800).map(lambda k: k / 2000)
    errors = np.array(draw(st.lists(grid, min_size=n_encoders * n_axes, max_size=n_encoders * n_axes)))
    floor = np.array(draw(st.lists(st.integers(0, 60).map(lambda k: max(k / 2000, 1e-6)),
                                   min_size=n_axes, max_size=n_axes)))
    reference = draw(st.one_of(st.none(), st.integers(0, n_encoders - 1)))
    raw = np.array(draw(st.lists(st.integers(0, 6), min_size=3, max_size=3)), dtype=np.float64)
    weights = raw / raw.sum() if raw.sum() > 0 else np.full(3, 1 / 3)
    return errors.reshape(n_encoders, n_axes), floor, reference, weights


def _score(errors, floor, reference, weights, margin=0.0):
    return crs_components(errors, reference, weights, floor, TOLERANCE, margin)


@settings(max_examples=300, deadline=None)
@given(cohorts(), st.data())
def test_raising_an_own_error_never_raises_its_crs_and_never_lowers_anothers(cohort, data):
    """Both directions of the contract, for every term the projection bounds: encoder k's error on one
    axis rises; k's CRS, dominance, balance and worst axis do not rise; every other encoder's do not fall."""
    errors, floor, reference, weights = cohort
    k = data.draw(st.integers(0, errors.shape[0] - 1))
    a = data.draw(st.integers(0, errors.shape[1] - 1))
    raised = errors.copy()
    raised[k, a] += data.draw(st.integers(1, 400)) / 2000
    before, after = _score(errors, floor, reference, weights), _score(raised, floor, reference, weights)
    others = np.arange(errors.shape[0]) != k
    for name in PROJECTED:
        assert after[name][k] <= before[name][k] + SLACK, (name, "own")
        assert (after[name][others] >= before[name][others] - SLACK).all(), (name, "others")


@settings(max_examples=200, deadline=None)
@given(cohorts(), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.05]))
def test_every_point_of_a_box_scores_inside_the_projected_bounds(cohort, seed, margin):
    """Random boxes around the cohort's errors: their corners, random points and the centre all score
    inside the projected bounds of the CRS, dominance, balance and worst axis (with a dominance margin
    the bounds of dominance come from u's extremes instead)."""
    errors, floor, reference, weights = cohort
    rng = np.random.default_rng(seed)
    half = rng.integers(0, 200, errors.shape) / 2000
    low, high = np.maximum(errors - half, 0.0005), errors + half
    bounds = project(low, high, lambda stack: _score(stack, floor, reference, weights, margin),
                     weights=weights, margin=margin, tolerance=TOLERANCE)
    points = [low, high, errors, *corners(low, high)[0], *corners(low, high)[1]]
    points += [low + rng.uniform(size=errors.shape) * (high - low) for _ in range(40)]
    points += [np.where(rng.uniform(size=errors.shape) < 0.5, low, high) for _ in range(40)]
    for point in points:
        found = _score(point, floor, reference, weights, margin)
        for name in PROJECTED:
            lower, upper = bounds[name]
            assert (found[name] >= lower - SLACK).all() and (found[name] <= upper + SLACK).all(), name


def test_the_bounds_are_reached_at_the_corners_and_collapse_on_a_point():
    """The corner bound is attained (it is the CRS of a point in the box), and a box of zero width gives
    the point estimate itself."""
    errors = np.array([[0.10, 0.02], [0.12, 0.05], [0.20, 0.01], [0.15, 0.04]])
    floor = np.array([0.01, 0.015])

    def score(stack):
        return crs_components(stack, None, None, floor)

    bounds = project(errors, errors, score)
    assert np.allclose(bounds["crs"][0], score(errors)["crs"]) and np.allclose(bounds["crs"][1], score(errors)["crs"])
    low, high = errors * 0.9, errors * 1.1
    bounds = project(low, high, score)
    worst, best = corners(low, high)
    assert bounds["crs"][0][2] == score(worst[2])["crs"][2] and bounds["crs"][1][2] == score(best[2])["crs"][2]
    assert (bounds["crs"][0] < score(errors)["crs"]).all() and (bounds["crs"][1] > score(errors)["crs"]).all()


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_the_reversal_count_of_any_point_in_the_intervals_lies_in_its_bounds(n, seed):
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    auroc_centre, crs_centre = rng.uniform(0.6, 0.9, n), rng.uniform(0.2, 0.8, n)
    auroc_half, crs_half = rng.uniform(0, 0.05, n), rng.uniform(0, 0.1, n)
    low, high = reversal_count_bounds(auroc_centre - auroc_half, auroc_centre + auroc_half,
                                      crs_centre - crs_half, crs_centre + crs_half)
    assert 0 <= low <= high <= n * (n - 1) // 2
    for _ in range(30):
        auroc = auroc_centre + rng.uniform(-1, 1, n) * auroc_half
        crs = crs_centre + rng.uniform(-1, 1, n) * crs_half
        a, c = rankdata(-auroc), rankdata(-crs)
        i, j = np.triu_indices(n, 1)
        count = int(np.sum(np.sign(a[i] - a[j]) * np.sign(c[i] - c[j]) < 0))
        assert low <= count <= high
