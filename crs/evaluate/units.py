"""Stage 2: fit probes on cached features and evaluate each on every condition, without refitting.

The unit of work is one (encoder, task): the clean features of its train, validation and test rows
are read from the cache once (in row blocks, kept as the cache stores them, float16), the nested
label-fraction subsets for every seed are drawn from the stored labels (identical for every
encoder, which makes the seed bootstrap paired), all probes of the unit are fitted in one call to
the probe backend, and each fitted probe predicts on the clean test split, every corruption x
severity and each shift target. Conditions are streamed: one is read from the cache block by block,
predicted by every distinct probe, scored with the batched metrics and written to the unit's
predictions file before the next is read, so a unit's memory does not grow with the number of
conditions (``crs.evaluate.memory`` has the formula). Needs nothing but the cache.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import zarr
from threadpoolctl import threadpool_limits

from crs import axes
from crs.cache.corrupt_rows import checked_positions
from crs.cache.direct import read_block
from crs.cache.prints import kept_rows
from crs.cache.store import FeatureStore, SampleTable, store_path
from crs.corruptions.variants import resolve_variants
from crs.data.base import VALIDATION_STREAM, nested_label_fractions
from crs.evaluate import artifacts
from crs.evaluate.memory import READ_ROWS, PeakRSS, UnitSize
from crs.probes import ProbeSet, distinct_probes, fit_probes, predict_kernel
from crs.probes.base import LinearProbeSet, PredictedScores, as_float
from crs.probes.metrics import METRICS, evaluation_metrics
from crs.spec import Spec

log = logging.getLogger("crs.probe")

RECORDS_FORMAT = 6
"""Bump when what a unit writes changes (columns, predictions), so incremental runs refit stale units.
5: one prediction stem per shift target (``shift__<target>``); 6: subgroup categories per test row."""

VALIDATIONS = ("fraction", "full")
"""``fraction``: each probe's C is chosen on validation rows drawn at its own label fraction (nested,
stratified, same per-class floor); ``full``: on the whole validation split."""


@dataclass(frozen=True)
class ProbeUnit:
    """One (encoder, task) unit of stage 2; ``targets`` name the task's shift target stores, in spec order.

    ``corruptions`` and ``severities`` are the spec's ``[extract]`` choice: the unit evaluates exactly
    those corrupted variants, whatever else a shared cache holds (docs/decisions/0050); ``corruptions``
    None evaluates every corrupted array cached for the encoder (a unit built without a spec).
    """

    encoder: str
    task: str
    targets: tuple[str, ...] = ()
    corruptions: tuple[str, ...] | str | None = None
    severities: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProbeSettings:
    label_fractions: tuple[float, ...]
    seeds: tuple[int, ...]
    Cs: tuple[float, ...]
    backend: str = "sklearn"
    family: str = "logistic"
    selection: str = "logloss"
    min_per_class: int = 3
    validation: str = "fraction"
    robustness_fractions: str = "full"


@dataclass(frozen=True)
class UnitCost:
    """What one unit cost its worker: wall and CPU seconds, peak resident memory (with the RSS at
    the unit's start), and CPU seconds per phase."""

    encoder: str
    task: str
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    start_rss_bytes: int
    read_cpu_s: float
    fit_cpu_s: float
    predict_cpu_s: float
    metrics_cpu_s: float
    save_cpu_s: float
    n_conditions: int
    n_probes: int
    worker_pid: int
    peak_exact: bool = True
    zero_shot_cpu_s: float = 0.0  # the unit's zero-shot, run in its pass (decision 0112); in cpu_s too

    def line(self) -> str:
        return (
            f"probe unit {self.encoder} x {self.task}: {self.wall_s:.1f} s wall, {self.cpu_s:.1f} s CPU, "
            f"peak RSS {self.peak_rss_bytes / 2**30:.2f} GiB (CPU s read {self.read_cpu_s:.1f} / fit "
            f"{self.fit_cpu_s:.1f} / predict {self.predict_cpu_s:.1f} / metrics {self.metrics_cpu_s:.1f} / save "
            f"{self.save_cpu_s:.1f}"
            + (f" / zero-shot {self.zero_shot_cpu_s:.1f}" if self.zero_shot_cpu_s else "")
            + f"; {self.n_conditions} conditions x {self.n_probes} probes)"
        )


@dataclass(frozen=True)
class UnitResult:
    """A unit's run records, the partial predictions file its worker wrote (None when no run folder
    was given), its cost and, when it ran its zero-shot too, that result
    (:class:`crs.evaluate.zero_shot.ZeroShotUnitResult`)."""

    records: pd.DataFrame
    predictions_file: Path | None = None
    cost: UnitCost | None = None
    zero_shot: Any = None


def condition_metrics(y: np.ndarray, probs: np.ndarray, kind: str, groups: np.ndarray | None = None) -> dict[str, float]:
    """Every per-condition metric of one probe's predictions (``groups``: patient ids, for the AUROC SE)."""
    row = {
        "auroc": axes.auroc(y, probs, kind),
        # noise level: sets the CRS error floor; clustered by patient where the condition has ids (issue 30)
        "auroc_se": axes.auroc_standard_error(y, probs, kind, groups),
        "ece": axes.ece(y, probs, kind),
        "ece_debiased": axes.debiased_ece(y, probs, kind),  # the scored calibration error
        "ece_se": axes.ece_standard_error(y, probs, kind),
        "brier": axes.brier(y, probs, kind),
        "nll": axes.nll(y, probs, kind),
        "kappa": np.nan,
        "ordinal_auroc": np.nan,
    }
    if kind == "ordinal":
        row["kappa"] = axes.quadratic_kappa(y, probs)
        row["ordinal_auroc"] = axes.ordinal_auroc(y, probs)
    return row


def training_subsets(table: SampleTable, settings: ProbeSettings) -> list[tuple[float, int, np.ndarray]]:
    """(label fraction, seed, row indices into the training split) for every probe of a task."""
    train_labels = table.labels[table.indices("train")]
    subsets: list[tuple[float, int, np.ndarray]] = []
    for seed in settings.seeds:
        drawn = nested_label_fractions(train_labels, settings.label_fractions, seed, settings.min_per_class)
        subsets.extend((fraction, seed, drawn[fraction]) for fraction in sorted(drawn))
    return subsets


def validation_subsets(table: SampleTable, settings: ProbeSettings) -> list[np.ndarray] | None:
    """Per probe (in :func:`training_subsets` order), the rows of the validation split that choose
    its C: drawn at the probe's label fraction (``validation = "fraction"``), or None (all rows)."""
    if settings.validation not in VALIDATIONS:
        raise ValueError(f"validation {settings.validation!r} is not one of {VALIDATIONS}")
    if settings.validation == "full":
        return None
    val_labels = table.labels[table.indices("val")]
    rows: list[np.ndarray] = []
    for seed in settings.seeds:
        drawn = nested_label_fractions(
            val_labels, settings.label_fractions, seed, settings.min_per_class, stream=VALIDATION_STREAM
        )
        rows.extend(drawn[fraction] for fraction in sorted(drawn))
    return rows


# --- reading features in row blocks ---------------------------------------------------------------


def block_rows(array: zarr.Array | np.ndarray) -> int:
    """Rows per read: about ``READ_ROWS``, in whole chunks so no chunk is decoded twice."""
    chunk = int(array.chunks[0]) if isinstance(array, zarr.Array) else READ_ROWS
    return max(chunk, 1) * max(1, READ_ROWS // max(chunk, 1))


def read_rows(array: zarr.Array, row_sets: list[np.ndarray]) -> list[np.ndarray]:
    """The rows of each sorted index array in ``row_sets``, each as its own matrix in the stored
    dtype, reading ``array`` one block at a time (blocks without a wanted row are skipped)."""
    outs = [np.empty((len(rows), array.shape[1]), dtype=array.dtype) for rows in row_sets]
    for start, stop, spans in _blocks(array, row_sets):
        data = read_block(array, start, stop)
        for out, rows, (lo, hi) in zip(outs, row_sets, spans, strict=True):
            out[lo:hi] = data[rows[lo:hi] - start]
    return outs


def iter_rows(array: zarr.Array, rows: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(position, block) over the rows ``rows`` (sorted; None: all) of ``array``, in order, one
    block of chunks at a time, in the stored dtype."""
    if rows is None:
        step = block_rows(array)
        for start in range(0, array.shape[0], step):
            yield start, read_block(array, start, start + step)
        return
    for start, stop, ((lo, hi),) in _blocks(array, [rows]):
        yield lo, read_block(array, start, stop)[rows[lo:hi] - start]


def _blocks(array: zarr.Array, row_sets: list[np.ndarray]):
    step = block_rows(array)
    for start in range(0, array.shape[0], step):
        stop = min(start + step, array.shape[0])
        spans = [tuple(np.searchsorted(rows, [start, stop])) for rows in row_sets]
        if any(hi > lo for lo, hi in spans):
            yield start, stop, spans


# --- evaluation conditions ------------------------------------------------------------------------


@dataclass
class Condition:
    """One evaluation condition: its record keys, labels, and where its feature rows come from."""

    condition: str
    corruption: str
    severity: int
    target: str
    labels: np.ndarray
    features: np.ndarray | zarr.Array  # in memory (clean test rows) or a cache array read in blocks
    rows: np.ndarray | None = None  # rows of ``features`` to evaluate; None: all
    groups: np.ndarray | None = None  # patient or lesion id per evaluated row (clean and shift), for the bootstrap
    subgroups: dict[str, np.ndarray] = field(default_factory=dict)  # attribute -> category per evaluated row
    design: tuple[str, str] | None = None  # how the rows were drawn (clean and shift): (design, "recorded" | "inferred")

    @property
    def design_key(self) -> str:
        """The prediction key of this condition's sampling design (decision 0085)."""
        return artifacts.design_key(self.target if self.condition == "shift" else "")

    @property
    def groups_key(self) -> str:
        """The prediction key of this condition's group ids (clean test rows or one shift target's rows)."""
        return artifacts.CLEAN_GROUPS if self.condition == "clean" else artifacts.shift_groups_key(self.target)

    @property
    def key(self) -> str:
        return artifacts.condition_key(self.condition, self.corruption, self.severity, self.target)

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        if isinstance(self.features, np.ndarray):
            step = block_rows(self.features)
            for start in range(0, len(self.features), step):
                yield start, self.features[start : start + step]
        else:
            yield from iter_rows(self.features, self.rows)


def sampling_design(table: SampleTable) -> tuple[str, str]:
    """(design, "recorded" or "inferred") of a sample table's test rows, as the predictions store it."""
    return table.split_design, "recorded" if table.split_design_recorded else "inferred"


def evaluation_conditions(
    unit: ProbeUnit, cache_root: Path, store: FeatureStore, table: SampleTable, clean_test: np.ndarray
) -> Iterator[Condition]:
    """The clean test split (from ``clean_test`` in memory), every corruption x severity and each
    shift target, in record order; the cache arrays are opened, not read."""
    test_labels = table.labels[table.indices("test")]
    test_rows = table.indices("test")
    clean = Condition("clean", "", 0, "", test_labels, clean_test, groups=table.groups[test_rows],
                      subgroups={a: values[test_rows] for a, values in table.subgroups.items()},
                      design=sampling_design(table))
    yield clean
    del clean, clean_test  # the caller may free the clean test rows once they are evaluated
    corrupted = corrupted_arrays(unit, store, table.modality)
    positions = corrupt_positions(store, unit.encoder, corrupted)
    corrupt_labels = test_labels if positions is None else test_labels[positions]
    for name in corrupted:
        _, corruption, severity_name = name.split("/")
        yield Condition("corrupt", corruption, int(severity_name), "", corrupt_labels,
                        store.feature_array(unit.encoder, name))
    for target in unit.targets:  # each its own condition: own labels, rows and groups
        target_store = FeatureStore(store_path(cache_root, target))
        target_table = target_store.read_table()
        if target_table.task.class_names != table.task.class_names:
            raise ValueError(
                f"shift target {target!r} labels {target_table.task.class_names} differ from "
                f"{unit.task!r} labels {table.task.class_names}; run `crs extract` again (it matches a "
                "target's labels to its task's by name)"
            )
        # Images the target shares with its source are left out (listed in the audit; decision 0097).
        target_rows = kept_rows(target_store, target_table.ids, target_table.indices("test"))
        yield Condition("shift", "", 0, target, target_table.labels[target_rows],
                        target_store.feature_array(unit.encoder, "clean"), target_rows,
                        groups=target_table.groups[target_rows],
                        subgroups={a: values[target_rows] for a, values in target_table.subgroups.items()},
                        design=sampling_design(target_table))


def corrupted_arrays(unit: ProbeUnit, store: FeatureStore, modality: str) -> list[str]:
    """The corrupted feature arrays ``unit`` evaluates, in the cache's order: those of the spec's
    corruptions x severities (all cached ones for a unit without a spec's choice). A shared cache may
    hold more (another spec's severities); they are left alone. One the spec names but the cache lacks
    is refused in one line."""
    cached = [name for name in store.feature_array_names(unit.encoder) if name.startswith("corrupt/")]
    if unit.corruptions is None:
        return cached
    wanted = {f"corrupt/{name}/{severity}"
              for name, severity in resolve_variants(modality, unit.corruptions, unit.severities)}
    missing = sorted(wanted - set(cached))
    if missing:
        raise ValueError(
            f"encoder {unit.encoder!r} on {unit.task!r}: the cache holds no features for {len(missing)} corrupted "
            f"variant(s) the spec names ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}); run "
            "`crs extract` with this spec (or import them), or leave them out of its [extract] corruptions and severities"
        )
    return [name for name in cached if name in wanted]


def corrupt_positions(store: FeatureStore, encoder: str, corrupted: list[str]) -> np.ndarray | None:
    """Positions into the test rows of the encoder's corrupted rows (None: all of them), checked against
    every corrupted array (a corruption subsample, ``[extract] corruption_rows``)."""
    if not corrupted:
        return None
    return checked_positions(store, encoder, corrupted, str(store.root.attrs.get("test_digest", "")))


# --- one unit -------------------------------------------------------------------------------------


@dataclass
class _Clock:
    """CPU seconds per phase of one unit (this process, every thread). CPU rather than wall seconds:
    on a shared machine wall time measures the neighbours. The evaluation conditions are read ahead
    on a reader thread (:class:`ConditionReader`), so part of their reading lands in the other phases;
    ``read`` is the CPU spent while prediction waits for rows (and the clean rows' read)."""

    seconds: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("read", "fit", "predict", "metrics", "save", "zero_shot"), 0.0))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        # zero_shot (decision 0112) runs on this thread alone (one BLAS thread, a single-threaded kernel):
        # its own thread's CPU, so the reader thread's reads, which the probes would pay anyway, stay out
        clock = time.thread_time if name == "zero_shot" else time.process_time
        start = clock()
        try:
            yield
        finally:
            self.seconds[name] += clock() - start


def float32_rows(rows: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """float16 cache rows as float32 (exact), written into ``buffer`` (reused across blocks: no fresh
    pages per block; :func:`crs.probes.base.as_float`); other dtypes as they are."""
    return as_float(rows, np.float32, buffer) if rows.dtype == np.float16 else rows


READ_AHEAD_BLOCKS = 4
"""Row blocks a unit's reader thread may hold ahead of prediction (4 x 8 MB at D = 1,024)."""


class ConditionReader:
    """Reads every evaluation condition's row blocks on a thread of its own, in order, up to
    ``depth`` blocks ahead of the caller, across condition boundaries, so the disk reads of a cold
    cache overlap prediction, metrics and saving instead of idling the worker's core.

    Use :meth:`conditions` for the conditions in order and, inside that loop, :meth:`blocks` for the
    current condition's (start, rows) blocks; an error on the reader thread is raised there.
    :meth:`close` stops the thread (also when the caller stops early)."""

    def __init__(self, conditions: Iterator[Condition], depth: int = READ_AHEAD_BLOCKS) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(conditions,), name="crs-read", daemon=True)
        self._thread.start()

    def _read(self, conditions: Iterator[Condition]) -> None:
        try:
            for condition in conditions:
                self._put(("condition", condition))
                for block in condition.blocks():
                    if not self._put(("block", block)):
                        return
                self._put(("end", None))
            self._put(("done", None))
        except BaseException as error:  # handed to the caller's thread
            self._put(("error", error))

    def _put(self, item: tuple) -> bool:
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _get(self) -> tuple:
        kind, value = self._queue.get()
        if kind == "error":
            raise value
        return kind, value

    def _items(self, kind_wanted: str, kind_last: str) -> Iterator:
        while True:
            kind, value = self._get()
            if kind == kind_last:
                return
            assert kind == kind_wanted, kind
            yield value

    def conditions(self) -> Iterator[Condition]:
        return self._items("condition", "done")

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        return self._items("block", "end")

    def close(self) -> None:
        self._stopped.set()
        self._thread.join()


PREDICT_ROWS = 512
"""Rows per float64 prediction step inside a read block. A 512 x 1,024 float64 piece (4 MiB) stays in
the cache through its conversion from float16, its centering and the product, where the whole
4,096-row block (32 MiB) went through memory three times: 1.4-1.6x faster per block here, and every
row's logits are the same bit for bit (a row's product does not depend on the rows beside it;
``tests/evaluate/test_stage2_memory.py`` checks it)."""


class RidingColumns(Protocol):
    """What :func:`predict_condition` feeds besides the probes (the unit's zero-shot,
    :class:`crs.evaluate.zero_shot.ZeroShotPass`; decisions 0112, 0116): each block's rows, or, when
    the probes' kernel widens them anyway, the rows' dot products with :attr:`columns_t` and sums of
    squares taken from the same widening."""

    columns_t: np.ndarray  # (M, D) float64, C order: the current condition's columns

    def add_block(self, start: int, rows: np.ndarray) -> None: ...

    def add_dots(self, start: int, dots: np.ndarray, squares: np.ndarray) -> None: ...


def predict_condition(
    probe_set: ProbeSet, condition: Condition, n_outputs: int, clock: _Clock,
    blocks: Iterator[tuple[int, np.ndarray]] | None = None, ordinal: bool = False,
    riding: RidingColumns | None = None,
) -> PredictedScores:
    """Probabilities (P, N, K) float64 and rank keys of every probe of ``probe_set`` on one condition
    (:class:`crs.probes.base.PredictedScores`), predicted block by block as the rows arrive (from
    ``blocks``, a :class:`ConditionReader`'s, or read here). Probe sets without float64 rank keys
    (k-NN, ridge's one-vs-rest link) give their probabilities and no keys.

    ``riding`` (the unit's zero-shot, decision 0112) sees each block too. When the probes' logits go
    through the compiled float16 kernel (keyed probes, float16 rows, numba), its columns ride along in
    that kernel's call per :data:`PREDICT_ROWS` piece, from the one widening of each row (decision
    0116), and their dot products and sums of squares reach it through ``add_dots``; otherwise it gets
    the block through ``add_block``. Its own work is the clock's ``zero_shot`` phase; the shared
    kernel call is ``predict``'s."""
    N, P = len(condition.labels), probe_set.n_subsets
    keyed = isinstance(probe_set, LinearProbeSet) and probe_set.link in ("softmax", "sigmoid")
    probs = np.empty((P, N, n_outputs))
    ovr = np.empty((P, N, n_outputs), dtype=np.float32) if keyed else None
    exceed = np.empty((P, N, n_outputs - 1), dtype=np.float32) if keyed and ordinal else None
    blocks = condition.blocks() if blocks is None else blocks
    reference = None  # the condition's first row: keys are the rows' exact differences from it
    while True:
        with clock.phase("read"):
            item = next(blocks, None)
        if item is None:
            return PredictedScores(probs, ovr, exceed)  # type: ignore[arg-type]
        start, rows = item
        stop = start + len(rows)
        fast = keyed and rows.dtype == np.float16 and predict_kernel.available()
        along = riding if fast else None  # its columns ride along in the probes' kernel call
        if riding is not None and along is None:
            with clock.phase("zero_shot"):
                riding.add_block(start, rows)
        with clock.phase("predict"):
            if keyed:
                if reference is None and len(rows):
                    reference = rows[0].astype(np.float64)
                if along is not None:
                    dots, squares = np.empty((len(rows), len(along.columns_t))), np.empty(len(rows))
                for lo in range(0, len(rows), PREDICT_ROWS):
                    piece = rows[lo : lo + PREDICT_ROWS]
                    at = slice(start + lo, start + lo + len(piece))
                    cosines = None if along is None else (along.columns_t, dots[lo : lo + len(piece)], squares[lo : lo + len(piece)])
                    scores = probe_set.predict_scores(piece, ordinal, reference, cosines)  # type: ignore[attr-defined]
                    probs[:, at], ovr[:, at] = scores.probs, scores.ovr_keys  # type: ignore[index]
                    if exceed is not None:
                        exceed[:, at] = scores.exceed_keys
            else:
                probs[:, start:stop] = probe_set.predict_proba(rows)
        if along is not None:
            with clock.phase("zero_shot"):
                along.add_dots(start, dots, squares)


def probe_metrics(
    y: np.ndarray, scores: PredictedScores, kind: str, reference_columns: list[str], groups: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Every column of :func:`condition_metrics` for each probe of ``scores`` (P, N, K): the batched
    metrics (AUROCs ranked on the rank keys), and per probe only the columns the batched path does
    not have (none today)."""
    probs = scores.probs
    batched = evaluation_metrics(
        y, probs, kind, metrics=[name for name in reference_columns if name in METRICS],
        ovr_keys=scores.ovr_keys, exceed_keys=scores.exceed_keys, groups=groups,
    )
    extra = [name for name in reference_columns if name not in batched]
    if extra:
        rows = [condition_metrics(y, p, kind, groups) for p in probs]
        batched.update({name: np.array([row[name] for row in rows], dtype=np.float64) for name in extra})
    return {name: batched[name] for name in reference_columns}


@contextmanager
def one_thread() -> Iterator[None]:
    """BLAS and torch limited to one thread for the block, restored after.

    A unit's arithmetic must not depend on where it runs: in the calling process (one worker,
    whose thread count is the process's) or in a worker process (one thread each), torch and BLAS
    split products differently across threads and round differently (one worker against two moved
    records by up to 2.7e-3 in AUROC before). Pinned to one thread everywhere, a unit's records are
    bit-identical whatever the worker count; one BLAS thread per worker is also the fastest on
    these cores (docs/performance.md)."""
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=1):
        if torch is not None:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch is not None and previous is not None:
                torch.set_num_threads(previous)


def run_unit(
    unit: ProbeUnit, cache_root: Path, settings: ProbeSettings, folder: artifacts.RunFolder | None = None,
    zero_shot: Any = None,
) -> UnitResult:
    """Fit and evaluate every probe of one (encoder, task) unit from the cache alone, on one thread
    (:func:`one_thread`).

    With ``folder``, the unit's per-case predictions are written, one condition at a time, to its
    partial predictions file there (the stage commits it with the run's records). With ``zero_shot``
    (a :class:`crs.evaluate.zero_shot.ZeroShotJob`), the unit's zero-shot runs on the blocks this pass
    reads (decision 0112; it only reads them: the probes' records are the same either way) and comes
    back as ``UnitResult.zero_shot``.
    """
    if settings.backend == "torch":
        import torch  # noqa: F401  # loaded before the limit, so the limit covers torch's threads too
    with one_thread():
        return _run_unit(unit, cache_root, settings, folder, zero_shot)


def _run_unit(
    unit: ProbeUnit, cache_root: Path, settings: ProbeSettings, folder: artifacts.RunFolder | None = None,
    zero_shot: Any = None,
) -> UnitResult:
    clock = _Clock()
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    with PeakRSS() as memory:
        start_rss = memory.peak
        store = FeatureStore(store_path(cache_root, unit.task))
        table = store.read_table()
        kind = table.task.kind
        train, val, test = (table.indices(s) for s in ("train", "val", "test"))
        with clock.phase("read"):
            X_train, X_val, X_test = read_rows(store.feature_array(unit.encoder, "clean"), [train, val, test])
        subsets = training_subsets(table, settings)
        with clock.phase("fit"):
            probe_set = fit_probes(
                X_train, table.labels[train], X_val, table.labels[val],
                [rows for _, _, rows in subsets], kind,
                backend=settings.backend, family=settings.family, Cs=settings.Cs,
                selection=settings.selection, n_classes=table.task.n_outputs,
                val_subsets=validation_subsets(table, settings),
            )
        fused = None
        if zero_shot is not None:  # its temperatures are fitted on the validation rows read above
            with clock.phase("zero_shot"):
                fused = zero_shot.start(unit, store, table, settings, X_val)
        del X_train, X_val
        fractions = np.array([float(f) for f, _, _ in subsets])
        seeds = np.array([int(seed) for _, seed, _ in subsets], dtype=np.int64)
        full = np.flatnonzero(fractions == max(settings.label_fractions))
        every_probe = np.arange(len(subsets))
        robustness_probes = full if settings.robustness_fractions == "full" else every_probe
        keys = {"encoder": unit.encoder, "task": unit.task, "task_kind": kind, "label_fraction": fractions, "seed": seeds}
        probe_columns = {
            "n_train": np.array([len(rows) for _, _, rows in subsets], dtype=np.int64),
            "selected_C": np.asarray(probe_set.selected_C, dtype=np.float64),
            "val_score": np.asarray(probe_set.val_score, dtype=np.float64),
        }
        # The small per-unit arrays of the predictions file, written after the conditions.
        predictions: dict[str, np.ndarray] = {
            artifacts.SUBSET_FRACTION: fractions, artifacts.SUBSET_SEED: seeds, artifacts.FULL_SEEDS: seeds[full],
        }
        corrupted = corrupted_arrays(unit, store, table.modality)
        positions = corrupt_positions(store, unit.encoder, corrupted)
        if positions is not None:  # the bootstrap weights these rows by the clean rows' patient draws
            predictions[artifacts.CORRUPT_ROWS] = positions
        writer = folder.open_predictions(unit.encoder, unit.task) if folder is not None else None
        reader = ConditionReader(evaluation_conditions(unit, cache_root, store, table, X_test))
        del X_test  # the reader's clean condition holds the clean test rows until they are evaluated
        frames: list[pd.DataFrame] = []
        reference_columns: list[str] = []
        n_conditions = 0
        try:
            for condition in reader.conditions():
                # Which probes this condition evaluates (every probe on clean data; on corrupted and
                # shifted data those of the full fraction unless asked), and of those the distinct ones:
                # the full fraction's seeds train on the same rows, so they are one probe, predicted once.
                evaluated = every_probe if condition.condition == "clean" else robustness_probes
                distinct, copies = distinct_probes(probe_set, evaluated)
                if fused is not None:
                    with clock.phase("zero_shot"):
                        fused.start(condition)
                distinct_scores = predict_condition(
                    probe_set.select(distinct), condition, table.task.n_outputs, clock, reader.blocks(),
                    ordinal=kind == "ordinal", riding=fused,
                )
                if fused is not None:
                    with clock.phase("zero_shot"):
                        fused.finish_condition()
                distinct_probs = distinct_scores.probs
                with clock.phase("metrics"):
                    if not reference_columns:  # the columns the per-probe reference defines
                        reference_columns = list(condition_metrics(condition.labels, distinct_probs[0], kind))
                    metrics = probe_metrics(condition.labels, distinct_scores, kind, reference_columns, condition.groups)
                    frames.append(pd.DataFrame({
                        **{name: value[evaluated] if isinstance(value, np.ndarray) else value for name, value in keys.items()},
                        "condition": condition.condition, "corruption": condition.corruption,
                        "severity": int(condition.severity), "target": condition.target,
                        **{name: value[evaluated] for name, value in probe_columns.items()},
                        **{name: value[copies] for name, value in metrics.items()},
                    }))
                if writer is not None:
                    # Per-case predictions at the full label fraction (every seed) for reliability
                    # diagrams and the test-case level of the bootstrap. float32: float16 turns
                    # probabilities near 0 and 1 into ties and moves AUROC (measured 0.56 -> 0.49).
                    with clock.phase("save"):
                        at_full = copies[np.searchsorted(evaluated, full)]
                        writer.add(artifacts.probs_key(condition.key), distinct_probs[at_full].astype(np.float32))
                        writer.add(artifacts.labels_key(condition.key), condition.labels)
                        rank_keys = distinct_scores.ovr_keys
                        if rank_keys is not None:  # what the bootstrap's AUROCs rank (order-exact)
                            writer.add(artifacts.keys_key(condition.key), rank_keys[at_full])
                        if condition.condition == "clean":  # every fraction, for label efficiency's bootstrap
                            writer.add(artifacts.ALL_CLEAN_PROBS, distinct_probs[copies].astype(np.float16))
                            if rank_keys is not None:
                                writer.add(artifacts.ALL_CLEAN_KEYS, rank_keys[copies])
                        if condition.groups is not None:  # the bootstrap resamples patients, not images
                            writer.add(condition.groups_key, condition.groups.astype(str))
                        if condition.design is not None:  # ... as the test rows were drawn (decision 0085)
                            writer.add(condition.design_key, np.array(condition.design, dtype=str))
                        for attribute, values in condition.subgroups.items():  # per-subgroup scores
                            writer.add(artifacts.subgroup_key(attribute, condition.target), values.astype(str))
                if condition.condition == "clean":  # free the clean test rows: no later condition reads them
                    condition.features = np.empty((0, 0), dtype=np.float16)
                del distinct_probs, distinct_scores
                n_conditions += 1
            if writer is not None:
                with clock.phase("save"):
                    for key, array in predictions.items():
                        writer.add(key, array)
            zero_shot_result = None
            if fused is not None:
                with clock.phase("zero_shot"):
                    zero_shot_result = fused.finish()
        finally:
            reader.close()
            if writer is not None:
                writer.close()
        records = pd.concat(frames, ignore_index=True)
    phase = clock.seconds
    cost = UnitCost(
        unit.encoder, unit.task, time.perf_counter() - wall_start, time.process_time() - cpu_start,
        int(memory.peak), int(start_rss), phase["read"], phase["fit"], phase["predict"], phase["metrics"], phase["save"],
        n_conditions, probe_set.n_subsets, os.getpid(), memory.exact, phase["zero_shot"],
    )
    return UnitResult(records, writer.path if writer is not None else None, cost, zero_shot_result)


def task_sizes(table: SampleTable, settings: ProbeSettings) -> dict[str, object]:
    """The parts of a unit's size that depend on the task alone (shared by its encoders): split
    sizes, the distinct training subsets grouped by size as the torch backend fits them, and the
    validation rows of each."""
    subsets = training_subsets(table, settings)
    val_subsets = validation_subsets(table, settings)
    n_val = len(table.indices("val"))
    distinct: dict[tuple[bytes, bytes], tuple[int, int]] = {}
    for s, (_, _, rows) in enumerate(subsets):
        val_rows = None if val_subsets is None else val_subsets[s]
        key = (rows.tobytes(), b"" if val_rows is None else val_rows.tobytes())
        distinct.setdefault(key, (len(rows), n_val if val_rows is None else len(val_rows)))
    by_size: dict[int, list[int]] = {}
    for n_rows, _ in distinct.values():
        by_size.setdefault(n_rows, []).append(n_rows)
    return {
        "n_train": len(table.indices("train")), "n_val": n_val, "n_test": len(table.indices("test")),
        "n_outputs": table.task.n_outputs, "n_probes": len(subsets), "n_distinct": len(distinct),
        "groups": tuple(tuple(rows) for rows in by_size.values()),
        "val_rows": tuple(v for _, v in distinct.values()),
    }


def unit_sizes(units: list[ProbeUnit], cache_root: Path, settings: ProbeSettings) -> dict[ProbeUnit, UnitSize]:
    """Every unit's :class:`UnitSize`, from the cache's tables and array shapes (no features read)."""
    per_task: dict[str, dict[str, object]] = {}
    targets: dict[str, int] = {}
    sizes = {}
    for unit in units:
        store = FeatureStore(store_path(cache_root, unit.task))
        if unit.task not in per_task:
            per_task[unit.task] = task_sizes(store.read_table(), settings)
        task = per_task[unit.task]
        eval_rows = int(task["n_test"])  # type: ignore[call-overload]
        for target in unit.targets:
            if target not in targets:
                targets[target] = len(FeatureStore(store_path(cache_root, target)).read_table().indices("test"))
            eval_rows = max(eval_rows, targets[target])
        dim = int(store.feature_array(unit.encoder, "clean").shape[1])
        sizes[unit] = UnitSize(eval_rows=eval_rows, dim=dim, n_Cs=len(settings.Cs), **task)  # type: ignore[arg-type]
    return sizes


def unit_costs_table(costs: list[UnitCost]) -> pd.DataFrame:
    """One row per unit cost, for the run folder's ``probe_costs.csv``."""
    return pd.DataFrame([asdict(cost) for cost in costs])


def probe_settings(spec: Spec) -> ProbeSettings:
    p = spec.probe
    return ProbeSettings(
        label_fractions=p.label_fractions, seeds=p.seeds, Cs=p.grid, backend=p.backend, family=p.family,
        selection=p.selection, min_per_class=p.min_per_class, validation=p.validation,
        robustness_fractions=p.robustness_fractions,
    )


def probe_units(spec: Spec) -> list[ProbeUnit]:
    """Every (encoder, task) unit the spec declares (:meth:`Spec.encoders_on`), with the task's shift
    targets and the spec's corrupted variants."""
    corruptions, severities = spec.extract.corruptions, tuple(spec.extract.severities)
    return [
        ProbeUnit(encoder, entry.name, entry.shift_target_names, corruptions, severities)
        for entry in spec.datasets for encoder in spec.encoders_on(entry.name)
    ]


