"""How straight is the way through ``crs/scoring/``? (issue 40 item 7, decision 0128)

Runs the tiny spec (tests/tiny.py: 2 encoders x 3 tasks, case-level bootstrap) through extract and
probe, then follows ``Benchmark.score`` with :func:`sys.setprofile`, recording the ``crs.scoring``
module of every Python call event in order (a generator expression or lambda counts as its function).
Prints, for ``score_records`` (the statistics) and for the whole of ``Benchmark.score`` (which then
writes the tables, summary and text), for every call and for the first call of each function only
(loops over tasks, encoders and axes repeat a stretch of the way; the first calls read as the code does):

* modules: distinct ``crs.scoring`` modules entered;
* stays: maximal runs of consecutive calls in one module (the sequence with repeats collapsed);
* returns: stays in a module the path had already left once (a way that reads straight has none);

and the stages: the modules of the functions ``crs.scoring.result`` (the orchestrator) calls itself, in
order (a stage used in one block is a step of a straight line; a return is the orchestrator going back
to a step it had finished).

Issue 40 item 7 counted 18 modules, 56 stays and 38 returns under a rule it did not state; docs/crs.md
("The way through crs/scoring") gives this script's counts before and after the moves.

The score runs on one thread (``case_bootstrap.DEFAULT_WORKERS = 1``) so every call is on the traced
thread and the sequence does not depend on thread timing. ``--path`` also prints the collapsed sequence of score_records' first calls.

    PYTHONPATH=$PWD python scripts/scoring_path.py [--folder DIR] [--path]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def follow(score) -> tuple[list[str], list[str], tuple[int, int], list[str]]:
    """The crs.scoring module of every call event while ``score()`` runs, in order; of the first call of
    each function; how many of each came before ``score_records`` returned; and the stages: the module of
    every function ``crs.scoring.result`` calls itself (first calls, until score_records returns)."""
    seen: list[str] = []
    statistics: list[int] = []
    stages: list[str] = []
    first: list[str] = []
    functions: set[tuple[str, int]] = set()

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "score_records" and not statistics:
            statistics.extend((len(seen), len(first)))  # score_records is done: what follows writes the tables
        if event == "call" and not frame.f_code.co_name.startswith("<"):  # a genexpr or lambda stays in its function
            name = frame.f_globals.get("__name__", "")
            if name.startswith("crs.scoring."):
                module = name[len("crs.scoring."):]
                seen.append(module)
                code = (frame.f_code.co_filename, frame.f_code.co_firstlineno)
                if code not in functions:
                    functions.add(code)
                    first.append(module)
                    caller = frame.f_back
                    if caller is not None and caller.f_globals.get("__name__") == "crs.scoring.result" and not statistics:
                        stages.append(module)

    sys.setprofile(profile)
    try:
        score()
    finally:
        sys.setprofile(None)
    return seen, first, (statistics[0], statistics[1]) if statistics else (len(seen), len(first)), stages


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
        every, first, (n_every, n_first), stages = follow(lambda: bench.score(overwrite=True))
    for part, (calls, firsts) in (("score_records (the statistics)", (every[:n_every], first[:n_first])),
                                  ("Benchmark.score (and writing the tables)", (every, first))):
        for what, sequence in (("every call", calls), ("first calls", firsts)):
            found = counts(sequence)
            print(f"{part}, {what}: {found['modules']} modules, {found['stays']} stays, "
                  f"{found['returns']} returns to a module already left")
    found = counts(stages)
    print(f"stages (what crs.scoring.result calls): {found['modules']} modules, {found['stays']} stays, "
          f"{found['returns']} returns to a module already left: {' -> '.join(stays(stages))}")
    if args.path:
        print(" -> ".join(stays(first[:n_first])))


if __name__ == "__main__":
    main()
