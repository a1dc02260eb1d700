"""One pre-flight check of a spec before any encoder time: every problem at once, not one per attempt.

`crs check SPEC` prints it; `crs run` and `crs extract` run it first and stop when it finds a
problem. In one pass it checks: each data set (and shift target) loads from its folder with its
labels and every listed image present, and can be probed (splits and classes); a sample of each
data set's images decodes to 8 bit (:mod:`crs.data.pixels`), with the modes and bit depths found;
every encoder's weights are on this machine (:func:`crs.encoders.locate.locate_weights`, no model
is built); the cache and output folders accept files and the cache's disk has room for what the
plan writes; an existing store still describes the spec's images, every file (its stat, and the bytes of
those whose stat changed: :func:`crs.cache.images.image_problem`); and, where an extraction is still to
read them, no JPEG or PNG is cut short (:mod:`crs.data.file_ends`; decision 0118).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from crs.cache.images import image_problem, sample_rows, vouches_for
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.data import Dataset, load_entry
from crs.data.base import DataError
from crs.data.check import FILE_LOADERS
from crs.data.dicom import looks_like_dicom
from crs.data.file_ends import cut_short_files
from crs.data.pixels import describe, to_eight_bit
from crs.data.shift import shift_target_dataset
from crs.data.validate import validate_for_extraction
from crs.encoders import EncoderError, get_spec
from crs.encoders.factory import with_input_size
from crs.encoders.locate import locate_weights
from crs.extract.plan import free_bytes, plan_spec
from crs.spec import SETTING_ATTRIBUTE, Spec, for_setting


@dataclass(frozen=True)
class Finding:
    """One problem: its message (the library's one line) and the setting that fixes it, if any."""

    message: str
    setting: str = ""


@dataclass(frozen=True)
class PreflightReport:
    """Every problem found (empty: ready to run) and what was seen on the way (pixel formats, bytes)."""

    problems: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


class PreflightError(RuntimeError):
    """The pre-flight check found problems; ``report`` holds all of them."""

    def __init__(self, report: PreflightReport):
        self.report = report
        first = report.problems[0].message
        more = f" (+{len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        super().__init__(f"{first}{more}")


def _finding(error: BaseException) -> Finding:
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    return Finding(message, str(getattr(error, SETTING_ATTRIBUTE, "") or ""))


def sampled_pixels(dataset: Dataset) -> tuple[Counter[str], dict[str, str]]:
    """(mode and bit depth -> sampled images, relative path -> one line for each sampled image that does not
    decode or has no faithful 8-bit mapping)."""
    formats: Counter[str] = Counter()
    refused: dict[str, str] = {}
    for row in sample_rows(len(dataset)).tolist():
        path = Path(dataset.root) / str(dataset.paths[row])
        if looks_like_dicom(path):
            formats["DICOM"] += 1
            continue
        try:
            with Image.open(path) as image:
                formats[describe(image)] += 1
                image.draft("RGB", (64, 64))
                image.load()
                to_eight_bit(image, path)
        except DataError as error:
            refused[str(dataset.paths[row])] = str(error)
        except (OSError, SyntaxError, ValueError) as error:
            refused[str(dataset.paths[row])] = f"image unreadable or truncated: {path} ({error})"
    return formats, refused


def writable(folder: Path, what: str, setting: str) -> Finding | None:
    """None if ``folder`` accepts a file (or, not there yet, could be created), else a finding naming it.

    Creates nothing that stays: a folder that does not exist yet is judged by its nearest existing
    ancestor, which must be a folder accepting a file (the probe file is removed at once).
    """
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(existing))
        probe = existing / f".crs-preflight-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as error:
        return Finding(f"{what} folder {folder} is not writable ({error.strerror or error}); "
                       f"choose another {what} folder", setting)
    return None


def _bad_images(spec: Spec, loader: str) -> dict[str, object]:
    """Loader options as stage 1 passes them, except that skipped images are found by a stat, not a decode:
    with ``skip_bad`` the loaders decode every image to find unreadable ones, which stage 1 does anyway."""
    if not spec.extract.skip_bad:
        return {}
    return {"skip_bad": True, **({"verify": "exists"} if loader in FILE_LOADERS else {})}


def _datasets(spec: Spec, problems: list[Finding]) -> list[Dataset]:
    """Every data set and shift target that loads; a problem for each that does not.

    A shift target is loaded even when its source data set fails, so its own problems (a missing root,
    a bad CSV) are reported in the same run; only its mapping onto the source's labels waits for the source.
    """
    loaded = []
    for entry in spec.datasets:
        source: Dataset | None = None
        try:
            source = load_entry(entry, **_bad_images(spec, entry.loader))
            validate_for_extraction(source)
            loaded.append(source)
        except (DataError, CacheError, OSError, TypeError) as error:
            problems.append(Finding(f"data set {entry.name!r}: {_finding(error).message}"))
            source = None
        for target_entry in entry.shift_targets:
            try:
                own = load_entry(target_entry, **_bad_images(spec, target_entry.loader))
                if source is None:
                    continue  # its own files load; the label mapping needs the source (reported above)
                target = shift_target_dataset(own, source)
                validate_for_extraction(target)
                loaded.append(target)
            except (DataError, CacheError, OSError, TypeError) as error:
                problems.append(Finding(f"shift target {target_entry.name!r}: {_finding(error).message}"))
    return loaded


def preflight(spec: Spec, encoder_names: list[str] | None = None) -> PreflightReport:
    """Check ``spec`` (its encoders, or ``encoder_names``) before stage 1; every problem, in one pass.

    The data layer's warnings (a class absent from a split) are held back here: stage 1 says them.
    """
    data_log = logging.getLogger("crs.data")
    level = data_log.level
    data_log.setLevel(logging.ERROR)
    try:
        return _preflight(spec, encoder_names)
    finally:
        data_log.setLevel(level)


def _preflight(spec: Spec, encoder_names: list[str] | None) -> PreflightReport:
    problems: list[Finding] = []
    notes: list[str] = []
    for entry in spec.encoders:  # first: an unknown name or missing weights is a fault of the spec itself
        if encoder_names is not None and entry.name not in encoder_names:
            continue
        try:
            locate_weights(with_input_size(get_spec(entry.name), entry.input_size), entry.weights)
        except EncoderError as error:
            problems.append(_finding(error))
    datasets = _datasets(spec, problems)
    unreadable: dict[str, dict[str, str]] = {}  # under skip_bad: data set -> sampled images stage 1 will skip
    for dataset in datasets:
        formats, refused = sampled_pixels(dataset)
        if formats:
            notes.append(f"{dataset.name}: pixels of {sum(formats.values())} sampled image(s): "
                         + ", ".join(f"{fmt} {n}" for fmt, n in sorted(formats.items())))
        if refused and spec.extract.skip_bad:
            unreadable[dataset.name] = refused  # stage 1 skips and lists them: a note, not a problem
        elif refused:
            more = f" (+{len(refused) - 1} more among the sample)" if len(refused) > 1 else ""
            problems.append(Finding(f"data set {dataset.name!r}: {next(iter(refused.values()))}{more}"))
    for folder, what, setting in ((spec.cache, "cache", "cache"), (spec.output, "output", "output")):
        found = writable(Path(folder), what, setting)
        if found is not None:
            problems.append(found)
    try:
        plan = plan_spec(spec, encoder_names)
    except Exception:  # noqa: BLE001  the plan needs what is checked above; its failure is one of those problems
        plan = None
    if plan is not None:
        free = free_bytes(Path(spec.cache))
        on_disk = plan.disk_bytes_to_write
        notes.append(f"plan: {plan.passes - plan.cached_passes:,} forward passes to go, "
                     f"{plan.bytes_to_write:,} bytes of features to write ({on_disk:,} on disk, in whole blocks)"
                     + (f", {free:,} bytes free" if free is not None else ""))
        if free is not None and on_disk > free:
            problems.append(Finding(
                f"cache folder {spec.cache}: the plan writes {plan.bytes_to_write:,} bytes of features, "
                f"{on_disk:,} bytes on disk in whole blocks with their checksums and flags, but its disk has "
                f"{free:,} bytes free; free space or choose a cache folder on a larger disk", "cache"))
    for dataset in datasets:
        path = store_path(spec.cache, dataset.name)
        problem, recorded = None, False
        if (path / "zarr.json").is_file():
            try:
                store = FeatureStore(path)
                recorded = vouches_for(store, dataset)
                problem = image_problem(store, dataset)
            except (CacheError, OSError) as error:
                problem = f"cache store {path}: {_finding(error).message}"
        if problem is not None:
            problems.append(Finding(problem))
        to_go = plan is None or any(row.dataset == dataset.name and row.clean_passes + row.corrupted_passes
                                    > row.cached_passes for row in plan.rows)
        cut: list[tuple[str, str]] = []
        if not recorded or to_go:  # files not yet all decoded by an extraction: every one checked for a cut-short end
            cut = cut_short_files(dataset.root, [str(p) for p in dataset.paths])
            if cut and spec.extract.skip_bad:
                notes.append(f"{dataset.name}: {len(cut)} truncated image file(s) will be skipped and listed "
                             f"(skip_bad), first: {cut[0][0]}")
            elif cut:
                problems.append(Finding(_cut_short(dataset, cut)))
        named = {path for path, _ in cut}
        others = [path for path in unreadable.get(dataset.name, {}) if path not in named]
        if others:
            notes.append(f"{dataset.name}: {len(others)} unreadable sampled image file(s) will be skipped and listed "
                         f"(skip_bad), first: {others[0]}")
    return PreflightReport(tuple(problems), tuple(notes))


def _cut_short(dataset: Dataset, bad: list[tuple[str, str]]) -> str:
    """The problem line for the data set's truncated JPEG and PNG files ``bad`` (path, why) without ``skip_bad``."""
    _, why = bad[0]
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"data set {dataset.name!r}: {len(bad)} image file(s) cut short{more}, first: {why}; restore them, or set "
            "skip_bad = true under [extract] to skip and list bad images (`crs datasets check` decodes every image)")


def require_preflight(spec: Spec, encoder_names: list[str] | None = None) -> PreflightReport:
    """:func:`preflight`, raising :class:`PreflightError` (holding every problem) when it finds any."""
    report = preflight(spec, encoder_names)
    if not report.ok:
        error = PreflightError(report)
        first = report.problems[0]
        raise for_setting(error, first.setting) if first.setting else error
    return report
