"""Patient subgroups from a data set's metadata: categories only, ready for the cache and the records.

Each loader names its subgroup attributes (:data:`DEFAULT_ATTRIBUTES`: CheXpert sex, age band and
AP/PA; ISIC 2019 sex, age band and anatomical site; MIMIC-CXR view; the synthetic benchmark sex and
age band); a ``folder`` data set names the CSV columns to use (``subgroups = ["Sex", "Age"]`` in its
options). Ages are banded (:data:`DEFAULT_AGE_BANDS`, configurable with ``age_bands``). Only short
category labels leave this module: a column with more than :data:`MAX_CATEGORIES` distinct values,
or with values longer than :data:`MAX_LABEL_LENGTH` characters, looks like an identifier or free
text and is refused with the fix. Missing values become :data:`UNKNOWN`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from crs.data.base import DataError, Dataset

DEFAULT_AGE_BANDS: tuple[float, ...] = (40.0, 60.0, 80.0)
"""Lower edges of the age bands after the first: <40, 40-59, 60-79, 80+ (years)."""
MAX_CATEGORIES = 20
"""More distinct values than this and a column is an identifier or free text, not a subgroup."""
MAX_LABEL_LENGTH = 40
UNKNOWN = "unknown"
"""The category of a missing value (reported like any group; never merged into another)."""

AGE = "age"
"""The attribute name that is banded (a metadata column holding years)."""

DEFAULT_ATTRIBUTES: dict[str, dict[str, str]] = {
    "chexpert": {"sex": "sex", AGE: "age", "ap_pa": "ap_pa"},
    "isic2019": {"sex": "sex", AGE: "age_approx", "site": "anatom_site_general"},
    "mimic_cxr": {"view": "view"},
    "synthetic": {"sex": "sex", AGE: "age"},
    "aptos2019": {},
    "folder": {},
    "ham10000": {"sex": "sex", AGE: "age", "site": "localization"},
    "pad_ufes_20": {"fitzpatrick": "fitzpatrick", "sex": "sex", AGE: "age"},
    "chestxray14": {"sex": "sex", AGE: "age", "view": "view"},
    "eyepacs": {"eye": "eye"},
    "derm7pt": {"sex": "sex", "site": "location"},
    "padchest": {"sex": "sex", AGE: "age", "view": "view"},
}
"""Loader -> {attribute: metadata column} used when the spec names none."""

_SEX = {"m": "male", "male": "male", "f": "female", "female": "female"}


def age_band_labels(edges: Sequence[float]) -> list[str]:
    """``(40, 60, 80)`` -> ``["<40", "40-59", "60-79", "80+"]`` (whole years; edges sorted)."""
    edges = [float(e) for e in edges]
    if not edges or sorted(edges) != edges or len(set(edges)) != len(edges):
        raise DataError(f"age_bands must be increasing numbers (band edges in years), got {list(edges)}")
    labels = [f"<{edges[0]:g}"]
    labels += [f"{low:g}-{high - 1:g}" for low, high in zip(edges[:-1], edges[1:], strict=True)]
    return [*labels, f"{edges[-1]:g}+"]


def age_bands(ages: Sequence[float] | np.ndarray, edges: Sequence[float] = DEFAULT_AGE_BANDS) -> np.ndarray:
    """The band label of each age (years); missing or non-numeric ages are :data:`UNKNOWN`."""
    names = age_band_labels(edges)
    values = pd.to_numeric(pd.Series(np.asarray(ages, dtype=object)), errors="coerce").to_numpy(np.float64)
    index = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="right")
    out = np.array([names[i] for i in np.minimum(index, len(names) - 1)], dtype=object)
    out[~np.isfinite(values)] = UNKNOWN
    return out.astype(str)


def categories(values: Sequence[object] | np.ndarray, attribute: str, where: str) -> np.ndarray:
    """Clean category labels of one column (stripped text; sex spelled ``male``/``female``), checked
    to be categories, not identifiers or free text."""
    series = pd.Series(np.asarray(values, dtype=object))
    text = series.map(lambda v: UNKNOWN if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip())
    text = text.replace({"": UNKNOWN, "nan": UNKNOWN, "None": UNKNOWN, "Unknown": UNKNOWN})
    if attribute in ("sex", "gender") or attribute.endswith(("_sex", "_gender")):
        text = text.map(lambda v: _SEX.get(v.lower(), v))
    levels = sorted(set(text.tolist()) - {UNKNOWN})
    if len(levels) > MAX_CATEGORIES:
        raise DataError(
            f"{where}: subgroup attribute {attribute!r} has {len(levels)} distinct values (at most {MAX_CATEGORIES}); "
            "it looks like an identifier or free text: name a categorical column (ages are banded: call it 'age')"
        )
    long = [v for v in levels if len(v) > MAX_LABEL_LENGTH]
    if long:
        raise DataError(
            f"{where}: subgroup attribute {attribute!r} holds values longer than {MAX_LABEL_LENGTH} characters "
            f"({long[0][:20]!r}...); subgroups are short categories, not free text"
        )
    return text.to_numpy().astype(str)


def attribute_name(column: str) -> str:
    """``"AP/PA"`` -> ``ap_pa``, ``"PatientAge"`` -> ``patient_age``: a CSV column's attribute name."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1_\2", str(column).strip())
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


def is_age(attribute: str) -> bool:
    """Attributes holding years, banded: ``age``, ``patient_age``, ``age_approx``."""
    return AGE in attribute.split("_")


SUBGROUP_WORDS = {"sex", "gender", "age", "view", "position", "ap", "pa", "site", "race", "ethnicity", "scanner",
                  "manufacturer", "hospital", "device"}
"""Words of a column name that suggest a patient-group attribute (``crs init`` proposes such columns)."""


def propose_columns(table: pd.DataFrame, used: set[str]) -> list[str]:
    """Columns of a CSV that look like subgroup attributes: named so (:data:`SUBGROUP_WORDS`) and either
    ages (numbers) or short categories (at most :data:`MAX_CATEGORIES` values); never ``used`` columns."""
    proposed = []
    for column in table.columns:
        if column in used:
            continue
        name = attribute_name(column)
        if not set(name.split("_")) & SUBGROUP_WORDS:
            continue
        values = table[column].dropna()
        if values.empty:
            continue
        numeric = pd.to_numeric(values, errors="coerce").notna().all()
        if is_age(name) and numeric:
            proposed.append(str(column))
        elif values.nunique() <= MAX_CATEGORIES and values.astype(str).str.len().max() <= MAX_LABEL_LENGTH:
            proposed.append(str(column))
    return proposed


def subgroup_table(
    dataset: Dataset,
    attributes: Mapping[str, str] | Sequence[str],
    edges: Sequence[float] = DEFAULT_AGE_BANDS,
) -> pd.DataFrame:
    """One categorical column per attribute, one row per image of ``dataset`` (row order kept).

    ``attributes``: {attribute: metadata column}, or a list of metadata columns (each its own
    attribute, named by :func:`attribute_name`). Ages (:func:`is_age`: ``age``, ``patient_age``...) are
    banded by ``edges``.
    """
    if not isinstance(attributes, Mapping):
        attributes = {attribute_name(column): str(column) for column in attributes}
    where = f"data set {dataset.name!r}"
    columns: dict[str, np.ndarray] = {}
    meta = dataset.metadata
    for attribute, column in attributes.items():
        if column not in meta.columns:
            raise DataError(
                f"{where}: subgroup attribute {attribute!r} needs metadata column {column!r}; "
                f"found {list(meta.columns)[:20]} (name a CSV column in the data set's `subgroups` option)"
            )
        values = meta[column].to_numpy()
        if is_age(attribute):
            columns[attribute] = age_bands(values, edges)
        else:
            columns[attribute] = categories(values, attribute, where)
    table = pd.DataFrame(columns, index=pd.RangeIndex(len(dataset)))
    if len(meta) != len(dataset) and attributes:
        raise DataError(f"{where}: metadata has {len(meta)} rows, the data set {len(dataset)}")
    return table


def attach_subgroups(
    dataset: Dataset,
    loader: str,
    attributes: Mapping[str, str] | Sequence[str] | None = None,
    edges: Sequence[float] | None = None,
) -> Dataset:
    """``dataset`` with its :attr:`Dataset.subgroups` set: the spec's attributes, else the loader's defaults
    (attributes whose column the loader did not fill, such as a CSV without a Sex column, are left out
    when they are defaults and refused when named)."""
    edges = DEFAULT_AGE_BANDS if edges is None else tuple(float(e) for e in edges)
    if attributes is None:
        found = DEFAULT_ATTRIBUTES.get(loader, {})
        attributes = {a: c for a, c in found.items()
                      if c in dataset.metadata.columns and dataset.metadata[c].notna().any()}
    dataset.subgroups = subgroup_table(dataset, attributes, edges)
    return dataset
