"""The score's cost side by side with an older revision, on the same run folder (issue 47's "Done when").

``python -m crs.bench.scoring --run-folder DIR [--reuse] --against REV [--pairs N]``: the synthetic run
folder is written once (by this tree's :func:`crs.bench.scoring.write_synthetic_run`); ``REV`` is checked
out into a temporary ``git worktree`` (detached, removed after, even on failure); then the two trees score
that folder interleaved, old then new, ``pairs`` times (A B A B), each run a fresh ``python`` with
``PYTHONPATH`` at its tree and the same thread count in the environment. Each run is :data:`SHIM`: the
tree's own ``score_records`` with the case-level bootstrap, its CPU seconds (user + system, the process's
own, about the call only) and its peak RSS. One untimed run per tree on the quick size first fills numba's
cache of that tree (the kernel compiles on first use; a fresh worktree has no cache), so the timed runs are
the scoring alone.

Reported: per run, the tree and its figures; per pair, CPU new / CPU old; the ratio of the sums and the
pairs' smallest and largest ratio (the spread). Runs are one at a time: at paper size each holds 1.3-1.9
GiB. Run it under ``nice -n 10`` on a shared machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crs

SHIM = r'''
import json, resource, sys, time
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.memory import own_peak_rss_bytes
from crs.scoring.result import score_records
from crs.scoring.settings import ScoreSettings

root, n_boot, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
folder = RunFolder(root)
records = folder.read_records()
usage, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
result = score_records(records, ScoreSettings(n_boot=n_boot, case_level=True), run_folder=folder, workers=workers)
wall = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime), "wall_s": wall,
                  "peak_rss_gib": own_peak_rss_bytes() / 2**30, "leading_tier": list(result.bootstrap.leading_tier),
                  "crs": [float(v) for v in result.crs["crs"]]}))
'''
"""One scoring run, written to a file and run under each tree's ``PYTHONPATH``: only the API both trees share
(``score_records``, ``ScoreSettings(n_boot, case_level)``, ``RunFolder``, ``own_peak_rss_bytes``)."""

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


class AgainstError(RuntimeError):
    """The old revision could not be checked out or could not score the folder."""


@dataclass(frozen=True)
class TreeRun:
    tree: str  # "old" or "new"
    cpu_s: float
    wall_s: float
    peak_rss_gib: float
    leading_tier: tuple[str, ...]


@dataclass(frozen=True)
class SideBySide:
    revision: str
    commit: str
    workers: int
    runs: tuple[TreeRun, ...]

    def _cpu(self, tree: str) -> list[float]:
        return [run.cpu_s for run in self.runs if run.tree == tree]

    @property
    def pair_ratios(self) -> tuple[float, ...]:
        """CPU new / CPU old of each pair (old first in each pair)."""
        return tuple(new / old for old, new in zip(self._cpu("old"), self._cpu("new"), strict=True))

    @property
    def ratio(self) -> float:
        """Summed CPU new / summed CPU old over every pair."""
        return sum(self._cpu("new")) / sum(self._cpu("old"))

    def summary(self) -> dict:
        return {"revision": self.revision, "commit": self.commit, "workers": self.workers,
                "runs": [run.__dict__ | {"leading_tier": list(run.leading_tier)} for run in self.runs],
                "pair_ratios": list(self.pair_ratios), "ratio": self.ratio,
                "ratio_low": min(self.pair_ratios), "ratio_high": max(self.pair_ratios)}


def this_tree() -> Path:
    """The source tree the running ``crs`` is imported from (its repository root)."""
    return Path(crs.__file__).resolve().parents[1]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AgainstError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


@contextlib.contextmanager
def checked_out(revision: str, repo: Path | None = None) -> Iterator[tuple[Path, str]]:
    """(a temporary detached worktree of ``revision``, its commit); the worktree is removed on exit."""
    repo = this_tree() if repo is None else repo
    commit = _git(repo, "rev-parse", "--verify", f"{revision}^{{commit}}")
    parent = Path(tempfile.mkdtemp(prefix="crs-against-"))
    tree = parent / "tree"
    try:
        _git(repo, "worktree", "add", "--detach", str(tree), commit)
        yield tree, commit
    finally:
        with contextlib.suppress(AgainstError):
            _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)
        with contextlib.suppress(AgainstError):
            _git(repo, "worktree", "prune")


def score_in(tree: Path, shim: Path, root: str, n_boot: int, workers: int) -> dict:
    """One run of :data:`SHIM` on ``root`` with ``tree``'s crs, in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(tree), **{name: str(workers) for name in THREAD_VARIABLES})
    done = subprocess.run([sys.executable, str(shim), root, str(n_boot), str(workers)], capture_output=True,
                          text=True, env=env, cwd=str(shim.parent))
    if done.returncode != 0:
        raise AgainstError(f"scoring {root} with the tree at {tree} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def side_by_side(root: str, revision: str, n_boot: int, workers: int = 2, pairs: int = 2,
                 warm_up: str | None = None, warm_up_boot: int = 20) -> SideBySide:
    """Score the run folder ``root`` with ``revision``'s code and this tree's, interleaved (see the module
    docstring); ``warm_up``: a small run folder each tree scores once, untimed, first (None: none)."""
    if pairs < 1:
        raise AgainstError(f"--pairs must be at least 1, got {pairs}")
    new = this_tree()
    with checked_out(revision, new) as (old, commit), tempfile.TemporaryDirectory(prefix="crs-shim-") as scratch:
        shim = Path(scratch) / "score_shim.py"
        shim.write_text(SHIM)
        if warm_up is not None:
            for tree in (old, new):
                score_in(tree, shim, warm_up, warm_up_boot, workers)
        runs = []
        for _ in range(pairs):
            for name, tree in (("old", old), ("new", new)):
                found = score_in(tree, shim, root, n_boot, workers)
                runs.append(TreeRun(name, found["cpu_s"], found["wall_s"], found["peak_rss_gib"],
                                    tuple(found["leading_tier"])))
                print(f"  {name} ({tree}): {found['cpu_s']:.1f} s CPU, {found['wall_s']:.1f} s wall, "
                      f"peak RSS {found['peak_rss_gib']:.2f} GiB", file=sys.stderr, flush=True)
    return SideBySide(revision, commit, workers, tuple(runs))


def side_by_side_text(result: SideBySide) -> str:
    lines = [f"score_records, this tree against {result.revision} ({result.commit[:9]}), same run folder, "
             f"{result.workers} thread(s), interleaved old/new:"]
    lines += [f"  {run.tree}: {run.cpu_s:.1f} s CPU, {run.wall_s:.1f} s wall, peak RSS {run.peak_rss_gib:.2f} GiB"
              for run in result.runs]
    ratios = ", ".join(f"{r:.3f}" for r in result.pair_ratios)
    lines.append(f"  CPU new / old: {result.ratio:.3f} (pairs: {ratios}; spread {min(result.pair_ratios):.3f}-"
                 f"{max(result.pair_ratios):.3f})")
    return "\n".join(lines)
