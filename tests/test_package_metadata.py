"""Installing crs prints no setuptools deprecation banner (issue 39 item 15: `project.license` as a
table was deprecated, and the banner came three times per install): the licence is the SPDX string
and the LICENSE file ships with it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_building_the_metadata_warns_of_nothing_and_names_the_licence(tmp_path):
    for name in ("pyproject.toml", "setup.cfg", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "crs").mkdir()
    (tmp_path / "crs" / "__init__.py").write_text("")
    (tmp_path / "meta").mkdir()
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-W", "always", "-c", code, str(tmp_path / "meta")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Deprecat" not in done.stderr and "project.license" not in done.stderr, done.stderr[-3000:]
    metadata = (tmp_path / "meta" / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
