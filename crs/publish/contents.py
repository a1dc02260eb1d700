"""Every file of a bundle accounted for: what it is, and the checks that need no re-score.

A full bundle's files are inputs the re-score reads (``run/records.parquet``, the predictions of the
spec's encoders on its data sets), outputs it re-derives and compares (``run/score/*``, the seed
aggregates, ``spec.json``: the spec embedded in the records), or files ``crs run --extend`` checks
against the extender's own data (``cases.json``, ``images.json``, ``run/audit.json``), which are
checked here for agreement with the predictions. An aggregates bundle's axis errors and replicates are
what its re-score reads (its stored CRS table is derived again from them); its measures and subgroups
are the site's word, vouched for by its signature alone. Any other file is a problem: a bundle holds
nothing a reader cannot account for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder
from crs.publish.aggregates import AGGREGATES, AGGREGATES_FILE, MEASURES_FILE, REPLICATES_FILE, SUBGROUPS_FILE
from crs.publish.bundle import CASES_FILE, IMAGES_FILE, RUN_DIR, SPEC_FILE, BundleError, check_cases
from crs.publish.manifest import bundle_files

INPUT = "input the re-score reads"
OUTPUT = "output the re-score re-derives and compares"
EXTENSION = "checked by `crs run --extend` against the extender's data"
AGGREGATE = "a site's aggregates vouched for by its signature alone (no records to re-derive them from)"
SCORE_PREFIX = f"{RUN_DIR}/{artifacts.SCORE_DIR}/"


@dataclass(frozen=True)
class Contents:
    """Each file's role (:data:`INPUT`, :data:`OUTPUT`, :data:`EXTENSION`, :data:`AGGREGATE`) and the problems found."""

    roles: dict[str, str]
    problems: tuple[str, ...]

    def summary(self) -> str:
        """One line: how many files of each role."""
        short = {INPUT: "read by the re-score", OUTPUT: "re-derived and compared", EXTENSION: "checked by `crs run --extend`",
                 AGGREGATE: "vouched for by the signature alone"}
        counts = {role: sum(r == role for r in self.roles.values()) for role in short}
        return ", ".join(f"{n} {short[role]}" for role, n in counts.items() if n)


def _full_roles(bundle: Path, names: list[str]) -> tuple[dict[str, str], list[str]]:
    from crs.spec import spec_from_dict

    roles = {CASES_FILE: EXTENSION, IMAGES_FILE: EXTENSION, f"{RUN_DIR}/{artifacts.AUDIT_FILE}": EXTENSION,
             f"{RUN_DIR}/{artifacts.RECORDS_FILE}": INPUT, f"{RUN_DIR}/{artifacts.AGGREGATE_FILE}": OUTPUT,
             SPEC_FILE: OUTPUT}
    problems = [f"missing: {name}" for name in (f"{RUN_DIR}/{artifacts.RECORDS_FILE}", CASES_FILE, IMAGES_FILE, SPEC_FILE)
                if name not in names]
    if problems:
        return roles, problems
    run = RunFolder(bundle / RUN_DIR)
    recorded = run.provenance().get("spec")
    if not isinstance(recorded, dict):
        return roles, [f"{RUN_DIR}/{artifacts.RECORDS_FILE} carries no spec: nothing can be re-scored"]
    spec = spec_from_dict(recorded)
    if json.loads((bundle / SPEC_FILE).read_text()) != recorded:
        problems.append(f"{SPEC_FILE} is not the spec embedded in {RUN_DIR}/{artifacts.RECORDS_FILE}")
    for entry in spec.datasets:
        for encoder in spec.encoders_on(entry.name):
            name = run.predictions_path(encoder, entry.name).relative_to(bundle).as_posix()
            roles[name] = INPUT
            if name not in names and spec.score.case_bootstrap:
                problems.append(f"missing input: {name}")
    roles.update({name: OUTPUT for name in names if name.startswith(SCORE_PREFIX)})
    cases = json.loads((bundle / CASES_FILE).read_text())
    try:
        check_cases(run, cases, spec)
    except (BundleError, KeyError) as error:
        problems.append(f"{CASES_FILE} does not match the predictions: {error}")
    images = json.loads((bundle / IMAGES_FILE).read_text())
    for dataset, conditions in cases.items():
        for condition, ids in conditions.items():
            target = condition.split("__", 1)[1] if condition.startswith(f"{artifacts.SHIFT}__") else dataset
            unlisted = [i for i in ids if i not in images.get(target, {}).get("files", {})]
            if unlisted:
                problems.append(f"{IMAGES_FILE} holds no digest of {len(unlisted)} {dataset} {condition} case(s), "
                                f"first {unlisted[0]}")
    return roles, problems


def account_for(bundle: Path, kind: str) -> Contents:
    """The role of every file of the bundle at ``bundle`` and what does not add up (each problem one line)."""
    names = bundle_files(bundle)
    try:
        if kind == AGGREGATES:
            # the axis errors and replicates are what the re-score reads (aggregates.json's CRS table is what it
            # derives again and compares); measures and subgroups are shown as the site wrote them
            roles = {AGGREGATES_FILE: INPUT, REPLICATES_FILE: INPUT, MEASURES_FILE: AGGREGATE, SUBGROUPS_FILE: AGGREGATE}
            problems = [f"missing: {name}" for name in (AGGREGATES_FILE, REPLICATES_FILE) if name not in names]
        else:
            roles, problems = _full_roles(bundle, names)
    except (OSError, ValueError) as error:  # a damaged or forged file: say so, do not crash the check
        return Contents({}, (f"unreadable bundle: {error}",))
    problems += [f"not part of a crs bundle: {name} (neither an input nor an output of the re-score)"
                 for name in names if name not in roles]
    return Contents({name: role for name, role in roles.items() if name in names}, tuple(problems))
