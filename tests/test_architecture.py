"""The architecture contract: imports point only down the layers and no package has an import cycle.

The contracts live in pyproject.toml (``[tool.importlinter]``); ``lint-imports`` checks them, here
and in ``make lint``. The second test breaks a copy of the package on purpose, with imports inside
functions, to show the contract can fail and that function-level imports count.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (dev extra)")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Run the contracts of ``root``/pyproject.toml on the ``crs`` package under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=root, env=env, capture_output=True, text=True,
        timeout=120,
    )


def test_the_package_keeps_its_contracts():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout and "layers" in result.stdout


# (module to break, the import put inside a new function, words the failure must name)
BREAKS = [
    ("crs/probes/base.py", "import crs.cli.main", ["imports point only down", "crs.probes.base -> crs.cli.main"]),
    ("crs/spec.py", "from crs.data import load_entry", ["imports point only down", "crs.spec -> crs.data"]),
    ("crs/cache/store.py", "from crs.probes import fit_probes", ["imports point only down", "crs.cache"]),
    ("crs/encoders/registry.py", "from crs.encoders import catalog", ["no import cycles", "crs.encoders"]),
]


@pytest.mark.parametrize("module,statement,words", BREAKS, ids=[b[0] for b in BREAKS])
def test_the_contract_fails_on_an_import_that_points_up_or_circles(tmp_path, module, statement, words):
    shutil.copytree(ROOT / "crs", tmp_path / "crs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n\ndef _break_the_contract():\n    {statement}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    for word in words:
        assert word in result.stdout, result.stdout
