"""Which encoder is scored on which task: declared coverage, its check against the records, and placement.

A spec may let a specialist (RETFound on fundus) run on some data sets only (``datasets`` on the
encoder; docs/decisions/0038-encoders-scored-where-they-belong.md). Then each task has a leaderboard over
the encoders declared on it, and the overall CRS is over the encoders declared on every task. A
declared (encoder, task) pair without run records is an error, exactly as a hole is when nothing is
declared: only the spec, never the records, decides who is left out of a leaderboard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from crs.scoring.formula import ScoreInputError

Coverage = Mapping[str, Sequence[str]]
"""Task -> the encoders declared to run on it (``Spec.coverage``)."""


def normalised(coverage: Coverage) -> dict[str, tuple[str, ...]]:
    """``coverage`` as task -> sorted encoder names (str), checked: no empty task, no repeated name."""
    if not isinstance(coverage, Mapping) or not coverage:
        raise ScoreInputError(f"coverage must map each task to the encoders declared on it, got {coverage!r}")
    out = {}
    for task, encoders in coverage.items():
        names = [str(name) for name in encoders]
        if not names or len(set(names)) != len(names):
            raise ScoreInputError(
                f"coverage of task {task!r} must name each encoder declared on it once, got {list(encoders)}"
            )
        out[str(task)] = tuple(sorted(names))
    return out


def every_task_encoders(coverage: Coverage) -> list[str]:
    """The encoders declared on every task (the overall leaderboard), sorted by name."""
    declared = normalised(coverage)
    common = set.intersection(*(set(names) for names in declared.values()))
    return sorted(common)


def is_complete(coverage: Coverage) -> bool:
    """True when every declared encoder is declared on every task: one leaderboard, nothing per task."""
    declared = normalised(coverage)
    everyone = set().union(*(set(names) for names in declared.values()))
    return all(set(names) == everyone for names in declared.values())


def declared_records(records: pd.DataFrame, coverage: Coverage) -> pd.DataFrame:
    """The records of the declared (encoder, task) pairs; a declared pair without records is an error.

    Records of undeclared pairs (an encoder the spec no longer runs on a task) are left out, as a
    spec that drops an encoder leaves out its records.
    """
    declared = normalised(coverage)
    encoder = records["encoder"].astype(str)
    task = records["task"].astype(str)
    present = set(zip(encoder, task, strict=True))
    missing = [(name, t) for t, names in declared.items() for name in names if (name, t) not in present]
    if missing:
        name, t = missing[0]
        raise ScoreInputError(
            f"no run records for encoder {name!r} on task {t!r}, which the spec declares ({len(missing)} declared "
            f"(encoder, task) pairs missing: {missing[:4]}); rerun `crs probe`, or drop the encoder from the "
            "data set's 'encoders' in the spec"
        )
    pairs = {(name, t) for t, names in declared.items() for name in names}
    keep = [pair in pairs for pair in zip(encoder, task, strict=True)]
    return records[keep]


def placement(coverage: Coverage, overall_ranks: Mapping[str, int], task_ranks: Mapping[str, Mapping[str, int]]) -> pd.DataFrame:
    """Who is ranked where and why: one row per encoder (overall ones first, by rank; then the others by name).

    Columns: ``tasks`` (the tasks it runs on), ``overall`` (ranked in the overall CRS), ``overall_rank``
    (NaN when not), ``task_ranks`` ("task: rank" per leaderboard), ``why`` (one sentence).
    """
    declared = normalised(coverage)
    tasks = list(declared)
    everyone = sorted(set().union(*(set(names) for names in declared.values())))
    rows = []
    for name in everyone:
        mine = [t for t in tasks if name in declared[t]]
        ranked = name in overall_ranks
        ranks = ", ".join(f"{t}: {int(task_ranks[t][name])}" for t in mine if name in task_ranks.get(t, {}))
        if ranked:
            why = "runs on every task: ranked overall and in every task's leaderboard"
        else:
            boards = " and ".join(mine)
            why = (f"{', '.join(mine)} only: ranked in the {boards} leaderboard{'s' if len(mine) > 1 else ''}, "
                   f"not overall (the overall CRS is over the encoders that run on every task)")
        rows.append({"encoder": name, "tasks": ", ".join(mine), "overall": ranked,
                     "overall_rank": float(overall_ranks[name]) if ranked else float("nan"),
                     "task_ranks": ranks, "why": why})
    table = pd.DataFrame(rows).set_index("encoder")
    order = table.assign(_rank=table["overall_rank"].fillna(float("inf"))).sort_values(["_rank", "encoder"]).index
    return table.loc[order]
