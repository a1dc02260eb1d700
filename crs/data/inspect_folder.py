"""Look at a folder of images with a CSV and guess how the ``folder`` loader should read it.

This is what ``crs init`` runs: it asks nothing. It finds the CSV whose column names image files
under the root, types those files (DICOM by suffix or by the ``DICM`` marker, else by suffix),
finds the label column(s) and the task kind, a patient or lesion column to split by, a split
column, and the modality (from the label names, the DICOM modality code, or how the images look:
grey films, colour photos with a dark circular field, other colour photos). Every guess carries
the reason it was made; anything that would stop a run (a class too small to reach every split,
blank labels, missing files) becomes a warning naming the fix.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.data import load_dataset
from crs.data.base import DEFAULT_FIT, MODALITIES, TASK_KINDS, DataError, Dataset, Task
from crs.data.dicom import acquisition_kind, looks_like_dicom
from crs.data.fit import check_fit
from crs.data.folder import read_csv
from crs.data.images import decode_image
from crs.data.label_typos import odd_labels
from crs.data.shift import label_key, match_labels
from crs.data.subgroups import propose_columns

IMAGE_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".tif": "tiff", ".tiff": "tiff",
                  ".bmp": "bmp", ".webp": "webp", ".gif": "gif"}
SAMPLE_ROWS = 5000      # rows whose files are typed (all of them in smaller CSVs)
PATH_PROBE_ROWS = 50    # values per column tried as file paths when looking for the image column
LOOK_IMAGES = 12        # images opened to tell grey from colour and fundus from skin
MIN_CLASS_IMAGES = 5    # fewer than this and a 60/20/20 split leaves some split without the class
MAX_CLASSES = 50

LABEL_WORDS = {"label", "labels", "class", "classes", "diagnosis", "dx", "target", "category", "finding",
               "findings", "outcome", "y", "grade", "level", "stage", "severity", "score", "rating"}
ORDINAL_WORDS = {"grade", "level", "stage", "severity", "score", "rating", "diagnosis"}
# Group columns by preference: a patient beats a lesion beats a case beats a study.
GROUP_WORDS = (("patient", "subject", "mrn", "person", "participant", "pid"), ("lesion",),
               ("case", "group", "family"), ("study", "exam", "accession"))
ID_WORDS = {"id", "uid", "image", "img", "file", "filename", "dicom", "sop", "instance", "name", "code", "key"}
SPLIT_VALUES = {"train", "val", "valid", "validation", "validate", "test"}
MODALITY_WORDS = {
    "chest_xray": {"atelectasis", "cardiomegaly", "consolidation", "edema", "oedema", "effusion", "pneumonia",
                   "pneumothorax", "nodule", "infiltration", "emphysema", "fibrosis", "opacity", "covid",
                   "tuberculosis", "lung", "chest", "cxr"},
    "dermoscopy": {"mel", "nv", "bcc", "ak", "bkl", "df", "vasc", "scc", "melanoma", "nevus", "naevus",
                   "keratosis", "dermatofibroma", "skin", "dermoscopy"},
    "fundus": {"retinopathy", "dr", "glaucoma", "cataract", "amd", "macular", "drusen", "diabetic",
               "myopia", "fundus", "retina", "retinal"},
}
# DICOM Modality codes that name one of crs's modalities (read only to guess; stored nowhere).
DICOM_MODALITY = {"CR": "chest_xray", "DX": "chest_xray", "OP": "fundus", "XC": "dermoscopy"}


@dataclass(frozen=True)
class FolderGuess:
    """How to read one folder, with the reason for each guess (``reasons``) and what to fix (``warnings``)."""

    root: Path
    csv: str
    n_rows: int
    columns: tuple[str, ...]
    image_column: str
    image_types: dict[str, int]
    kind: str
    label_columns: tuple[str, ...]
    class_counts: dict[str, int]
    modality: str
    fit: str
    group_column: str | None = None
    group_candidates: tuple[str, ...] = ()
    split_column: str | None = None
    id_column: str | None = None
    reasons: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    subgroup_columns: tuple[str, ...] = ()
    """CSV columns proposed as patient subgroups (sex, age, view...; crs.data.subgroups.propose_columns)."""
    class_names: tuple[str, ...] | None = None
    """The classes written into the spec (text labels of one column), values that look like typos left out."""

    def loader_options(self) -> dict[str, Any]:
        """The ``folder`` loader's options for this folder (what the spec's ``options`` table holds)."""
        options: dict[str, Any] = {
            "csv": self.csv,
            "image_column": self.image_column,
            "label_columns": self.label_columns[0] if len(self.label_columns) == 1 and self.kind != "multilabel"
            else list(self.label_columns),
            "kind": self.kind,
            "modality": self.modality,
            "fit": self.fit,
        }
        for key, value in (("group_column", self.group_column), ("split_column", self.split_column),
                           ("id_column", self.id_column)):
            if value:
                options[key] = value
        if self.subgroup_columns:
            options["subgroups"] = list(self.subgroup_columns)
        if self.class_names:
            options["class_names"] = list(self.class_names)
        return options


def _words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", str(name))  # imageId -> image Id
    return set(re.split(r"[^a-z0-9]+", label_key(spaced))) - {""}


def _is_text(values: pd.Series) -> bool:
    return values.dtype == object or pd.api.types.is_string_dtype(values)


def _inside(root: str, relative: str) -> str | None:
    """The absolute path of ``relative`` under ``root``, or None if it would leave the root."""
    if not isinstance(relative, str) or not relative.strip() or os.path.isabs(relative):
        return None
    joined = os.path.normpath(os.path.join(root, relative))
    return joined if joined.startswith(root.rstrip(os.sep) + os.sep) else None


def _path_score(root: Path, values: pd.Series) -> float:
    sample = [v for v in values.dropna().tolist()[:PATH_PROBE_ROWS] if isinstance(v, str)]
    if not sample:
        return 0.0
    found = sum(1 for v in sample if (p := _inside(str(root), v)) is not None and os.path.isfile(p))
    return found / len(sample)


def find_image_table(root: Path, csv: str | None = None, image_column: str | None = None) -> tuple[str, pd.DataFrame, str, float]:
    """(CSV path relative to root, its table, the image column, share of sampled paths found)."""
    if csv is not None:
        path = Path(csv) if Path(csv).is_absolute() else root / csv
        candidates = [path]
    else:
        candidates = sorted(
            p for pattern in ("*.csv", "*.csv.gz", "*/*.csv", "*/*.csv.gz") for p in root.glob(pattern) if p.is_file()
        )
    if not candidates:
        raise DataError(f"no CSV under {root}: write labels.csv with one row per image: a path column (relative to "
                        f"{root}) and a label column")
    best: tuple[float, int, str, pd.DataFrame, str] | None = None
    empty: list[Path] = []  # CSVs with a header at most: no row can name an image
    for path in candidates:
        try:
            table = read_csv(path, "init", "one row per image")
        except DataError:
            if csv is not None and path.is_file() and path.stat().st_size == 0:
                empty.append(path)
                continue
            if csv is not None:
                raise
            if path.is_file() and path.stat().st_size == 0:
                empty.append(path)
            continue
        if table.empty:
            empty.append(path)
            continue
        columns = [image_column] if image_column else [c for c in table.columns if _is_text(table[c])]
        if image_column and image_column not in table.columns:
            raise DataError(f"{path}: no column {image_column!r}; columns are {list(table.columns)[:20]}")
        for column in columns:
            score = _path_score(root, table[column])
            relative = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            key = (score, len(table), relative, table, column)
            if best is None or key[:2] > best[:2]:
                best = key
    if (best is None or best[0] == 0) and empty and (best is None or csv is not None):
        raise DataError(f"{empty[0]} has no rows: write one row per image, a path column (relative to {root}) and a "
                        "label column" + (f"; {len(empty) - 1} other CSV(s) have none either" if len(empty) > 1 else ""))
    if best is None or best[0] == 0:
        looked = ", ".join(str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in candidates[:5])
        rowless = f"; {', '.join(p.name for p in empty)} has no rows" if empty else ""
        raise DataError(f"no CSV column under {root} names image files relative to it (looked in {looked}){rowless}; "
                        "give paths relative to the folder, or name the CSV and column with --csv and --image-column")
    score, _, relative, table, column = best
    return relative.replace(os.sep, "/"), table, column, score


def image_types(root: Path, paths: list[str]) -> dict[str, int]:
    """Files per type among ``paths`` (a sample of at most SAMPLE_ROWS): dicom, png, jpeg, ..., missing, other."""
    counts: Counter[str] = Counter()
    step = max(1, len(paths) // SAMPLE_ROWS)
    for relative in paths[::step]:
        full = _inside(str(root), relative)
        if full is None or not os.path.isfile(full):
            counts["missing"] += 1
        elif looks_like_dicom(full):
            counts["dicom"] += 1
        else:
            counts[IMAGE_SUFFIXES.get(Path(full).suffix.lower(), "other")] += 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _binary(values: pd.Series) -> bool:
    numbers = pd.to_numeric(values, errors="coerce")
    known = numbers[values.notna()]
    return bool(len(known)) and not known.isna().any() and set(known.unique().tolist()) <= {0.0, 1.0} \
        and known.nunique() == 2


def _has_uncertain(values: pd.Series) -> bool:
    numbers = pd.to_numeric(values, errors="coerce")
    known = numbers[values.notna()]
    return bool(len(known)) and not known.isna().any() and set(known.unique().tolist()) <= {-1.0, 0.0, 1.0} \
        and -1.0 in set(known.unique().tolist())


def _contiguous_integers(values: pd.Series) -> bool:
    if not pd.api.types.is_integer_dtype(values):
        return False
    levels = sorted(set(values.dropna().tolist()))
    return levels == list(range(len(levels)))


def _split_column(table: pd.DataFrame, exclude: set[str]) -> str | None:
    for column in table.columns:
        if column in exclude or not _is_text(table[column]):
            continue
        values = set(table[column].dropna().astype(str).str.strip().str.lower())
        if values and values <= SPLIT_VALUES and "train" in values:
            return str(column)
    return None


def group_candidates(table: pd.DataFrame, exclude: set[str]) -> list[str]:
    """Columns that may name a patient or lesion: named so, and holding repeated values."""
    ranked = []
    for column in table.columns:
        if column in exclude:
            continue
        words = _words(column)
        values = table[column].dropna()
        repeated = 1 < values.nunique() < len(values)
        for rank, names in enumerate(GROUP_WORDS):
            if words & set(names):
                ranked.append((rank, 0 if repeated else 1, str(column)))
                break
    return [column for _, _, column in sorted(ranked)]


def _id_column(table: pd.DataFrame, exclude: set[str]) -> str | None:
    for column in table.columns:
        words = _words(column)
        if column in exclude or not ({"id", "uid"} & words) or not (words - {"id", "uid"} <= ID_WORDS):
            continue
        values = table[column]
        if values.notna().all() and values.astype(str).is_unique:
            return str(column)
    return None


def _labels(table: pd.DataFrame, exclude: set[str]) -> tuple[str, tuple[str, ...], str, list[str]]:
    """(kind, label columns, reason, warnings) for the remaining columns."""
    warnings: list[str] = []
    candidates = [c for c in table.columns if c not in exclude]
    named = [c for c in candidates if _words(c) & LABEL_WORDS and 2 <= table[c].nunique() <= MAX_CLASSES]
    binary = [c for c in candidates if _binary(table[c])]
    uncertain = [c for c in candidates if _has_uncertain(table[c])]
    if uncertain:
        warnings.append(f"columns {uncertain} hold -1 (uncertain): the folder loader takes 1, 0 or blank; "
                        "map -1 to 1, 0 or blank in the CSV to use them")
    if named:
        column = named[0]
        ordinal = _contiguous_integers(table[column]) and table[column].nunique() >= 3 and _words(column) & ORDINAL_WORDS
        kind = "ordinal" if ordinal else "multiclass"
        why = f"column {column!r} is named as a label" + (" and holds grades 0..K-1" if ordinal else "")
        return kind, (str(column),), why, warnings
    if len(binary) >= 2:
        return "multilabel", tuple(map(str, binary)), f"{len(binary)} columns hold only 0, 1 or blank", warnings
    if len(binary) == 1:
        return "multiclass", (str(binary[0]),), f"column {binary[0]!r} is the only 0/1 column", warnings
    small = sorted((table[c].nunique(), str(c)) for c in candidates if 2 <= table[c].nunique() <= MAX_CLASSES)
    if small:
        column = small[0][1]
        warnings.append(f"no column is named as a label; took {column!r} (fewest values); "
                        "name the right one with --label-column")
        return "multiclass", (column,), f"column {column!r} has the fewest distinct values", warnings
    raise DataError(f"no label column found among {[str(c) for c in candidates][:20]}: give one with --label-column "
                    f"(2 to {MAX_CLASSES} distinct values), or several 0/1 columns for a multilabel task")


def class_counts(table: pd.DataFrame, kind: str, label_columns: tuple[str, ...]) -> dict[str, int]:
    """Images per class (single label, in the loader's class order) or positives per label (multilabel)."""
    if kind == "multilabel":
        return {c: int((pd.to_numeric(table[c], errors="coerce") == 1).sum()) for c in label_columns}
    column = table[label_columns[0]].dropna()
    if pd.api.types.is_integer_dtype(column):
        counts = column.value_counts()
        return {str(k): int(counts[k]) for k in sorted(counts.index)}
    counts = column.astype(str).str.strip().value_counts()
    return {str(k): int(counts[k]) for k in sorted(counts.index)}


def _looks(root: Path, paths: list[str]) -> tuple[Counter[str], Counter[str]]:
    """(how sampled images look: grey | fundus | colour, DICOM modality codes among them)."""
    looks: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    picked = paths[:: max(1, len(paths) // LOOK_IMAGES)][:LOOK_IMAGES]
    for relative in picked:
        full = _inside(str(root), relative)
        if full is None or not os.path.isfile(full):
            continue
        if looks_like_dicom(full):
            kind = acquisition_kind(full)
            if kind is not None:
                codes[kind[0]] += 1
                if kind[1]:
                    looks["grey"] += 1
                    continue
        try:
            image = np.asarray(decode_image(full, draft_size=64).resize((64, 64)), dtype=np.float32)
        except DataError:
            continue
        if np.abs(image - image.mean(axis=2, keepdims=True)).mean() < 3:
            looks["grey"] += 1
            continue
        corners = np.concatenate([image[:8, :8], image[:8, -8:], image[-8:, :8], image[-8:, -8:]]).mean()
        centre = image[24:40, 24:40].mean()
        looks["fundus" if corners < 20 and centre > 40 else "colour"] += 1
    return looks, codes


def guess_modality(root: Path, table: pd.DataFrame, label_columns: tuple[str, ...], kind: str,
                   paths: list[str]) -> tuple[str, str]:
    """(modality, reason): from label names, then DICOM modality codes, then how the images look."""
    names = list(label_columns) if kind == "multilabel" else table[label_columns[0]].dropna().astype(str).unique().tolist()
    words = set().union(*(_words(n) for n in [*names, *label_columns])) if names else set()
    hits = {modality: len(words & vocabulary) for modality, vocabulary in MODALITY_WORDS.items()}
    best = max(hits, key=lambda m: hits[m])
    if hits[best] and sorted(hits.values())[-2] < hits[best]:
        return best, f"from the label names: {', '.join(sorted(words & MODALITY_WORDS[best])[:4])}"
    looks, codes = _looks(root, paths)
    named = Counter({DICOM_MODALITY[c]: n for c, n in codes.items() if c in DICOM_MODALITY})
    if named:
        modality, _ = named.most_common(1)[0]
        return modality, f"DICOM modality codes of {sum(codes.values())} sampled file(s)"
    if looks:
        look, n = looks.most_common(1)[0]
        modality = {"grey": "chest_xray", "fundus": "fundus", "colour": "dermoscopy"}[look]
        description = {"grey": "grey films", "fundus": "colour photos with a dark circular field",
                       "colour": "colour photos"}[look]
        return modality, f"{n} of {sum(looks.values())} sampled images are {description}"
    return "chest_xray", "nothing to go on (no image could be opened); set it with --modality"


def inspect_folder(
    root: Path | str,
    csv: str | None = None,
    image_column: str | None = None,
    label_columns: tuple[str, ...] | list[str] | None = None,
    kind: str | None = None,
    modality: str | None = None,
    group_column: str | None = None,
    split_column: str | None = None,
    fit: str | None = None,
) -> FolderGuess:
    """Guess how to load ``root`` with the ``folder`` loader; every argument given overrides its guess."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise DataError(f"{root} is not a folder")
    if kind is not None and kind not in TASK_KINDS:
        raise DataError(f"kind={kind!r} is not one of {TASK_KINDS}")
    if modality is not None and modality not in MODALITIES:
        raise DataError(f"modality={modality!r} is not one of {MODALITIES}")
    reasons: dict[str, str] = {}
    warnings: list[str] = []
    csv_name, table, image_column, found = find_image_table(root, csv, image_column)
    reasons["csv"] = f"column {image_column!r} names files under the folder ({found:.0%} of those sampled exist)"
    if table.empty:
        raise DataError(f"{root / csv_name} has no rows")
    paths = table[image_column].astype(str).tolist()
    types = image_types(root, paths)
    if types.get("missing"):
        warnings.append(f"{types['missing']} listed file(s) are missing; restore them, drop their rows, or set "
                        "skip_bad = true under [extract] to skip and list them")
    if types.get("other"):
        warnings.append(f"{types['other']} file(s) have a suffix crs does not know; `crs datasets check` tells if they decode")

    used = {image_column}
    if split_column is None:
        split_column = _split_column(table, used)
        if split_column:
            reasons["splits"] = f"column {split_column!r} holds train/val/test"
    else:
        reasons["splits"] = "given"
    if split_column:
        used.add(split_column)
    candidates = group_candidates(table, used)
    if group_column is None:
        named = [c for c in candidates if 1 < table[c].nunique() < len(table)]
        group_column = named[0] if named else None
        if group_column:
            reasons["groups"] = (f"named as a patient/lesion/case, {table[group_column].nunique()} groups "
                                 f"for {len(table)} images")
        else:
            warnings.append("no patient or lesion column found: each image is its own group; if a patient has several "
                            "images, name the column with --group-column so they stay in one split")
    else:
        reasons["groups"] = "given"
    if group_column:
        used.add(group_column)
    id_column = _id_column(table, used)
    if id_column:
        used.add(id_column)
        reasons["ids"] = f"column {id_column!r} is named as an image id and unique"

    if label_columns:
        label_columns = tuple(label_columns)
        missing = [c for c in label_columns if c not in table.columns]
        if missing:
            raise DataError(f"{root / csv_name}: no column(s) {missing}; columns are {list(table.columns)[:20]}")
        kind = kind or ("multilabel" if len(label_columns) > 1 else "multiclass")
        reasons["task"] = "given"
    else:
        guessed_kind, label_columns, why, label_warnings = _labels(table, used)
        warnings.extend(label_warnings)
        reasons["task"] = why
        kind = kind or guessed_kind
    if kind != "multilabel":
        blank = int(table[label_columns[0]].isna().sum())
        if blank:
            warnings.append(f"{blank} row(s) have no label in {label_columns[0]!r}: the loader refuses blank labels; "
                            "fill them in or drop those rows")
    counts = class_counts(table, kind, label_columns)
    class_names = None
    if kind == "multiclass" and _is_text(table[label_columns[0]]):
        values = table[label_columns[0]].dropna().astype(str).str.strip().tolist()
        odd = odd_labels(values)
        class_names = tuple(sorted(set(values) - {o.value for o in odd}))
        if odd:
            few = any(len(o.rows) < MIN_CLASS_IMAGES for o in odd)
            warnings.append("label values that look like typos are left out of class_names, so `crs check` refuses "
                            "their rows until you fix them or add them to class_names: "
                            + "; ".join(o.describe() for o in odd)
                            + (f" (a value kept as a class needs at least {MIN_CLASS_IMAGES} images for a 60/20/20 "
                               "split)" if few else ""))
    left_out = set(table[label_columns[0]].dropna().astype(str).str.strip()) - set(class_names) if class_names else set()
    # a value left out as a typo is no class: only the typo warning speaks of it, never "a class too small"
    small = {name: n for name, n in counts.items() if n < MIN_CLASS_IMAGES and name not in left_out}
    if small:
        warnings.append(f"classes {small} have fewer than {MIN_CLASS_IMAGES} images (positives): a 60/20/20 split "
                        "leaves some split without them and the run stops; add images, merge or drop them")

    if modality is None:
        modality, reasons["modality"] = guess_modality(root, table, label_columns, kind, paths)
    else:
        reasons["modality"] = "given"
    if fit is None:
        fit = DEFAULT_FIT[modality]
        reasons["fit"] = f"the {modality} default"
    else:
        reasons["fit"] = "given"
    subgroup_columns = tuple(propose_columns(table, used | set(label_columns)))
    if subgroup_columns:
        reasons["subgroups"] = "named as sex, age, view or site, with few values (ages are banded)"
    return FolderGuess(
        root=root, csv=csv_name, n_rows=len(table), columns=tuple(map(str, table.columns)),
        image_column=str(image_column), image_types=types, kind=kind, label_columns=tuple(label_columns),
        class_counts=counts, modality=modality, fit=check_fit(fit), group_column=group_column,
        group_candidates=tuple(candidates), split_column=split_column, id_column=id_column,
        reasons=reasons, warnings=tuple(warnings), subgroup_columns=subgroup_columns, class_names=class_names,
    )



def load_guess(guess: FolderGuess, **options: Any) -> Dataset:
    """The data set ``guess`` describes, loaded without touching the image files (``verify="none"``)."""
    return load_dataset("folder", guess.root, **{**guess.loader_options(), **options, "verify": "none"})


def inspect_shift_target(
    source: FolderGuess,
    source_task: Task,
    root: Path | str,
    csv: str | None = None,
    image_column: str | None = None,
    label_columns: tuple[str, ...] | list[str] | None = None,
) -> tuple[FolderGuess, dict[str, Any]]:
    """Guess how to read ``root`` as the shift target of ``source``: (its guess, its loader options).

    The target takes the source's kind, modality and fit; its labels are matched to the source's
    by name (:func:`crs.data.shift.match_labels`), an error listing any that do not match. Every
    image goes to the test split (``proportions = [0, 0, 1]``): a shift target is evaluated only.
    """
    root = Path(root).resolve()
    if source.kind == "multilabel" and not label_columns:
        _, table, _, _ = find_image_table(root, csv, image_column)
        wanted = {label_key(name) for name in source_task.class_names}
        label_columns = [str(c) for c in table.columns if label_key(c) in wanted]
        if not label_columns:
            raise DataError(f"shift target {root}: no column is named as a source label {list(source_task.class_names)}; "
                            "rename its label columns or give them with --shift-label-column")
    guess = inspect_folder(root, csv=csv, image_column=image_column, label_columns=label_columns,
                           kind=source.kind, modality=source.modality, split_column=None, fit=source.fit)
    where = f"shift target {root}"
    options = {**guess.loader_options(), "proportions": [0.0, 0.0, 1.0]}
    options.pop("split_column", None)
    if source.kind == "multilabel":
        mapping = match_labels(source_task.class_names, guess.label_columns, "multilabel", where)
        ordered = sorted((i, column) for column, i in zip(guess.label_columns, mapping.source_index, strict=True) if i >= 0)
        options["label_columns"] = [column for _, column in ordered]
    else:
        own = load_dataset("folder", root, **{**options, "verify": "none"}).task
        if own.class_names != source_task.class_names:
            match_labels(source_task.class_names, own.class_names, source.kind, where)
    options["class_names"] = list(source_task.class_names)
    target = load_dataset("folder", root, **{**options, "verify": "none"})
    if target.task.class_names != source_task.class_names:
        raise DataError(f"{where}: its labels load as {list(target.task.class_names)}, not the source's "
                        f"{list(source_task.class_names)}; give its label column(s) with --shift-label-column")
    return guess, options
