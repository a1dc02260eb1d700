"""``crs bench paper-scale``: stage 2 and scoring at the paper's sample counts, each stage measured alone.

What a user with a finished stage 1 does, at the real sizes, on generated features with planted
class signal:

* three tasks with the paper's counts: ISIC 2019 (25,331 images, 8 classes, 16 dermoscopy
  corruptions x 5 severities = 80 conditions on its test rows), APTOS 2019 (3,662 images, 5
  ordinal grades, 45 conditions) and CheXpert (191,027 frontal images, 5 labels, 65 conditions on
  38,117 test rows) with a MIMIC-CXR-sized shift target; D = 1,024; group ids (lesions, patients)
  with several images per group; group-aware train / val / test splits;
* for ``--encoders N`` encoders whose signal strength and robustness differ (so rankings differ);
* the sample tables are written from a spec of ``folder`` entries (CSV only; there are no images)
  and every condition is imported through :mod:`crs.cache.imports`, one file per condition, as a
  user importing features computed elsewhere would;
* then ``Benchmark.probe()``, ``.score()`` and ``.report()`` each run in a process of their own, with
  the spec's settings (fractions 1-100 %, 5 seeds, 5 C, torch backend, the default ``jobs``).

Per stage: wall seconds, CPU seconds of the whole process tree (the stage process and its joblib
workers: ``getrusage(RUSAGE_CHILDREN)`` after it ends, or the sum of psutil's per-process CPU
times, whichever is larger), the peak RSS of the tree (the sum over the stage process and all its
descendants, sampled every 0.1 s) and the largest single process's peak: the stage process's own
``VmHWM`` (exact), and the workers' ``getrusage(RUSAGE_CHILDREN).ru_maxrss``, an upper bound, since a
forked or spawned child inherits the high-water mark its parent had when it started.
Per unit: what ``crs probe`` records in the run folder's ``probe_costs.csv``, when that file is
there. The probe's 15-encoder figure is each unit's measured cost times 15 units per task (plus the
stage's fixed part once), a measurement of per-unit cost times units, not a fit to smaller sizes. The
score and the report at 15 encoders are measured (on by default for ``--reuse`` and full-size runs):
after the stages, a run folder of 15 encoders is made from the measured one without new fits (encoder
k copies measured encoder k mod N, its predictions files hard links; :mod:`crs.bench.paper_scale_replicas`
says what that shows and what it cannot), and the score and report stages run on it in processes of
their own. The figures scaled per encoder (measured cost per encoder times 15) stay beside them as
``*_scaled`` (decision 0114: the report does not grow with the encoders, so scaling it overstated it).

``--scale`` multiplies every row count (for quick runs); ``--keep`` keeps the work folder (cache,
run folder, spec), which is otherwise deleted. Full size needs about 6.6 GB of disk per encoder.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil

from crs.bench.paper_scale_zero_shot import (
    ZERO_SHOT_STAGES,
    fused_stages,
    import_simulated,
    is_vlm,
    run_probe_stage,
    run_score_stage,
    run_zero_shot_stage,
    simulated_prototypes,
    summary_line,
    zero_shot_summary,
)
from crs.benchmark import Benchmark
from crs.cache.imports import import_features, write_table_from_spec
from crs.cache.store import FeatureStore, store_path
from crs.data.subsample import corruption_rows
from crs.evaluate.memory import own_peak_rss_bytes

ISIC_CLASSES = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
CHEXPERT_LABELS = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion")
PAPER_ENCODERS = 15
LATENT = 32  # dimension of the planted signal, mixed into D feature dimensions
BLOCK_ROWS = 8192  # rows generated and written at a time


@dataclass(frozen=True)
class PaperTask:
    """One task at its paper size; ``n_test`` None means 20 % of the images (as the loaders split)."""

    name: str
    kind: str
    modality: str
    n_images: int
    classes: tuple[str, ...]
    prevalence: tuple[float, ...]
    max_group: int  # images per group (lesion, patient) drawn from 1..max_group
    n_test: int | None = None
    shift: tuple[str, int] | None = None  # (name, images) of a shift target


TASKS = (
    # ISIC 2019 training set class shares (NV about half, DF and VASC about 1 %).
    PaperTask("isic2019", "multiclass", "dermoscopy", 25_331, ISIC_CLASSES,
              (0.18, 0.51, 0.13, 0.034, 0.10, 0.009, 0.010, 0.025), max_group=4),
    PaperTask("aptos2019", "ordinal", "fundus", 3_662, ("0", "1", "2", "3", "4"),
              (0.49, 0.10, 0.27, 0.05, 0.08), max_group=1),
    # MIMIC-CXR-sized target: 5,000 images, the order of MIMIC-CXR-JPG's official test split.
    PaperTask("chexpert", "multilabel", "chest_xray", 191_027, CHEXPERT_LABELS,
              (0.30, 0.15, 0.08, 0.30, 0.40), max_group=6, n_test=38_117, shift=("mimic_cxr", 5_000)),
)


@dataclass(frozen=True)
class PaperScaleConfig:
    encoders: int = 2
    scale: float = 1.0
    dim: int = 1024
    severities: tuple[int, ...] = (1, 2, 3, 4, 5)
    max_corruptions: int | None = None  # per task; None: the modality's whole suite
    label_fractions: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 1.0)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    Cs: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0)
    n_boot: int = 1000
    backend: str = "torch"
    jobs: int | str | None = None  # None: the spec's default
    in_process: bool = False  # run the stages in this process (quick runs and tests; peaks are upper bounds)
    seed: int = 0
    workdir: str | None = None
    keep: bool = False
    reuse: bool = False  # measure the stages on the cache a kept work folder already holds (no prepare)
    subgroups: bool = False  # score patient subgroups (Sex, Age band; AP/PA on chest films) as CheXpert's CSV has them
    corruption_rows: int | None = None  # corrupted conditions on a patient-level subsample of about N test images
    zero_shot: bool = True  # every second encoder is a VLM with simulated prototypes; its zero-shot cost measured
    # score and report measured on a 15-encoder run folder replicated from the measured one (no new fits);
    # None: on for --reuse runs and full-size runs (scale >= 1), off for quick runs
    measure_fifteen: bool | None = None
    keep_fifteen: bool = False  # keep that folder (``--keep``; a --reuse run keeps the cache but not it)

    def measures_fifteen(self) -> bool:
        if self.measure_fifteen is not None:
            return self.measure_fifteen
        return self.reuse or self.scale >= 1.0

    def encoder_names(self) -> list[str]:
        return [f"enc{k:02d}" for k in range(self.encoders)]


# --- sizes, tables and the spec ---------------------------------------------------------------------

@dataclass(frozen=True)
class TaskSize:
    n_images: int
    n_val: int
    n_test: int
    conditions: tuple[str, ...]
    shift_images: int


def task_size(task: PaperTask, config: PaperScaleConfig) -> TaskSize:
    """Row counts at ``config.scale`` (never below what the label-fraction floors need) and the conditions."""
    from crs.corruptions import suite  # the suites' names (no torch)

    floor = 40 * len(task.classes)
    n = max(round(task.n_images * config.scale), floor)
    n_test = max(round((task.n_test or 0.2 * task.n_images) * config.scale), floor // 4)
    n_val = max(round(0.2 * n), floor // 4)
    corruptions = suite(task.modality) if config.max_corruptions is None else shared_corruptions(config)
    conditions = tuple(f"corrupt/{c}/{s}" for c in corruptions for s in config.severities)
    shift = max(round(task.shift[1] * config.scale), floor // 2) if task.shift else 0
    return TaskSize(n, n_val, n_test, conditions, shift)


def shared_corruptions(config: PaperScaleConfig) -> tuple[str, ...]:
    """With ``max_corruptions``: the first that many corruptions of those in every task's suite (the
    spec's ``[extract] corruptions`` is one list for all tasks, and stage 2 evaluates exactly it)."""
    from crs.corruptions import suite

    suites = [suite(task.modality) for task in TASKS]
    shared = tuple(name for name in suites[0] if all(name in other for other in suites[1:]))
    if config.max_corruptions is not None and config.max_corruptions > len(shared):
        raise ValueError(f"--max-corruptions {config.max_corruptions}: the three suites share only {len(shared)} "
                         f"corruptions ({', '.join(shared)}); ask for at most {len(shared)}, or for all of them")
    return shared[: config.max_corruptions]


def _group_sizes(n: int, max_group: int, rng: np.random.Generator) -> np.ndarray:
    """Group sizes in 1..max_group summing to exactly ``n``."""
    sizes = rng.integers(1, max_group + 1, size=n // max(1, (max_group + 1) // 2) + 2)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n)) + 1]
    sizes[-1] -= int(sizes.sum()) - n
    return sizes[sizes > 0]


def _labels(task: PaperTask, n: int, rng: np.random.Generator) -> np.ndarray:
    """Labels drawn from the prevalences; the first rows cycle through every class (or label) so each
    split holds a few of each, as the label-fraction floors need."""
    if task.kind == "multilabel":
        present = (rng.random((n, len(task.classes))) < np.asarray(task.prevalence)).astype(np.float32)
        for j in range(len(task.classes)):
            present[4 * j: 4 * j + 2, j], present[4 * j + 2: 4 * j + 4, j] = 1.0, 0.0
        return present
    p = np.asarray(task.prevalence) / np.sum(task.prevalence)
    codes = rng.choice(len(task.classes), size=n, p=p)
    head = min(n, 4 * len(task.classes))
    codes[:head] = np.arange(head) % len(task.classes)
    return codes.astype(np.int64)


@dataclass(frozen=True)
class TaskTable:
    ids: np.ndarray
    labels: np.ndarray
    splits: np.ndarray
    groups: np.ndarray


def task_table(task: PaperTask, size: TaskSize, seed: int, shift: bool = False) -> TaskTable:
    """Ids, labels, splits and groups; every split is whole groups, in store (id) order."""
    rng = np.random.default_rng([seed, TASKS.index(task), int(shift)])
    prefix = task.shift[0] if shift and task.shift else task.name
    parts = [("test", size.shift_images)] if shift else [
        ("train", size.n_images - size.n_val - size.n_test), ("val", size.n_val), ("test", size.n_test)]
    splits: list[np.ndarray] = []
    groups: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    for split, count in parts:
        sizes = _group_sizes(count, task.max_group, rng)
        first = sum(len(g) for g in groups)
        groups.append(np.repeat([f"{prefix}-{split}-g{first + j:07d}" for j in range(len(sizes))], sizes))
        splits.append(np.full(count, split))
        labels.append(_labels(task, count, rng))
    n = sum(count for _, count in parts)
    ids = np.array([f"{prefix}-{i:07d}" for i in range(n)])
    return TaskTable(ids, np.concatenate(labels), np.concatenate(splits), np.concatenate(groups))


def write_csv(task: PaperTask, table: TaskTable, folder: Path) -> None:
    """The ``folder`` loader's CSV: id, path (no file behind it), label(s), group, split."""
    folder.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame({"id": table.ids, "path": [f"images/{i}.jpg" for i in table.ids]})
    if task.kind == "multilabel":
        rng = np.random.default_rng(len(table.ids))
        for j, name in enumerate(task.classes):
            column = table.labels[:, j].astype(object)
            blank = (rng.random(len(column)) < 0.03) & (table.splits != "test")  # a few unknown labels
            column[blank] = None
            frame[name] = column
    elif task.kind == "multiclass":
        frame["label"] = np.asarray(task.classes)[table.labels]
    else:
        frame["label"] = table.labels
    frame["group"], frame["split"] = table.groups, table.splits
    frame = pd.concat([frame, subgroup_columns(task, table.groups)], axis=1)
    frame.to_csv(folder / "labels.csv", index=False)


SUBGROUP_COLUMNS = ("Sex", "Age", "AP/PA")


def subgroup_columns(task: PaperTask, groups: np.ndarray) -> pd.DataFrame:
    """Per patient (group) a sex and an age, and per chest film a view, drawn as CheXpert's train.csv has
    them (about 59 % male, ages 18-90 around 60, 84 % AP among frontal films); a stream of their own."""
    rng = np.random.default_rng([TASKS.index(task), 99])
    names, index = np.unique(groups, return_inverse=True)
    sex = np.where(rng.random(len(names)) < 0.59, "Male", "Female")[index]
    age = np.clip(np.round(rng.normal(60, 18, len(names))), 18, 90).astype(np.int64)[index]
    columns = {"Sex": sex, "Age": age}
    if task.kind == "multilabel":
        columns["AP/PA"] = np.where(rng.random(len(groups)) < 0.84, "AP", "PA")
    return pd.DataFrame(columns)


def _options(task: PaperTask, subgroups: bool = False) -> str:
    labels = json.dumps(list(task.classes)) if task.kind == "multilabel" else '"label"'
    named = [c for c in SUBGROUP_COLUMNS if c != "AP/PA" or task.kind == "multilabel"] if subgroups else []
    return (f'{{ csv = "labels.csv", id_column = "id", image_column = "path", label_columns = {labels}, '
            f'kind = "{task.kind}", modality = "{task.modality}", group_column = "group", split_column = "split", '
            f'class_names = {json.dumps(list(task.classes))}, subgroups = {json.dumps(named)} }}')


def write_spec(config: PaperScaleConfig, work: Path) -> Path:
    """The paper's stage-2 protocol as a spec of ``folder`` data sets (tables from CSVs, no images).

    Its folders are written absolute: a relative path in a spec resolves against the spec's own folder
    (decision 0154), and the spec is copied into other folders (:mod:`crs.bench.paper_scale_replicas`).
    """
    work = Path(work).absolute()
    lines = [
        'name = "paper-scale"', f'cache = "{work / "cache"}"', f'output = "{work / "out"}"',
        f"encoders = {json.dumps(config.encoder_names())}",
        # Stage 2 evaluates exactly the spec's corrupted variants (decision 0050): the ones imported.
        "", "[extract]",
        f"corruptions = {json.dumps('all' if config.max_corruptions is None else list(shared_corruptions(config)))}",
        f"severities = {list(config.severities)}",
        *([f"corruption_rows = {config.corruption_rows}"] if config.corruption_rows is not None else []),
        "", "[probe]", f'backend = "{config.backend}"',
        f"label_fractions = {list(config.label_fractions)}", f"seeds = {list(config.seeds)}",
        f"Cs = {list(config.Cs)}", "min_per_class = 3",
        "", "[score]", f'reference_encoder = "{config.encoder_names()[0]}"', f"n_boot = {config.n_boot}",
    ]
    for task in TASKS:
        lines += ["", "[[datasets]]", f'name = "{task.name}"', 'loader = "folder"',
                  f'root = "{work / "data" / task.name}"', f"options = {_options(task, config.subgroups)}"]
        if task.shift:
            name = task.shift[0]
            lines.append(f'shift_target = {{ name = "{name}", loader = "folder", root = "{work / "data" / name}", '
                         f"options = {_options(task, config.subgroups)} }}")
    path = work / "spec.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# --- features with planted signal -------------------------------------------------------------------

def _class_signal(task: PaperTask, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Latent (rows x LATENT) signal: class centroids (multiclass), a graded axis (ordinal), or a sum of
    one direction per present label (multilabel), plus unit noise shared by every encoder. The scales
    give clean macro AUROCs of about 0.83-0.88 (ISIC), 0.73-0.83 (APTOS) and 0.91-0.92 (CheXpert) for
    encoders 0-14, and severity-5 corruptions that cost 0 to 0.2 of it (scikit-learn, C = 0.01, at a
    fifth of ISIC's and APTOS's size and a twentieth of CheXpert's)."""
    centroids = np.random.default_rng(TASKS.index(task)).standard_normal((len(task.classes), LATENT))
    if task.kind == "multilabel":
        signal = 0.45 * (labels @ centroids)
    elif task.kind == "ordinal":
        axis = centroids[0] / np.linalg.norm(centroids[0])
        signal = 0.9 * labels[:, None] * axis + 0.3 * centroids[labels]
    else:
        signal = 0.3 * centroids[labels]
    return (signal + rng.standard_normal(signal.shape)).astype(np.float32)


def latent_directions(task: PaperTask) -> np.ndarray:
    """(classes, LATENT): the latent direction each class (grade, finding) carries its signal in, as
    :func:`_class_signal` plants it; a simulated VLM's prototypes point along them."""
    centroids = np.random.default_rng(TASKS.index(task)).standard_normal((len(task.classes), LATENT))
    if task.kind == "ordinal":
        axis = centroids[0] / np.linalg.norm(centroids[0])
        return 0.9 * np.arange(len(task.classes))[:, None] * axis + 0.3 * centroids
    return centroids


def _encoder_mix(task: PaperTask, encoder: int, dim: int) -> tuple[np.ndarray, float, float]:
    """Encoder ``encoder``'s projection of the latent signal, signal strength and robustness factor."""
    rng = np.random.default_rng([TASKS.index(task), encoder, 7])
    mix = (rng.standard_normal((LATENT, dim)) / np.sqrt(LATENT)).astype(np.float32)
    strength = 1.6 * 0.92 ** encoder
    robustness = float(rng.uniform(0.5, 1.5))  # how much a corruption hurts this encoder
    return mix, strength, robustness


def feature_blocks(task: PaperTask, table: TaskTable, encoder: int, dim: int, seed: int,
                   shift: bool = False) -> Iterator[np.ndarray]:
    """Clean features of every row in blocks; the latent signal of an image is the same for every
    encoder (seeded by block), the projection and the noise are the encoder's own."""
    mix, strength, _ = _encoder_mix(task, encoder, dim)
    offset = np.random.default_rng([seed, 99]).standard_normal(dim).astype(np.float32) * 0.5 if shift else 0.0
    for start in range(0, len(table.ids), BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, len(table.ids))
        latent_rng = np.random.default_rng([seed, TASKS.index(task), int(shift), start])
        latent = _class_signal(task, table.labels[start:stop], latent_rng)
        noise_rng = np.random.default_rng([seed, TASKS.index(task), int(shift), encoder, start, 1])
        features = noise_rng.standard_normal((stop - start, dim), dtype=np.float32)
        features += (strength * (0.8 if shift else 1.0)) * (latent @ mix)
        yield features + offset


def _capturing(blocks: Iterator[np.ndarray], keep: np.ndarray, sink: list[np.ndarray]) -> Iterator[np.ndarray]:
    """Pass blocks on, keeping a copy of the rows where ``keep`` is true (the test rows the corruptions start from)."""
    start = 0
    for block in blocks:
        sink.append(block[keep[start:start + len(block)]])
        start += len(block)
        yield block


def corrupt(clean_test: np.ndarray, task: PaperTask, encoder: int, condition: str, seed: int) -> np.ndarray:
    """A corruption x severity of the clean test features: a blend towards noise of the same scale that
    grows with severity (it removes signal, so AUROC falls), scaled by the encoder's robustness and a
    per-corruption factor, plus a small drift (which moves calibration more than ranking)."""
    _, corruption, severity = condition.split("/")
    _, _, robustness = _encoder_mix(task, encoder, clean_test.shape[1])
    rng = np.random.default_rng([seed, TASKS.index(task), encoder, zlib.crc32(corruption.encode()), int(severity)])
    blend = min(0.9, 0.12 * int(severity) * robustness * rng.uniform(0.5, 1.5))
    scale = float(clean_test.std())
    noisy = (1 - blend) * clean_test + (blend * scale) * rng.standard_normal(clean_test.shape, dtype=np.float32)
    noisy += (0.2 * blend * scale) * rng.standard_normal((1, clean_test.shape[1]), dtype=np.float32)
    return noisy


def _write_h5(path: Path, ids: np.ndarray, blocks: Iterator[np.ndarray], n_rows: int, dim: int) -> None:
    """A plain HDF5 file (``features`` float16, ``ids``), as a user's own export might be."""
    import h5py  # a declared dependency, but only this writer needs it

    with h5py.File(path, "w") as f:
        f.create_dataset("ids", data=ids.astype(object), dtype=h5py.string_dtype("utf-8"))
        features = f.create_dataset("features", shape=(n_rows, dim), dtype="float16")
        start = 0
        for block in blocks:
            features[start:start + len(block)] = block.astype(np.float16)
            start += len(block)


def prepare(config: PaperScaleConfig, work: Path) -> dict[str, Any]:
    """Write the CSVs, the spec and the sample tables, then import every encoder's conditions (one file each)."""
    spec = write_spec(config, work)
    stats: dict[str, Any] = {"generate_s": 0.0, "import_s": 0.0, "imported_bytes": 0, "imports": 0}
    for task in TASKS:
        size = task_size(task, config)
        table = task_table(task, size, config.seed)
        write_csv(task, table, work / "data" / task.name)
        write_table_from_spec(spec, task.name)
        shift_table = None
        if task.shift:
            shift_table = task_table(task, size, config.seed, shift=True)
            write_csv(task, shift_table, work / "data" / task.shift[0])
            write_table_from_spec(spec, task.shift[0])
        test_rows = np.flatnonzero(table.splits == "test")
        subsample = corruption_subsample(work, task.name, config.corruption_rows)
        for encoder, name in enumerate(config.encoder_names()):
            captured: list[np.ndarray] = []
            blocks = _capturing(feature_blocks(task, table, encoder, config.dim, config.seed),
                                table.splits == "test", captured)
            _import_one(work, stats, task.name, name, "clean", table.ids, blocks, len(table.ids), config.dim)
            if config.zero_shot and is_vlm(encoder):
                mix, _, _ = _encoder_mix(task, encoder, config.dim)
                prototypes = simulated_prototypes(task.kind, latent_directions(task), mix, [config.seed, encoder, 29])
                import_simulated(work / "cache", task.name, name, prototypes, work)
            if shift_table is not None and task.shift:
                blocks = feature_blocks(task, shift_table, encoder, config.dim, config.seed, shift=True)
                _import_one(work, stats, task.shift[0], name, "clean", shift_table.ids, blocks, len(shift_table.ids),
                            config.dim)
            clean_test = np.concatenate(captured)
            del captured
            for condition in size.conditions:
                started = time.perf_counter()
                # Drawn for every test row, then subset: a subsample's rows are the whole split's rows.
                noisy = corrupt(clean_test, task, encoder, condition, config.seed)[subsample]
                stats["generate_s"] += time.perf_counter() - started
                _import_one(work, stats, task.name, name, condition, table.ids[test_rows][subsample], iter([noisy]),
                            len(noisy), config.dim, config.corruption_rows)
            del clean_test
    return stats


def corruption_subsample(work: Path, dataset: str, rows: int | None) -> np.ndarray:
    """Positions into the test split of the corruption subsample the store's table gives (all rows for None)."""
    table = FeatureStore(store_path(work / "cache", dataset)).read_table()
    test = table.indices("test")
    return corruption_rows(table.ids[test], table.labels[test], table.groups[test], rows).positions


def _import_one(work: Path, stats: dict[str, Any], dataset: str, encoder: str, condition: str, ids: np.ndarray,
                blocks: Iterator[np.ndarray], n_rows: int, dim: int, corruption_rows_wanted: int | None = None) -> None:
    path = work / "import.h5"
    started = time.perf_counter()
    _write_h5(path, ids, blocks, n_rows, dim)
    stats["generate_s"] += time.perf_counter() - started
    started = time.perf_counter()
    import_features(work / "cache", dataset, encoder, path, condition, corruption_rows_wanted=corruption_rows_wanted)
    stats["import_s"] += time.perf_counter() - started
    stats["imported_bytes"] += n_rows * dim * 2
    stats["imports"] += 1
    path.unlink()


# --- running and measuring one stage ----------------------------------------------------------------

@dataclass(frozen=True)
class StageCost:
    stage: str
    wall_s: float
    cpu_s: float
    peak_tree_rss_bytes: int  # sum over the stage process and its descendants, sampled every 0.1 s
    peak_process_rss_bytes: int  # the largest single process (ru_maxrss of the stage process or a worker)
    returncode: int
    error: str = ""
    import_s: float = 0.0  # wall seconds the stage process spent importing STAGE_MODULES[stage]: fixed, not per encoder


STAGE_MODULES = {
    "probe": ("crs.evaluate.stage", "crs.evaluate.zero_shot"),
    "score": ("crs.scoring.result", "crs.scoring.case_bootstrap"),
    "report": ("crs.report", "crs.corruptions", "matplotlib.pyplot"),
    "zero_shot": ("crs.evaluate.zero_shot",),
    "zero_shot_score": ("crs.scoring.zero_shot", "crs.scoring.case_bootstrap"),
}
"""The modules each stage imports when it runs (crs.benchmark imports them lazily). The stage process
imports them first and times it: a per-process cost that does not grow with the encoders, so the
15-encoder figures do not scale it. A module missing here is scaled with the work (pessimistic)."""


def run_stage(stage: str, spec: Path, jobs: int | str | None) -> dict[str, Any]:
    """In the stage's own process: import its modules (timed), run it, then report the import time and
    this process's and its waited-for workers' peaks."""
    started = time.perf_counter()
    for module in STAGE_MODULES.get(stage, ()):
        importlib.import_module(module)
    import_s = time.perf_counter() - started
    bench = Benchmark(spec)
    if stage == "probe":  # with the VLMs' zero-shot inside their units (decision 0112)
        run_probe_stage(bench, jobs)
    elif stage == "score":  # with zero-shot's score after the probes', where the probe stage made its records
        run_score_stage(bench)
    elif stage == "report":
        bench.report()
    elif stage in ZERO_SHOT_STAGES:
        run_zero_shot_stage(stage, spec)
    elif stage != "startup":
        raise ValueError(f"unknown stage {stage!r}")
    own = own_peak_rss_bytes()  # VmHWM: ru_maxrss would carry the bench process's high-water mark
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # an upper bound (see module doc)
    return {"self_maxrss": own, "children_maxrss": workers, "import_s": import_s}


class _TreeSampler(threading.Thread):
    """Peak summed RSS and per-process CPU seconds of a process and all its descendants."""

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.root, self.interval = psutil.Process(pid), interval
        self.peak = 0
        self.cpu: dict[int, float] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for process in processes:
                try:
                    total += process.memory_info().rss
                    times = process.cpu_times()
                    self.cpu[process.pid] = times.user + times.system
                except psutil.Error:
                    continue
            self.peak = max(self.peak, total)
            self.stopped.wait(self.interval)


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    peak_tree_rss_bytes: int
    returncode: int
    output: str


def measure_command(command: Sequence[str], env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` and measure it with its whole process tree: wall, CPU (waited-for descendants
    by ``getrusage``, or the sampled per-process sum if larger) and the peak summed RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, **(env or {})})
    sampler = _TreeSampler(process.pid)
    sampler.start()
    output, _ = process.communicate()
    wall = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    waited_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(wall, max(waited_cpu, sum(sampler.cpu.values())), sampler.peak, process.returncode, output)


def measure_stage(stage: str, spec: Path, jobs: int | str | None) -> StageCost:
    """Run one stage in a fresh process (``python -m crs.bench.paper_scale --stage ...``) and measure it."""
    report = spec.parent / f"stage-{stage}.json"
    command = [sys.executable, "-m", "crs.bench.paper_scale", "--stage", stage, "--spec", str(spec),
               "--stage-report", str(report)]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    measured = measure_command(command)
    peaks = json.loads(report.read_text()) if report.exists() else {}
    single = max(peaks.get("self_maxrss", 0), peaks.get("children_maxrss", 0))
    output = measured.output.strip()
    error = "" if measured.returncode == 0 else (output.splitlines()[-1] if output else "failed")
    return StageCost(stage, measured.wall_s, measured.cpu_s, measured.peak_tree_rss_bytes, single,
                     measured.returncode, error, float(peaks.get("import_s", 0.0)))


def measure_in_process(stage: str, spec: Path, jobs: int | str | None, config: PaperScaleConfig | None = None) -> StageCost:
    """The same stage in this process (``--in-process``, quick runs): its peak includes whatever this
    process already held, so it bounds the stage's own peak from above."""
    sampler = _TreeSampler(os.getpid())
    sampler.start()
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    error = ""
    try:
        if stage == "prepare":
            assert config is not None
            (spec.parent / "prepare.json").write_text(json.dumps(prepare(config, spec.parent)))
        else:
            run_stage(stage, spec, jobs)
    except Exception as exc:  # reported like a failed stage process
        error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    wall = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    cpu = 0.0
    for before, who in ((before_self, resource.RUSAGE_SELF), (before_children, resource.RUSAGE_CHILDREN)):
        after = resource.getrusage(who)
        cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return StageCost(stage, wall, cpu, sampler.peak, own, 1 if error else 0, error)


# --- the whole benchmark ----------------------------------------------------------------------------

@dataclass(frozen=True)
class PaperScaleResult:
    config: dict[str, Any]
    sizes: dict[str, dict[str, int]]
    prepare: dict[str, Any]
    startup: StageCost
    stages: tuple[StageCost, ...]
    units: list[dict[str, Any]] = field(default_factory=list)  # probe_costs.csv per task, when present
    total_15: dict[str, float] = field(default_factory=dict)  # wall seconds per stage for 15 encoders
    jobs: str = ""
    zero_shot: dict[str, float] = field(default_factory=dict)  # zero-shot's cost beside the probes' (ratios)
    stages_15: tuple[StageCost, ...] = ()  # score and report measured on the replicated 15-encoder run folder

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def disk_estimate(config: PaperScaleConfig) -> int:
    """Bytes the cache takes (float16 features of every encoder, condition and row; one h5 file at a time)."""
    total = 0
    for task in TASKS:
        size = task_size(task, config)
        corrupted = size.n_test if config.corruption_rows is None else min(size.n_test, config.corruption_rows)
        rows = size.n_images + corrupted * len(size.conditions) + size.shift_images
        total += rows * config.dim * 2 * config.encoders
    return int(total * 1.1)


def per_unit(folder: Path) -> list[dict[str, Any]]:
    """Per task: units, mean wall and CPU seconds and the largest peak RSS from ``probe_costs.csv``;
    net of a unit's zero-shot (``zero_shot_cpu_s``, decision 0112), so the probes' figures are theirs."""
    path = folder / "probe_costs.csv"
    if not path.exists():
        return []
    costs = pd.read_csv(path)
    if "zero_shot_cpu_s" in costs:
        costs["wall_s"] -= costs["zero_shot_cpu_s"]
        costs["cpu_s"] -= costs["zero_shot_cpu_s"]
    workers = int(costs["worker_pid"].nunique()) if "worker_pid" in costs else 1
    rows = []
    for task, group in costs.groupby("task", sort=False):
        row: dict[str, Any] = {"task": str(task), "units": int(len(group)), "workers": workers}
        for column in ("wall_s", "cpu_s"):
            if column in group:
                row[f"mean_{column}"] = float(group[column].mean())
        if "peak_rss_bytes" in group:
            row["max_peak_rss_bytes"] = int(group["peak_rss_bytes"].max())
        rows.append(row)
    return rows


def fifteen_encoders(stages: Sequence[StageCost], startup: StageCost, encoders: int,
                     units: Sequence[dict[str, Any]] = (), measured: Sequence[StageCost] = ()) -> dict[str, float]:
    """Each stage's wall seconds for 15 encoders: (measured - fixed) / N x 15 + fixed, fixed = start-up
    (python and crs.benchmark) + the stage's own imports (``import_s``).

    ``measured``: stages run at 15 encoders (the score and report on the replicated run folder); a
    stage measured there (and successful) counts with its measured wall seconds, and its figure scaled
    per encoder is kept as ``<stage>_scaled``; the totals then use the measured ones, and the totals of
    the scaled figures alone are kept as ``total_scaled`` and ``total_from_units_scaled``.

    With per-unit costs (``probe_costs.csv``) also ``probe_from_units``: per-unit cost x units, i.e.
    15 units per task at the task's mean unit wall time shared by the run's W workers (distinct
    worker processes in the file), plus start-up and the probe stage's fixed part (its wall time
    beyond start-up and its units' time / W: worker start, records, audit, measured once, not per
    encoder); and ``total_from_units``: that plus the other stages as above.
    """
    base = startup.wall_s
    totals = {s.stage: base + s.import_s + max(s.wall_s - base - s.import_s, 0.0) / encoders * PAPER_ENCODERS
              for s in stages}
    totals["total"] = sum(totals.values())
    probe = next((s for s in stages if s.stage == "probe"), None)
    if probe is not None and units and all("mean_wall_s" in u for u in units):
        workers = max(int(u.get("workers", 1)) for u in units)
        unit_seconds = sum(u["mean_wall_s"] * u["units"] for u in units)
        fixed = max(probe.wall_s - base - unit_seconds / workers, 0.0)
        totals["probe_from_units"] = base + fixed + sum(u["mean_wall_s"] * PAPER_ENCODERS for u in units) / workers
        totals["total_from_units"] = totals["total"] - totals["probe"] + totals["probe_from_units"]
    at_fifteen = {s.stage: s.wall_s for s in measured if s.returncode == 0 and s.stage in totals}
    if at_fifteen:
        for key in ("total", "total_from_units"):
            if key in totals:
                totals[f"{key}_scaled"] = totals[key]
                totals[key] += sum(seconds - totals[stage] for stage, seconds in at_fifteen.items())
        for stage, seconds in at_fifteen.items():
            totals[f"{stage}_scaled"], totals[stage] = totals[stage], seconds
    return totals


def run(config: PaperScaleConfig, json_out: bool = False, echo=print) -> PaperScaleResult:
    """Generate, import, measure each stage, print, and delete the work folder unless ``config.keep``."""
    work = Path(config.workdir) if config.workdir else Path(tempfile.mkdtemp(prefix="crs-paper-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if config.reuse:
        config = reused_config(config, work)
    need = 0 if config.reuse else disk_estimate(config)
    free = shutil.disk_usage(work).free
    if need > free:
        raise OSError(f"paper-scale needs about {need / 2**30:.1f} GiB in {work} but {free / 2**30:.1f} GiB are free; "
                      "choose another work folder or a smaller scale")
    sizes = {task.name: dataclasses.asdict(task_size(task, config)) for task in TASKS}
    for entry in sizes.values():
        entry["conditions"] = len(entry["conditions"])
    try:
        if not json_out:
            echo(f"paper-scale: {config.encoders} encoder(s), scale {config.scale}, D = {config.dim}, "
                 f"about {need / 2**30:.1f} GiB of cache in {work}")
        prepared = reused_prepare(work) if config.reuse else measure_prepare(config, work)
        spec = work / "spec.toml"
        if config.in_process:
            startup = StageCost("startup", 0.0, 0.0, 0, 0, 0)
        else:
            startup = measure_stage("startup", spec, None)
        stages = []
        with_zero_shot = config.zero_shot and any(is_vlm(k) for k in range(config.encoders))
        for stage in ("probe", "score", "report"):  # zero-shot runs inside probe and score (fused_stages)
            cost = (measure_in_process(stage, spec, config.jobs) if config.in_process
                    else measure_stage(stage, spec, config.jobs))
            stages.append(cost)
            if not json_out:
                echo(_stage_line(cost))
            if cost.returncode != 0:
                break
        stages_15: list[StageCost] = []
        if config.measures_fifteen() and all(s.returncode == 0 for s in stages):
            stages_15 = measure_fifteen(config, spec, echo if not json_out else None)
        if with_zero_shot:  # the zero-shot that ran inside the probe and score stages, split out of them
            stages = fused_stages(stages, work / "out")
        jobs = str(Benchmark(spec).spec.probe.jobs if config.jobs is None else config.jobs)
        units = per_unit(work / "out")
        probe_stages = [s for s in stages if s.stage not in ZERO_SHOT_STAGES]
        result = PaperScaleResult(
            dataclasses.asdict(config), sizes, prepared, startup, tuple(stages), units,
            fifteen_encoders(probe_stages, startup, config.encoders, units, stages_15), jobs,
            zero_shot_summary(stages, config.encoders, work / "out", startup, fused=True,
                              score_15=next((s for s in stages_15 if s.stage == "score"), None))
            if with_zero_shot else {},
            tuple(stages_15),
        )
    finally:
        if not config.keep:
            shutil.rmtree(work, ignore_errors=True)
    if json_out:
        echo(json.dumps(result.as_dict(), indent=2))
    else:
        echo(format_result(result))
    return result


def measure_fifteen(config: PaperScaleConfig, spec: Path, echo=None, folder: Path | None = None) -> list[StageCost]:
    """The score and report stages on a run folder of 15 encoders replicated from the measured one
    (:func:`crs.bench.paper_scale_replicas.replicate_run`: no fits, predictions linked), each in its own
    process (or in this one with ``in_process``), in ``folder`` (default: ``fifteen`` beside the spec);
    the folder is deleted after unless ``keep_fifteen``."""
    from crs.bench.paper_scale_replicas import FOLDER, replicate_run

    folder = folder if folder is not None else spec.parent / FOLDER
    costs: list[StageCost] = []
    try:
        spec_15 = replicate_run(spec, PAPER_ENCODERS, folder)
        for stage in ("score", "report"):
            cost = (measure_in_process(stage, spec_15, config.jobs) if config.in_process
                    else measure_stage(stage, spec_15, config.jobs))
            costs.append(cost)
            if echo is not None:
                echo(_stage_line(cost, f"{stage}@{PAPER_ENCODERS}"))
            if cost.returncode != 0:
                break
    finally:
        if not config.keep_fifteen:
            shutil.rmtree(folder, ignore_errors=True)
    return costs


def reused_config(config: PaperScaleConfig, work: Path) -> PaperScaleConfig:
    """The configuration a kept work folder was prepared with, with this run's stage options
    (jobs, in-process, keep); the folder's earlier run output is removed so every stage starts afresh."""
    saved = work / "config.json"
    if not (saved.exists() and (work / "prepare.json").exists() and (work / "spec.toml").exists()):
        raise FileNotFoundError(f"{work} holds no prepared paper-scale cache (config.json, prepare.json, spec.toml); "
                                "run once with a work folder and keep it first")
    prepared = config_from_json(saved.read_text())
    shutil.rmtree(work / "out", ignore_errors=True)
    return dataclasses.replace(prepared, jobs=config.jobs, in_process=config.in_process, keep=True, reuse=True,
                               workdir=str(work), measure_fifteen=config.measure_fifteen,
                               keep_fifteen=config.keep_fifteen)


def reused_prepare(work: Path) -> dict[str, Any]:
    """The preparation figures stored by the run that made the work folder (not measured again)."""
    return {**json.loads((work / "prepare.json").read_text()), "reused": True}


def measure_prepare(config: PaperScaleConfig, work: Path) -> dict[str, Any]:
    """Generate and import in a process of its own, so its memory is measured like a stage's."""
    (work / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    if config.in_process:
        cost = measure_in_process("prepare", work / "spec.toml", None, config)
    else:
        cost = measure_stage("prepare", work / "spec.toml", None)
    if cost.returncode != 0:
        raise RuntimeError(f"paper-scale: generating or importing the features failed: {cost.error}")
    stats = json.loads((work / "prepare.json").read_text())
    return {**stats, "wall_s": cost.wall_s, "cpu_s": cost.cpu_s, "peak_tree_rss_bytes": cost.peak_tree_rss_bytes,
            "peak_process_rss_bytes": cost.peak_process_rss_bytes}


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _stage_line(cost: StageCost, label: str = "") -> str:
    text = (f"  {label or cost.stage:<7} wall {cost.wall_s:8.1f} s  CPU {cost.cpu_s:8.1f} s  peak RSS (tree) "
            f"{_gib(cost.peak_tree_rss_bytes)}  largest process {_gib(cost.peak_process_rss_bytes)}"
            f"  (imports {cost.import_s:.1f} s)")
    return text + (f"  FAILED: {cost.error}" if cost.returncode else "")


def format_result(result: PaperScaleResult) -> str:
    config = result.config
    lines = [f"paper-scale: {config['encoders']} encoder(s), scale {config['scale']}, D = {config['dim']}, "
             f"backend {config['backend']}, jobs {result.jobs}"]
    for name, size in result.sizes.items():
        lines.append(f"  {name}: {size['n_images']} images ({size['n_test']} test, {size['n_val']} val), "
                     f"{size['conditions']} corrupted conditions" +
                     (f", shift target {size['shift_images']} images" if size["shift_images"] else ""))
    p = result.prepare
    if p.get("reused"):
        lines.append(f"  prepare: reused the work folder's cache ({p['imports']} files, "
                     f"{p['imported_bytes'] / 2**30:.2f} GiB float16), not measured in this run")
    else:
        lines.append(f"  prepare (generate + import): wall {p['wall_s']:.1f} s, of which import {p['import_s']:.1f} s "
                     f"for {p['imports']} files, {p['imported_bytes'] / 2**30:.2f} GiB float16; peak RSS "
                     f"{_gib(p['peak_tree_rss_bytes'])}")
    if config["in_process"]:
        lines.append("  stages ran in this process: each peak includes what the process held before the stage")
    else:
        lines.append(f"  process start-up (python, import crs): {result.startup.wall_s:.1f} s wall, "
                     f"{result.startup.cpu_s:.1f} s CPU (counted once in the {PAPER_ENCODERS}-encoder figures)")
    lines += [_stage_line(cost) for cost in result.stages]
    if result.stages_15:
        lines.append(f"  at {PAPER_ENCODERS} encoders (a run folder replicated from the measured one, no new fits):")
        lines += ["  " + _stage_line(cost, f"{cost.stage}@{PAPER_ENCODERS}") for cost in result.stages_15]
    if result.units:
        lines.append("  per unit (probe_costs.csv):")
        for unit in result.units:
            lines.append(f"    {unit['task']:<10} {unit['units']} units, {unit.get('mean_wall_s', float('nan')):.1f} s wall, "
                         f"{unit.get('mean_cpu_s', float('nan')):.1f} s CPU, peak "
                         f"{_gib(unit.get('max_peak_rss_bytes', 0))}")
    else:
        lines.append("  per unit: no probe_costs.csv in the run folder (crs probe of this version does not write it)")
    totals = dict(result.total_15)
    from_units = totals.pop("probe_from_units", None)
    total_from_units = totals.pop("total_from_units", None)
    scaled = {key: totals.pop(key) for key in list(totals) if key.endswith("_scaled")}
    at_fifteen = {key[: -len("_scaled")] for key in scaled}
    measured_here = ", ".join(stage for stage in ("score", "report") if stage in at_fifteen)
    lines.append(f"  {PAPER_ENCODERS} encoders (measured cost per encoder x {PAPER_ENCODERS}"
                 + (f"; {measured_here} measured at {PAPER_ENCODERS}" if measured_here else "") + "): "
                 + ", ".join(f"{stage} {seconds / 60:.1f} min" for stage, seconds in totals.items()))
    if scaled:
        order = ("probe", "score", "report", "total", "total_from_units")
        lines.append("    scaled per encoder instead (before decision 0114): " + ", ".join(
            f"{key} {scaled[f'{key}_scaled'] / 60:.1f} min" for key in order if f"{key}_scaled" in scaled))
    if result.zero_shot:
        lines.append(summary_line(result.zero_shot))
    if from_units is not None and total_from_units is not None:
        workers = max(int(u.get("workers", 1)) for u in result.units)
        lines.append(f"  {PAPER_ENCODERS} encoders by per-unit cost x units ({PAPER_ENCODERS} units per task on {workers} "
                     f"worker(s), plus the probe stage's fixed part): probe {from_units / 60:.1f} min, "
                     f"total {total_from_units / 60:.1f} min"
                     + (f" (score and report measured at {PAPER_ENCODERS})" if at_fifteen else ""))
    return "\n".join(lines)


def config_from_json(text: str) -> PaperScaleConfig:
    saved: dict[str, Any] = json.loads(text)
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}
    return PaperScaleConfig(**values)


def _child(argv: Sequence[str]) -> int:
    """``python -m crs.bench.paper_scale --stage NAME --spec SPEC --stage-report OUT [--jobs N]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m crs.bench.paper_scale")
    parser.add_argument("--stage", required=True)
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--stage-report", required=True, type=Path)
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    if args.stage == "prepare":
        work = args.spec.parent
        config = config_from_json((work / "config.json").read_text())
        stats = prepare(config, work)
        (work / "prepare.json").write_text(json.dumps(stats))
        peaks = {"self_maxrss": own_peak_rss_bytes()}
    else:
        peaks = run_stage(args.stage, args.spec, args.jobs)
    args.stage_report.write_text(json.dumps(peaks))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
