"""How straight is the way through ``crs/scoring/``? (issue 40 item 7, decision 0128)

Runs the tiny spec (tests/tiny.py: 2 encoders x 3 tasks, case-level bootstrap) through extract and
probe, then follows ``Benchmark.score`` with :func:`sys.setprofile`, recording the ``crs.scoring``
module of every Python call event in order. Prints, for every call and for the first call of each
function only (loops over tasks, encoders and axes repeat a stretch of the way; the first calls read
as the code does):

* modules: distinct ``crs.scoring`` modules entered;
* stays: maximal runs of consecutive calls in one module (the sequence with repeats collapsed);
* returns: stays in a module the path had already left once (a way that reads straight has none).

Issue 40 item 7 counted 18 modules, 56 stays and 38 returns under a rule it did not state; on the
same code (main at 2b1ac79) this script gives 18 / 307 / 289 for every call and 18 / 79 / 61 for first calls.

The score runs on one thread (``case_bootstrap.DEFAULT_WORKERS = 1``) so every call is on the traced
thread and the sequence does not depend on thread timing. ``--path`` also prints the first calls' collapsed sequence.

    PYTHONPATH=$PWD python scripts/scoring_path.py [--folder DIR] [--path]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def follow(score) -> tuple[list[str], list[str]]:
    """The crs.scoring module of every call event while ``score()`` runs, in order; and of the first call
    of each function."""
    seen: list[str] = []
    first: list[str] = []
    functions: set[tuple[str, int]] = set()

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("crs.scoring."):
                module = name[len("crs.scoring."):]
                seen.append(module)
                code = (frame.f_code.co_filename, frame.f_code.co_firstlineno)
                if code not in functions:
                    functions.add(code)
                    first.append(module)

    sys.setprofile(profile)
    try:
        score()
    finally:
        sys.setprofile(None)
    return seen, first


def stays(sequence: list[str]) -> list[str]:
    out: list[str] = []
    for name in sequence:
        if not out or out[-1] != name:
            out.append(name)
    return out


def counts(sequence: list[str]) -> dict[str, int]:
    collapsed = stays(sequence)
    returns, left = 0, set()
    for before, name in zip([None, *collapsed], collapsed, strict=False):
        if name in left:
            returns += 1
        if before is not None:
            left.add(before)
    return {"modules": len(set(collapsed)), "stays": len(collapsed), "returns": returns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="where to write the tiny run (default: a temporary folder)")
    parser.add_argument("--path", action="store_true", help="print the first calls' collapsed module sequence")
    args = parser.parse_args()

    from crs.benchmark import Benchmark
    from crs.scoring import case_bootstrap
    from crs.spec import load_spec

    from tiny import write_tiny_spec

    case_bootstrap.DEFAULT_WORKERS = 1
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.folder or Path(temporary)
        bench = Benchmark(load_spec(write_tiny_spec(folder)))
        bench.extract(progress=False)
        bench.probe(progress=False)
        every, first = follow(lambda: bench.score(overwrite=True))
    for what, sequence in (("every call", every), ("first calls", first)):
        found = counts(sequence)
        print(f"crs.scoring from Benchmark.score, {what}: {found['modules']} modules, {found['stays']} stays, "
              f"{found['returns']} returns to a module already left")
    if args.path:
        print(" -> ".join(stays(first)))


if __name__ == "__main__":
    main()
