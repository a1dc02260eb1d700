"""The run folder: the one owner of every path, file name and array key stage 2 and scoring write.

Layout of ``<output>/``::

    records.parquet                    one row per encoder x task x fraction x seed x condition
    records_seed_aggregated.parquet    mean, std and n over seeds
    predictions/<encoder>__<task>.npz  per-case predictions of one unit (keys: see below)
    audit.json                         skipped images and the drawn label-fraction ids
    score/                             every score table (parquet), summary.json, score.txt

Prediction keys: ``<condition>_probs`` and ``<condition>_labels`` with condition ``clean``,
``shift`` or ``corrupt__<corruption>__<severity>``; ``clean_all_probs`` (every probe, float16),
``subset_fraction``, ``subset_seed`` (one per probe) and ``full_seeds`` (the seeds of the
full-fraction rows); ``clean_groups`` and ``shift_groups``: the patient or lesion id of each test
row and shift-target row, for the group-level bootstrap. Everything else reads them through this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.evaluate import records as records_io
from crs.spec import for_setting

RECORDS_FILE = "records.parquet"
AGGREGATE_FILE = "records_seed_aggregated.parquet"
PREDICTIONS_DIR = "predictions"
AUDIT_FILE = "audit.json"
SCORE_DIR = "score"
SCORE_SUMMARY_FILE = "summary.json"
SCORE_TEXT_FILE = "score.txt"

CLEAN = "clean"
SHIFT = "shift"
ALL_CLEAN_PROBS = "clean_all_probs"
SUBSET_FRACTION = "subset_fraction"
SUBSET_SEED = "subset_seed"
FULL_SEEDS = "full_seeds"
CLEAN_GROUPS = "clean_groups"
SHIFT_GROUPS = "shift_groups"
_CORRUPT_PREFIX = "corrupt__"


class RunFolderError(FileNotFoundError):
    """A run folder lacks what was asked of it; the message says which stage writes it."""


def condition_key(condition: str, corruption: str = "", severity: int = 0) -> str:
    """The prediction-key stem of one evaluation condition (``clean``, ``shift``, ``corrupt__c__s``)."""
    if condition == "corrupt":
        return f"{_CORRUPT_PREFIX}{corruption}__{int(severity)}"
    return condition


def probs_key(stem: str) -> str:
    return f"{stem}_probs"


def labels_key(stem: str) -> str:
    return f"{stem}_labels"


def corrupt_stems(arrays: Mapping[str, Any]) -> list[str]:
    """The corruption condition stems present in one unit's predictions, in sorted order."""
    suffix = "_probs"
    return sorted(key[: -len(suffix)] for key in arrays if key.startswith(_CORRUPT_PREFIX) and key.endswith(suffix))


def parse_corrupt_stem(stem: str) -> tuple[str, int]:
    """``corrupt__jpeg__3`` -> ``("jpeg", 3)``."""
    corruption, severity = stem[len(_CORRUPT_PREFIX):].rsplit("__", 1)
    return corruption, int(severity)


def ensure_writable(folder: Path) -> Path:
    """Create ``folder`` and check it accepts files, with a one-line error naming it otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".crs-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise for_setting(PermissionError(
            f"output folder {folder} is not writable ({error.strerror}); choose another output folder"
        ), "output") from None
    return folder


class RunFolder:
    """Reads and writes one run's stage-2 and score artifacts under ``root``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.root)!r})"

    # --- paths ----------------------------------------------------------------------------------
    @property
    def records_path(self) -> Path:
        return self.root / RECORDS_FILE

    @property
    def aggregate_path(self) -> Path:
        return self.root / AGGREGATE_FILE

    @property
    def predictions_dir(self) -> Path:
        return self.root / PREDICTIONS_DIR

    @property
    def audit_path(self) -> Path:
        return self.root / AUDIT_FILE

    @property
    def score_dir(self) -> Path:
        return self.root / SCORE_DIR

    def predictions_path(self, encoder: str, task: str) -> Path:
        return self.predictions_dir / f"{encoder}__{task}.npz"

    def ensure_writable(self) -> RunFolder:
        ensure_writable(self.root)
        return self

    # --- records --------------------------------------------------------------------------------
    def write_records(self, records: pd.DataFrame, provenance: dict[str, Any]) -> None:
        """Run records and their seed aggregate, both with ``provenance`` in the parquet metadata."""
        records_io.write_parquet(records, self.records_path, provenance)
        records_io.write_parquet(records_io.seed_aggregate(records), self.aggregate_path, provenance)

    def read_records(self, encoders: Sequence[str] | None = None) -> pd.DataFrame:
        """Run records, restricted to ``encoders`` when given (a spec may drop one; the cache keeps it)."""
        if not self.records_path.exists():
            raise RunFolderError(f"no run records at {self.records_path}; run `crs probe` first")
        records = pd.read_parquet(self.records_path)
        if encoders is not None:
            records = records[records["encoder"].isin(list(encoders))].reset_index(drop=True)
        return records

    def read_aggregate(self) -> pd.DataFrame:
        if not self.aggregate_path.exists():
            raise RunFolderError(f"no seed aggregates at {self.aggregate_path}; run `crs probe` first")
        return pd.read_parquet(self.aggregate_path)

    def provenance(self) -> dict[str, Any]:
        return records_io.read_provenance(self.records_path) if self.records_path.exists() else {}

    # --- predictions ----------------------------------------------------------------------------
    def write_predictions(self, encoder: str, task: str, arrays: Mapping[str, np.ndarray]) -> Path:
        path = self.predictions_path(encoder, task)
        path.parent.mkdir(parents=True, exist_ok=True)
        # allow_pickle spelled out (else mypy reads **arrays as possibly binding it); the arrays are numeric
        np.savez_compressed(path, allow_pickle=False, **arrays)
        return path

    def has_predictions(self, encoder: str, task: str) -> bool:
        return self.predictions_path(encoder, task).exists()

    def read_predictions(self, encoder: str, task: str) -> dict[str, np.ndarray]:
        path = self.predictions_path(encoder, task)
        if not path.exists():
            raise RunFolderError(
                f"no per-case predictions at {path}; rerun `crs probe` (stage 2 writes them) "
                "or score without the case level"
            )
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}

    # --- audit ----------------------------------------------------------------------------------
    def write_audit(self, audit: Mapping[str, Any]) -> None:
        self.audit_path.write_text(json.dumps(audit, indent=1))

    def read_audit(self) -> dict[str, Any]:
        if not self.audit_path.exists():
            raise RunFolderError(f"no audit file at {self.audit_path}; run `crs probe` first")
        return dict(json.loads(self.audit_path.read_text()))

    # --- score ----------------------------------------------------------------------------------
    def write_score(self, tables: Mapping[str, pd.DataFrame], summary: Mapping[str, Any], text: str) -> Path:
        """Every score table as parquet, the summary as JSON and the terminal text, under ``score/``."""
        folder = self.score_dir
        folder.mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            table.to_parquet(folder / f"{name}.parquet", index=False)
        (folder / SCORE_SUMMARY_FILE).write_text(json.dumps(dict(summary), indent=2, default=str))
        (folder / SCORE_TEXT_FILE).write_text(text + "\n")
        return folder

    @property
    def score_summary_path(self) -> Path:
        """``score/summary.json``: its time stamp says when the score was stored (``crs report`` compares it)."""
        return self.score_dir / SCORE_SUMMARY_FILE

    def has_score(self) -> bool:
        return (self.score_dir / SCORE_SUMMARY_FILE).exists()

    def read_score_table(self, name: str) -> pd.DataFrame:
        path = self.score_dir / f"{name}.parquet"
        if not path.exists():
            raise RunFolderError(f"no score table {name!r} at {path}; run `crs score` first")
        return pd.read_parquet(path)

    def read_score_summary(self) -> dict[str, Any]:
        path = self.score_dir / SCORE_SUMMARY_FILE
        if not path.exists():
            raise RunFolderError(f"no score summary at {path}; run `crs score` first")
        return dict(json.loads(path.read_text()))
