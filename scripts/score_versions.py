"""Time ``Benchmark(spec).score()`` with whichever crs ``PYTHONPATH`` names: one code version per process.

Used to compare two versions of the score side by side on one run folder (A/B/B/A, one process per
run of this script), e.g. the interval method's cost (issue 30 item 7; docs/performance.md):

    PYTHONPATH=/path/to/old/worktree python scripts/score_versions.py SPEC 2 old
    PYTHONPATH=/path/to/new/worktree python scripts/score_versions.py SPEC 2 new

Run it from outside both worktrees (``python -m`` and a script's own folder come before PYTHONPATH);
each line says which ``crs`` was imported. Prints one JSON line per score: wall and process CPU seconds.
"""

import json
import os
import sys
import time

spec, runs, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import crs  # noqa: E402
import crs.scoring.case_bootstrap  # noqa: E402,F401  (imported before the clock, as a stage process does)
import crs.scoring.result  # noqa: E402,F401
from crs.benchmark import Benchmark  # noqa: E402

for run in range(runs):
    bench = Benchmark(spec)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    bench.score()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    print(json.dumps({"code": label, "crs": os.path.dirname(crs.__file__), "run": run, "wall_s": round(wall, 2),
                      "cpu_s": round(cpu, 2), "load": round(os.getloadavg()[0], 2)}), flush=True)
