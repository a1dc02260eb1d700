"""``crs verify BUNDLE``: is this bundle what was published, by whom, and does its score follow from its records?

Four checks, each reported: the manifest (every file present, unchanged, none added), the bundle's
contents (every file an input the re-score reads, an output it re-derives, or a file ``crs run
--extend`` checks; :mod:`crs.publish.contents`), the signature (when the bundle is signed and a public
key is given), and a re-score (an aggregates bundle: its CRS table derived again from its axis errors and
replicates, :func:`crs.publish.sites.rescore_site`) of the bundle's records and predictions compared with every
output it writes under the reproducibility contract (docs/reproducibility.md): each score table, the seed
aggregates and the summary to the contract's tolerance, ``score.txt`` byte for byte (or every difference one unit
in a printed number's last digit: :func:`last_digit_flips`); an output the
re-score writes that the bundle lacks, or a score file it does not write, fails. What the checks add
up to is :func:`crs.publish.verdict.judge`'s, the one notion of "verified" shared with ``crs merge``
and the leaderboard site. The bundle is only read; the re-score goes to a temporary folder.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crs.benchmark import Benchmark
from crs.evaluate import records as records_io
from crs.evaluate.artifacts import SCORE_SUMMARY_FILE, SCORE_TEXT_FILE, RunFolder, RunFolderError
from crs.evaluate.compare import ABSOLUTE_TOLERANCE, ColumnCheck, Comparison, compare_tables
from crs.publish.aggregates import AGGREGATES
from crs.publish.bundle import RUN_DIR
from crs.publish.contents import Contents, account_for
from crs.publish.manifest import MANIFEST_FILE, SIGNATURE_FILE, manifest_problems, read_manifest
from crs.publish.signing import signature_holds
from crs.publish.sites import rescore_site
from crs.publish.verdict import FAILED, Verdict, judge


@dataclass(frozen=True)
class Verification:
    """What :func:`verify_bundle` found; ``holds`` when no check failed, :attr:`verdict` what it adds up to."""

    bundle: Path
    kind: str
    manifest_problems: tuple[str, ...]
    signature: str
    """``valid``, ``invalid``, ``unsigned``, ``not checked`` (signed, no key given) or ``missing`` (key given, unsigned)."""
    rescore: Comparison | None = None
    notes: tuple[str, ...] = field(default=())
    contents: Contents | None = None
    key: str | None = None
    """The file name of the public key the signature was checked with (None: no key named)."""

    @property
    def contents_problems(self) -> tuple[str, ...]:
        return () if self.contents is None else self.contents.problems

    @property
    def verdict(self) -> Verdict:
        return judge(self)

    @property
    def holds(self) -> bool:
        """No check failed (the bundle may still be unverified: unsigned, signature not checked, not re-scored)."""
        return self.verdict.state != FAILED

    def lines(self) -> list[str]:
        """The report, one finding a line; the last line is the verdict."""
        out = [f"manifest: {'every file as published' if not self.manifest_problems else f'{len(self.manifest_problems)} problem(s)'}"]
        out += [f"  {problem}" for problem in self.manifest_problems]
        if self.contents is not None:
            found = self.contents.problems
            out.append(f"files: {self.contents.summary() or 'none accounted for'}" + (f"; {len(found)} problem(s)" if found else ""))
            out += [f"  {problem}" for problem in found]
        out.append(f"signature: {self.signature}")
        if self.rescore is not None:
            out.append(f"re-score: {self.rescore.verdict()}")
            out += [f"  {RUN_DIR}/score/{SCORE_TEXT_FILE if c.table == 'score_text' else c.table}: {c.example} (a value on "
                    "a rounding boundary, printed the other way by this CPU's last bit; the tables agree)"
                    for c in self.rescore.checks if c.column == "text"]
        out += list(self.notes)
        verdict = self.verdict
        if verdict.verified:
            out.append(f"verify: verified ({self.bundle})")
        elif verdict.state == FAILED:
            out.append(f"verify: FAILED ({self.bundle})")
        else:
            out.append(f"verify: not verified, nothing failed: {verdict.label} ({self.bundle})")
        return out


def _signature(bundle: Path, public_key: str | Path | None) -> str:
    signed = (bundle / SIGNATURE_FILE).is_file()
    if public_key is None:
        return "not checked (signed; give the publisher's public key)" if signed else "unsigned"
    if not signed:
        return "missing (a key was given, but the bundle is not signed)"
    holds = signature_holds((bundle / MANIFEST_FILE).read_bytes(), (bundle / SIGNATURE_FILE).read_bytes(), public_key)
    return "valid" if holds else "invalid"


def _json_differences(published: Any, fresh: Any, where: str = "") -> list[str]:
    """Dotted keys where two JSON values differ: numbers beyond the contract's tolerance, anything else at all."""
    numbers = (int, float)
    if isinstance(published, dict) and isinstance(fresh, dict):
        return [d for key in sorted(set(published) | set(fresh), key=str)
                for d in _json_differences(published.get(key), fresh.get(key), f"{where}.{key}" if where else str(key))]
    if isinstance(published, list) and isinstance(fresh, list) and len(published) == len(fresh):
        return [d for i, (a, b) in enumerate(zip(published, fresh, strict=True)) for d in _json_differences(a, b, f"{where}[{i}]")]
    if isinstance(published, numbers) and isinstance(fresh, numbers) and not isinstance(published, bool):
        a, b = float(published), float(fresh)
        same = (np.isnan(a) and np.isnan(b)) or abs(a - b) <= ABSOLUTE_TOLERANCE * max(1.0, abs(a))
        return [] if same else [where]
    return [] if published == fresh else [where]


def _compare_file(name: str, published: Path, fresh: Path) -> tuple[list[ColumnCheck], list[str]]:
    """One score output of the bundle against the re-score's: tables to the contract, summary as JSON, text byte for byte."""
    import pandas as pd

    label = f"{RUN_DIR}/score/{name}"
    if name.endswith(".parquet"):
        return compare_tables(f"score_{name.removesuffix('.parquet')}", pd.read_parquet(published), pd.read_parquet(fresh))
    if name == SCORE_SUMMARY_FILE:
        differ = _json_differences(json.loads(published.read_text()), json.loads(fresh.read_text()))
        if differ:
            return [], [f"{label}: {', '.join(differ[:3])} differ from the re-score's"]
        return [ColumnCheck("score_summary", "json", 0.0, 0, 1, 0.0, "")], []
    table = "score_text" if name == SCORE_TEXT_FILE else name
    if published.read_bytes() == fresh.read_bytes():
        return [ColumnCheck(table, "bytes", 0.0, 0, 1, 0.0, "")], []
    mine, theirs = published.read_text(errors="replace"), fresh.read_text(errors="replace")
    flipped = last_digit_flips(mine, theirs)
    if flipped is not None:  # the re-score's CPU rounded a value on a printed boundary the other way (decision 0152)
        return [ColumnCheck(table, "text", 0.0, 0, 1, 0.0,
                            f"{flipped} printed number(s) one unit apart in the last digit")], []
    lines, again = mine.splitlines(), theirs.splitlines()
    line = next((i for i, (a, b) in enumerate(zip(lines, again, strict=False)) if a != b), min(len(lines), len(again)))
    return [], [f"{label}: not byte-identical to the re-score's (line {line + 1})"]


_PRINTED_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def last_digit_flips(published: str, fresh: str) -> int | None:
    """How many printed numbers of two renderings differ, when every difference is one unit in the last printed
    digit of a number printed to the same places (a value that lay on a rounding boundary, rounded the other way
    by another CPU's last bit; the tables behind the text are compared to the contract apart); None when anything
    else differs: a word, a number's places, a larger change. Runs of spaces are not compared, since a flip
    from 9.99 to 10.00 moves a column's padding."""
    if _PRINTED_NUMBER.split(published) != _PRINTED_NUMBER.split(fresh):
        if [part.split() for part in _PRINTED_NUMBER.split(published)] != [
                part.split() for part in _PRINTED_NUMBER.split(fresh)]:
            return None
    flips = 0
    for a, b in zip(_PRINTED_NUMBER.findall(published), _PRINTED_NUMBER.findall(fresh), strict=True):
        if a == b:
            continue
        places = [len(x.partition(".")[2]) for x in (a, b)]
        if places[0] != places[1] or abs(int(a.replace(".", "")) - int(b.replace(".", ""))) > 1:
            return None
        flips += 1
    return flips


def rescore(run: RunFolder) -> Comparison:
    """Score ``run``'s records again into a temporary folder and compare every output the score writes.

    Every score file the re-score writes must be in ``run`` and agree with it; every score file of ``run``
    must be one the re-score writes. The seed aggregates are re-derived from the records and compared too."""
    checks: list[ColumnCheck] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="crs-verify-") as scratch:
        Benchmark.from_run_folder(run.root).score(to=scratch)
        again = RunFolder(scratch)
        published = {p.name for p in run.score_dir.iterdir() if p.is_file()} if run.score_dir.is_dir() else set()
        fresh = {p.name for p in again.score_dir.iterdir() if p.is_file()}
        problems += [f"missing output: {RUN_DIR}/score/{name} (the re-score writes it)" for name in sorted(fresh - published)]
        problems += [f"not an output of the re-score: {RUN_DIR}/score/{name}" for name in sorted(published - fresh)]
        for name in sorted(fresh & published):
            try:
                found, wrong = _compare_file(name, run.score_dir / name, again.score_dir / name)
            except (OSError, ValueError) as error:
                found, wrong = [], [f"{RUN_DIR}/score/{name}: unreadable ({error})"]
            checks += found
            problems += wrong
    try:
        table_checks, table_problems = compare_tables("records_seed_aggregated", run.read_aggregate(),
                                                      records_io.seed_aggregate(run.read_records()))
    except RunFolderError as error:
        table_checks, table_problems = [], [f"missing output: {error}"]
    return Comparison(tuple(checks + table_checks), tuple(problems + table_problems))


def verify_bundle(bundle: str | Path, *, public_key: str | Path | None = None, score: bool = True) -> Verification:
    """Check the bundle at ``bundle``: manifest, contents, signature (with ``public_key``) and, with ``score``, a re-score."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    problems = tuple(manifest_problems(bundle, manifest))
    signature = _signature(bundle, public_key)
    kind = str(manifest.get("kind", "?"))
    contents = account_for(bundle, kind)
    comparison = None
    notes: list[str] = []
    if score and not problems and not contents.problems:
        try:
            comparison = rescore_site(bundle) if kind == AGGREGATES else rescore(RunFolder(bundle / RUN_DIR))
        except Exception as error:  # noqa: BLE001 - a bundle is untrusted input: any failure to score it is a finding
            comparison = Comparison((), (f"the bundle could not be scored ({type(error).__name__}: {error})",))
        if kind == AGGREGATES:
            notes.append("re-score: the site's CRS and interval derived again from its axis errors and replicates "
                         "(no records: the axis errors themselves are the site's, vouched for by its signature)")
    elif score:
        notes.append("re-score: skipped (the manifest or the files do not hold)")
    key = None if public_key is None else Path(public_key).name
    return Verification(bundle, kind, problems, signature, comparison, tuple(notes), contents, key)
