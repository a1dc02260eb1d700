"""One pre-flight check of a spec before any encoder time: every problem at once, not one per attempt.

`crs check SPEC` prints it; `crs run` and `crs extract` run it first and stop when it finds a
problem. In one pass it checks: each data set (and shift target) loads from its folder with its
labels and every listed image present, and can be probed (splits and classes); a sample of each
data set's images decodes to 8 bit (:mod:`crs.data.pixels`), with the modes and bit depths found;
every encoder's weights are on this machine (:func:`crs.encoders.locate.locate_weights`, no model
is built); the cache and output folders accept files and the cache's disk has room for what the
plan writes; and an existing store still describes the spec's images (:func:`crs.cache.images.image_problem`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from crs.cache.images import image_problem, sample_rows
from crs.cache.store import CacheError, FeatureStore, store_path
from crs.data import Dataset, load_entry
from crs.data.base import DataError
from crs.data.check import FILE_LOADERS
from crs.data.dicom import looks_like_dicom
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


def sampled_pixels(dataset: Dataset) -> tuple[Counter[str], list[str]]:
    """(mode and bit depth -> sampled images, one line per sampled image with no faithful 8-bit mapping)."""
    formats: Counter[str] = Counter()
    refused = []
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
            refused.append(str(error))
        except (OSError, SyntaxError, ValueError) as error:
            refused.append(f"image unreadable or truncated: {path} ({error})")
    return formats, refused


def writable(folder: Path, what: str, setting: str) -> Finding | None:
    """None if ``folder`` (created if need be) accepts a file, else a finding naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".crs-preflight-{os.getpid()}"
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
    loaded = []
    for entry in spec.datasets:
        try:
            source = load_entry(entry, **_bad_images(spec, entry.loader))
            validate_for_extraction(source)
            loaded.append(source)
        except (DataError, CacheError, OSError, TypeError) as error:
            problems.append(Finding(f"data set {entry.name!r}: {_finding(error).message}"))
            continue
        for target_entry in entry.shift_targets:
            try:
                target = shift_target_dataset(load_entry(target_entry, **_bad_images(spec, target_entry.loader)), source)
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
    for dataset in datasets:
        formats, refused = sampled_pixels(dataset)
        if formats:
            notes.append(f"{dataset.name}: pixels of {sum(formats.values())} sampled image(s): "
                         + ", ".join(f"{fmt} {n}" for fmt, n in sorted(formats.items())))
        if refused:
            more = f" (+{len(refused) - 1} more among the sample)" if len(refused) > 1 else ""
            problems.append(Finding(f"data set {dataset.name!r}: {refused[0]}{more}"))
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
        notes.append(f"plan: {plan.passes - plan.cached_passes:,} forward passes to go, "
                     f"{plan.bytes_to_write:,} bytes to write" + (f", {free:,} bytes free" if free is not None else ""))
        if free is not None and plan.bytes_to_write > free:
            problems.append(Finding(
                f"cache folder {spec.cache}: the plan writes {plan.bytes_to_write:,} bytes of features (more on disk, "
                f"in whole blocks) but its disk has {free:,} bytes free; free space or choose a cache folder on a "
                "larger disk", "cache"))
    for dataset in datasets:
        path = store_path(spec.cache, dataset.name)
        if not (path / "zarr.json").is_file():
            continue
        try:
            problem = image_problem(FeatureStore(path), dataset)
        except (CacheError, OSError) as error:
            problem = f"cache store {path}: {_finding(error).message}"
        if problem is not None:
            problems.append(Finding(problem))
    return PreflightReport(tuple(problems), tuple(notes))


def require_preflight(spec: Spec, encoder_names: list[str] | None = None) -> PreflightReport:
    """:func:`preflight`, raising :class:`PreflightError` (holding every problem) when it finds any."""
    report = preflight(spec, encoder_names)
    if not report.ok:
        error = PreflightError(report)
        first = report.problems[0]
        raise for_setting(error, first.setting) if first.setting else error
    return report
