"""The CRS: a hand-derived 3-encoder table and hypothesis properties of the definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crs.scoring.formula import AXES, ScoreInputError, axis_errors, clinical_reliability_score, crs_components


def _errors(rows: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(AXES)).rename_axis("encoder")


def test_three_encoder_golden_table():
    # reference R errors (.2, .1, .4, .3); A halves every error; B triples discrimination error and
    # thirds calibration error.  rho = e / e_R, u = 1 / (1 + rho):
    #   R: u = (1/2, 1/2, 1/2, 1/2)
    #   A: rho = 1/2 everywhere -> u = 2/3 everywhere
    #   B: rho = (3, 1/3, 1, 1) -> u = (1/4, 3/4, 1/2, 1/2)
    # Pareto: A > R on every axis, so A dominates R. A vs B: A worse on calibration (2/3 < 3/4): no.
    # R vs B: R better on discrimination, worse on calibration: no.
    #   S: A 1/2, R 0, B 0;  Q: A 0, R 1/2, B 0;  Dom = (1 + S - Q) / 2: A 3/4, R 1/4, B 1/2
    # balance = geometric mean: A 2/3, R 1/2, B (1/4 * 3/4 * 1/2 * 1/2)^(1/4) = (3/64)^(1/4) = 0.465302
    # worst = min u: A 2/3, R 1/2, B 1/4 (all on discrimination, the first axis on ties)
    # CRS = mean: A (3/4 + 2/3 + 2/3) / 3 = 25/36; R (1/4 + 1/2 + 1/2) / 3 = 5/12;
    #             B (1/2 + 0.465302 + 1/4) / 3 = 0.405101 -> ranks A 1, R 2, B 3
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.1, 0.05, 0.2, 0.15), "B": (0.6, 0.1 / 3, 0.4, 0.3)})
    table = clinical_reliability_score(errors, "R")
    assert table.loc["B", [f"u_{a}" for a in AXES]].tolist() == pytest.approx([0.25, 0.75, 0.5, 0.5])
    assert table["S"].to_dict() == pytest.approx({"R": 0.0, "A": 0.5, "B": 0.0})
    assert table["Q"].to_dict() == pytest.approx({"R": 0.5, "A": 0.0, "B": 0.0})
    assert table["dominance"].to_dict() == pytest.approx({"R": 0.25, "A": 0.75, "B": 0.5})
    assert table["balance"].to_dict() == pytest.approx({"R": 0.5, "A": 2 / 3, "B": (3 / 64) ** 0.25})
    assert table["worst_axis"].to_dict() == pytest.approx({"R": 0.5, "A": 2 / 3, "B": 0.25})
    assert table.loc["B", "worst_axis_name"] == "discrimination"
    assert table["crs"].to_dict() == pytest.approx({"R": 5 / 12, "A": 25 / 36, "B": 0.405101}, abs=1e-6)
    assert table["rank"].to_dict() == {"A": 1, "R": 2, "B": 3}


def test_epsilon_floor_caps_the_ratio():
    # reference discrimination error 0 is floored at 1e-3, so an encoder at .01 has rho 10, u 1/11
    errors = _errors({"R": (0.0, 0.1, 0.1, 0.1), "E": (0.01, 0.1, 0.1, 0.1)})
    table = clinical_reliability_score(errors, "R", epsilon=1e-3)
    assert table.loc["E", "u_discrimination"] == pytest.approx(1 / 11)


def test_weights_and_margin():
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.19, 0.099, 0.39, 0.29)})
    plain = clinical_reliability_score(errors, "R")
    assert plain.loc["A", "dominance"] == 1.0
    # A's u gains are all below .05, so with that margin it no longer counts as dominating R
    assert clinical_reliability_score(errors, "R", dominance_margin=0.05).loc["A", "dominance"] == 0.5
    only_worst = clinical_reliability_score(errors, "R", weights={"worst_axis": 1.0})
    assert only_worst["crs"].to_dict() == pytest.approx(only_worst["worst_axis"].to_dict())


def test_missing_reference_names_encoders_present():
    errors = _errors({"R": (0.2, 0.1, 0.4, 0.3), "A": (0.1, 0.05, 0.2, 0.15)})
    with pytest.raises(ScoreInputError, match=r"'resnet50'.*\['A', 'R'\]"):
        clinical_reliability_score(errors, "resnet50")


def test_axis_without_any_value_is_left_out_but_partial_axis_is_an_error():
    errors = _errors({"R": (0.2, 0.1, 0.4, np.nan), "A": (0.1, 0.05, 0.2, np.nan)})
    table = clinical_reliability_score(errors, "R")
    assert "u_robustness" not in table.columns and table.attrs["axes"] == list(AXES[:3])
    errors.loc["A", "robustness"] = 0.1
    with pytest.raises(ScoreInputError, match="robustness"):
        clinical_reliability_score(errors, "R")


def test_axis_errors_counts_each_task_once():
    # task t1 has 2 seeds (AUROC .8, .9 -> .85), task t2 one seed (.7): mean over tasks .775, not .8
    seed_axes = pd.DataFrame(
        {
            "encoder": ["e"] * 3,
            "task": ["t1", "t1", "t2"],
            "seed": [0, 1, 0],
            "auroc": [0.8, 0.9, 0.7],
            "ece": [0.1, 0.1, 0.1],
            "label_efficiency": [0.5, 0.5, 0.5],
            "retention": [0.9, 0.9, 0.9],
        }  # fmt: skip
    )
    errors = axis_errors(seed_axes)
    assert errors.loc["e", "discrimination"] == pytest.approx(0.225)
    assert errors.loc["e", "robustness"] == pytest.approx(0.1)


# --- properties -----------------------------------------------------------------------------------

# errors on a coarse grid (k / 100) keep distinct values distinct under the transforms below
error_tables = (
    st.integers(2, 6)
    .flatmap(
        lambda n: st.lists(st.lists(st.integers(1, 100), min_size=4, max_size=4), min_size=n, max_size=n)
    )
    .map(lambda rows: np.array(rows, dtype=np.float64) / 100.0)
)


@settings(max_examples=150, deadline=None)
@given(error_tables, st.lists(st.floats(0.3, 3.0), min_size=4, max_size=4), st.floats(0.0, 2.0))
def test_dominance_unchanged_by_increasing_per_axis_transforms(errors, powers, offset):
    transformed = np.stack([errors[:, a] ** powers[a] + offset * a for a in range(4)], axis=1)
    before = crs_components(errors, 0, epsilon=1e-12)
    after = crs_components(transformed, 0, epsilon=1e-12)
    assert np.array_equal(before["dominance"], after["dominance"])


@settings(max_examples=150, deadline=None)
@given(error_tables, st.integers(0, 5))
def test_reference_scores_one_half_on_every_axis(errors, reference):
    reference %= len(errors)
    assert np.all(crs_components(errors, reference)["u"][reference] == 0.5)


@settings(max_examples=150, deadline=None)
@given(error_tables, st.floats(0.01, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 0.05))
def test_an_encoder_that_dominates_another_scores_strictly_higher(errors, w_dom, w_bal, w_worst, margin):
    parts = crs_components(
        errors, 0, np.array([w_dom, w_bal, w_worst]) / (w_dom + w_bal + w_worst), dominance_margin=margin
    )
    gap = parts["u"][:, None, :] - parts["u"][None, :, :]
    dominates = np.all(gap >= 0, axis=-1) & np.any(gap > margin, axis=-1)
    for i, j in zip(*np.nonzero(dominates), strict=True):
        assert parts["crs"][i] > parts["crs"][j]


@settings(max_examples=100, deadline=None)
@given(error_tables, st.randoms(use_true_random=False))
def test_permuting_encoders_changes_nothing(errors, random):
    names = [f"enc{i}" for i in range(len(errors))]
    table = pd.DataFrame(errors, index=names, columns=list(AXES))
    order = names[:]
    random.shuffle(order)
    first = clinical_reliability_score(table, names[0])
    second = clinical_reliability_score(table.loc[order], names[0]).loc[first.index]
    pd.testing.assert_frame_equal(first, second)
