"""Label maps from a source task to a target cohort, as data files (``crs/data/label_maps/*.toml``).

Cohorts name and cut their classes their own way: PAD-UFES-20 has six diagnoses where ISIC 2019 has
eight, ChestX-ray14 says ``Effusion`` where CheXpert says ``Pleural Effusion``. A label map says, for
each target class, which source class it is; it names the source classes that have no counterpart
(never scored on the target) and the target classes that have none (their rows are left out and
counted). A map is applied when the target is loaded (loader option ``label_map``: a shipped name or
a path to a TOML file), so the loaded target already speaks the source's label space.

The shift is scored on the mapped classes only: a source class with no counterpart has no positive
on the target (single-label) or is NaN there (multilabel), and the AUROC leaves such a class out
(:mod:`crs.axes.discrimination`). :attr:`MappedLabels.scored` names the classes that can be scored
(positives and negatives on the target); a mapping leaving fewer than two is refused.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from crs.data.base import DataError, Dataset, RowAccounting, Task

MAP_FOLDER = "label_maps"
MIN_SCORED_CLASSES = 2


@dataclass(frozen=True)
class LabelMap:
    """``classes``: target class -> source class; ``no_counterpart``: source classes the target lacks;
    ``dropped``: target classes with no source class (their rows are left out)."""

    name: str
    source: tuple[str, ...]
    kind: str
    classes: Mapping[str, str]
    no_counterpart: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    target_loader: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        where = f"label map {self.name!r}"
        unknown = sorted(set(self.classes.values()) - set(self.source))
        if unknown:
            raise DataError(f"{where}: maps onto {unknown}, which are not source classes {list(self.source)}; fix [classes]")
        named = set(self.classes.values()) | set(self.no_counterpart)
        unnamed = [c for c in self.source if c not in named]
        if unnamed:
            raise DataError(f"{where}: source classes {unnamed} are neither mapped nor listed in no_counterpart; name them")
        both = sorted(set(self.classes.values()) & set(self.no_counterpart))
        if both:
            raise DataError(f"{where}: {both} are both mapped and in no_counterpart; keep one")
        if set(self.classes) & set(self.dropped):
            raise DataError(f"{where}: {sorted(set(self.classes) & set(self.dropped))} are both mapped and dropped; keep one")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": list(self.source), "kind": self.kind, "classes": dict(self.classes),
                "no_counterpart": list(self.no_counterpart), "dropped": list(self.dropped),
                "target_loader": self.target_loader, "note": self.note}


def shipped_maps() -> list[str]:
    """The names of the label maps shipped with crs (file stems in ``crs/data/label_maps``)."""
    folder = resources.files("crs.data").joinpath(MAP_FOLDER)
    return sorted(item.name[: -len(".toml")] for item in folder.iterdir() if item.name.endswith(".toml"))


def read_label_map(name_or_path: str | Path) -> LabelMap:
    """A shipped map by name (``isic2019-to-pad_ufes_20``) or a TOML file by path."""
    text_name = str(name_or_path)
    path = Path(text_name)
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise DataError(f"label map file {path} not found; give a shipped map name ({', '.join(shipped_maps())}) or a TOML path")
        raw = path.read_bytes()
        name = path.stem
    else:
        resource = resources.files("crs.data").joinpath(MAP_FOLDER, f"{text_name}.toml")
        if not resource.is_file():
            raise DataError(f"unknown label map {text_name!r}; shipped maps: {', '.join(shipped_maps())} (or give a TOML path)")
        raw = resource.read_bytes()
        name = text_name
    try:
        table = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"label map {name!r}: not valid TOML ({error})") from error
    for key in ("source", "kind", "classes"):
        if key not in table:
            raise DataError(f"label map {name!r}: missing key {key!r} (needs source, kind, [classes])")
    return LabelMap(
        name=name, source=tuple(map(str, table["source"])), kind=str(table["kind"]),
        classes={str(k): str(v) for k, v in table["classes"].items()},
        no_counterpart=tuple(map(str, table.get("no_counterpart", ()))), dropped=tuple(map(str, table.get("dropped", ()))),
        target_loader=str(table.get("target_loader", "")), note=str(table.get("note", "")),
    )


@dataclass(frozen=True)
class MappedLabels:
    """What a map did to one target: the classes scored (positives and negatives present), those
    mapped but absent, the source classes without counterpart, and the rows left out by class."""

    map_name: str
    scored: tuple[str, ...]
    absent: tuple[str, ...]
    no_counterpart: tuple[str, ...]
    rows_dropped: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"label_map": self.map_name, "scored": list(self.scored), "absent": list(self.absent),
                "no_counterpart": list(self.no_counterpart), "rows_dropped": dict(self.rows_dropped)}


def scorable_classes(labels: np.ndarray, names: tuple[str, ...], kind: str) -> tuple[str, ...]:
    """Classes a one-vs-rest AUROC can score: with a positive and a negative row (single-label: the classes
    present, each of which has negatives as soon as two are)."""
    if kind == "multilabel":
        known = ~np.isnan(labels)
        positive = (np.nan_to_num(labels, nan=0.0) > 0.5) & known
        negative = known & ~positive
        return tuple(n for j, n in enumerate(names) if positive[:, j].any() and negative[:, j].any())
    counts = np.bincount(labels.astype(np.int64), minlength=len(names))
    return tuple(n for j, n in enumerate(names) if counts[j] > 0)


def apply_label_map(dataset: Dataset, label_map: LabelMap) -> Dataset:
    """``dataset`` (in its own classes) relabelled into the map's source classes.

    Raises :class:`DataError` for a target class the map does not name, a kind mismatch, or a
    result with fewer than two scorable classes. The returned data set carries the map's report in
    ``dataset.label_map`` and its dropped rows in ``dataset.accounting``.
    """
    where = f"data set {dataset.name!r} with label map {label_map.name!r}"
    multilabel = dataset.task.kind == "multilabel"
    if multilabel != (label_map.kind == "multilabel"):
        raise DataError(f"{where}: the data set is {dataset.task.kind} and the map {label_map.kind}; use a map of the same kind")
    names = dataset.task.class_names
    known = set(label_map.classes) | set(label_map.dropped)  # single-label: every used class must be here
    source_index = {name: i for i, name in enumerate(label_map.source)}
    dropped_rows: dict[str, int] = {}
    labels = np.asarray(dataset.labels)
    mapped: np.ndarray
    if multilabel:
        # Target labels the map does not name have no source output: they are left out, not scored.
        mapped = np.full((len(labels), len(label_map.source)), np.nan, dtype=np.float32)
        for j, name in enumerate(names):
            if name in label_map.classes:
                i = source_index[label_map.classes[name]]
                column = labels[:, j]
                mapped[:, i] = np.where(np.isnan(mapped[:, i]), column, np.fmax(mapped[:, i], column))
        # A mapped label the data set lacks (a finding no loaded report mentions) stays NaN: absent, not scored.
        keep = np.ones(len(labels), dtype=bool)
    else:
        used = [names[c] for c in np.unique(labels.astype(np.int64))]
        unknown = [n for n in used if n not in known]
        if unknown:
            raise DataError(f"{where}: target classes {unknown} are neither mapped nor dropped by the map; add them to [classes] or dropped")
        lookup = np.array([source_index.get(label_map.classes.get(n, ""), -1) for n in names], dtype=np.int64)
        codes = lookup[labels.astype(np.int64)]
        keep = codes >= 0
        for name in label_map.dropped:
            if name in names:
                n = int((labels == names.index(name)).sum())
                if n:
                    dropped_rows[f"class {name} (no source counterpart)"] = n
        mapped = codes
    task = Task(dataset.task.name, label_map.kind, label_map.source)
    out = dataclasses.replace(dataset, task=task, labels=mapped)
    if not keep.all():
        out = out.subset(keep)
    scored = scorable_classes(np.asarray(out.labels), label_map.source, task.kind)
    if len(scored) < MIN_SCORED_CLASSES:
        raise DataError(
            f"{where}: only {len(scored)} mapped class(es) {list(scored)} have positives on the target "
            f"(at least {MIN_SCORED_CLASSES} are needed to score a shift); use a larger target or another map"
        )
    mapped_sources = set(label_map.classes.values())
    absent = tuple(c for c in label_map.source if c in mapped_sources and c not in scored)
    report = MappedLabels(label_map.name, scored, absent, label_map.no_counterpart, dropped_rows)
    accounting = dataset.accounting or RowAccounting(len(dataset))
    out.accounting = dataclasses.replace(
        accounting, dropped={**accounting.dropped, **dropped_rows},
        notes=(*accounting.notes, f"label map {label_map.name}: scored {', '.join(scored)}"
               + (f"; no counterpart {', '.join(label_map.no_counterpart)}" if label_map.no_counterpart else "")),
    )
    out.label_map = report.to_dict()
    return out
