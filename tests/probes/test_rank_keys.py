"""Order-exact rank keys (crs.probes.base.rank_scores): the compiled kernel against the numpy path,
and both against the log-odds computed directly, with absent classes, tied top classes and near-certain
rows."""

from __future__ import annotations

import numpy as np
import pytest

from crs.axes import weighted_kernel
from crs.probes.base import rank_scores


def _decisions(seed: int = 0, P: int = 3, N: int = 400, K: int = 5):
    rng = np.random.default_rng(seed)
    decision = rng.standard_normal((P, N, K)) * 3.0
    decision[:, :20] *= 15.0  # near-certain rows: p of the top class within 1e-30 of 1
    decision[:, 20:30, :2] = 4.0  # two tied top classes
    bias = rng.standard_normal((P, K))
    bias[1, 3] = -np.inf  # a class the second probe cannot predict
    return decision, bias


@pytest.mark.parametrize("ordinal", [False, True])
def test_compiled_keys_equal_the_numpy_path(monkeypatch, ordinal):
    if weighted_kernel.numba is None:
        pytest.skip("numba is not installed (the `fast` extra)")
    decision, bias = _decisions()
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "0")
    compiled = rank_scores(decision, bias, "softmax", ordinal)
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "1")
    plain = rank_scores(decision, bias, "softmax", ordinal)
    np.testing.assert_allclose(compiled.probs, plain.probs, rtol=1e-14, atol=1e-300)
    # float32 keys from float64 values equal to rounding: at most one float32 step apart
    np.testing.assert_array_less(np.abs(compiled.ovr_keys - plain.ovr_keys), np.spacing(np.abs(plain.ovr_keys)) * 1.01 + 1e-30)
    if ordinal:
        assert compiled.exceed_keys is not None and plain.exceed_keys is not None
        np.testing.assert_array_less(np.abs(compiled.exceed_keys - plain.exceed_keys),
                                     np.spacing(np.abs(plain.exceed_keys)) * 1.01 + 1e-30)  # fmt: skip


@pytest.mark.parametrize("path", ["0", "1"])
def test_keys_are_the_log_odds_up_to_a_constant_per_column(monkeypatch, path):
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, path)
    decision, bias = _decisions(seed=1, N=300)
    scores = rank_scores(decision, bias, "softmax")
    logits = decision + bias[:, None, :]
    for p in range(decision.shape[0]):
        for k in range(decision.shape[2]):
            if not np.isfinite(bias[p, k]):
                assert np.all(scores.probs[p, :, k] == 0) and np.all(scores.ovr_keys[p, :, k] == 0)
                continue
            others = np.delete(logits[p], k, axis=1)
            top = others.max(axis=1, keepdims=True)
            others_lse = top[:, 0] + np.log(np.exp(others - top).sum(axis=1))
            log_odds = logits[p, :, k] - others_lse  # the direct formula, fine away from huge logits
            moderate = np.abs(log_odds) < 30
            difference = scores.ovr_keys[p, moderate, k].astype(np.float64) - log_odds[moderate]
            assert np.ptp(difference) <= 1e-5 * max(1.0, np.abs(log_odds[moderate]).max())
            # the keys order the cases as the log-odds do, near-certain rows included
            assert np.all(np.diff(scores.ovr_keys[p, np.argsort(log_odds, kind="stable"), k]) >= 0)


@pytest.mark.parametrize("link", ["softmax", "sigmoid"])
def test_compiled_float16_logits_equal_the_converted_product(monkeypatch, link):
    """float16 rows read as their bits by the compiled kernel give the float64 logits of the numpy
    path (convert, centre, BLAS product) to the rounding of a float64 sum, and the same
    probabilities and rank keys; float32 rows take the numpy path either way."""
    from crs.probes import predict_kernel
    from crs.probes.base import LinearProbeSet

    if predict_kernel.centered_logits is None:
        pytest.skip("numba is not installed (the `fast` extra)")
    rng = np.random.default_rng(5)
    P, D, K, N = 2, 67, 4, 301  # D not a multiple of the vector width; N odd
    bias = rng.standard_normal((P, K))
    probe_set = LinearProbeSet("multiclass", K, "torch", "logistic", "logloss", (1.0,), np.ones(P), np.ones(P),
                               np.ones((P, 1)), np.ones(P, bool), link=link, center=rng.standard_normal(D),
                               weights=rng.standard_normal((P, D, K)) * 0.1, bias=bias)  # fmt: skip
    X = (rng.standard_normal((N, D)) * 3.0 + 2.0).astype(np.float16)
    X[5, 7] = np.float16(3e-7)  # a subnormal float16, through the table
    X[6, 3] = np.float16(-600.0)
    reference = X[0].astype(np.float64)
    stacked = probe_set.weights.transpose(1, 0, 2).reshape(D, P * K)
    extreme = X.copy()
    extreme[7, 1] = np.float16(-6e4)  # near the end of float16's range
    exact = (extreme.astype(np.float64) - reference) @ stacked
    magnitude = np.abs(extreme.astype(np.float64) - reference) @ np.abs(stacked)
    compiled = predict_kernel.centered_logits_half(extreme, reference, stacked)
    assert np.all(np.abs(compiled - exact) <= 4 * D * np.finfo(np.float64).eps * magnitude)
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "0")
    fast = probe_set.predict_scores(X, False, reference)
    monkeypatch.setattr(predict_kernel, "centered_logits_half", None)  # the kernel must not be reached below
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "1")
    plain = probe_set.predict_scores(X, False, reference)
    np.testing.assert_allclose(fast.probs, plain.probs, rtol=1e-13, atol=1e-300)
    np.testing.assert_array_less(np.abs(fast.ovr_keys - plain.ovr_keys), np.spacing(np.abs(plain.ovr_keys)) * 4.01 + 1e-30)
    with pytest.raises(TypeError):  # with numba on, float16 rows do reach the kernel
        monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "0")
        probe_set.predict_scores(X, False, reference)
    as_float32 = probe_set.predict_scores(X.astype(np.float32), False, reference)  # float32: the numpy path
    np.testing.assert_array_equal(as_float32.probs, probe_set.predict_scores(X.astype(np.float32), False, reference).probs)
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "1")
    np.testing.assert_array_equal(probe_set.predict_scores(X.astype(np.float32), False, reference).probs, plain.probs)


def test_compiled_float16_logits_keep_non_finite_rows_non_finite():
    from crs.probes import predict_kernel

    if predict_kernel.centered_logits is None:
        pytest.skip("numba is not installed (the `fast` extra)")
    X = np.ones((3, 8), np.float16)
    X[1, 2] = np.inf
    X[2, 5] = np.nan
    out = predict_kernel.centered_logits_half(X, np.zeros(8), np.ones((8, 2)))
    assert np.isfinite(out[0]).all() and not np.isfinite(out[1]).any() and np.isnan(out[2]).all()
