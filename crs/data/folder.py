"""Any image folder with a CSV: the user's own data set, plus the CSV helpers every loader shares.

The CSV names one image path per row (relative to the root), one label column (multiclass or
ordinal) or several 0/1 columns (multilabel), and optionally a group column (patient, lesion)
and a split column (train/val/test). Everything else is kept as metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crs.data.base import MODALITIES, SPLITS, TASK_KINDS, DataError, Dataset, Task, group_split
from crs.data.images import resolve_paths, screen_images
from crs.data.label_typos import closest, did_you_mean, odd_labels, odd_labels_message
from crs.data.shift import label_key


def read_csv(path: Path, dataset: str, what: str, **kwargs: object) -> pd.DataFrame:
    """Read a CSV (plain or .gz) with an error naming the file and what it should hold."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{dataset}: {path} not found; it should hold {what}")
    try:
        return pd.read_csv(path, **kwargs)  # type: ignore[call-overload]
    except pd.errors.EmptyDataError as error:  # not even a header: the file is empty
        raise DataError(f"{dataset}: {path} has no rows (the file is empty); it should hold {what}") from error
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as error:
        raise DataError(f"{dataset}: cannot parse {path} ({error}); it should be a CSV holding {what}") from error


def find_csv(folder: Path, name: str) -> Path | None:
    """``folder/name`` or ``folder/name.gz``, whichever exists."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def require_columns(table: pd.DataFrame, columns: Sequence[str], source: str) -> None:
    """Raise naming the missing columns and the ones that are there."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {missing}; found {list(table.columns)[:20]}; "
            "check the file is the official one (or set the column names in the spec)"
        )


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def load_folder(
    root: Path | str,
    csv: str = "labels.csv",
    image_column: str = "path",
    label_columns: str | Sequence[str] = "label",
    kind: str = "multiclass",
    modality: str | None = None,
    group_column: str | None = None,
    split_column: str | None = None,
    id_column: str | None = None,
    class_names: Sequence[str] | None = None,
    name: str = "folder",
    image_size: int = 224,
    skip_bad: bool = False,
    verify: str | None = None,
    seed: int = 0,
    proportions: Sequence[float] = (0.6, 0.2, 0.2),
) -> Dataset:
    """Load a folder of images described by a CSV.

    ``kind`` is ``multiclass`` (labels are class names or integers), ``ordinal`` (integers
    0..K-1, or names in ``class_names`` order) or ``multilabel`` (several columns holding 1, 0 or
    blank; blank means unknown and is ignored, stored as NaN). ``modality`` picks the corruption
    suite. Without ``group_column`` each image is its own group; without ``split_column`` splits
    are drawn by :func:`group_split`.
    """
    root = Path(root).resolve()
    if kind not in TASK_KINDS:
        raise DataError(f"folder: kind={kind!r} is not one of {TASK_KINDS}")
    if modality not in MODALITIES:
        raise DataError(f"folder: modality={modality!r} must be one of {MODALITIES}; it picks the corruption suite")
    csv_path = safe_csv_path(root, csv)
    table = read_csv(csv_path, name, "one row per image")
    label_columns = _as_list(label_columns)
    if kind != "multilabel" and len(label_columns) != 1:
        raise DataError(f"folder: kind {kind!r} takes one label column, got {label_columns}")
    optional = [c for c in (group_column, split_column, id_column) if c]
    require_columns(table, [image_column, *label_columns, *optional], str(csv_path))
    if table.empty:
        raise DataError(f"folder: {csv_path} has no rows")

    task, labels = _labels(table, label_columns, kind, class_names, name, csv_path)
    paths = resolve_paths(root, table[image_column].tolist())
    ids = table[id_column].astype(str).to_numpy() if id_column else np.array(paths, dtype=object)
    keep, skipped = screen_images(root, paths, skip_bad, verify, name)
    idx = np.flatnonzero(keep)
    groups = table[group_column].astype(str).to_numpy() if group_column else ids.astype(str)
    if split_column:
        splits = table[split_column].astype(str).str.strip().str.lower().replace({"valid": "val", "validate": "val", "validation": "val"})
        bad = sorted(set(splits) - set(SPLITS))
        if bad:
            raise DataError(f"folder: split column {split_column!r} holds {bad}; use train, val or test")
        splits_kept = splits.to_numpy()[idx].astype(str)
    else:
        splits_kept = group_split(groups[idx], labels[idx], proportions, seed)
    extra = [c for c in table.columns if c not in {image_column, *label_columns}]
    return Dataset(
        name=name,
        root=root,
        task=task,
        modality=modality,
        image_size=int(image_size),
        ids=ids[idx].astype(str),
        paths=[paths[i] for i in idx],
        groups=groups[idx].astype(str),
        labels=labels[idx],
        splits=splits_kept,
        metadata=table[extra].iloc[idx].reset_index(drop=True),
        skipped=skipped,
        split_design="imported" if split_column else "stratified",  # decision 0085
    )


def safe_csv_path(root: Path, csv: str) -> Path:
    """The CSV may sit anywhere under the root (or be given as an absolute path by the user)."""
    path = Path(csv)
    return path if path.is_absolute() else root / path


def _labels(
    table: pd.DataFrame,
    columns: list[str],
    kind: str,
    class_names: Sequence[str] | None,
    name: str,
    csv_path: Path,
) -> tuple[Task, np.ndarray]:
    if kind == "multilabel":
        values = table[columns].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float32)
        raw = table[columns]
        unparsable = raw.notna().to_numpy() & np.isnan(values)
        if unparsable.any() or not np.isin(values[~np.isnan(values)], (0.0, 1.0)).all():
            raise DataError(f"folder: multilabel columns {columns} in {csv_path} must hold 1, 0 or blank")
        return Task(name, kind, tuple(class_names or columns)), values
    column = table[columns[0]]
    if column.isna().any():
        row = int(np.flatnonzero(column.isna().to_numpy())[0])
        raise DataError(f"folder: label column {columns[0]!r} is blank in row {row + 2} of {csv_path}; every image needs a label")
    if class_names is None:  # every distinct value becomes a class: refuse values that look like typos (0119)
        text = column.astype(str).str.strip().tolist()
        odd = odd_labels(text)
        if odd:
            raise DataError(odd_labels_message(odd, columns[0], str(csv_path), sorted(set(text))))
    if class_names is not None:
        names = tuple(str(c) for c in class_names)
        as_text = column.astype(str).str.strip()
        if pd.api.types.is_integer_dtype(column):
            codes = column.to_numpy(dtype=np.int64)
        else:
            # Exact text first, then the shift-target rule (case, spaces, '_' and '-' ignored) when unambiguous.
            lookup = {c: i for i, c in enumerate(names)}
            loose = {label_key(c): i for i, c in enumerate(names)}
            if len(loose) == len(names):
                lookup.update({text: loose[label_key(text)] for text in set(as_text) - set(lookup) if label_key(text) in loose})
            unknown = sorted(set(as_text) - set(lookup))
            if unknown:
                first = [int(i) + 2 for i in np.flatnonzero(as_text.isin(unknown).to_numpy())[:5]]
                guess = did_you_mean(closest(unknown[0], names), names)
                raise DataError(f"folder: labels {unknown[:5]} in {csv_path} (row {', '.join(map(str, first))}) are not in "
                                f"class_names {list(names)}; {guess}; fix those rows, or add the value to class_names")
            codes = as_text.map(lookup).to_numpy(dtype=np.int64)
    elif pd.api.types.is_integer_dtype(column):
        codes = column.to_numpy(dtype=np.int64)
        if kind == "ordinal":
            names = tuple(str(i) for i in range(int(codes.max()) + 1))
        else:
            names = tuple(str(c) for c in sorted(set(codes.tolist())))
            codes = np.searchsorted(np.array(sorted(set(codes.tolist()))), codes)
    else:
        if kind == "ordinal":
            raise DataError(f"folder: ordinal labels in {csv_path} are text; give integers 0..K-1 or class_names in order")
        names = tuple(sorted(set(column.astype(str).str.strip())))
        codes = column.astype(str).str.strip().map({c: i for i, c in enumerate(names)}).to_numpy(dtype=np.int64)
    if codes.min() < 0 or codes.max() >= len(names):
        raise DataError(f"folder: labels in {csv_path} run outside 0..{len(names) - 1}; fix the CSV or class_names")
    return Task(name, kind, names), codes.astype(np.int64)
