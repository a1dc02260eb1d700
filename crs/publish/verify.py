"""``crs verify BUNDLE``: is this bundle what was published, by whom, and does its score follow from its records?

Three checks, each reported: the manifest (every file present, unchanged, none added), the
signature (when the bundle is signed and a public key is given), and a re-score of the bundle's
records and predictions compared with its score tables under the reproducibility contract
(docs/reproducibility.md). The bundle is only read; the re-score goes to a temporary folder.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from crs.benchmark import Benchmark
from crs.evaluate.artifacts import RunFolder, RunFolderError
from crs.evaluate.compare import SCORE_TABLES, ColumnCheck, Comparison, compare_tables
from crs.publish.bundle import RUN_DIR
from crs.publish.manifest import MANIFEST_FILE, SIGNATURE_FILE, manifest_problems, read_manifest
from crs.publish.signing import signature_holds


@dataclass(frozen=True)
class Verification:
    """What :func:`verify_bundle` found; ``holds`` when nothing is wrong."""

    bundle: Path
    kind: str
    manifest_problems: tuple[str, ...]
    signature: str
    """``valid``, ``invalid``, ``unsigned``, ``not checked`` (signed, no key given) or ``missing`` (key given, unsigned)."""
    rescore: Comparison | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def holds(self) -> bool:
        verdict = self.signature.split(" (", 1)[0]  # "not checked (signed; give the publisher's public key)"
        return (not self.manifest_problems and verdict in ("valid", "unsigned", "not checked")
                and (self.rescore is None or self.rescore.holds))

    def lines(self) -> list[str]:
        """The report, one finding a line; the last line is the verdict."""
        out = [f"manifest: {'every file as published' if not self.manifest_problems else f'{len(self.manifest_problems)} problem(s)'}"]
        out += [f"  {problem}" for problem in self.manifest_problems]
        out.append(f"signature: {self.signature}")
        if self.rescore is not None:
            out.append(f"re-score: {self.rescore.verdict()}")
        out += list(self.notes)
        out.append(f"verify: {'ok' if self.holds else 'FAILED'} ({self.bundle})")
        return out


def _signature(bundle: Path, public_key: str | Path | None) -> str:
    signed = (bundle / SIGNATURE_FILE).is_file()
    if public_key is None:
        return "not checked (signed; give the publisher's public key)" if signed else "unsigned"
    if not signed:
        return "missing (a key was given, but the bundle is not signed)"
    holds = signature_holds((bundle / MANIFEST_FILE).read_bytes(), (bundle / SIGNATURE_FILE).read_bytes(), public_key)
    return "valid" if holds else "invalid"


def rescore(run: RunFolder) -> Comparison:
    """Score ``run``'s records again into a temporary folder and compare every score table it holds."""
    checks: list[ColumnCheck] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="crs-verify-") as scratch:
        Benchmark.from_run_folder(run.root).score(to=scratch)
        again = RunFolder(scratch)
        for table in SCORE_TABLES:
            try:
                published = run.read_score_table(table)
            except RunFolderError:
                continue  # an optional table the bundle does not hold
            try:
                fresh = again.read_score_table(table)
            except RunFolderError as error:
                problems.append(f"score_{table}: {error}")
                continue
            table_checks, table_problems = compare_tables(f"score_{table}", published, fresh)
            checks += table_checks
            problems += table_problems
    return Comparison(tuple(checks), tuple(problems))


def verify_bundle(bundle: str | Path, *, public_key: str | Path | None = None, score: bool = True) -> Verification:
    """Check the bundle at ``bundle``: manifest, signature (with ``public_key``) and, with ``score``, a re-score."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    problems = tuple(manifest_problems(bundle, manifest))
    signature = _signature(bundle, public_key)
    comparison = None
    notes: list[str] = []
    kind = str(manifest.get("kind", "?"))
    if score and not problems and (bundle / RUN_DIR).is_dir():
        comparison = rescore(RunFolder(bundle / RUN_DIR))
    elif score and problems:
        notes.append("re-score: skipped (the manifest does not hold)")
    elif kind == "aggregates":
        notes.append("re-score: not applicable (an aggregates bundle holds no records to score again)")
    return Verification(bundle, kind, problems, signature, comparison, tuple(notes))
