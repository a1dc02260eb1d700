"""Re-run a published run folder's stage 2 and score from its embedded spec and compare (``crs reproduce``).

The spec a run was made with is embedded in its records; with the cache (or imported features) it
was made from, stage 2 and the score are re-run into a fresh folder and every table is compared
with the published one under the reproducibility contract (:mod:`crs.evaluate.compare`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from crs.benchmark import Benchmark
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.compare import Comparison, compare_run_folders


def reproduce(
    published: str | Path, *, cache: str | Path | None = None, workdir: str | Path | None = None,
    jobs: int | str | None = None, progress: bool = True,
) -> Comparison:
    """Re-run stage 2 (and the score, when the published folder has one) of the run folder
    ``published`` from its embedded spec into ``workdir`` (default: a temporary folder), reading
    features from ``cache`` (default: the cache the run recorded), and compare every table."""
    source = Benchmark.from_run_folder(published, cache=cache)
    with tempfile.TemporaryDirectory(prefix="crs-reproduce-") as scratch:
        target = Path(workdir) if workdir is not None else Path(scratch) / "rerun"
        rerun = Benchmark(source.spec, output=target)
        rerun.probe(jobs=jobs, progress=progress, full=True)
        has_score = RunFolder(published).has_score()
        if has_score:
            rerun.score()
        return compare_run_folders(RunFolder(published), RunFolder(target), score=has_score)
