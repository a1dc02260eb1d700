"""Write the golden tables of the reduced synthetic benchmark (tests/test_golden_house.py reads them).

Run once, on the commit named in ``tests/golden/house/COMMIT``, before a change that must keep
behaviour identical; the test compares a fresh run with these files. There is no "regenerate" flag
in the test on purpose: a change of behaviour is a decision, made by rerunning this script by hand
and saying why in the commit.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from golden_tables import run_reduced_benchmark  # noqa: E402


def main(which: str = "house") -> None:
    """``house``: the stage-2 tables; ``score``: the score tables (``python make_house_golden.py score``)."""
    target = HERE / which
    target.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        tables = run_reduced_benchmark(Path(folder))
    for name, table in tables.items():
        if name.startswith("score_") != (which == "score"):
            continue
        table.to_csv(target / f"{name}.csv", index=False, float_format="%.17g")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    (target / "COMMIT").write_text(commit + "\n")
    print(f"wrote {sorted(tables)} to {target} at {commit}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
