"""The cheaper zero-shot paths give what the plain ones give (docs/decisions/0108)."""

from __future__ import annotations

import numpy as np
import pytest

from crs.cache.prototypes import Prototypes
from crs.evaluate.temperature import fit_temperatures
from crs.evaluate.zero_shot import condition_similarities, similarities, unit_rows
from crs.scoring.zero_shot import _distinct


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def _prototypes(rng, k: int, d: int, paired: bool, variants: int) -> Prototypes:
    return Prototypes(
        _unit(rng.standard_normal((k, d))), 100.0, 0.0, "softmax", "test", "digest", tuple(f"c{j}" for j in range(k)),
        _unit(rng.standard_normal((k, d))) if paired else None,
        _unit(rng.standard_normal((variants, k, d))),
        _unit(rng.standard_normal((variants, k, d))) if paired else None,
    )


@pytest.mark.parametrize("paired", [False, True])
def test_block_similarities_are_the_unit_rows_cosines(paired):
    """Cosines from the raw float16 rows block by block (dot products over norms) equal those of the
    normalised float64 copy to rounding, for the prototypes and every prompt variant."""
    rng = np.random.default_rng(0)
    features = (3.0 * rng.standard_normal((1000, 64))).astype(np.float16)
    proto = _prototypes(rng, 5, 64, paired, variants=3)
    blocks = ((start, features[start:start + 300]) for start in range(0, 1000, 300))  # uneven last block
    cosine, variants = condition_similarities(blocks, proto, 1000, variants=True)
    expected = similarities(unit_rows(features), proto, normalised=True)
    np.testing.assert_allclose(cosine, expected, rtol=0, atol=1e-13)
    assert variants is not None and variants.shape == (3, 1000, 5)
    for v in range(3):
        np.testing.assert_allclose(variants[v], similarities(unit_rows(features), proto, v, normalised=True),
                                   rtol=0, atol=1e-13)
    np.testing.assert_allclose(similarities(features, proto), expected, rtol=0, atol=1e-13)  # raw rows, in blocks
    assert np.abs(cosine).max() <= 2.0 + 1e-12  # cosines (a pair's difference of two) - not raw dot products


@pytest.mark.parametrize("kind", ["multiclass", "multilabel"])
def test_temperatures_fitted_together_are_each_sets_own_fit_exactly(kind):
    """Every set's (T, b) fitted beside others is bit for bit its fit alone: only the sets still moving
    are re-evaluated in the line search, and a set's sums never see another set's rows."""
    rng = np.random.default_rng(1)
    n, k = 600, 4
    cosine = 0.3 * rng.standard_normal((n, k))
    if kind == "multilabel":
        labels = (rng.random((n, k)) < 0.5 + cosine).astype(np.float64)
        labels[rng.random((n, k)) < 0.1] = np.nan
    else:
        labels = np.argmax(cosine + 0.2 * rng.standard_normal((n, k)), axis=1)
    row_sets = [np.sort(rng.choice(n, size, replace=False)) for size in (6, 30, 120, 600, 45)]
    together = fit_temperatures(cosine, labels, kind, 30.0, -1.0, row_sets)
    for s, rows in enumerate(row_sets):
        alone = fit_temperatures(cosine, labels, kind, 30.0, -1.0, [rows])
        assert together[0][s] == alone[0][0] and together[1][s] == alone[1][0]


def test_identical_probe_predictions_are_scored_once():
    stack = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [1.0, 2.0], [5.0, 6.0]])
    distinct, index = _distinct(stack)
    assert len(distinct) == 3
    np.testing.assert_array_equal(np.stack(distinct)[index], stack)


@pytest.mark.parametrize("paired", [False, True])
def test_compiled_similarity_kernel_equals_the_numpy_products(paired, monkeypatch):
    """float16 blocks through the compiled kernel (the rows read as their bits, float64 sums, no
    converted copy) give the numpy path's dot products and norms to a float64 sum's rounding (~1e-16
    relative), cosines and variants included; without numba (``CRS_NO_NUMBA=1``) the numpy path runs."""
    from crs.evaluate.zero_shot import ConditionSimilarities
    from crs.probes import predict_kernel

    if not predict_kernel.available():
        pytest.skip("numba is not installed, or CRS_NO_NUMBA=1")
    rng = np.random.default_rng(2)
    features = (3.0 * rng.standard_normal((700, 96))).astype(np.float16)
    features[5] = 0  # a zero row: its norm is floored at 1e-12 both ways
    proto = _prototypes(rng, 5, 96, paired, variants=3)

    def run() -> ConditionSimilarities:
        found = ConditionSimilarities(proto, 700, variants=True)
        for start in range(0, 700, 256):
            found.add(start, features[start:start + 256])
        return found

    compiled = run()
    assert compiled.compiled
    monkeypatch.setenv("CRS_NO_NUMBA", "1")
    plain = run()
    assert not plain.compiled
    x = features.astype(np.float64)
    np.testing.assert_array_equal(plain.dots[:256], x[:256] @ plain.stacked)  # the numpy path is the old product
    np.testing.assert_allclose(compiled.dots, plain.dots, rtol=1e-15, atol=1e-15 * np.abs(plain.dots).max())
    np.testing.assert_allclose(compiled.norms, plain.norms, rtol=1e-15, atol=0)
    assert compiled.norms[5] == plain.norms[5] == 1e-12
    (cosine, variants), (plain_cosine, plain_variants) = compiled.result(), plain.result()
    np.testing.assert_allclose(cosine, plain_cosine, rtol=0, atol=1e-14)
    assert variants is not None and plain_variants is not None
    np.testing.assert_allclose(variants, plain_variants, rtol=0, atol=1e-14)
    assert not np.array_equal(compiled.dots, np.zeros_like(compiled.dots))
