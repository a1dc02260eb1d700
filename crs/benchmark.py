"""``Benchmark``: the whole job for one spec, as one object the CLI and notebooks share.

Each stage reads what the previous one wrote under the spec's cache and output folders, so a stage
can be re-run alone: ``Benchmark(spec).probe()`` on a copied cache folder needs no images and no
encoder weights, and ``Benchmark.from_run_folder(folder).score()`` needs only the run folder (the
spec is read back from the run records).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from crs.cache.mirror import MirrorSync
from crs.cache.verify import Problem, RepairAction, repair, verify_cache
from crs.evaluate.artifacts import RunFolder, RunFolderError
from crs.scoring.formula import ScoreInputError
from crs.scoring.result import ScoreResult, read_score, score_records
from crs.scoring.settings import ScoreSettings
from crs.spec import Spec, SpecError, for_setting, load_spec, spec_from_dict, url_scheme

if TYPE_CHECKING:  # the stages' modules are imported when a stage runs: extraction and probing load
    # torch, torchvision and the encoder libraries (seconds), which scoring and reporting never need
    from crs.evaluate.compare import Comparison
    from crs.evaluate.stage import ProbeOutcome
    from crs.extract.plan import ExtractPlan
    from crs.extract.preflight import PreflightReport
    from crs.extract.runner import ExtractStats

__all__ = ["DEMO_SPEC", "Benchmark", "CacheRepair", "RunOutcome", "reproduce"]

DEMO_SPEC = Path(__file__).resolve().parent / "specs" / "quickstart.toml"
"""The packaged quickstart spec of ``crs demo`` (examples/quickstart.toml links to it)."""


@dataclass(frozen=True)
class RunOutcome:
    """What :meth:`Benchmark.run` did: each stage's result and the report's path."""

    extract: ExtractStats
    probe: ProbeOutcome
    score: ScoreResult
    report: Path
    seconds: float


@dataclass(frozen=True)
class CacheRepair:
    """What :meth:`Benchmark.repair_cache` did: one action per problem, then the re-extraction."""

    actions: tuple[RepairAction, ...]
    extract: ExtractStats


class Benchmark:
    """One benchmark spec and its run folder: extract, probe, score and report.

    Args:
        spec: a :class:`crs.spec.Spec`, or the path of a TOML spec file.
        cache: cache root that overrides the spec's (features are read and written there).
        output: output folder that overrides the spec's (run records, score, report).
        skip_bad: skip missing or unreadable images and list them, instead of stopping.

    Example (runs as is on the built-in synthetic benchmark; no downloads)::

        >>> from crs import Benchmark
        >>> bench = Benchmark("examples/quickstart.toml", output="crs-out/notebook")  # doctest: +SKIP
        >>> outcome = bench.run(progress=False)                                        # doctest: +SKIP
        >>> outcome.score.crs[["crs", "rank"]]                                          # doctest: +SKIP
        >>> # later, in another session, without the TOML file:
        >>> Benchmark.from_run_folder("crs-out/notebook").score().bootstrap.leading_tier  # doctest: +SKIP

    Every method returns a typed result; none prints. Errors are one-line exceptions that name the
    input and the fix (``crs.spec.SpecError``, ``FileNotFoundError``, ``ValueError`` ...).
    """

    def __init__(
        self,
        spec: Spec | str | Path,
        *,
        cache: str | Path | None = None,
        output: str | Path | None = None,
        skip_bad: bool = False,
    ) -> None:
        loaded = spec if isinstance(spec, Spec) else load_spec(spec)
        changes: dict[str, object] = {}
        if cache is not None:  # a URL stays a string (``Path`` would make ``s3:/bucket``); the spec mirrors it
            changes["cache"] = cache if url_scheme(cache) else Path(cache)
            changes["cache_url"] = None
        if output is not None:
            changes["output"] = Path(output)
        if skip_bad and not loaded.extract.skip_bad:
            changes["extract"] = dataclasses.replace(loaded.extract, skip_bad=True)
        self.spec: Spec = dataclasses.replace(loaded, **changes) if changes else loaded  # type: ignore[arg-type]
        self.mirror = MirrorSync(self.spec)
        """A URL cache's pull (before the first stage reads the cache) and push (after extraction)."""

    @classmethod
    def from_run_folder(cls, folder: str | Path, *, cache: str | Path | None = None) -> Benchmark:
        """The benchmark that wrote ``folder``, rebuilt from the spec embedded in its run records.

        Its output is ``folder`` itself, wherever the folder now lies, so a run folder copied to a
        laptop scores and reports there; ``cache`` overrides the recorded cache root (only
        :meth:`extract` and :meth:`probe` read it).
        """
        run = RunFolder(folder)
        if not run.records_path.exists():
            raise RunFolderError(f"no run records at {run.records_path}; point at a folder `crs probe` wrote")
        recorded = run.provenance().get("spec")
        if not isinstance(recorded, Mapping):
            raise SpecError(
                f"the run records at {run.records_path} carry no spec; give the TOML: Benchmark(SPEC, output={folder!s})"
            )
        return cls(spec_from_dict(recorded), cache=cache, output=folder)

    @classmethod
    def demo(cls, *, cache: str | Path | None = None, output: str | Path | None = None) -> Benchmark:
        """The built-in synthetic benchmark of ``crs demo`` (four encoders, three tasks, no downloads).

        Its relative folders (``cache``, ``crs-out/quickstart``) resolve against the working folder: the
        spec ships inside the package, whose folder is no place for a cache.
        """
        return cls(load_spec(DEMO_SPEC, base=Path.cwd()), cache=cache, output=output)

    def __repr__(self) -> str:
        return f"Benchmark({self.spec.name!r}, cache={str(self.spec.cache)!r}, output={str(self.spec.output)!r})"

    @property
    def folder(self) -> RunFolder:
        """The run folder (records, predictions, audit, score tables) under the spec's output."""
        return RunFolder(self.spec.output)

    # --- stages ---------------------------------------------------------------------------------
    def extract(
        self,
        encoders: list[str] | None = None,
        *,
        progress: bool = True,
        shard: tuple[int, int] | None = None,
        wait: bool = False,
        announce: Callable[[str], None] | None = None,
        allow_overlap: bool = False,
    ) -> ExtractStats:
        """Stage 1: cache clean and corrupted features of every encoder (skips what is cached).

        A shift target's images that are also in its source are dropped from it and listed in the
        run's audit (``allow_overlap=True`` keeps them and marks the run; :mod:`crs.data.overlap`).

                ``shard=(i, n)`` fills the i-th of n stretches of equal forward passes; ``wait`` waits for another writer of
        the same (store, encoder, shard) instead of failing. ``announce`` receives one line per
        data set before its work starts: its forward passes, how many are already cached, how many to go.
        """
        from crs.evaluate.imported import imported_encoders, to_extract
        from crs.extract.stage import extract_spec

        self.mirror.pull()  # a URL cache: resume from the bucket's finished chunks; each data set pushed when done
        imported = imported_encoders(self.spec, encoders)  # features imported into the cache: nothing to extract
        if announce is not None:
            for found in imported.values():
                announce(found.note())
        return extract_spec(self.spec, to_extract(self.spec, encoders, imported), progress=progress, shard=shard,
                            wait=wait, announce=announce, allow_overlap=allow_overlap,
                            on_dataset_done=self.mirror.push if self.spec.cache_url else None)

    def plan(self, encoders: list[str] | None = None, corruption_rows: int | None = None) -> ExtractPlan:
        """What :meth:`extract` would do: forward passes, cached part, bytes, disk and time per data set x encoder.

        ``corruption_rows`` plans a what-if: the corrupted variants of a patient-level subsample of
        about that many test images, and the forward passes it would save.
        """
        from crs.evaluate.imported import imported_encoders, to_extract
        from crs.extract.plan import plan_spec

        self.mirror.pull()
        return plan_spec(self.spec, to_extract(self.spec, encoders, imported_encoders(self.spec, encoders)),
                         corruption_rows)

    def probe(
        self, *, jobs: int | str | None = None, cluster: str | None = None, progress: bool = True, full: bool = False
    ) -> ProbeOutcome:
        """Stage 2: fit probes on the cache and write run records (needs only the cache).

        ``jobs`` overrides the spec's worker count; ``cluster`` sends units to Dask
        (``tcp://host:port`` or ``local:N``); ``full`` refits units whose inputs did not change.
        """
        from crs.evaluate.stage import probe_spec

        self.mirror.pull_for_reading()  # a URL cache: metadata now, each feature chunk on its first read
        outcome = probe_spec(self.spec, jobs=jobs, cluster=cluster, progress=progress, full=full)
        self._say_read_through()
        return outcome

    def _say_read_through(self) -> None:
        line = self.mirror.read_through_line()
        if line is not None and self.mirror.announce is not None:
            self.mirror.announce(line)

    def verify_cache(self, *, check_data: bool = True) -> dict[str, list[Problem]]:
        """Check every store under the spec's cache: store path -> problems (empty when sound).

        ``check_data=False`` checks shapes, dtypes and flags without reading chunk data.
        """
        return verify_cache(self.spec.cache, check_data=check_data)

    def verify_images(self, *, workers: int = 8) -> dict[str, Any]:
        """Re-hash every image of the spec's data sets against what their stores recorded.

        Data set -> list of changed images (empty: same files), or a line saying why nothing was compared.
        """
        from crs.extract.stage import verify_images

        return dict(verify_images(self.spec, workers=workers))

    def check(self, encoders: list[str] | None = None) -> PreflightReport:
        """The pre-flight check: every problem stage 1 would meet, found in one pass before any encoder runs.

        Raises :class:`~crs.extract.preflight.PreflightError` holding all of them; returns the report
        (with what it saw: pixel formats, bytes to write) when there is none.
        """
        from crs.evaluate.imported import require_preflight

        self.mirror.pull()  # a URL cache: the content check reads the image records the bucket holds
        return require_preflight(self.spec, encoders)

    def kept(self, stage: str) -> str:
        """One line: what a ``stage`` (extract | probe | score | report) stopped part-way left for the next run."""
        from crs.evaluate.kept import kept_by_probing
        from crs.extract.kept import kept_by_extraction

        if stage == "extract":
            return kept_by_extraction(self.plan(), self.spec.cache)
        if stage == "probe":
            return kept_by_probing(self.folder)
        return "kept the feature cache and the run records; only this step is redone"

    def repair_cache(
        self, problems: Mapping[str, Sequence[Problem]], *, progress: bool = True
    ) -> CacheRepair:
        """Mark what :meth:`verify_cache` found bad as not written, then re-extract only that.

        Groups this spec does not produce are not re-extracted; check again to see what remains.
        """
        actions = tuple(action for found in problems.values() for action in repair(list(found)))
        return CacheRepair(actions, self.extract(progress=progress))

    def records(self) -> pd.DataFrame:
        """The run records of the spec's encoders (a spec may drop one; the run folder keeps it)."""
        return self.folder.read_records(self.spec.encoder_names)

    def ranking_limits(self) -> list[str]:
        """What this spec cannot rank, one line each (empty for two or more encoders and tasks)."""
        encoders, tasks = len(self.spec.encoders), len(self.spec.datasets)
        limits = []
        if encoders == 1:
            limits.append(
                f"1 encoder ({self.spec.encoders[0].name}): nothing is ranked. The CRS is relative: its reference "
                "is this encoder (every axis scores 0.5), dominance has no other encoder, and tiers and rank "
                "reversals need two; add encoders to compare them")
        if tasks == 1:
            limits.append(
                f"1 task ({self.spec.datasets[0].name}): encoders are ranked on this task only; nothing says whether "
                "the ranking carries to other data sets (each task counts once in the CRS); add data sets to see it")
        return limits

    def score(
        self, records: pd.DataFrame | None = None, *, to: str | Path | None = None, overwrite: bool = False
    ) -> ScoreResult:
        """Axes, CRS, bootstrap tiers, reversals and sensitivity; stored under ``<output>/score``.

        When the spec lets some encoders run on some data sets only, the result is the overall
        leaderboard (encoders on every data set) with one leaderboard per task beside it
        (``ScoreResult.leaderboards``, docs/decisions/0038).

        A run folder's stored score is its published result: a score with other ``[score]``
        settings (weights, reference, ...) is refused there unless ``overwrite=True``; ``to`` stores
        it under ``<to>/score`` instead and leaves the run folder untouched (docs/decisions/0052).
        """
        records = self.records() if records is None else records
        missing = sorted(set(self.spec.encoder_names) - set(records["encoder"]))
        if missing:
            raise ValueError(f"encoders {missing} have no run records; run `crs probe` after adding them")
        settings = ScoreSettings.from_config(self.spec.score)
        target = RunFolder(to) if to is not None else self.folder
        if not overwrite:
            self._refuse_other_settings(target, settings)
        coverage = None if self.spec.complete_coverage else self.spec.coverage
        result = score_records(records, settings, run_folder=self.folder, coverage=coverage)
        target.write_score(result.tables(), result.summary(), result.format())
        if self.spec.score.zero_shot:  # its own leaderboard beside the CRS, never inside it
            from crs.scoring.zero_shot import score_zero_shot, write_zero_shot_score

            folder = self.folder

            def probe_predictions(encoder: str, task: str):
                # only the clean arrays are read (the crossover), not every condition of the file
                return folder.read_predictions_on_demand(encoder, task) if folder.has_predictions(encoder, task) else None

            write_zero_shot_score(target.root, score_zero_shot(self.spec.output, settings, records, probe_predictions,
                                                               coverage=coverage))
        return result

    @staticmethod
    def _refuse_other_settings(folder: RunFolder, settings: ScoreSettings, remedy: str = "") -> None:
        """Raise when ``folder`` stores a score made with other settings than ``settings``."""
        if not folder.has_score():
            return
        try:
            stored = folder.read_score_summary().get("settings") or {}
        except (OSError, ValueError):
            return  # an unreadable summary is rewritten, as stored_score does
        wanted = json.loads(json.dumps(settings.as_dict(), default=str))
        changed = sorted(key for key in wanted if key in stored and stored[key] != wanted[key])
        if changed:
            raise for_setting(ValueError(
                f"{folder.score_dir} holds a score made with other [score] settings ({', '.join(changed)}); "
                + (remedy or "it is left as it is: store this score elsewhere (to=FOLDER) or replace it (overwrite=True)")
            ), "overwrite")

    def stored_score(self, records: pd.DataFrame | None = None) -> tuple[ScoreResult, str]:
        """The score stored under ``<output>/score`` and where it came from; recomputed (and stored) only
        when it is missing, older than the run records, unreadable, or for other encoders than the spec's.
        A stored score made with other ``[score]`` settings than the spec's is refused, never shown as
        the spec's: score again first (:meth:`score`)."""
        folder = self.folder
        self._refuse_other_settings(folder, ScoreSettings.from_config(self.spec.score), remedy=(
            "it is not what the spec asks for: score again first (overwrite=True replaces it, "
            "to=FOLDER stores it elsewhere)"))
        reason = ""
        if not folder.has_score():
            reason = "no stored score"
        elif folder.records_path.exists() and folder.score_summary_path.stat().st_mtime < folder.records_path.stat().st_mtime:
            reason = "the stored score is older than the run records"
        else:
            try:
                stored = read_score(folder)
            except (ScoreInputError, RunFolderError, KeyError, ValueError) as error:
                reason = f"the stored score cannot be read ({error})"
            else:
                ranked = set(stored.crs.index.astype(str))
                if stored.placement is not None:  # specialists are ranked in their tasks' leaderboards only
                    ranked |= set(stored.placement.index.astype(str))
                boards = {task: sorted(board.crs.index.astype(str)) for task, board in stored.leaderboards.items()}
                declared = {} if self.spec.complete_coverage else {
                    task: sorted(encoders) for task, encoders in self.spec.coverage.items()}
                if sorted(ranked) == sorted(self.spec.encoder_names) and boards == declared:
                    return stored, f"stored score read from {folder.score_dir}"
                reason = "the stored score covers other encoders or tasks than the spec"
        return self.score(records), f"score recomputed: {reason}"

    def report(self, score: ScoreResult | None = None, *, to: str | Path | None = None,
               overwrite: bool = False) -> Path:
        """Write report.html, report.md and figures; return the HTML path.

        Without ``score`` it reads the stored one (:meth:`stored_score`), recomputing only when needed.
        ``to`` writes the report there instead of the run folder; a ``score`` with other settings than
        the run folder's stored one is refused there unless ``overwrite=True`` (as :meth:`score`).
        """
        from crs.report import write_report

        self.mirror.pull_for_reading()  # the report reads stores' provenance and shifts from the cache
        records = self.records()
        if score is None:
            score, _ = self.stored_score(records)
        elif to is None and not overwrite:
            self._refuse_other_settings(self.folder, score.settings)
        out = Path(to) if to is not None else self.spec.output
        return write_report(score, records, out, title=f"crs report: {self.spec.name}", spec=self.spec,
                            predictions_dir=self.folder.predictions_dir)

    def run(self, *, jobs: int | str | None = None, cluster: str | None = None, progress: bool = True) -> RunOutcome:
        """Extract, probe, score and report."""
        started = time.perf_counter()
        extracted = self.extract(progress=progress)
        probed = self.probe(jobs=jobs, cluster=cluster, progress=progress)
        scored = self.score()
        path = self.report(scored)
        return RunOutcome(extracted, probed, scored, path, time.perf_counter() - started)


def reproduce(
    published: str | Path, *, cache: str | Path | None = None, workdir: str | Path | None = None,
    jobs: int | str | None = None, progress: bool = True,
) -> Comparison:
    """Re-run stage 2 (and the score, when the published folder has one) of the run folder
    ``published`` from its embedded spec into ``workdir`` (default: a temporary folder), reading
    features from ``cache`` (default: the cache the run recorded), and compare every table."""
    import tempfile

    from crs.evaluate.compare import compare_run_folders

    source = Benchmark.from_run_folder(published, cache=cache)
    with tempfile.TemporaryDirectory(prefix="crs-reproduce-") as scratch:
        target = Path(workdir) if workdir is not None else Path(scratch) / "rerun"
        rerun = Benchmark(source.spec, output=target)
        rerun.probe(jobs=jobs, progress=progress, full=True)
        has_score = RunFolder(published).has_score()
        if has_score:
            rerun.score()
        return compare_run_folders(RunFolder(published), RunFolder(target), score=has_score)
