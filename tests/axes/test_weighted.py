"""Weighted AUROC and ECE under replicate weights (crs.axes.weighted) against scikit-learn and crs.axes.

Oracles: scikit-learn's ``roc_auc_score(sample_weight=...)`` on random inputs with heavy ties
(scores rounded to float16 and to coarse grids); crs.axes at unit weights; crs.axes on the
expanded sample (case i repeated ``weights[b, i]`` times) for whole-number weights. Hand-derived
values for the small cases are written next to them. Every test runs twice: through the compiled
one-pass kernel (numba, :mod:`crs.axes.weighted_kernel`) and through the numpy path.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from crs import axes
from crs.axes import AxisInputError, weighted_kernel
from crs.axes.weighted import (
    prepare_weights,
    weighted_auroc,
    weighted_binned_ece,
    weighted_calibrated_ece,
    weighted_debiased_ece,
    weighted_ece,
    weighted_macro_auroc,
    weighted_per_class_auroc,
)

EXACT = 1e-9


@pytest.fixture(autouse=True)
def auroc_path(numba_path):
    """Run each test through the compiled kernel and through the numpy path."""
    return numba_path


def _sklearn_or_nan(y: np.ndarray, scores: np.ndarray, w: np.ndarray) -> float:
    if (w * (y == 1)).sum() == 0 or (w * (y == 0)).sum() == 0:
        return float("nan")
    return float(roc_auc_score(y, scores, sample_weight=w))


def _tied_scores(rng: np.random.Generator, y: np.ndarray) -> np.ndarray:
    """Scores with many ties: float16 rounding of a coarse grid, shifted a little by the label."""
    grid = rng.choice([4, 16, 256])
    return (np.round(rng.random(len(y)) * grid) / grid + 0.1 * y).astype(np.float16).astype(np.float64)


# --- hand-derived -----------------------------------------------------------------------------------


def test_hand_values():
    # negatives 0.1, 0.4; positives 0.35, 0.8: 3 of 4 pairs ordered right -> 0.75
    scores, y = np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])
    # weights (1, 1, 2, 1): pairs 0.35>0.1 (2x1), 0.35<0.4 (0), 0.8>0.1 (1), 0.8>0.4 (1) -> 4 / (3 x 2)
    # weights (0, 1, 1, 1): 0.35<0.4 (0), 0.8>0.4 (1) -> 1 / 2
    weights = np.array([[1, 1, 1, 1], [1, 1, 2, 1], [0, 1, 1, 1]])
    assert weighted_auroc(scores, y, weights) == pytest.approx([0.75, 4 / 6, 0.5], abs=EXACT)


def test_ties_count_one_half():
    # one positive and one negative at the same score; a second negative below both
    scores, y = np.array([0.5, 0.5, 0.2]), np.array([1, 0, 0])
    # unit: (tie 1/2 + win 1) / 2 = 0.75; weights (1, 3, 1): (3 x 1/2 + 1) / 4 = 0.625
    assert weighted_auroc(scores, y, np.array([[1, 1, 1], [1, 3, 1]])) == pytest.approx(
        [0.75, 0.625], abs=EXACT
    )


def test_a_side_without_weight_is_nan_not_zero():
    scores, y = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0, 1, 0, 1])
    result = weighted_auroc(scores, y, np.array([[0, 1, 0, 1], [1, 0, 1, 0], [1, 1, 1, 1]]))
    assert np.isnan(result[0]) and np.isnan(result[1]) and result[2] == pytest.approx(0.75)


# --- scikit-learn oracle ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", range(30))
def test_matches_sklearn_with_heavy_ties(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(2, 400))
    y = (rng.random(n) < rng.uniform(0.05, 0.95)).astype(np.float64)
    y[0], y[-1] = 1.0, 0.0
    scores = _tied_scores(rng, y)
    counts = rng.integers(0, 4, size=(12, n))
    real = rng.exponential(1.0, size=(6, n))
    for weights in (counts, real, np.ones((1, n))):
        expected = [_sklearn_or_nan(y, scores, w) for w in weights]
        np.testing.assert_allclose(weighted_auroc(scores, y, weights), expected, atol=EXACT, equal_nan=True)


def test_many_columns_share_labels_and_match_sklearn_per_column():
    rng = np.random.default_rng(7)
    n, k = 300, 9
    y = (rng.random(n) < 0.3).astype(np.float64)
    scores = np.stack([_tied_scores(rng, y) for _ in range(k)], axis=1).astype(np.float32)
    weights = rng.integers(0, 3, size=(25, n))
    got = weighted_auroc(scores, y, weights, workers=2)
    assert got.shape == (25, k)
    for column in range(k):
        expected = [_sklearn_or_nan(y, scores[:, column], w) for w in weights]
        np.testing.assert_allclose(got[:, column], expected, atol=EXACT)


def test_totals_beyond_16_bits_take_the_float_path_and_stay_exact():
    rng = np.random.default_rng(3)
    n = 200
    y = (rng.random(n) < 0.4).astype(np.float64)
    scores = _tied_scores(rng, y)
    weights = rng.integers(200, 700, size=(4, n))  # totals about 90,000 > 65,535
    assert not prepare_weights(weights).exact_uint16
    expected = [_sklearn_or_nan(y, scores, w) for w in weights]
    np.testing.assert_allclose(weighted_auroc(scores, y, weights), expected, atol=EXACT)


def test_block_size_and_threads_do_not_change_the_result():
    rng = np.random.default_rng(11)
    n = 500
    y = (rng.random(n) < 0.2).astype(np.float64)
    scores = np.stack([_tied_scores(rng, y) for _ in range(3)], axis=1)
    weights = rng.integers(0, 3, size=(40, n))
    one_block = weighted_auroc(scores, y, weights)
    tiny_blocks = weighted_auroc(scores, y, weights, block_bytes=1, workers=2)
    assert len(prepare_weights(weights, block_bytes=1).blocks) == 40
    np.testing.assert_array_equal(one_block, tiny_blocks)


def test_compiled_kernel_and_numpy_path_agree_exactly(monkeypatch):
    rng = np.random.default_rng(5)
    n = 3000
    y = (rng.random((n, 4)) < [0.02, 0.3, 0.7, 0.95]).astype(np.float64)  # rare and majority positives
    y[rng.random(y.shape) < 0.1] = np.nan  # ignored cases
    scores = rng.random((n, 4)).astype(np.float16).astype(np.float32)  # float16 keys: many ties
    for weights in (rng.multinomial(n, np.ones(n) / n, size=60), rng.exponential(1.0, size=(20, n))):
        monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "0")
        compiled = weighted_auroc(scores, y, prepare_weights(weights), workers=2)
        monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "1")
        numpy_path = weighted_auroc(scores, y, prepare_weights(weights))
        np.testing.assert_allclose(compiled, numpy_path, rtol=0, atol=1e-12)


# --- crs.axes at unit weights, and on the expanded sample ---------------------------------------------


def _cases(kind: str, rng: np.random.Generator, n: int):
    if kind == "binary":
        y = (rng.random(n) < 0.3).astype(np.float64)
        return y, _tied_scores(rng, y)
    if kind == "multilabel":
        y = (rng.random((n, 4)) < [0.05, 0.3, 0.6, 0.0]).astype(np.float64)  # label 3 never positive: absent
        y[rng.random(y.shape) < 0.2] = np.nan
        probs = np.round(rng.random((n, 4)), 2)
        return y, probs
    n_classes = 5
    y = rng.choice(n_classes - 1, size=n)  # the last class is absent from y
    probs = np.round(rng.dirichlet(np.ones(n_classes), size=n), 2)
    return y, probs


@pytest.mark.parametrize("kind", ["binary", "multiclass", "ordinal", "multilabel"])
@pytest.mark.parametrize("case", range(6))
def test_unit_weights_equal_crs_axes(kind, case):
    rng = np.random.default_rng(100 + case)
    y, probs = _cases(kind, rng, int(rng.integers(20, 300)))
    unit = np.ones((1, len(y)))
    np.testing.assert_allclose(
        weighted_per_class_auroc(y, probs, kind, unit)[0],
        axes.per_class_auroc(y, probs, kind),
        atol=EXACT,
        equal_nan=True,
    )
    assert weighted_macro_auroc(y, probs, kind, unit)[0] == pytest.approx(
        axes.auroc(y, probs, kind), abs=EXACT
    )
    assert weighted_ece(y, probs, kind, unit)[0] == pytest.approx(axes.ece(y, probs, kind), abs=EXACT)
    if kind in ("multiclass", "multilabel"):
        assert np.isnan(weighted_per_class_auroc(y, probs, kind, unit)[0, -1])  # absent: NaN, not 0


@pytest.mark.parametrize("kind", ["binary", "multiclass", "multilabel"])
@pytest.mark.parametrize("case", range(4))
def test_whole_number_weights_equal_the_metric_on_the_repeated_sample(kind, case):
    rng = np.random.default_rng(200 + case)
    y, probs = _cases(kind, rng, int(rng.integers(20, 200)))
    counts = rng.integers(0, 4, size=(8, len(y)))
    aurocs = weighted_macro_auroc(y, probs, kind, counts)
    eces = weighted_ece(y, probs, kind, counts)
    for b, repeat in enumerate(counts):
        y_rep, probs_rep = np.repeat(y, repeat, axis=0), np.repeat(probs, repeat, axis=0)
        assert aurocs[b] == pytest.approx(axes.auroc(y_rep, probs_rep, kind), abs=EXACT, nan_ok=True)
        assert eces[b] == pytest.approx(axes.ece(y_rep, probs_rep, kind), abs=EXACT, nan_ok=True)


def test_binned_ece_by_hand_with_bin_edges():
    # 15 equal-width bins; 1.0 falls in the last bin, 1/15 opens the second.
    confidence = np.array([1.0, 1.0, 1 / 15, 0.5])
    correct = np.array([1.0, 0.0, 1.0, 1.0])
    # bins: last {1.0: +0, 1.0: -1} -> |-1|; second {1/15: 1 - 1/15}; eighth {0.5: +0.5}
    expected_unit = (1.0 + (1 - 1 / 15) + 0.5) / 4
    # weights (2, 0, 1, 1): last |0| ; second 14/15; eighth 0.5; total 4
    expected_weighted = ((1 - 1 / 15) + 0.5) / 4
    got = weighted_binned_ece(confidence, correct, np.array([[1, 1, 1, 1], [2, 0, 1, 1]]))
    assert got == pytest.approx([expected_unit, expected_weighted], abs=EXACT)
    assert got[0] == pytest.approx(axes.ece(correct, confidence, "binary"), abs=EXACT)


# --- bad inputs ---------------------------------------------------------------------------------------


def test_bad_inputs_raise_one_line_errors():
    scores, y = np.array([0.1, 0.2, 0.3]), np.array([0, 1, 1])
    with pytest.raises(AxisInputError, match="non-negative"):
        weighted_auroc(scores, y, np.array([[1, -1, 1]]))
    with pytest.raises(AxisInputError, match="NaN"):
        weighted_auroc(np.array([0.1, np.nan, 0.3]), y, np.ones((1, 3)))
    with pytest.raises(AxisInputError, match="cases"):
        weighted_auroc(scores, y, np.ones((1, 4)))
    with pytest.raises(AxisInputError, match="0, 1 or NaN"):
        weighted_auroc(scores, np.array([0, 2, 1]), np.ones((1, 3)))


@pytest.mark.parametrize("kind", ["binary", "multiclass", "ordinal", "multilabel"])
@pytest.mark.parametrize("case", range(4))
def test_debiased_ece_at_unit_weights_and_on_the_repeated_sample_equals_crs_axes(kind, case):
    rng = np.random.default_rng(300 + case)
    y, probs = _cases(kind, rng, int(rng.integers(20, 200)))
    assert weighted_debiased_ece(y, probs, kind, np.ones((1, len(y))))[0] == pytest.approx(
        axes.debiased_ece(y, probs, kind), abs=EXACT, nan_ok=True
    )
    counts = rng.integers(0, 4, size=(6, len(y)))
    got = weighted_debiased_ece(y, probs, kind, prepare_weights(counts, block_bytes=4096))  # several blocks
    for b, repeat in enumerate(counts):
        expected = axes.debiased_ece(np.repeat(y, repeat, axis=0), np.repeat(probs, repeat, axis=0), kind)
        assert got[b] == pytest.approx(expected, abs=EXACT, nan_ok=True)


@pytest.mark.parametrize("case", range(3))
def test_calibration_error_and_its_standard_error_on_repeated_samples_equal_crs_axes(case):
    # frequency weights: the weighted per-bin sums (count, residual, residual^2) are the repeated sample's
    from crs.axes.weighted import weighted_calibration_error

    rng = np.random.default_rng(400 + case)
    n = int(rng.integers(30, 300))
    confidence = rng.uniform(size=n)
    outcome = (rng.uniform(size=n) < confidence**1.7).astype(float)
    counts = np.vstack([np.ones(n, int), rng.integers(0, 4, size=(4, n))])
    error, standard_error = weighted_calibration_error(confidence, outcome, prepare_weights(counts, block_bytes=2048))
    for b, repeat in enumerate(counts):
        y, p = np.repeat(outcome, repeat), np.repeat(confidence, repeat)
        assert error[b] == pytest.approx(axes.debiased_ece(y, p, "binary"), abs=EXACT)
        assert standard_error[b] == pytest.approx(axes.ece_standard_error(y, p, "binary"), abs=EXACT)


def test_calibrated_ece_is_the_closed_form_per_bin():
    # two cases in bin 0 (c = 0.05) and one in the last bin (c = 1): V = 2 x 0.0475 and 0
    confidence = np.array([0.05, 0.05, 1.0])
    got = weighted_calibrated_ece(confidence, np.array([[1, 1, 1], [2, 0, 1]]))
    assert got[0] == pytest.approx(np.sqrt(2 * 2 * 0.0475 / np.pi) / 3, abs=1e-12)
    assert got[1] == pytest.approx(np.sqrt(2 * 2 * 0.0475 / np.pi) / 3, abs=1e-12)


def _random_task(rng, kind: str, n: int):
    if kind == "multilabel":
        y = (rng.uniform(size=(n, 4)) < [0.3, 0.1, 0.5, 0.05]).astype(float)
        y[rng.uniform(size=y.shape) < 0.1] = np.nan  # unknown labels count on neither side
        return y, np.clip(np.nan_to_num(y) * 0.3 + rng.uniform(size=(n, 4)) * 0.7, 0.0, 1.0)
    n_classes = 2 if kind == "binary" else 5
    y = rng.integers(0, n_classes, size=n)
    logits = rng.normal(size=(n, n_classes)) + 1.5 * np.eye(n_classes)[y]
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return y, np.round(probs, 2)  # coarse grid: many cases on bin edges


@pytest.mark.parametrize("kind", ["multilabel", "multiclass", "ordinal", "binary"])
@pytest.mark.parametrize("case", range(3))
def test_debiased_ece_by_group_equals_the_ece_of_each_group_on_its_own_rows(kind, case):
    # the one-pass per-group error (joint groups of several groupings, one weight read per case)
    # against the straightforward one: weighted_debiased_ece on each group's own rows and weights
    from crs.axes import weighted
    from crs.axes.weighted import weighted_debiased_ece_by_group

    rng = np.random.default_rng(500 + case)
    n = int(rng.integers(200, 600))
    y, probs = _random_task(rng, kind, n)
    counts = np.vstack([np.ones(n, int), rng.poisson(1.0, size=(40, n))])
    groupings = [rng.integers(-1, 3, size=n), rng.integers(0, 5, size=n), np.repeat(rng.integers(0, 2, n // 3 + 1), 3)[:n]]
    prepared = prepare_weights(counts, block_bytes=8192)  # several blocks
    got = weighted_debiased_ece_by_group(y, probs, kind, prepared, groupings)
    if case == 2:  # the same through one pass per grouping (too many joint groups)
        previous, weighted.MAX_JOINT_GROUPS = weighted.MAX_JOINT_GROUPS, 2
        try:
            for one, other in zip(got, weighted_debiased_ece_by_group(y, probs, kind, prepared, groupings), strict=True):
                np.testing.assert_allclose(one, other, atol=1e-12, rtol=0)
        finally:
            weighted.MAX_JOINT_GROUPS = previous
    for codes, found in zip(groupings, got, strict=True):
        assert found.shape == (len(counts), codes.max() + 1)
        for g in range(codes.max() + 1):
            rows = np.flatnonzero(codes == g)
            expected = weighted_debiased_ece(y[rows], probs[rows], kind, counts[:, rows])
            np.testing.assert_allclose(found[:, g], expected, atol=1e-12, rtol=0)


def test_cell_sums_add_each_entry_into_its_cell():
    # two cases, two entries each; case 1's second entry in no cell: hand sums per replicate
    from crs.axes.weighted import weighted_cell_sums

    cells = np.array([[0, 2], [2, -1]])
    values = np.array([[[1.0, 0.5], [1.0, 2.0]], [[1.0, -1.0], [7.0, 7.0]]])
    got = weighted_cell_sums(cells, values, 3, np.array([[1, 1], [3, 2]]))
    np.testing.assert_array_equal(got[0], [[1.0, 0.5], [0.0, 0.0], [2.0, 1.0]])
    np.testing.assert_array_equal(got[1], [[3.0, 1.5], [0.0, 0.0], [5.0, 4.0]])
    with pytest.raises(AxisInputError, match="cells must lie"):
        weighted_cell_sums(cells, values, 2, np.ones((1, 2)))


@pytest.mark.parametrize("dtype", [np.uint16, np.float64])
def test_weights_laid_out_from_group_counts_equal_the_expanded_weights(dtype):
    # a cluster bootstrap's (B, groups) counts and each case's group: the same blocks as the (B, N) counts
    rng = np.random.default_rng(11)
    group_counts = rng.poisson(1.0, size=(30, 40)).astype(dtype)
    row_group = rng.integers(0, 40, size=150)
    expanded = prepare_weights(group_counts[:, row_group], block_bytes=2048)
    direct = prepare_weights(group_counts, block_bytes=2048, columns=row_group)
    assert (direct.n_replicates, direct.n_cases, direct.exact_uint16) == (30, 150, expanded.exact_uint16)
    assert len(direct.blocks) == len(expanded.blocks) > 1
    for one, other in zip(direct.blocks, expanded.blocks, strict=True):
        assert one.dtype == other.dtype
        np.testing.assert_array_equal(one, other)
    with pytest.raises(AxisInputError, match="columns"):
        prepare_weights(group_counts, columns=np.array([40]))


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("case", range(3))
def test_auroc_by_group_equals_the_auroc_with_other_cases_on_no_side(whole, case):
    # one sort and one walk for every group of every grouping against weighted_auroc group by group;
    # coarse scores (heavy ties across groups), unknown labels, groups on one side only
    from crs.axes.weighted import weighted_auroc_by_group

    rng = np.random.default_rng(800 + case)
    n = int(rng.integers(150, 400))
    labels = (rng.uniform(size=n) < [0.2, 0.5, 0.8][case]).astype(float)
    labels[rng.uniform(size=n) < 0.1] = np.nan
    scores = np.round(rng.uniform(size=(n, 2)) + 0.3 * np.nan_to_num(labels)[:, None], 1).astype(np.float32)
    weights = rng.poisson(1.0, size=(25, n)) if whole else rng.uniform(0, 2, size=(25, n))
    groupings = [rng.integers(-1, 3, size=n), rng.integers(0, 4, size=n)]
    groupings[1][labels == 1] = np.where(groupings[1][labels == 1] == 3, 2, groupings[1][labels == 1])  # group 3: no positive
    prepared = prepare_weights(weights, block_bytes=4096)
    got = weighted_auroc_by_group(scores, labels, prepared, groupings)
    for codes, found in zip(groupings, got, strict=True):
        assert found.shape == (25, 2, codes.max() + 1)
        for g in range(codes.max() + 1):
            expected = weighted_auroc(scores, np.where(codes == g, labels, np.nan), prepared)
            if whole:
                np.testing.assert_array_equal(found[:, :, g], expected)
            else:
                np.testing.assert_allclose(found[:, :, g], expected, atol=1e-12, rtol=0)
    assert np.isnan(got[1][:, :, 3]).all() and np.isfinite(got[1][:, :, :3]).all()
    nobody = weighted_auroc_by_group(scores, labels, prepared, [np.full(n, -1), groupings[0]])  # no group at all
    assert nobody[0].shape == (25, 2, 0)
    np.testing.assert_allclose(nobody[1], got[0], atol=0 if whole else 1e-12, rtol=0)
