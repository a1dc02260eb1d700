"""Behaviour pinned across the house move (issue 13): a fresh reduced run equals the stored tables.

The tables in tests/golden/house were written by tests/golden/make_house_golden.py on the commit in
tests/golden/house/COMMIT, before any module moved.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from golden_tables import run_reduced_benchmark

GOLDEN = Path(__file__).resolve().parent / "golden" / "house"


@pytest.fixture(scope="module")
def fresh_tables(tmp_path_factory):
    return run_reduced_benchmark(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.csv")))
def test_tables_equal_golden(fresh_tables, name, tmp_path):
    expected = pd.read_csv(GOLDEN / f"{name}.csv", keep_default_na=False, na_values=[""])
    # Round-trip the fresh table through the same CSV writer so dtypes and NaN spelling match.
    fresh_path = tmp_path / f"{name}.csv"
    fresh_tables[name].to_csv(fresh_path, index=False, float_format="%.17g")
    fresh = pd.read_csv(fresh_path, keep_default_na=False, na_values=[""])
    assert list(fresh.columns) == list(expected.columns)
    assert len(fresh) == len(expected)
    for column in expected.columns:
        if pd.api.types.is_numeric_dtype(expected[column]):
            np.testing.assert_allclose(
                fresh[column].to_numpy(dtype=float), expected[column].to_numpy(dtype=float),
                rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=f"{name}.{column}",
            )
        else:
            assert fresh[column].astype(str).tolist() == expected[column].astype(str).tolist(), f"{name}.{column}"
