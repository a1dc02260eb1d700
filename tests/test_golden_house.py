"""Behaviour pinned across refactors: a fresh reduced run equals the stored tables.

tests/golden/house holds the stage-2 tables (run records, seed aggregates) written by
tests/golden/make_house_golden.py on the commit in tests/golden/house/COMMIT, before any module
moved (issue 13). tests/golden/score holds the score tables, written the same way on the commit in
tests/golden/score/COMMIT, after the score was redefined on purpose (issue 14). Both were rewritten
once more when identical probes began to be predicted once (docs/decisions/0025: float32 products
of a different width, last-bit changes), and when selected probes began to be polished in float64
and AUROCs ranked on order-exact keys (docs/decisions/0029). The score tables moved again when each task's
patient resample was keyed on the task's name, not its place (docs/decisions/0144). Columns added later are allowed; every
pinned column must keep its values within the reproducibility contract's tolerances.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from crs.evaluate.compare import compare_tables

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
    # The contract's tolerances (docs/reproducibility.md): every float column within 1e-6, binned
    # calibration errors in all but 0.5 % of the rows, every other column exactly; so the goldens
    # hold on any x86-64 machine, BLAS kernel, worker count and with numba on or off.
    expected = _read(GOLDEN / folder / f"{name}.csv")
    # Round-trip the fresh table through the same CSV writer so dtypes and NaN spelling match.
    fresh_path = tmp_path / f"{name}.csv"
    fresh_tables[name].to_csv(fresh_path, index=False, float_format="%.17g")
    fresh = _read(fresh_path)
    missing = [column for column in expected.columns if column not in fresh.columns]
    assert not missing, f"{name}: pinned columns {missing} are gone"
    assert len(fresh) == len(expected)
    checks, problems = compare_tables(name, expected, fresh[list(expected.columns)])
    assert not problems, problems
    broken = [check for check in checks if not check.holds]
    assert not broken, [(c.column, c.max_difference, c.rows_over, c.example) for c in broken]
