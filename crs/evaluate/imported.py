"""Encoders a spec names that are not in the registry but whose features were imported into the cache.

``crs import-features`` (or :func:`crs.cache.imports.import_features`) stores features computed
elsewhere under an encoder name of the user's choosing; stage 2 reads them as it reads extracted ones.
Stage 1 has nothing to extract for such an encoder and the pre-flight check has no weights to find:
both ask here which of the spec's encoders are imported, and what the cache lacks for them.

An encoder counts as imported when it is not a registry name and at least one store of a data set it
runs on holds an imported feature group for it; a name found in neither place stays unknown, so the
registry's "did you mean" error still names a typo (decision 0156), or, when the name is close to an
imported one, :func:`close_to_imported` names that one.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from crs.cache.store import CacheError, FeatureStore, child_group, store_path
from crs.encoders import available
from crs.extract.preflight import Finding, PreflightError, PreflightReport, preflight
from crs.spec import Spec, for_setting


@dataclass(frozen=True)
class ImportedEncoder:
    """One imported encoder of a spec: the stores holding its features, and one line per store that does not."""

    name: str
    held: tuple[str, ...]
    problems: tuple[str, ...]

    def note(self) -> str:
        """The one line stage 1 and the pre-flight check print for it."""
        return (f"{self.name}: imported features in the cache ({', '.join(self.held)}); nothing to extract, "
                "stage 2 reads them")


def _imported_problem(spec: Spec, store_name: str, encoder: str) -> str | None:
    """None when ``store_name``'s store holds a finished imported group of ``encoder`` for its current rows,
    else what is wrong, with the command that fixes it."""
    path = store_path(spec.cache, store_name)
    fix = (f"import them: crs import-features FILE --dataset {store_name} --encoder {encoder} "
           f"--spec {spec.source or 'SPEC'}")
    if not (path / "zarr.json").is_file():
        return f"encoder {encoder!r}: no cache store for data set {store_name!r} under {spec.cache}; {fix}"
    try:
        store = FeatureStore(path)
        if encoder not in store.encoder_names():
            return f"encoder {encoder!r}: no imported features for data set {store_name!r} in {path}; {fix}"
        current = child_group(store.root, f"encoders/{encoder}").attrs.get("current")
        if current is None:
            return f"encoder {encoder!r}: its features for data set {store_name!r} in {path} are unfinished; {fix}"
        group = store.encoder_group(encoder, cast(str, current))
        fields = cast(dict[str, Any], group.attrs.get("fields", {}))
        if fields.get("image_ids_sha256") != store.root.attrs.get("id_digest"):
            return (f"encoder {encoder!r}: its imported features for data set {store_name!r} were made for another "
                    f"image list than the cache's; {fix}")
        store.feature_array(encoder, "clean", cast(str, current))
    except (CacheError, OSError, KeyError) as error:
        return f"encoder {encoder!r}, data set {store_name!r}: {str(error).splitlines()[0]}"
    return None


def _holds_imported(spec: Spec, store_name: str, encoder: str) -> bool:
    """Whether ``store_name``'s store has an imported feature group of ``encoder`` (finished or not)."""
    path = store_path(spec.cache, store_name)
    if not (path / "zarr.json").is_file():
        return False
    try:
        store = FeatureStore(path)
        return any(cast(dict[str, Any], store.encoder_group(encoder, fingerprint).attrs.get("fields", {})).get("imported")
                   for fingerprint in store.fingerprints(encoder))
    except (CacheError, OSError, KeyError):
        return False


def imported_encoders(spec: Spec, encoders: Sequence[str] | None = None) -> dict[str, ImportedEncoder]:
    """The spec's (or ``encoders``') imported encoders by name (registry names never are), each with what its
    stores lack."""
    registered = set(available())
    found: dict[str, ImportedEncoder] = {}
    for entry in spec.encoders:
        if entry.name in registered or (encoders is not None and entry.name not in encoders):
            continue
        datasets = [d for d in spec.datasets if entry.datasets is None or d.name in entry.datasets]
        stores = [name for d in datasets for name in (d.name, *d.shift_target_names)]
        if not any(_holds_imported(spec, name, entry.name) for name in stores):
            continue  # neither registered nor imported: left to the registry's "unknown encoder" error
        problems = {name: _imported_problem(spec, name, entry.name) for name in stores}
        found[entry.name] = ImportedEncoder(
            entry.name, tuple(name for name, problem in problems.items() if problem is None),
            tuple(problem for problem in problems.values() if problem is not None))
    return found


def _imported_in_cache(spec: Spec) -> set[str]:
    """Every encoder name with an imported feature group in a store of the spec's data sets or shift targets."""
    names = set()
    for entry in spec.datasets:
        for store_name in (entry.name, *entry.shift_target_names):
            path = store_path(spec.cache, store_name)
            if not (path / "zarr.json").is_file():
                continue
            try:
                held = FeatureStore(path).encoder_names()
            except (CacheError, OSError):
                continue
            names |= {name for name in held if _holds_imported(spec, store_name, name)}
    return names


def close_to_imported(spec: Spec) -> dict[str, str]:
    """Unknown encoder names of the spec (neither registered nor imported) close to an imported one in the cache:
    name -> the one-line error naming it (a typo of an imported name gets no registry guess)."""
    registered = set(available())
    imported = imported_encoders(spec)
    unknown = [e.name for e in spec.encoders if e.name not in registered and e.name not in imported]
    if not unknown:
        return {}
    in_cache = sorted(_imported_in_cache(spec))
    found = {}
    for name in unknown:
        close = difflib.get_close_matches(name, in_cache, n=1, cutoff=0.6)
        if close:
            found[name] = (f"unknown encoder {name!r}: not in the registry nor imported into {spec.cache}; "
                           f"did you mean {close[0]!r} (imported features in the cache)?")
    return found


def to_extract(spec: Spec, encoders: Sequence[str] | None, imported: Mapping[str, ImportedEncoder]) -> list[str] | None:
    """``encoders`` (None: every one of the spec) less the imported ones, which stage 1 has nothing to do for."""
    if not imported:
        return None if encoders is None else list(encoders)
    return [name for name in (encoders or spec.encoder_names) if name not in imported]


def require_preflight(spec: Spec, encoders: Sequence[str] | None = None) -> PreflightReport:
    """The pre-flight check of ``spec`` with its imported encoders checked in the cache instead of by weights;
    raises :class:`PreflightError` holding every problem (a typo of an imported name among them)."""
    imported = imported_encoders(spec, encoders)
    typos = {name: line for name, line in close_to_imported(spec).items() if encoders is None or name in encoders}
    names = [name for name in to_extract(spec, encoders, imported) or spec.encoder_names if name not in typos]
    report = preflight(spec, names if imported or typos else None if encoders is None else list(encoders))
    report = dataclasses.replace(
        report, problems=tuple(Finding(line) for line in typos.values())
        + tuple(Finding(line) for found in imported.values() for line in found.problems) + report.problems,
        notes=tuple(found.note() for found in imported.values()) + report.notes)
    if not report.ok:
        error = PreflightError(report)
        first = report.problems[0]
        raise for_setting(error, first.setting) if first.setting else error
    return report
