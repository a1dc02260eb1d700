"""Behaviour pinned across refactors: a fresh reduced run equals the stored tables.

tests/golden/house holds the stage-2 tables (run records, seed aggregates) written by
tests/golden/make_house_golden.py on the commit in tests/golden/house/COMMIT, before any module
moved (issue 13). tests/golden/score holds the score tables, written the same way on the commit in
tests/golden/score/COMMIT, after the score was redefined on purpose (issue 14). Both were rewritten
once more when identical probes began to be predicted once (docs/decisions/0025: float32 products
of a different width, last-bit changes). Columns added later are allowed; every pinned column must
keep its values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from golden_tables import run_reduced_benchmark

GOLDEN = Path(__file__).resolve().parent / "golden"
PINNED = sorted(
    (folder.name, path.stem) for folder in (GOLDEN / "house", GOLDEN / "score") for path in folder.glob("*.csv")
)


@pytest.fixture(scope="module")
def fresh_tables(tmp_path_factory):
    return run_reduced_benchmark(tmp_path_factory.mktemp("golden"))


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


@pytest.mark.parametrize(("folder", "name"), PINNED)
def test_tables_equal_golden(fresh_tables, folder, name, tmp_path):
    expected = _read(GOLDEN / folder / f"{name}.csv")
    # Round-trip the fresh table through the same CSV writer so dtypes and NaN spelling match.
    fresh_path = tmp_path / f"{name}.csv"
    fresh_tables[name].to_csv(fresh_path, index=False, float_format="%.17g")
    fresh = _read(fresh_path)
    missing = [column for column in expected.columns if column not in fresh.columns]
    assert not missing, f"{name}: pinned columns {missing} are gone"
    assert len(fresh) == len(expected)
    for column in expected.columns:
        if pd.api.types.is_numeric_dtype(expected[column]):
            np.testing.assert_allclose(
                fresh[column].to_numpy(dtype=float), expected[column].to_numpy(dtype=float),
                rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=f"{name}.{column}",
            )
        else:
            assert fresh[column].astype(str).tolist() == expected[column].astype(str).tolist(), f"{name}.{column}"
