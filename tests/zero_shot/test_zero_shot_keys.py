"""Zero-shot AUROCs rank float32 rank keys, as the probes' do (decision 0115)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from crs.evaluate.units import Condition
from crs.evaluate.zero_shot import (
    FITTED,
    SHIPPED,
    _record_rows,
    _Scored,
    condition_scores,
    cosine_keys,
    probabilities,
    variant_aurocs,
)
from crs.probes.metrics import evaluation_metrics


def _condition(labels: np.ndarray) -> Condition:
    return Condition("clean", "", 0, "", labels, np.zeros((len(labels), 1)))


def _records(labels, cosine, kind, scale, bias, fits):
    condition = _condition(labels)
    pairs = [(t, b) for _, _, _, t, b in fits]
    probs, keys, exceed = condition_scores(cosine, kind, scale, bias, pairs)
    scored = _Scored(condition, {"condition": "clean"}, pairs, probs, keys, exceed)
    return probs, _record_rows([scored], kind, fits, bias, (0,), 1.0)


def test_a_saturated_shipped_sigmoid_ranks_the_cosines_not_ties_of_one():
    """CLIP's scale 100 puts sigmoid(100 cos) at exactly 1.0 for every cosine above ~0.37: the old
    records ranked those cases as ties (AUROC near 0.5 here); the cosines order them, and every
    calibration of a multilabel column is a strictly increasing map of its cosine."""
    rng = np.random.default_rng(0)
    n = 400
    labels = (rng.random((n, 3)) < 0.3).astype(np.float64)
    labels[rng.random((n, 3)) < 0.1] = np.nan  # unknown findings are left out, as the probes do
    cosine = 0.45 + 0.05 * rng.standard_normal((n, 3)) + 0.03 * np.nan_to_num(labels)
    fits = [(0.1, 0, 50, 30.0, -60.0), (1.0, 0, 200, 25.0, -55.0)]
    probs, rows = _records(labels, cosine, "multilabel", 100.0, 0.0, fits)
    assert (probs[0] == 1.0).mean() > 0.9  # the shipped probabilities saturate
    known = [~np.isnan(labels[:, k]) for k in range(3)]
    expected = np.mean([roc_auc_score(labels[m, k], cosine[m, k]) for k, m in enumerate(known)])
    assert expected > 0.6
    ranked_probabilities = evaluation_metrics(labels, probs[:1], "multilabel", metrics=["auroc"])["auroc"][0]
    assert expected - ranked_probabilities > 0.05  # what the records said before (ties of 1.0)
    shipped = [r for r in rows if r["calibration"] == SHIPPED]
    fitted = [r for r in rows if r["calibration"] == FITTED]
    assert len(shipped) == 1 and len(fitted) == 2
    for row in rows:  # one ranking: the same AUROC and standard error for every calibration
        assert abs(row["auroc"] - expected) < 1e-12
        assert row["auroc_se"] == shipped[0]["auroc_se"] > 0
    # the calibration columns stay each calibration's own, as evaluation_metrics gives them
    alone = evaluation_metrics(labels, probs, "multilabel")
    for p, row in enumerate([shipped[0], *fitted]):
        for name in ("ece", "ece_debiased", "brier", "nll"):
            assert row[name] == alone[name][p], name


def test_cosine_keys_keep_the_order_of_cosines_sharing_a_large_offset():
    """Relative to the first row, float32 keeps differences of 1e-9 that float32 cosines of ~0.3 lose."""
    cosine = 0.3 + 1e-9 * np.arange(6.0)[:, None]
    assert len(np.unique(cosine.astype(np.float32))) == 1
    keys = cosine_keys(cosine)
    assert keys.dtype == np.float32 and (np.diff(keys[:, 0]) > 0).all()


def test_softmax_keys_give_the_probabilities_and_the_float64_ranking():
    """Multiclass and ordinal: softmax(scale cos / T) per calibration from the probes' rank keys; the
    probabilities as before to a few ulps, the AUROCs scikit-learn's on the float64 probabilities."""
    rng = np.random.default_rng(1)
    n, k = 300, 4
    y = rng.integers(0, k, n)
    cosine = 0.2 + 0.02 * rng.standard_normal((n, k)) + 0.01 * np.eye(k)[y]
    fits = [(1.0, 0, 100, 3.0, 0.0)]
    for kind in ("multiclass", "ordinal"):
        probs, rows = _records(y, cosine, kind, 20.0, 0.0, fits)
        for p, scale in enumerate((20.0, 20.0 / 3.0)):
            reference = probabilities(cosine, kind, scale, 0.0)
            np.testing.assert_allclose(probs[p], reference, rtol=1e-13, atol=1e-15)
            expected = roc_auc_score(y, reference, multi_class="ovr", average="macro")
            assert abs(rows[p]["auroc"] - expected) < 1e-12, (kind, p)
            if kind == "ordinal":
                exceed = [roc_auc_score(y >= t, reference[:, t:].sum(axis=1)) for t in range(1, k)]
                assert abs(rows[p]["ordinal_auroc"] - np.mean(exceed)) < 1e-12


def test_prompt_variant_aurocs_rank_each_variants_cosines():
    rng = np.random.default_rng(2)
    n = 200
    labels = (rng.random((n, 2)) < 0.4).astype(np.float64)
    variants = 0.5 + 0.05 * rng.standard_normal((3, n, 2)) + 0.02 * labels[None]
    found = variant_aurocs(labels, variants, "multilabel", 100.0)
    expected = [np.mean([roc_auc_score(labels[:, c], v[:, c]) for c in range(2)]) for v in variants]
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-12)
