"""Benchmark of stage 2 for one (encoder, task) unit: crs's batched probes against a careful sklearn loop.

Both sides run in one process tree in one run, on the same synthetic features of realistic size
(5,000 train, 1,000 validation, 2,000 test rows, D = 768; an 8-class task and a 5-label multilabel
task; 5 label fractions x 5 seeds x 8 C values; the clean test split plus 60 corrupted variants),
under the protocol ``crs probe`` runs by default: C chosen per probe by validation log-loss on
validation rows drawn at the probe's label fraction; every probe scored on every evaluation set by
every metric of the run records (``condition_metrics``' columns: AUROC, ECE, Brier, NLL here).

* baseline: one ``LogisticRegression`` (L-BFGS, L2) per (fraction, seed, C) on the standardised
  subset, joblib processes over all cores with one BLAS thread each; C chosen by
  ``sklearn.metrics.log_loss`` on the probe's validation rows; each selected probe evaluated with
  ``predict_proba`` and one library call per record metric (scikit-learn's ``roc_auc_score``,
  ``log_loss``, ``brier_score_loss``; ``crs.axes`` for ECE, which scikit-learn lacks) once per
  (probe, evaluation set), also over joblib processes.
* crs: ``fit_probes(backend="torch")`` in this process on one thread, then per evaluation set one
  ``predict_scores`` for the distinct probes (the full fraction's seeds are one probe) and one call
  of ``crs.evaluate.units.probe_metrics``: what ``crs probe`` runs per condition when every
  fraction is evaluated on every condition (``robustness_fractions = "all"``; the default evaluates
  the corrupted sets with the full fraction's probe alone, a smaller job). With numba installed
  (the ``fast`` extra) the AUROC and its standard error go through the compiled kernel
  (``crs.probes.auroc_kernel``); ``CRS_NO_NUMBA=1`` measures the numpy path. A warm-up run on a
  small unit comes first, untimed, as the baseline's worker start-up is.

Reported: wall-clock and CPU-second speed-ups, the largest |AUROC difference| at the selected C
(every probe, every evaluation set), the largest |ECE difference|, the largest difference in
selected C (log10 units) and how many probes disagree, and crs's peak extra memory relative to the
unit's float32 feature matrix. ``--cache-unit`` measures one unit read from a cache of paper size
instead (time per phase, peak RSS against the memory model).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from crs import axes
from crs.cache.store import FeatureStore, store_path, test_digest
from crs.cache.writer import ChunkedFeatureArray
from crs.data.base import VALIDATION_STREAM, Dataset, Task, nested_label_fractions
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.memory import unit_peak_bytes
from crs.evaluate.units import (
    ProbeSettings,
    ProbeUnit,
    condition_metrics,
    probe_metrics,
    read_rows,
    run_unit,
    training_subsets,
    unit_sizes,
    validation_subsets,
)
from crs.probes import distinct_probes, fit_probes


@dataclass(frozen=True)
class BenchSize:
    n_train: int
    n_val: int
    n_test: int
    dim: int
    n_classes: int
    n_labels: int
    fractions: tuple[float, ...]
    seeds: int
    n_Cs: int
    n_conditions: int


FULL = BenchSize(5000, 1000, 2000, 768, 8, 5, (0.01, 0.05, 0.1, 0.25, 1.0), 5, 8, 60)
QUICK = BenchSize(800, 300, 400, 48, 4, 3, (0.1, 0.5, 1.0), 2, 4, 4)


# --- synthetic unit --------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    kind: str
    n_classes: int
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    subsets: tuple[np.ndarray, ...]
    val_subsets: tuple[np.ndarray, ...]
    Cs: tuple[float, ...]
    n_conditions: int

    def condition(self, index: int) -> np.ndarray:
        """Evaluation set ``index``: 0 is the clean test split, the others a seeded noisy blend of it
        (severity cycles 1..5), standing in for one corruption x severity read from the cache."""
        if index == 0:
            return self.X_test
        severity = 1 + (index - 1) % 5
        rng = np.random.default_rng(1000 + index)
        noise = rng.standard_normal(self.X_test.shape, dtype=np.float32) * self.X_test.std(axis=0)
        return (1 - 0.08 * severity) * self.X_test + 0.08 * severity * noise

    @property
    def feature_bytes(self) -> int:
        return (len(self.X_train) + len(self.X_val) + len(self.X_test)) * self.X_train.shape[1] * 4


def synthetic_unit(size: BenchSize, kind: str, seed: int = 0) -> Unit:
    """Correlated features (a 64-D latent signal mixed into D dims plus noise) with planted labels."""
    rng = np.random.default_rng(seed)
    n = size.n_train + size.n_val + size.n_test
    latent_dim = min(64, size.dim)
    latent = rng.standard_normal((n, latent_dim))
    mixing = rng.standard_normal((latent_dim, size.dim)) / np.sqrt(latent_dim)
    X = (latent @ mixing + 0.7 * rng.standard_normal((n, size.dim)) + rng.normal(size=size.dim)).astype(np.float32)
    outputs = size.n_labels if kind == "multilabel" else size.n_classes
    signal = latent @ rng.standard_normal((latent_dim, outputs)) * 0.35
    if kind == "multilabel":
        y = (signal + rng.logistic(size=signal.shape) > 0.8).astype(np.float32)
        y[rng.random(y.shape) < 0.1] = np.nan
    else:
        y = np.argmax(signal + rng.gumbel(size=signal.shape), axis=1).astype(np.int64)
    a, b = size.n_train, size.n_train + size.n_val
    subsets, val_subsets = [], []
    for s in range(size.seeds):
        nested = nested_label_fractions(y[:a], size.fractions, seed=s, min_per_class=3)
        subsets += [np.asarray(nested[f]) for f in size.fractions]
        nested_val = nested_label_fractions(y[a:b], size.fractions, seed=s, min_per_class=3, stream=VALIDATION_STREAM)
        val_subsets += [np.asarray(nested_val[f]) for f in size.fractions]
    Cs = tuple(float(c) for c in np.logspace(-4, 1, size.n_Cs))
    return Unit(kind, outputs, X[:a], y[:a], X[a:b], y[a:b], X[b:], y[b:], tuple(subsets), tuple(val_subsets), Cs,
                size.n_conditions)


# --- baseline: the loop a careful user writes ------------------------------------------------


def _auroc(y: np.ndarray, proba: np.ndarray, kind: str) -> float:
    from sklearn.metrics import roc_auc_score

    if kind == "multilabel":
        values = []
        for label in range(y.shape[1]):
            rows = ~np.isnan(y[:, label])
            if len(np.unique(y[rows, label])) == 2:
                values.append(roc_auc_score(y[rows, label], proba[rows, label]))
        return float(np.mean(values))
    return float(roc_auc_score(y, proba, multi_class="ovr", labels=np.arange(proba.shape[1])))


def _log_loss(y: np.ndarray, proba: np.ndarray, kind: str) -> float:
    from sklearn.metrics import log_loss

    if kind == "multilabel":
        values = []
        for label in range(y.shape[1]):
            rows = ~np.isnan(y[:, label])
            values.append(log_loss(y[rows, label], proba[rows, label], labels=[0, 1]))
        return float(np.mean(values))
    return float(log_loss(y, proba, labels=np.arange(proba.shape[1])))


def _baseline_fit(unit: Unit, s: int, C: float):
    import warnings

    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    cpu_start = time.process_time()
    subset, val_rows = unit.subsets[s], unit.val_subsets[s]
    scaler = StandardScaler().fit(unit.X_train[subset])
    X = scaler.transform(unit.X_train[subset])
    y = unit.y_train[subset]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if unit.kind == "multilabel":
            models = []
            for label in range(y.shape[1]):
                rows = ~np.isnan(y[:, label])
                models.append(LogisticRegression(C=C, max_iter=5000).fit(X[rows], y[rows, label].astype(int)))
        else:
            models = [LogisticRegression(C=C, max_iter=5000).fit(X, y)]
    probe = (scaler, models)
    val_proba = _baseline_proba(probe, unit.X_val[val_rows], unit.kind)
    return probe, _log_loss(unit.y_val[val_rows], val_proba, unit.kind), time.process_time() - cpu_start


def _baseline_proba(probe, X: np.ndarray, kind: str) -> np.ndarray:
    scaler, models = probe
    Xs = scaler.transform(X)
    if kind == "multilabel":
        return np.stack([m.predict_proba(Xs)[:, 1] for m in models], axis=1)
    return models[0].predict_proba(Xs)


AXES_FUNCTIONS = {"ece": "ece", "ece_debiased": "debiased_ece", "ece_se": "ece_standard_error",
                  "auroc_se": "auroc_standard_error"}
"""Record columns scikit-learn has no function for, and the per-probe ``crs.axes`` function a careful
user would call instead (those present in this tree)."""


def _baseline_metrics(y: np.ndarray, proba: np.ndarray, kind: str, names: list[str]) -> tuple[float, float]:
    """Every metric of the run records (``names``) for one probe on one set, one library call each:
    scikit-learn's ``roc_auc_score``, ``log_loss`` and ``brier_score_loss`` (per label for
    multilabel), and ``crs.axes`` for the rest (ECE and its kin). Returns (AUROC, ECE)."""
    from sklearn.metrics import brier_score_loss


    auroc = _auroc(y, proba, kind)
    _log_loss(y, proba, kind)
    if kind == "multilabel":
        for label in range(y.shape[1]):
            rows = ~np.isnan(y[:, label])
            brier_score_loss(y[rows, label], proba[rows, label], labels=[0, 1])
    else:
        brier_score_loss(y, proba, labels=np.arange(proba.shape[1]))
    values = {name: getattr(axes, function)(y, proba, kind) for name, function in AXES_FUNCTIONS.items()
              if name in names and hasattr(axes, function)}
    return auroc, values["ece"]


def record_metric_names(unit: Unit) -> list[str]:
    """The metric columns of the run records (``crs.evaluate.units.condition_metrics``' keys)."""

    return list(condition_metrics(unit.y_test, np.full((len(unit.y_test), unit.n_classes), 0.5), unit.kind))


def _baseline_evaluate(unit: Unit, probes: list, index: int) -> tuple[list[tuple[float, float]], float, float]:
    """(AUROC, ECE) of every probe on evaluation set ``index`` (read once, as a careful user would),
    the CPU seconds spent, and the wall seconds spent generating the set (not counted)."""
    names = record_metric_names(unit)
    t0 = time.perf_counter()
    X = unit.condition(index)
    generation_s = time.perf_counter() - t0
    cpu_start = time.process_time()
    values = [_baseline_metrics(unit.y_test, _baseline_proba(probe, X, unit.kind), unit.kind, names) for probe in probes]
    return values, time.process_time() - cpu_start, generation_s


def run_baseline(unit: Unit, n_jobs: int) -> dict:
    from joblib import Parallel, delayed, parallel_config

    start = time.perf_counter()
    jobs = [(s, c) for s in range(len(unit.subsets)) for c in range(len(unit.Cs))]
    with parallel_config(backend="loky", inner_max_num_threads=1):
        fitted = Parallel(n_jobs=n_jobs)(delayed(_baseline_fit)(unit, s, unit.Cs[c]) for s, c in jobs)
    losses = np.array([loss for _, loss, _ in fitted]).reshape(len(unit.subsets), len(unit.Cs))
    fit_cpu = sum(cpu for _, _, cpu in fitted)
    best = np.argmin(losses, axis=1)  # ties to the smaller C, as crs
    fit_seconds = time.perf_counter() - start
    probes = [fitted[s * len(unit.Cs) + best[s]][0] for s in range(len(unit.subsets))]
    eval_start = time.perf_counter()
    with parallel_config(backend="loky", inner_max_num_threads=1):
        evaluated = Parallel(n_jobs=n_jobs)(
            delayed(_baseline_evaluate)(unit, probes, i) for i in range(unit.n_conditions + 1)
        )
    # Generating the sets stands in for reading them from the cache: its wall time, spread over
    # the workers, is taken off (an estimate; it is ~1 % of the evaluation).
    generation_s = sum(g for _, _, g in evaluated) / n_jobs
    eval_cpu = sum(cpu for _, cpu, _ in evaluated)
    metrics = np.array([values for values, _, _ in evaluated])  # (n_conditions + 1, n_subsets, 2)
    return {
        "fit_s": fit_seconds,
        "eval_s": time.perf_counter() - eval_start - generation_s,
        "total_s": time.perf_counter() - start - generation_s,
        "fit_cpu_s": fit_cpu,
        "eval_cpu_s": eval_cpu,
        "total_cpu_s": fit_cpu + eval_cpu,
        "selected_C": np.asarray(unit.Cs)[best],
        "auroc": metrics[..., 0].T,  # (n_subsets, n_conditions + 1)
        "ece": metrics[..., 1].T,
    }


# --- crs -------------------------------------------------------------------------------------


class PeakRSS:
    """Samples this process's resident memory every 5 ms; ``extra`` is the peak above the start."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process(os.getpid())
        self.start = self._process.memory_info().rss
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)

    @property
    def extra(self) -> int:
        return self.peak - self.start


def run_crs(unit: Unit, device: str = "cpu") -> dict:
    import torch

    # the columns of the run records, found before the clock starts
    names = record_metric_names(unit)
    with PeakRSS() as memory:
        start = time.perf_counter()
        cpu_start = time.process_time()
        probe_set = fit_probes(
            unit.X_train, unit.y_train, unit.X_val, unit.y_val, list(unit.subsets), unit.kind,
            backend="torch", Cs=unit.Cs, n_classes=unit.n_classes, device=device, selection="logloss",
            val_subsets=list(unit.val_subsets),
        )
        if device != "cpu":
            torch.cuda.synchronize()
        fit_seconds = time.perf_counter() - start
        fit_cpu = time.process_time() - cpu_start
        # as crs probe evaluates a condition (robustness_fractions = "all"): the distinct probes
        # predicted once (the full fraction's seeds are one probe), every metric column, then copied
        distinct, copies = distinct_probes(probe_set, np.arange(probe_set.n_subsets))
        predicting = probe_set.select(distinct)
        columns, generation_s, generation_cpu = [], 0.0, 0.0
        for i in range(unit.n_conditions + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            X = unit.condition(i)  # stands in for reading the condition from the cache; not counted
            generation_s += time.perf_counter() - t0
            generation_cpu += time.process_time() - c0
            scores = predicting.predict_scores(X, unit.kind == "ordinal", X[0].astype(np.float64))  # type: ignore[attr-defined]  # as predict_condition
            metrics = probe_metrics(unit.y_test, scores, unit.kind, names)
            columns.append({name: values[copies] for name, values in metrics.items()})
            del X
        auroc = np.stack([c["auroc"] for c in columns], axis=1)
        ece = np.stack([c["ece"] for c in columns], axis=1)
        total = time.perf_counter() - start - generation_s
        total_cpu = time.process_time() - cpu_start - generation_cpu
    return {
        "fit_s": fit_seconds,
        "total_s": total,
        "fit_cpu_s": fit_cpu,
        "eval_cpu_s": total_cpu - fit_cpu,
        "total_cpu_s": total_cpu,
        "selected_C": probe_set.selected_C,
        "auroc": auroc,
        "ece": ece,
        "converged": bool(probe_set.converged.all()),
        "peak_extra_bytes": memory.extra,
    }


MEMORY_METHOD = (
    "peak RSS sampled every 5 ms above the RSS at the start of crs's stage 2, in a fresh process "
    "with one thread, after a warm-up run on a small unit (torch, BLAS and LAPACK first-use "
    "allocations excluded) and with glibc's mmap threshold fixed at 128 KiB (freed blocks leave RSS, "
    "so it tracks live memory); includes generating each evaluation set, which stands in for "
    "reading it from the cache"
)


def measure_memory(kind: str, quick: bool = False, device: str = "cpu") -> dict:
    """crs's peak extra memory for one unit, measured as MEMORY_METHOD says (this process's allocator
    is left alone, so the timed runs are not slowed by the fixed mmap threshold)."""
    command = [sys.executable, "-m", "crs.bench.probes", "--memory-only", kind, "--device", device]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(command + (["--quick"] if quick else []), capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _memory_only(kind: str, quick: bool, device: str) -> None:
    import ctypes

    import torch

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD; also ends its dynamic growth
    except OSError:  # not glibc: RSS then also holds freed blocks, an upper bound
        pass
    torch.set_num_threads(1)
    run_crs(synthetic_unit(QUICK, kind), device=device)  # warm-up
    unit = synthetic_unit(QUICK if quick else FULL, kind)
    ours = run_crs(unit, device=device)
    print(json.dumps({"peak_extra_bytes": ours["peak_extra_bytes"], "feature_bytes": unit.feature_bytes}))


# --- one stage-2 unit from a cache of paper size ----------------------------------------------


@dataclass(frozen=True)
class CacheUnitSize:
    """A (data set, encoder) unit as stage 2 reads it from the cache."""

    kind: str
    n_train: int
    n_val: int
    n_test: int
    dim: int
    n_outputs: int
    n_corruptions: int


CACHE_UNITS = {
    # CheXpert: 191,027 frontal images, 38,117 test rows, 5 labels, D = 1024, clean + 64 corruptions
    "chexpert": CacheUnitSize("multilabel", 114_793, 38_117, 38_117, 1024, 5, 64),
    # ISIC 2019: 25,331 images, 8 classes, clean + 79 corruptions
    "isic": CacheUnitSize("multiclass", 15_199, 5_066, 5_066, 1024, 8, 79),
    # APTOS 2019: 3,662 images, 5 grades (ordinal), clean + 44 corruptions
    "aptos": CacheUnitSize("ordinal", 2_197, 732, 733, 1024, 5, 44),
    "reduced": CacheUnitSize("multilabel", 20_000, 5_000, 5_000, 512, 5, 16),
    "reduced-multiclass": CacheUnitSize("multiclass", 20_000, 5_000, 5_000, 512, 8, 16),
}
PAPER_FRACTIONS = (0.01, 0.05, 0.1, 0.25, 1.0)
PAPER_SEEDS = (0, 1, 2, 3, 4)
PAPER_CS = (0.001, 0.01, 0.1, 1.0, 10.0)


def write_synthetic_store(cache_root, size: CacheUnitSize, task: str = "unit", encoder: str = "synthetic", seed: int = 0) -> None:
    """A cache store of ``size`` with planted signal (a 64-D latent mixed into D dims plus noise),
    written through the cache writer one row chunk at a time (the generator holds the clean test
    rows, float16, and one chunk), splits interleaved at random as group splits leave them."""

    rng = np.random.default_rng(seed)
    n = size.n_train + size.n_val + size.n_test
    splits = np.array(["train"] * size.n_train + ["val"] * size.n_val + ["test"] * size.n_test)
    rng.shuffle(splits)
    latent_dim = min(64, size.dim)
    latent_weights = rng.standard_normal((latent_dim, size.n_outputs)) * 0.35
    mixing = (rng.standard_normal((latent_dim, size.dim)) / np.sqrt(latent_dim)).astype(np.float32)
    offset = rng.normal(size=size.dim).astype(np.float32)
    labels_rng = np.random.default_rng(seed + 1)
    chunk = 4096
    blocks = []
    for start in range(0, n, chunk):
        block_rng = np.random.default_rng([seed, start])
        latent = block_rng.standard_normal((min(chunk, n - start), latent_dim)).astype(np.float32)
        signal = latent @ latent_weights
        if size.kind == "multilabel":
            y = (signal + labels_rng.logistic(size=signal.shape) > 0.8).astype(np.float32)
            y[labels_rng.random(y.shape) < 0.1] = np.nan
        else:
            y = np.argmax(signal + labels_rng.gumbel(size=signal.shape), axis=1).astype(np.int64)
        blocks.append(y)
    labels = np.concatenate(blocks)
    names = tuple(f"label{k}" for k in range(size.n_outputs))
    ids = np.array([f"img{i:07d}" for i in range(n)])
    dataset = Dataset(task, Path("/nonexistent"), Task(task, size.kind, names), "chest_xray", 224, ids,
                      [f"{i}.png" for i in ids], ids.copy(), labels, splits)
    store = FeatureStore(store_path(cache_root, task), mode="w")
    store.write_table(dataset)
    fields = {"name": encoder, "source": "synthetic", "dim": size.dim,
              "image_ids_sha256": dataset.id_digest(), "test_ids_sha256": test_digest(dataset)}
    group = store.encoder_group(encoder, "synthetic0", fields)
    clean = ChunkedFeatureArray(group, "clean", n, size.dim, chunk)
    test_rows = np.flatnonzero(splits == "test")
    clean_test = np.empty((size.n_test, size.dim), dtype=np.float16)
    for c in range(clean.n_chunks):
        start, stop = clean.chunk_bounds(c)
        block_rng = np.random.default_rng([seed, start])
        latent = block_rng.standard_normal((stop - start, latent_dim)).astype(np.float32)
        X = latent @ mixing + 0.7 * block_rng.standard_normal((stop - start, size.dim), dtype=np.float32) + offset
        clean.write_chunk(c, X)
        lo, hi = np.searchsorted(test_rows, [start, stop])
        clean_test[lo:hi] = X[test_rows[lo:hi] - start]
    scale = clean_test.astype(np.float32).std(axis=0)
    for index in range(size.n_corruptions):
        corruption, severity = f"noise{index // 5}", 1 + index % 5
        array = ChunkedFeatureArray(group, f"corrupt/{corruption}/{severity}", size.n_test, size.dim, chunk)
        for c in range(array.n_chunks):
            start, stop = array.chunk_bounds(c)
            noise = np.random.default_rng([seed, 7, index, c]).standard_normal((stop - start, size.dim), dtype=np.float32)
            weight = 0.08 * severity
            array.write_chunk(c, (1 - weight) * clean_test[start:stop].astype(np.float32) + weight * noise * scale)
    store.mark_current(encoder, "synthetic0")


def measure_cache_unit(cache_root, task: str = "unit", encoder: str = "synthetic", backend: str = "torch") -> dict:
    """Run one stage-2 unit from the cache as a worker does (one thread, predictions written) and
    report its cost beside the memory model's prediction."""
    import torch


    torch.set_num_threads(1)
    settings = ProbeSettings(PAPER_FRACTIONS, PAPER_SEEDS, PAPER_CS, backend=backend)
    unit = ProbeUnit(encoder, task)
    size = unit_sizes([unit], Path(cache_root), settings)[unit]
    with tempfile.TemporaryDirectory(dir=cache_root) as output:
        folder = RunFolder(output)
        result = run_unit(unit, Path(cache_root), settings, folder)
        assert result.cost is not None and result.predictions_file is not None
        predictions_bytes = result.predictions_file.stat().st_size
        records = result.records
    cost = asdict(result.cost)
    clean = records[(records.condition == "clean") & (records.label_fraction == 1.0)]
    return {
        **cost, "predicted_peak_bytes": unit_peak_bytes(size, backend),
        "size": {k: v for k, v in asdict(size).items() if k not in ("groups", "val_rows")},
        "predictions_file_bytes": predictions_bytes, "records": len(records),
        "clean_auroc_full": float(clean.auroc.mean()), "clean_ece_full": float(clean.ece.mean()),
    }


def unit_from_cache(cache_root, task: str = "unit", encoder: str = "synthetic") -> Unit:
    """The bench's :class:`Unit` from a cache store (a ``--cache-unit`` store): its clean train,
    validation and test rows as float32, the paper's label fractions, seeds and C grid, the subsets
    and validation rows stage 2 draws, and as many evaluation sets as the store has conditions
    (generated from the clean test rows as the bench does; their generation is not counted)."""

    store = FeatureStore(store_path(Path(cache_root), task))
    table = store.read_table()
    splits = [table.indices(s) for s in ("train", "val", "test")]
    X_train, X_val, X_test = (X.astype(np.float32) for X in read_rows(store.feature_array(encoder, "clean"), splits))
    settings = ProbeSettings(PAPER_FRACTIONS, PAPER_SEEDS, PAPER_CS, backend="torch")
    subsets = tuple(rows for _, _, rows in training_subsets(table, settings))
    val_subsets = validation_subsets(table, settings)
    assert val_subsets is not None
    conditions = sum(name.startswith("corrupt/") for name in store.feature_array_names(encoder))
    y = [table.labels[rows] for rows in splits]
    return Unit(table.task.kind, table.task.n_outputs, X_train, y[0], X_val, y[1], X_test, y[2], subsets,
                tuple(val_subsets), PAPER_CS, conditions)


def cache_unit_benchmark(name: str, folder, backend: str = "torch", keep: bool = False) -> dict:
    """Write a synthetic store of ``CACHE_UNITS[name]`` under ``folder``, measure one unit in a fresh
    process (``--measure-unit``: its peak RSS is its own), delete the store unless ``keep``."""
    cache_root = Path(folder) / f"cache-{name}"
    start = time.perf_counter()
    write_synthetic_store(cache_root, CACHE_UNITS[name])
    written = time.perf_counter() - start
    store_bytes = sum(f.stat().st_size for f in cache_root.rglob("*") if f.is_file())
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        command = [sys.executable, "-m", "crs.bench.probes", "--measure-unit", str(cache_root), "--backend", backend]
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    finally:
        if not keep:
            shutil.rmtree(cache_root, ignore_errors=True)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    return {"unit": name, "store_bytes": store_bytes, "store_write_s": round(written, 1), **measured}


def compare(unit: Unit, n_jobs: int | None = None, device: str = "cpu", quick: bool = False, memory_pass: bool = True) -> dict:
    """Time baseline and crs on one unit side by side and compare their answers; ``quick`` says the
    unit is the QUICK size (the memory pass rebuilds it in a fresh process; ``memory_pass=False``
    skips it, for a unit that is not a synthetic bench size)."""
    import torch
    from threadpoolctl import threadpool_limits

    n_jobs = n_jobs or os.cpu_count() or 1
    baseline = run_baseline(unit, n_jobs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            # warm-up on the small unit (not timed): torch's and BLAS's first use, and compiling or
            # loading the numba kernels, as the baseline's worker start-up and imports are not timed
            run_crs(synthetic_unit(QUICK, unit.kind), device=device)
            ours = run_crs(unit, device=device)
    finally:
        torch.set_num_threads(threads)
    memory = (measure_memory(unit.kind, quick=quick, device=device) if memory_pass
              else {"peak_extra_bytes": ours["peak_extra_bytes"], "feature_bytes": unit.feature_bytes})
    log_C = np.abs(np.log10(ours["selected_C"]) - np.log10(baseline["selected_C"]))
    return {
        "kind": unit.kind,
        "probes_fitted_baseline": len(unit.subsets) * len(unit.Cs),
        "evaluation_sets": unit.n_conditions + 1,
        "baseline_cores": n_jobs,
        "crs_threads": 1,
        "crs_device": device,
        "baseline_fit_s": round(baseline["fit_s"], 3),
        "baseline_total_s": round(baseline["total_s"], 3),
        "crs_fit_s": round(ours["fit_s"], 3),
        "crs_total_s": round(ours["total_s"], 3),
        "baseline_fit_cpu_s": round(baseline["fit_cpu_s"], 3),
        "baseline_eval_cpu_s": round(baseline["eval_cpu_s"], 3),
        "baseline_total_cpu_s": round(baseline["total_cpu_s"], 3),
        "crs_fit_cpu_s": round(ours["fit_cpu_s"], 3),
        "crs_eval_cpu_s": round(ours["eval_cpu_s"], 3),
        "crs_total_cpu_s": round(ours["total_cpu_s"], 3),
        "speedup": round(baseline["total_s"] / ours["total_s"], 2),
        "speedup_cpu": round(baseline["total_cpu_s"] / ours["total_cpu_s"], 2),
        "speedup_fit_cpu": round(baseline["fit_cpu_s"] / ours["fit_cpu_s"], 2),
        "speedup_fit": round(baseline["fit_s"] / ours["fit_s"], 2),
        "max_abs_dauroc": float(np.abs(ours["auroc"] - baseline["auroc"]).max()),
        "max_abs_dauroc_same_C": float(np.abs(ours["auroc"] - baseline["auroc"])[log_C == 0].max(initial=0)),
        "max_abs_dece_same_C": float(np.abs(ours["ece"] - baseline["ece"])[log_C == 0].max(initial=0)),
        "max_selected_C_diff_log10": float(log_C.max()),
        "selected_C_disagreements": int((log_C > 0).sum()),
        "crs_converged": ours["converged"],
        "speedup_eval_cpu": round(baseline["eval_cpu_s"] / ours["eval_cpu_s"], 2),
        "feature_bytes": unit.feature_bytes,
        "peak_extra_bytes": memory["peak_extra_bytes"],
        "peak_extra_memory_over_features": round(memory["peak_extra_bytes"] / memory["feature_bytes"], 2),
        "memory_method": MEMORY_METHOD,
    }


def run(json_out: bool = False, quick: bool = False, device: str = "cpu", n_jobs: int | None = None) -> list[dict]:
    """Benchmark both task kinds; print a table (or JSON) and return the rows."""
    size = QUICK if quick else FULL
    rows = []
    for kind in ("multiclass", "multilabel"):
        rows.append(compare(synthetic_unit(size, kind), n_jobs=n_jobs, device=device, quick=quick))
    if json_out:
        print(json.dumps({"size": asdict(size), "results": rows}, indent=2))
    else:
        print(f"stage 2, one unit: {size}")
        for row in rows:
            print(
                f"{row['kind']:>10}: baseline {row['baseline_total_s']:.1f} s ({row['baseline_cores']} cores), "
                f"crs {row['crs_total_s']:.2f} s (1 thread, {row['crs_device']}) -> {row['speedup']:.1f}x "
                f"(fits {row['speedup_fit']:.1f}x); CPU seconds {row['baseline_total_cpu_s']:.1f} vs "
                f"{row['crs_total_cpu_s']:.2f} -> {row['speedup_cpu']:.1f}x; max |dAUROC| {row['max_abs_dauroc']:.2e} "
                f"(same C {row['max_abs_dauroc_same_C']:.2e}; |dECE| {row['max_abs_dece_same_C']:.2e}); selected C differs for "
                f"{row['selected_C_disagreements']} probes (max {row['max_selected_C_diff_log10']:.2f} decades); "
                f"peak extra memory {row['peak_extra_memory_over_features']:.2f}x the feature matrix "
                f"(CPU s fit/eval: baseline {row['baseline_fit_cpu_s']:.1f}/{row['baseline_eval_cpu_s']:.1f}, "
                f"crs {row['crs_fit_cpu_s']:.2f}/{row['crs_eval_cpu_s']:.2f})"
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--device", default="cpu", help="torch device for crs (cpu, cuda)")
    parser.add_argument("--jobs", type=int, default=None, help="baseline processes (default: all cores)")
    parser.add_argument("--memory-only", choices=("multiclass", "multilabel"), help=argparse.SUPPRESS)
    parser.add_argument("--cache-unit", choices=sorted(CACHE_UNITS),
                        help="measure one stage-2 unit of this size from a synthetic cache (written, then deleted)")
    parser.add_argument("--folder", default=".", help="where --cache-unit writes its store (default: here)")
    parser.add_argument("--backend", default="torch", help="probe backend for --cache-unit")
    parser.add_argument("--keep", action="store_true", help="keep the --cache-unit store")
    parser.add_argument("--measure-unit", help=argparse.SUPPRESS)
    parser.add_argument("--compare-cache", help="baseline and crs side by side on the unit of this --cache-unit "
                        "store (--keep it first): the bench's ratio at that size")
    args = parser.parse_args(argv)
    if args.memory_only:
        _memory_only(args.memory_only, args.quick, args.device)
        return
    if args.compare_cache:
        unit = unit_from_cache(args.compare_cache)
        print(json.dumps(compare(unit, n_jobs=args.jobs, memory_pass=False), indent=2, default=float))
        return
    if args.measure_unit:
        print(json.dumps(measure_cache_unit(args.measure_unit, backend=args.backend)))
        return
    if args.cache_unit:
        print(json.dumps(cache_unit_benchmark(args.cache_unit, args.folder, args.backend, args.keep), indent=2))
        return
    run(json_out=args.json, quick=args.quick, device=args.device, n_jobs=args.jobs)


if __name__ == "__main__":
    main()
