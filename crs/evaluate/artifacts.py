"""The run folder: the one owner of every path, file name and array key stage 2 and scoring write.

Layout of ``<output>/``::

    records.parquet                    one row per encoder x task x fraction x seed x condition
    records_seed_aggregated.parquet    mean, std and n over seeds
    predictions/<encoder>__<task>.npz  per-case predictions of one unit (keys: see below)
    probe_costs.csv                    wall, CPU seconds and peak memory of each unit fitted by the last run
    audit.json                         skipped images and the drawn label-fraction ids
    score/                             every score table (parquet), summary.json, score.txt

Prediction keys: ``<condition>_probs`` and ``<condition>_labels`` with condition ``clean``,
``shift__<target>`` (one per shift target) or ``corrupt__<corruption>__<severity>``;
``clean_all_probs`` (every probe, float16), ``<condition>_keys`` and ``clean_all_keys`` (float32
rank keys in each probability column's order, which AUROCs are computed on: see
:class:`crs.probes.base.PredictedScores`; a folder written before them ranks the probabilities),
``subset_fraction``, ``subset_seed`` (one per probe)
and ``full_seeds`` (the seeds of the full-fraction rows); ``corrupt_rows``: where the corrupted
conditions were evaluated on a corruption subsample, its positions in the clean test rows; ``clean_groups`` and
``shift_groups__<target>``: the patient or lesion id of each test row and of each shift target's
rows, for the group-level bootstrap; ``clean_design`` and ``shift_design__<target>``: how those rows
were drawn, two strings (the design of :data:`crs.data.base.SPLIT_DESIGNS`, then ``recorded`` or
``inferred`` for a cache written before crs kept it; :func:`design_key`), which the bootstrap follows
(decision 0085); ``clean_subgroup__<attribute>`` and
``shift_subgroup__<target>__<attribute>``: the patient-group category (sex, age band, view...) of each
of those rows (:func:`subgroup_key`, :func:`subgroup_attributes`). Run folders written before several shift targets hold one
target under ``shift_probs``, ``shift_labels`` and ``shift_groups``; :func:`shift_keys` reads both
forms. Everything else reads them through this module.

A unit's predictions file is written one condition at a time by the worker that runs the unit
(:class:`PredictionWriter`, to ``<name>.npz.partial``) and moved into place by the stage when the
run's records are written (:meth:`RunFolder.commit_predictions`), so no process holds every
condition's predictions at once and a crashed run never leaves a new predictions file beside old
records. Probabilities and rank keys are stored uncompressed (deflate saves 7-10 % on them at
~30 ns a byte: 7 CPU s per CheXpert-sized unit for the keys alone), labels and small arrays deflated
(level 1).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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
UNIT_COSTS_FILE = "probe_costs.csv"
PARTIAL_SUFFIX = ".partial"
DEFLATE_LEVEL = 1
"""zlib level of the deflated (non-probability) arrays of a predictions file."""

CLEAN = "clean"
SHIFT = "shift"
"""Condition name of every shift target in the records; alone, the stem of an older folder's one target."""
ALL_CLEAN_PROBS = "clean_all_probs"
ALL_CLEAN_KEYS = "clean_all_keys"
SUBSET_FRACTION = "subset_fraction"
SUBSET_SEED = "subset_seed"
FULL_SEEDS = "full_seeds"
CLEAN_GROUPS = "clean_groups"
CORRUPT_ROWS = "corrupt_rows"
"""Positions into the clean test rows of the rows every corrupted condition was evaluated on; absent:
all of them (``[extract] corruption_rows``, decision 0032)."""
SHIFT_GROUPS = "shift_groups"
"""Group ids of an older folder's one shift target (today: :func:`shift_groups_key`)."""
_CORRUPT_PREFIX = "corrupt__"
_SHIFT_PREFIX = "shift__"
_PROBS_SUFFIX = "_probs"
_KEYS_SUFFIX = "_keys"


class RunFolderError(FileNotFoundError):
    """A run folder lacks what was asked of it; the message says which stage writes it."""


def condition_key(condition: str, corruption: str = "", severity: int = 0, target: str = "") -> str:
    """The prediction-key stem of one evaluation condition (``clean``, ``shift__<target>``, ``corrupt__c__s``)."""
    if condition == "corrupt":
        return f"{_CORRUPT_PREFIX}{corruption}__{int(severity)}"
    if condition == SHIFT and target:
        return f"{_SHIFT_PREFIX}{target}"
    return condition


SUBGROUP_MARK = "subgroup__"


def subgroup_key(attribute: str, target: str = "") -> str:
    """The key of one subgroup attribute's categories per test row (``target``: of that shift target's rows)."""
    return f"{CLEAN}_{SUBGROUP_MARK}{attribute}" if not target else f"{SHIFT}_{SUBGROUP_MARK}{target}__{attribute}"


def subgroup_attributes(arrays: Mapping[str, Any], target: str = "") -> list[str]:
    """The subgroup attributes stored for the clean test rows (or one shift target's rows), sorted."""
    prefix = subgroup_key("", target)
    return sorted(key[len(prefix):] for key in arrays if key.startswith(prefix) and "__" not in key[len(prefix):])


DESIGN = "design"


def design_key(target: str = "") -> str:
    """The key of the sampling design of the clean test rows (or of one shift target's rows)."""
    return f"{CLEAN}_{DESIGN}" if not target else f"{SHIFT}_{DESIGN}__{target}"


def shift_groups_key(target: str) -> str:
    """The key of one shift target's group ids."""
    return f"{SHIFT_GROUPS}__{target}"


@dataclass(frozen=True)
class ShiftKeys:
    """Where one shift target's predictions lie in a unit's arrays (``groups`` may be absent there)."""

    target: str
    probs: str
    labels: str
    groups: str


class ShiftKeysError(ValueError):
    """A unit's shift predictions cannot be named; the message says what the records hold."""


def shift_keys(arrays: Mapping[str, Any], targets: Sequence[str] | None = None) -> list[ShiftKeys]:
    """The shift targets in one unit's predictions, by target name (sorted, as the scores order them).

    A folder written before several shift targets holds one target under the bare ``shift`` keys,
    without its name: it takes the one name in ``targets`` (the records' targets of the task), or
    ``""`` when none is given. ``targets`` with several names cannot name it: an error.
    """
    found = [
        key[len(_SHIFT_PREFIX): -len(_PROBS_SUFFIX)] for key in arrays
        if key.startswith(_SHIFT_PREFIX) and key.endswith(_PROBS_SUFFIX)
    ]
    keys = [ShiftKeys(t, probs_key(condition_key(SHIFT, target=t)), labels_key(condition_key(SHIFT, target=t)),
                      shift_groups_key(t)) for t in found]
    if probs_key(SHIFT) in arrays:  # an older folder: one target, named by the records
        names = list(targets) if targets is not None else [""]
        if len(names) != 1 or found:
            raise ShiftKeysError(
                f"predictions hold one unnamed shift target (written by an older crs) but the records name "
                f"{sorted(names)}; rerun `crs probe` to rewrite the predictions"
            )
        keys.append(ShiftKeys(names[0], probs_key(SHIFT), labels_key(SHIFT), SHIFT_GROUPS))
    return sorted(keys, key=lambda k: k.target)


def probs_key(stem: str) -> str:
    return f"{stem}{_PROBS_SUFFIX}"


def keys_key(stem: str) -> str:
    """The rank keys stored beside ``<stem>_probs`` (AUROCs rank these; see the module docstring)."""
    return f"{stem}{_KEYS_SUFFIX}"


def auroc_scores(arrays: Mapping[str, Any], probs_name: str) -> np.ndarray:
    """What an AUROC ranks for the probabilities stored under ``probs_name``: their rank keys when
    the folder has them (order-exact, see :class:`crs.probes.base.PredictedScores`), else the
    probabilities themselves (a folder written before the keys)."""
    key: str | None = None
    if probs_name == ALL_CLEAN_PROBS:
        key = ALL_CLEAN_KEYS
    elif probs_name.endswith(_PROBS_SUFFIX):
        key = keys_key(probs_name[: -len(_PROBS_SUFFIX)])
    return np.asarray(arrays[key] if key is not None and key in arrays else arrays[probs_name])


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


def predictions_file(predictions_dir: Path | str, encoder: str, task: str) -> Path:
    """One unit's predictions file in a predictions folder (a run folder's, or one copied elsewhere)."""
    return Path(predictions_dir) / f"{encoder}__{task}.npz"


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


class PredictionWriter:
    """Writes one unit's predictions file array by array (an ``.npz`` that ``np.load`` reads).

    Each :meth:`add` goes straight to disk, so only the array being written is held.
    Probabilities and rank keys (names ending ``_probs`` or ``_keys``: float32 noise that barely
    compresses) are stored uncompressed, everything else deflated. Use as a context manager, or
    call :meth:`close`.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._zip = zipfile.ZipFile(self.path, mode="w", allowZip64=True)
        self._keys: set[str] = set()

    def add(self, key: str, array: np.ndarray) -> None:
        if key in self._keys:
            raise ValueError(f"prediction key {key!r} written twice to {self.path}")
        self._keys.add(key)
        array = np.asarray(array)
        raw = key.endswith((_PROBS_SUFFIX, _KEYS_SUFFIX))
        info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED if raw else zipfile.ZIP_DEFLATED
        # deflate level 1: labels and group ids shrink to 11-18 % instead of 7-14 % at the default
        # level 6, five times faster (a CheXpert unit deflated 66 label arrays in 1.8 CPU s at 6)
        setattr(info, "_compresslevel", DEFLATE_LEVEL)  # noqa: B010  # ZipInfo's level (named so in Python 3.11 to 3.13)
        with self._zip.open(info, "w", force_zip64=True) as handle:
            np.lib.format.write_array(handle, array, allow_pickle=False)

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> PredictionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LazyPredictions(Mapping[str, np.ndarray]):
    """One predictions file's arrays by name, each read from the file the first time it is asked for.

    A CheXpert-sized file holds every condition (about 200 arrays, 0.5 GB compressed, seconds to read
    whole); what needs a few of them (the subgroup tables: the clean and shift predictions and the
    categories) reads only those. Names are listed without reading any array.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with np.load(self.path, allow_pickle=False) as data:
            self._names = tuple(data.files)
        self._read: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._read:
            if key not in self._names:
                raise KeyError(key)
            with np.load(self.path, allow_pickle=False) as data:
                self._read[key] = data[key]
        return self._read[key]

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


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
        return predictions_file(self.predictions_dir, encoder, task)

    def partial_predictions_path(self, encoder: str, task: str) -> Path:
        """Where a worker writes a unit's predictions before the stage commits them."""
        path = self.predictions_path(encoder, task)
        return path.with_name(path.name + PARTIAL_SUFFIX)

    @property
    def unit_costs_path(self) -> Path:
        return self.root / UNIT_COSTS_FILE

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
        """All of one unit's predictions at once (stage 2 streams them instead: :meth:`open_predictions`)."""
        with self.open_predictions(encoder, task) as writer:
            for key, array in arrays.items():
                writer.add(key, array)
        return self.commit_predictions(encoder, task)

    def open_predictions(self, encoder: str, task: str) -> PredictionWriter:
        """A writer for one unit's predictions, to its partial path until :meth:`commit_predictions`."""
        return PredictionWriter(self.partial_predictions_path(encoder, task))

    def commit_predictions(self, encoder: str, task: str) -> Path:
        """Move a unit's finished partial predictions file into place."""
        path = self.predictions_path(encoder, task)
        self.partial_predictions_path(encoder, task).replace(path)
        return path

    def has_predictions(self, encoder: str, task: str) -> bool:
        return self.predictions_path(encoder, task).exists()

    def read_predictions(self, encoder: str, task: str) -> dict[str, np.ndarray]:
        path = self.predictions_path(encoder, task)
        if not path.exists():
            raise self.missing_predictions_error([(encoder, task)])
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}

    def read_predictions_on_demand(self, encoder: str, task: str) -> LazyPredictions:
        """One (encoder, task)'s predictions, each array read when first asked for (:class:`LazyPredictions`)."""
        path = self.predictions_path(encoder, task)
        if not path.exists():  # raised here: a subclass may route read_predictions through this method
            raise self.missing_predictions_error([(encoder, task)])
        return LazyPredictions(path)

    def missing_predictions(self, pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (encoder, task) pairs of ``pairs`` whose per-case predictions file is not in this folder."""
        return [(encoder, task) for encoder, task in pairs if not self.has_predictions(encoder, task)]

    def missing_predictions_error(self, missing: Sequence[tuple[str, str]]) -> RunFolderError:
        """One line: which per-case predictions are missing, and the two ways on (copy them, or score
        at the seed level only)."""
        first = self.predictions_path(*missing[0])
        where = (f"no {PREDICTIONS_DIR}/ folder in {self.root}" if not self.predictions_dir.exists()
                 else f"{len(missing)} per-case predictions file(s) missing, first {first}")
        return RunFolderError(
            f"{where}: the case-level bootstrap reads the per-case predictions stage 2 wrote ({first.name} ...); "
            f"copy the run's {PREDICTIONS_DIR}/ folder beside {RECORDS_FILE}, or score at the seed level only "
            "(spec [score] case_bootstrap = false; ScoreSettings(case_level=False))"
        )

    # --- unit costs -----------------------------------------------------------------------------
    def write_unit_costs(self, costs: pd.DataFrame) -> Path:
        """Wall and CPU seconds, peak memory and phase times of each unit fitted by this run."""
        costs.to_csv(self.unit_costs_path, index=False, float_format="%.4g")
        return self.unit_costs_path

    def read_unit_costs(self) -> pd.DataFrame:
        if not self.unit_costs_path.exists():
            raise RunFolderError(f"no unit costs at {self.unit_costs_path}; run `crs probe` first")
        return pd.read_csv(self.unit_costs_path)

    # --- audit ----------------------------------------------------------------------------------
    def write_audit(self, audit: Mapping[str, Any]) -> None:
        self.audit_path.write_text(json.dumps(audit, indent=1))

    def read_audit(self) -> dict[str, Any]:
        if not self.audit_path.exists():
            raise RunFolderError(f"no audit file at {self.audit_path}; run `crs probe` first")
        return dict(json.loads(self.audit_path.read_text()))

    # --- score ----------------------------------------------------------------------------------
    def write_score(self, tables: Mapping[str, pd.DataFrame], summary: Mapping[str, Any], text: str) -> Path:
        """Every score table as parquet, the summary as JSON and the terminal text, under ``score/``.

        The tables are one set: the old summary goes first (so no reader takes the folder for a whole
        score while it is rewritten), then every table of this score is written, every table an earlier
        score left that this one does not have is removed (scoring again without ``equity`` must not
        leave the old equity tables beside the new summary), and the summary comes last.
        """
        folder = self.score_dir
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SCORE_SUMMARY_FILE).unlink(missing_ok=True)
        for name, table in tables.items():
            table.to_parquet(folder / f"{name}.parquet", index=False)
        current = {f"{name}.parquet" for name in tables}
        for stale in folder.glob("*.parquet"):
            if stale.name not in current:
                stale.unlink()
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
