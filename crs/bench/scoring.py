"""Benchmark of the scoring bootstrap at the paper's size, on synthetic per-case predictions.

It runs the new bootstrap parts the way the integrated score will: per task one stratified
patient/lesion-level draw of the test rows (and of the shift target's), shared by every encoder
and condition (:mod:`crs.scoring.resample`); per encoder the weighted AUROC of every condition
column (clean at the full fraction, every lower fraction x seed, every corruption x severity) and
the weighted ECE under all replicates at once (:mod:`crs.axes.weighted`); the four axis errors and
the CRS per replicate (:func:`crs.scoring.formula.crs_components`); then the simultaneous rank
sets (:mod:`crs.scoring.rank_sets`) and the AUROC-vs-CRS reversals (:mod:`crs.scoring.reversals`).

Paper size (issue 14/16): 15 encoders x 3 tasks, ISIC 2019 about 5,000 test rows / 8 classes / 80
conditions, APTOS about 730 / 5 grades / 45, CheXpert about 38,000 / 5 labels / 65 plus a 3,000-row
shift target; 5 label fractions x 5 seeds; 1,000 replicates. At the full fraction every seed trains
on the same rows, so its predictions are one column (as stage 2 produces them), not five.

Measured: wall and CPU seconds of the scoring (the synthetic predictions are made outside the
clock and reported apart), the process's peak RSS, and the number of (replicate x row x column)
AUROC terms. Run ``python -m crs.bench.scoring`` (``--quick`` for a small size; ``--run-folder DIR
--against REV`` for the cost against an older revision, below).

Measured at paper size on the 2-core development machine (2026-12-03, load average 1-2.5 from
one niced neighbour), ``python -m crs.bench.scoring --run-folder DIR [--reuse] --workers N``:

=====================================  ============  ===========  ==========
scoring through ``score_records``       wall s        CPU s        peak RSS
=====================================  ============  ===========  ==========
numpy weighted AUROC, 2 threads         283           411          1.13 GiB
compiled kernel (numba), 2 threads      151           205          1.29 GiB
+ introsort and shared label sides, 2   122           188          1.24 GiB
the same, 1 thread                      174           183          1.21 GiB
+ one encoder per thread, 2 threads     **105**       186          1.89 GiB
=====================================  ============  ===========  ==========

Side by side with an older revision (``--against REV``, :mod:`crs.bench.scoring_against`: the same run
folder, the old code from a temporary git worktree, old/new interleaved in fresh processes). Issue 47's
cost bound, against ``c6bd9bb`` (main before the #47 work), 2 threads, ``nice -n 10``, load average 5-10
from three neighbours (2026-12-07, ``python -m crs.bench.scoring --run-folder DIR --against c6bd9bb
--pairs 2``):

=====================================  ============  ===========  ==========
``score_records``, CPU s per run        old           new          new / old
=====================================  ============  ===========  ==========
pair 1                                  162.6         173.6        1.068
pair 2                                  172.1         171.3        0.995
both pairs (summed)                     334.6         344.9        **1.031**
=====================================  ============  ===========  ==========

Peak RSS 1.96-1.98 GiB old, 1.90-2.01 GiB new; wall 243-312 s each (the load's). The tier read off the
family (decision 0166) keeps 13 of the 15 synthetic encoders where the CRS rank sets kept 10.

Every run: leading tier of 5 encoders, 33 reversals of which 15 robust, noise alone reordering 9.5 CRS
pairs on average (the same replicates, so the same figures). Writing the run folder (4.7 GB of npz)
took 83 s apart. Profile of the 1-thread run (cProfile): the kernel 114 s for 3.09e11 terms (0.37
ns a term), sorting 28.7 s before introsort (6x faster a sort after it, timed on one 38,000-row column),
the weighted ECE 20 s. Earlier, under
a load average of 3-7, the numpy path took 807 s wall / 480 s CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from crs.axes.weighted import (
    ReplicateWeights,
    nanmean_classes,
    prepare_weights,
    weighted_auroc,
    weighted_debiased_ece,
    weighted_ece,
)
from crs.evaluate import artifacts
from crs.evaluate.artifacts import RunFolder
from crs.evaluate.memory import own_peak_rss_bytes
from crs.evaluate.units import condition_metrics
from crs.scoring.draws import SHIFT_STREAM, TEST_STREAM, draw_seed_counts, task_entropy
from crs.scoring.formula import crs_components
from crs.scoring.rank_sets import rank_confidence_sets
from crs.scoring.resample import group_bootstrap
from crs.scoring.result import score_records
from crs.scoring.reversals import auroc_crs_reversals
from crs.scoring.settings import ScoreSettings


@dataclass(frozen=True)
class TaskSize:
    name: str
    kind: str
    n_test: int
    n_outputs: int
    n_conditions: int
    images_per_group: float
    n_shift: int = 0


@dataclass(frozen=True)
class ScoringSize:
    name: str
    tasks: tuple[TaskSize, ...]
    n_encoders: int
    n_seeds: int
    fractions: tuple[float, ...]
    n_boot: int


PAPER = ScoringSize(
    name="paper",
    tasks=(
        TaskSize("isic2019", "multiclass", 5000, 8, 80, 1.5),
        TaskSize("aptos2019", "ordinal", 730, 5, 45, 1.0),
        TaskSize("chexpert", "multilabel", 38000, 5, 65, 3.0, n_shift=3000),
    ),
    n_encoders=15,
    n_seeds=5,
    fractions=(0.01, 0.05, 0.1, 0.25, 1.0),
    n_boot=1000,
)
QUICK = ScoringSize(
    name="quick",
    tasks=(
        TaskSize("isic2019", "multiclass", 600, 8, 6, 1.5),
        TaskSize("aptos2019", "ordinal", 200, 5, 4, 1.0),
        TaskSize("chexpert", "multilabel", 900, 5, 5, 3.0, n_shift=200),
    ),
    n_encoders=5,
    n_seeds=3,
    fractions=(0.1, 0.5, 1.0),
    n_boot=100,
)

_CLASS_SHARES = {
    "multiclass": (0.45, 0.18, 0.13, 0.10, 0.05, 0.04, 0.03, 0.02),
    "ordinal": (0.49, 0.10, 0.27, 0.05, 0.09),
}
_LABEL_PREVALENCE = (0.15, 0.12, 0.07, 0.25, 0.38)


# --- synthetic predictions -------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskTruth:
    labels: np.ndarray
    groups: np.ndarray
    shift_labels: np.ndarray | None
    shift_groups: np.ndarray | None


def _labels_and_groups(
    kind: str, n_rows: int, n_outputs: int, images_per_group: float, rng: np.random.Generator
):
    n_groups = max(1, round(n_rows / images_per_group))
    groups = np.sort(rng.integers(0, n_groups, n_rows))
    if kind == "multilabel":
        propensity = rng.normal(0.0, 1.0, (n_groups, n_outputs))[groups]
        base = np.log(np.array(_LABEL_PREVALENCE[:n_outputs]) / (1 - np.array(_LABEL_PREVALENCE[:n_outputs])))
        labels = (rng.random((n_rows, n_outputs)) < 1 / (1 + np.exp(-(base + propensity)))).astype(np.float64)
        labels[rng.random(labels.shape) < 0.05] = np.nan  # uncertain findings: counted on neither side
        return labels, groups
    shares = np.array(_CLASS_SHARES[kind][:n_outputs])
    return rng.choice(n_outputs, size=n_groups, p=shares / shares.sum())[groups], groups


def task_truth(task: TaskSize, seed: int) -> TaskTruth:
    rng = np.random.default_rng([seed, 7])
    labels, groups = _labels_and_groups(task.kind, task.n_test, task.n_outputs, task.images_per_group, rng)
    if not task.n_shift:
        return TaskTruth(labels, groups, None, None)
    shift_labels, shift_groups = _labels_and_groups(
        task.kind, task.n_shift, task.n_outputs, task.images_per_group, rng
    )
    return TaskTruth(labels, groups, shift_labels, shift_groups)


def _probabilities(logits: np.ndarray, kind: str) -> np.ndarray:
    if kind == "multilabel":
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)


def encoder_predictions(
    task: TaskSize, truth: TaskTruth, size: ScoringSize, encoder: int, seed: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """(N, columns, K) probabilities and the shift target's (M, K): planted signal per encoder, condition and seed.

    Columns: 0 the full fraction; then every lower fraction x seed (fraction-major); then every
    corruption x severity. Encoders differ in signal strength; lower fractions and stronger
    corruptions weaken it; a patient effect makes images of one patient alike.
    """
    rng = np.random.default_rng([seed, encoder, sum(map(ord, task.name))])
    signal = 1.0 + 0.08 * encoder + 0.1 * rng.normal()

    def logits_for(labels: np.ndarray, groups: np.ndarray, strength: np.ndarray) -> np.ndarray:
        n_rows = len(labels)
        patient = rng.normal(0.0, 0.6, (int(groups.max()) + 1, task.n_outputs)).astype(np.float32)[groups]
        base = patient + rng.normal(0.0, 1.0, (n_rows, task.n_outputs)).astype(np.float32)
        target = (
            np.nan_to_num(labels, nan=0.0) * 2.0 - 1.0
            if task.kind == "multilabel"
            else np.eye(task.n_outputs)[labels]
        ).astype(np.float32)
        jitter = rng.normal(0.0, 0.3, (len(strength), n_rows, task.n_outputs)).astype(np.float32)
        return (strength[:, None, None] * target[None] + base[None] + jitter).transpose(1, 0, 2)

    lower = [f for f in size.fractions if f < max(size.fractions)]
    strengths = [signal]
    strengths += [
        signal * (0.55 + 0.45 * (np.log10(f) + 2.0) / 2.0) for f in lower for _ in range(size.n_seeds)
    ]
    sensitivity = 0.05 + 0.1 * rng.random()
    strengths += [signal * max(0.2, 1.0 - sensitivity * (1 + c % 5)) for c in range(task.n_conditions)]
    probs = _probabilities(
        logits_for(truth.labels, truth.groups, np.array(strengths, dtype=np.float32)), task.kind
    )
    shift = None
    if truth.shift_labels is not None and truth.shift_groups is not None:
        shift_logits = logits_for(
            truth.shift_labels, truth.shift_groups, np.array([0.8 * signal], dtype=np.float32)
        )
        shift = _probabilities(shift_logits[:, 0], task.kind)
    return probs, shift


# --- the scoring, as the integrated bootstrap runs it ----------------------------------------------


def _class_labels(labels: np.ndarray, kind: str, k: int) -> np.ndarray:
    """One-vs-rest labels of class (label) k, NaN where a multilabel finding is unknown."""
    return labels[:, k] if kind == "multilabel" else (labels == k).astype(np.float64)


def condition_aurocs(
    probs: np.ndarray, labels: np.ndarray, kind: str, weights: ReplicateWeights, workers: int
) -> np.ndarray:
    """(B, columns) macro AUROC of every condition column: per class, all columns share the class's labels."""
    per_class = np.stack(
        [
            weighted_auroc(probs[:, :, k], _class_labels(labels, kind, k), weights, workers=workers)
            for k in range(probs.shape[2])
        ],
        axis=-1,
    )
    return nanmean_classes(per_class)


def encoder_axis_errors(
    aurocs: np.ndarray,
    ece: np.ndarray,
    shift: np.ndarray | None,
    seed_counts: np.ndarray,
    n_lower: int,
    n_seeds: int,
) -> np.ndarray:
    """(B, 4) axis errors of one encoder on one task from its condition AUROCs (DESIGN section 7, absolute utilities)."""
    discrimination = aurocs[:, 0]
    by_fraction = aurocs[:, 1 : 1 + n_lower * n_seeds].reshape(len(aurocs), n_lower, n_seeds)
    seed_mean = (by_fraction * seed_counts[:, None, :]).sum(axis=2) / seed_counts.sum(axis=1, keepdims=True)
    label_efficiency = seed_mean.mean(axis=1)
    robustness = aurocs[:, 1 + n_lower * n_seeds :].mean(axis=1)
    if shift is not None:
        robustness = 0.5 * robustness + 0.5 * shift
    return np.stack([1.0 - discrimination, ece, 1.0 - label_efficiency, 1.0 - robustness], axis=1)


def draw_weights(
    labels: np.ndarray, groups: np.ndarray, kind: str, entropy: Sequence[int], n_boot: int
) -> ReplicateWeights:
    """Unit weights (the point estimate) then ``n_boot`` group-level replicates, laid out for the weighted metrics."""
    counts = group_bootstrap(groups, labels, kind, seed=entropy).counts(range(n_boot))
    return prepare_weights(np.vstack([np.ones((1, len(labels)), dtype=counts.dtype), counts]))


@dataclass
class _Clock:
    wall: float = 0.0
    cpu: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    cpu_parts: dict[str, float] = field(default_factory=dict)

    def run(self, name: str, call, *args, **kwargs):
        usage, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        result = call(*args, **kwargs)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
        self.wall += elapsed
        self.cpu += cpu
        self.parts[name] = self.parts.get(name, 0.0) + elapsed
        self.cpu_parts[name] = self.cpu_parts.get(name, 0.0) + cpu
        return result


@dataclass(frozen=True)
class ScoringBenchmark:
    size: str
    n_encoders: int
    n_boot: int
    workers: int
    scoring_wall_s: float
    scoring_cpu_s: float
    synthesis_wall_s: float
    peak_rss_gib: float
    auroc_terms: float
    ns_per_term_cpu: float
    parts_wall_s: dict[str, float]
    load_average: tuple[float, float]
    leading_tier: tuple[str, ...]
    n_reversed: int
    n_robust: int
    noise_crs_mean: float


def run(size: ScoringSize = PAPER, workers: int = 2, seed: int = 0) -> ScoringBenchmark:
    """Score ``size`` once and measure it (see the module docstring)."""
    load_start = os.getloadavg()[0]
    clock, synthesis = _Clock(), 0.0
    encoders = [f"encoder_{e:02d}" for e in range(size.n_encoders)]
    n_lower = len([f for f in size.fractions if f < max(size.fractions)])
    seed_counts = np.vstack([np.ones((1, size.n_seeds)), draw_seed_counts(size.n_seeds, size.n_boot, seed)])
    errors = np.zeros((size.n_boot + 1, size.n_encoders, 4))
    clean_auroc = np.zeros((size.n_boot + 1, size.n_encoders))
    terms = 0.0
    for task in size.tasks:
        truth = task_truth(task, seed)
        weights = clock.run(
            "draws", draw_weights, truth.labels, truth.groups, task.kind,
            task_entropy(seed, task.name, TEST_STREAM), size.n_boot,
        )
        shift_weights = None
        if truth.shift_labels is not None and truth.shift_groups is not None:
            shift_weights = clock.run(
                "draws",
                draw_weights,
                truth.shift_labels,
                truth.shift_groups,
                task.kind,
                task_entropy(seed, task.name, SHIFT_STREAM),
                size.n_boot,
            )
        for e in range(size.n_encoders):
            start = time.perf_counter()
            probs, shift_probs = encoder_predictions(task, truth, size, e, seed)
            synthesis += time.perf_counter() - start
            aurocs = clock.run("auroc", condition_aurocs, probs, truth.labels, task.kind, weights, workers)
            terms += float(size.n_boot) * probs.shape[0] * probs.shape[1] * probs.shape[2]
            ece = clock.run("ece", weighted_ece, truth.labels, probs[:, 0], task.kind, weights)
            shift = None
            if shift_probs is not None and shift_weights is not None:
                shift = clock.run(
                    "auroc",
                    condition_aurocs, shift_probs[:, None, :], truth.shift_labels, task.kind, shift_weights, workers,
                )[:, 0]  # fmt: skip
            errors[:, e] += encoder_axis_errors(aurocs, ece, shift, seed_counts, n_lower, size.n_seeds) / len(
                size.tasks
            )
            clean_auroc[:, e] += aurocs[:, 0] / len(size.tasks)
            del probs, shift_probs
        del weights, shift_weights

    crs = clock.run("crs", lambda: crs_components(errors, 0)["crs"])
    rank_sets = clock.run(
        "rank_sets",
        rank_confidence_sets,
        pd.Series(crs[0], index=encoders),
        pd.DataFrame(crs[1:], columns=encoders),
    )
    reversals = clock.run(
        "reversals",
        auroc_crs_reversals,
        pd.Series(clean_auroc[0], index=encoders), pd.Series(crs[0], index=encoders), clean_auroc[1:], crs[1:],
    )  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux -> GiB
    return ScoringBenchmark(
        size=size.name,
        n_encoders=size.n_encoders,
        n_boot=size.n_boot,
        workers=workers,
        scoring_wall_s=clock.wall,
        scoring_cpu_s=clock.cpu,
        synthesis_wall_s=synthesis,
        peak_rss_gib=peak,
        auroc_terms=terms,
        ns_per_term_cpu=1e9 * clock.cpu_parts.get("auroc", 0.0) / max(terms, 1.0),
        parts_wall_s=dict(clock.parts),
        load_average=(load_start, os.getloadavg()[0]),
        leading_tier=rank_sets.leading_tier,
        n_reversed=reversals.n_reversed,
        n_robust=reversals.n_robust,
        noise_crs_mean=float(reversals.noise.loc["crs", "mean"]),
    )


# --- the real path: a run folder of synthetic predictions, scored by score_records ------------------


def write_synthetic_run(size: ScoringSize, root: str, seed: int = 0) -> RunFolder:
    """Write ``size``'s synthetic predictions and run records into a run folder, as stage 2 stores them.

    Per (encoder, task) file: ``clean_probs`` and every ``corrupt__*_probs`` (S seeds x N x K, float32;
    at the full fraction every seed trains on the same rows, so the S rows are equal, as stage 2's
    are), ``clean_all_probs`` (every fraction x seed, float16), the subset keys, ``clean_groups`` and,
    on CheXpert, the shift target's arrays. Run records: :func:`crs.evaluate.units.condition_metrics`
    of the clean full-fraction and shift predictions; for the lower fractions and the corruptions
    (about 90 % of the rows) the AUROC and the debiased calibration error come from
    :mod:`crs.axes.weighted` at unit weights (the same values, one sort per column) and the other
    reported columns are copied from the clean row (they are never scored). This keeps the synthesis
    at minutes, not the half hour 30,000 full metric calls at CheXpert size would take.
    """
    folder = RunFolder(root)
    folder.root.mkdir(parents=True, exist_ok=True)
    lower = [f for f in size.fractions if f < max(size.fractions)]
    full = max(size.fractions)
    seeds = list(range(size.n_seeds))
    rows: list[dict] = []
    for task in size.tasks:
        truth = task_truth(task, seed)
        unit = np.ones((1, task.n_test))
        for e in range(size.n_encoders):
            encoder = f"encoder_{e:02d}"
            probs, shift_probs = encoder_predictions(task, truth, size, e, seed)
            n_lower = len(lower) * size.n_seeds
            full_probs = probs[:, 0]
            arrays: dict[str, np.ndarray] = {
                artifacts.probs_key(artifacts.CLEAN): np.repeat(full_probs[None], size.n_seeds, axis=0),
                artifacts.labels_key(artifacts.CLEAN): truth.labels,
                artifacts.ALL_CLEAN_PROBS: np.concatenate(
                    [probs[:, 1 : 1 + n_lower].transpose(1, 0, 2), np.repeat(full_probs[None], size.n_seeds, axis=0)]
                ).astype(np.float16),
                artifacts.SUBSET_FRACTION: np.repeat(np.array([*lower, full]), size.n_seeds),
                artifacts.SUBSET_SEED: np.tile(np.array(seeds), len(lower) + 1),
                artifacts.FULL_SEEDS: np.array(seeds),
                artifacts.CLEAN_GROUPS: truth.groups.astype(str),
            }
            corrupt_names = []
            for c in range(task.n_conditions):
                name, severity = f"corruption{c // 5:02d}", c % 5 + 1
                corrupt_names.append((name, severity))
                arrays[artifacts.probs_key(artifacts.condition_key("corrupt", name, severity))] = np.repeat(
                    probs[None, :, 1 + n_lower + c], size.n_seeds, axis=0
                )
            # metrics of every column at unit weights: lower fractions from the stored float16 keys
            stored_lower = arrays[artifacts.ALL_CLEAN_PROBS][:n_lower].transpose(1, 0, 2)
            columns = np.concatenate([stored_lower, probs[:, 1 + n_lower :]], axis=1)
            aurocs = condition_aurocs(columns, truth.labels, task.kind, prepare_weights(unit), 1)[0]
            clean = condition_metrics(truth.labels, full_probs, task.kind)
            base = {"encoder": encoder, "task": task.name, "task_kind": task.kind, "target": "", "n_train": 0}
            for s in seeds:
                rows.append({**base, **clean, "label_fraction": full, "seed": s, "condition": "clean",
                             "corruption": "", "severity": 0})  # fmt: skip
                for f, fraction in enumerate(lower):
                    k = f * size.n_seeds + s
                    debiased = float(weighted_debiased_ece(truth.labels, stored_lower[:, k].astype(np.float32),
                                                           task.kind, unit)[0])  # fmt: skip
                    rows.append({**base, **clean, "auroc": float(aurocs[k]), "ece_debiased": debiased,
                                 "label_fraction": fraction, "seed": s, "condition": "clean", "corruption": "",
                                 "severity": 0})  # fmt: skip
                for c, (name, severity) in enumerate(corrupt_names):
                    rows.append({**base, **clean, "auroc": float(aurocs[n_lower + c]), "label_fraction": full,
                                 "seed": s, "condition": "corrupt", "corruption": name, "severity": severity})  # fmt: skip
            if shift_probs is not None and truth.shift_labels is not None and truth.shift_groups is not None:
                target = f"{task.name}_shift"
                stem = artifacts.condition_key(artifacts.SHIFT, target=target)
                arrays[artifacts.probs_key(stem)] = np.repeat(shift_probs[None], size.n_seeds, axis=0)
                arrays[artifacts.labels_key(stem)] = truth.shift_labels
                arrays[artifacts.shift_groups_key(target)] = truth.shift_groups.astype(str)
                shifted = condition_metrics(truth.shift_labels, shift_probs, task.kind)
                for s in seeds:
                    rows.append({**base, **shifted, "label_fraction": full, "seed": s, "condition": "shift",
                                 "corruption": "", "severity": 0, "target": target})  # fmt: skip
            folder.write_predictions(encoder, task.name, arrays)
            del probs, shift_probs, arrays, columns
    folder.write_records(pd.DataFrame(rows), {"source": "crs.bench.scoring synthetic run"})
    return folder


@dataclass(frozen=True)
class RunFolderBenchmark:
    size: str
    n_encoders: int
    n_boot: int
    workers: int
    score_wall_s: float
    score_cpu_s: float
    peak_rss_gib: float
    synthesis_wall_s: float
    load_average: tuple[float, float]
    leading_tier: tuple[str, ...]
    n_reversed: int
    n_robust: int
    noise_crs_mean: float


def _score_folder(root: str, n_boot: int, workers: int, queue) -> None:
    """Child process: read the records, score them with the case-level bootstrap, report the figures."""
    folder = RunFolder(root)
    records = folder.read_records()
    usage, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = score_records(records, ScoreSettings(n_boot=n_boot, case_level=True), run_folder=folder, workers=workers)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    found = result.reversal_uncertainty
    queue.put(
        {
            "score_wall_s": wall,
            "score_cpu_s": (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime),
            "peak_rss_gib": own_peak_rss_bytes() / 2**30,  # not ru_maxrss: that inherits the parent's
            "leading_tier": tuple(result.bootstrap.leading_tier),
            "n_reversed": result.reversals.n_reversed,
            "n_robust": 0 if found is None else found.n_robust,
            "noise_crs_mean": float("nan") if found is None else float(found.noise.loc["crs", "mean"]),
        }
    )


def write_once(size: ScoringSize, root: str, seed: int = 0, reuse: bool = False) -> float:
    """Write the synthetic run in a fresh process (unless ``reuse`` and it exists); the seconds it took."""
    import multiprocessing  # only this benchmark forks: a fresh process measures the scoring's own peak

    started = time.perf_counter()
    if not (reuse and RunFolder(root).records_path.exists()):
        context = multiprocessing.get_context("spawn")
        writer = context.Process(target=write_synthetic_run, args=(size, root, seed))
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            raise RuntimeError(f"writing the synthetic run failed (exit code {writer.exitcode})")
    return time.perf_counter() - started


WARM_UP = ScoringSize("warm-up", QUICK.tasks, 2, 2, (0.5, 1.0), 10)
"""The run folder each tree scores once, untimed, before ``--against``'s timed runs (numba's cache)."""


def run_against(size: ScoringSize, root: str, revision: str, workers: int = 2, pairs: int = 2, seed: int = 0,
                reuse: bool = False):
    """``--against``: write the run folder once, then score it with ``revision``'s code and this tree's,
    interleaved (:func:`crs.bench.scoring_against.side_by_side`)."""
    import tempfile

    from crs.bench.scoring_against import side_by_side

    write_once(size, root, seed, reuse)
    with tempfile.TemporaryDirectory(prefix="crs-warm-up-") as warm:
        write_once(WARM_UP, warm, seed)
        return side_by_side(root, revision, size.n_boot, workers, pairs, warm_up=warm, warm_up_boot=WARM_UP.n_boot)


def run_through_score_records(
    size: ScoringSize, root: str, workers: int = 2, seed: int = 0, reuse: bool = False
) -> RunFolderBenchmark:
    """Write the synthetic run (unless ``reuse`` and it exists), then score it by :func:`score_records`
    in a fresh process, so the peak RSS is the scoring's alone (the synthesis is measured apart)."""
    import multiprocessing  # only this benchmark forks: a fresh process measures the scoring's own peak

    synthesis = write_once(size, root, seed, reuse)
    load_start = os.getloadavg()[0]
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    scorer = context.Process(target=_score_folder, args=(root, size.n_boot, workers, queue))
    scorer.start()
    figures = queue.get()
    scorer.join()
    return RunFolderBenchmark(
        size=size.name, n_encoders=size.n_encoders, n_boot=size.n_boot, workers=workers,
        synthesis_wall_s=synthesis, load_average=(load_start, os.getloadavg()[0]), **figures,
    )  # fmt: skip


def folder_text(result: RunFolderBenchmark) -> str:
    return "\n".join(
        [
            f"score_records on a synthetic run folder, {result.size} size: {result.n_encoders} encoders, "
            f"{result.n_boot} replicates, {result.workers} worker thread(s)",
            f"  scoring: {result.score_wall_s:.1f} s wall, {result.score_cpu_s:.1f} s CPU, peak RSS "
            f"{result.peak_rss_gib:.2f} GiB (its own process); run folder written in {result.synthesis_wall_s:.1f} s",
            f"  load average {result.load_average[0]:.1f} at the start, {result.load_average[1]:.1f} at the end",
            f"  leading tier {', '.join(result.leading_tier)}; {result.n_reversed} reversals, {result.n_robust} robust; "
            f"noise alone reorders {result.noise_crs_mean:.1f} CRS pairs on average",
        ]
    )


def text(result: ScoringBenchmark) -> str:
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.parts_wall_s.items())
    return "\n".join(
        [
            f"scoring bootstrap, {result.size} size: {result.n_encoders} encoders, {result.n_boot} replicates, "
            f"{result.workers} worker thread(s)",
            f"  scoring: {result.scoring_wall_s:.1f} s wall, {result.scoring_cpu_s:.1f} s CPU ({parts})",
            f"  peak RSS {result.peak_rss_gib:.2f} GiB; synthetic predictions made outside the clock in "
            f"{result.synthesis_wall_s:.1f} s",
            f"  {result.auroc_terms:.3g} AUROC terms (replicate x row x column), {result.ns_per_term_cpu:.2f} CPU ns each",
            f"  load average {result.load_average[0]:.1f} at the start, {result.load_average[1]:.1f} at the end",
            f"  leading tier {', '.join(result.leading_tier)}; {result.n_reversed} reversals, {result.n_robust} robust; "
            f"noise alone reorders {result.noise_crs_mean:.1f} CRS pairs on average",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small size that runs in seconds")
    parser.add_argument("--encoders", type=int, default=None, help="number of encoders (default: the size's)")
    parser.add_argument("--boot", type=int, default=None, help="bootstrap replicates (default: the size's)")
    parser.add_argument("--workers", type=int, default=2, help="threads for the weighted AUROC")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--run-folder", default=None,
                        help="write a synthetic run folder here and score it through score_records (the real path)")
    parser.add_argument("--reuse", action="store_true", help="with --run-folder: reuse a run folder already written")
    parser.add_argument("--against", default=None, metavar="REV",
                        help="with --run-folder: score it with REV's code (a temporary git worktree) and this "
                             "tree's, interleaved, and report CPU new / old (crs.bench.scoring_against)")
    parser.add_argument("--pairs", type=int, default=2, help="with --against: old/new pairs to run (default 2)")
    args = parser.parse_args(argv)
    if args.against and not args.run_folder:
        parser.error("--against needs --run-folder DIR: the one run folder both trees score")
    size = QUICK if args.quick else PAPER
    if args.encoders is not None or args.boot is not None:
        size = ScoringSize(
            f"{size.name} (changed)",
            size.tasks,
            args.encoders or size.n_encoders,
            size.n_seeds,
            size.fractions,
            args.boot or size.n_boot,
        )
    if args.against:
        from crs.bench.scoring_against import side_by_side_text

        compared = run_against(size, args.run_folder, args.against, args.workers, args.pairs, reuse=args.reuse)
        print(json.dumps(compared.summary(), indent=2) if args.json else side_by_side_text(compared))
        return
    if args.run_folder:
        folder_result = run_through_score_records(size, args.run_folder, workers=args.workers, reuse=args.reuse)
        print(json.dumps(asdict(folder_result), indent=2) if args.json else folder_text(folder_result))
        return
    result = run(size, workers=args.workers)
    print(json.dumps(asdict(result), indent=2) if args.json else text(result))


if __name__ == "__main__":
    main()
