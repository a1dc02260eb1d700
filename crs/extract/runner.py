"""Stage 1: decode each image once, make its corrupted variants, run every pending encoder, cache.

One pass over a data set serves all encoders: a batch is decoded once, its corrupted variants are
made from the decoded tensor on the encoder's device, and each encoder embeds only the rows whose
cache chunks are not yet complete. A second run over a complete cache runs no forward pass.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from tqdm.auto import tqdm

from crs.cache import corrupt_rows as stored_rows
from crs.cache.fingerprint import fingerprint
from crs.cache.images import ensure_same_images
from crs.cache.journal import read_records
from crs.cache.lock import WriterLock, layout_lock, live_writer, writer_lock_path
from crs.cache.store import FEATURE_DTYPE, CacheError, FeatureStore, store_path, test_digest
from crs.cache.writer import ChunkedFeatureArray
from crs.corruptions import SUITE_VERSION, apply_severities
from crs.data.base import DataError, Dataset
from crs.data.images import dataset_image
from crs.data.subsample import CorruptionRows, corruption_rows
from crs.data.validate import validate_for_extraction
from crs.extract.chunking import chunk_rows_for
from crs.extract.cores import ThreadGovernor, thread_plan
from crs.extract.disk import array_bytes, block_size, blocks, disk_full_error, is_disk_full
from crs.extract.shards import ChunkUnit, array_units, assign
from crs.spec import for_setting

log = logging.getLogger("crs.extract")


@dataclass
class ExtractStats:
    """Counters that make cache reuse visible: a second run must show zero forward passes."""

    images_decoded: int = 0
    forward_images: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    chunks_written: int = 0
    chunks_left_to_other_shards: int = 0
    passes_planned: int = 0  # every forward pass the stores need, cached or not
    passes_cached_at_start: int = 0  # of those, already in complete chunks when this run started
    passes_to_go_here: int = 0  # forward passes this run (this shard) set out to fill
    variants_made: int = 0  # corrupted images made (once per image and variant, shared by the encoders)

    def add_forward(self, encoder: str, n: int) -> None:
        self.forward_images[encoder] = self.forward_images.get(encoder, 0) + n

    def merge(self, other: ExtractStats) -> None:
        self.images_decoded += other.images_decoded
        for name, n in other.forward_images.items():
            self.add_forward(name, n)
        self.seconds += other.seconds
        self.chunks_written += other.chunks_written
        self.chunks_left_to_other_shards += other.chunks_left_to_other_shards
        self.passes_planned += other.passes_planned
        self.passes_cached_at_start += other.passes_cached_at_start
        self.passes_to_go_here += other.passes_to_go_here
        self.variants_made += other.variants_made

    @property
    def total_forward(self) -> int:
        return sum(self.forward_images.values())


def encoder_fingerprint_fields(encoder: Any, dataset: Dataset, suite_version: str) -> dict[str, Any]:
    """Everything that determines this encoder's features on this data set."""
    return {
        **encoder.fingerprint_fields(),
        "feature_dtype": FEATURE_DTYPE,
        "corruption_suite_version": suite_version,
        "image_ids_sha256": dataset.id_digest(),
        # Corrupted features are stored in test-split order: a new split is a new cache.
        "test_ids_sha256": test_digest(dataset),
        "image_size": dataset.image_size,
        # How non-square images were made square (crop | pad | squash): other pixels, other features.
        "image_fit": dataset.fit,
    }


class _EncoderJob:
    """One encoder's pending work on one data set: which arrays, which chunks (of this shard), row buffers."""

    def __init__(self, encoder: Any, store: FeatureStore, dataset: Dataset, variants: Sequence[tuple[str, int]],
                 rows: CorruptionRows, chunk_rows: int, suite_version: str, batch_size: int,
                 shard: tuple[int, int] | None = None, run_encoders: int = 1):
        self.encoder = encoder
        # Data-set rows of the corrupted arrays' positions: the test split, or its corruption subsample.
        test_rows = dataset.indices("test")[rows.positions]
        self.image_ids = dataset.ids
        self.name = encoder.spec.name
        self.fields = encoder_fingerprint_fields(encoder, dataset, suite_version)
        self.fingerprint = fingerprint(self.fields)
        self.store = store
        group = store.encoder_group(self.name, self.fingerprint, self.fields)
        dim = int(encoder.spec.dim)
        where = f"{dataset.name} / {self.name} ({self.fingerprint})"
        guard_mixed_runs(group, where, run_settings(rows, batch_size, variants), shard, store.path, self.name)
        # New arrays get chunks sized so a kill of the whole run (all ``run_encoders`` encoders) loses
        # little (chunking.py); existing ones keep theirs.
        clean_chunk, *variant_chunks = chunk_rows_for(
            [len(dataset), *(len(test_rows) for _ in variants)], batch_size, chunk_rows, run_encoders)
        self.clean = ChunkedFeatureArray(group, "clean", len(dataset), dim, clean_chunk, label=f"{where} clean")
        self.corrupt = {}
        whole_split = test_digest(dataset)
        for (name, severity), rows_per_chunk in zip(variants, variant_chunks, strict=True):
            array = f"corrupt/{name}/{severity}"
            if stored_rows.array_rows_digest(group, array, whole_split) not in (None, rows.digest):
                stored_rows.drop_array(group, array)  # made for another subsample: its features are stale
            self.corrupt[(name, severity)] = ChunkedFeatureArray(
                group, array, len(test_rows), dim, rows_per_chunk, label=f"{where} {array}")
            stored_rows.mark_array(group, array, rows)
        stored_rows.record_rows(group, rows)
        self.test_rows = test_rows
        self.n_rows = len(dataset)
        # Row buffers: array -> chunk -> (features, filled mask)
        self.buffers: dict[Any, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.clean_rows = np.zeros(0, dtype=np.int64)
        self.variant_rows: dict[tuple[str, int], np.ndarray] = {}
        self.rows_journaled = 0  # rows of pending chunks a killed run journaled, found by plan()

    def plan(self, mine: list[set[int]] | None) -> None:
        """Read which chunks of this shard are pending (call while holding the writer lock).

        ``mine``: the chunks of this shard per array, in the order of :meth:`arrays` (None: all).
        Rows a killed run journaled for a pending chunk go back into its buffer and are not
        computed again (they are whole forward calls, so the batches stay those of one run).
        """
        owned: list[set[int] | None] = list(mine) if mine is not None else [None] * (1 + len(self.corrupt))
        keys: list[Any] = ["clean", *self.corrupt]
        pending = [self._resume(key, array, row_of_position, chunks)
                   for key, (array, row_of_position), chunks in zip(keys, self.arrays(), owned, strict=True)]
        self.clean_rows, *variant_rows = pending
        self.variant_rows = dict(zip(self.corrupt, variant_rows, strict=True))

    def arrays(self) -> list[tuple[ChunkedFeatureArray, np.ndarray]]:
        """Each feature array with the data-set row of each of its positions."""
        return [(self.clean, np.arange(self.n_rows)), *((array, self.test_rows) for array in self.corrupt.values())]

    def _resume(self, key: Any, array: ChunkedFeatureArray, row_of_position: np.ndarray,
                chunks: set[int] | None) -> np.ndarray:
        """Data-set rows (not array positions) whose chunk in ``array`` (one of ``chunks``) is not yet
        complete and that no journal holds; journaled rows go into the chunk's buffer."""
        array.drop_finished_journals()
        positions = []
        for chunk in array.pending_chunks():
            if chunks is not None and chunk not in chunks:
                # Another shard's chunk: its journaled rows are kept too (counted as `crs plan` counts them).
                self.rows_journaled += _journaled_rows(array, chunk)
                continue
            start, stop = array.chunk_bounds(chunk)
            missing = np.ones(stop - start, dtype=bool)
            journaled, values = array.journaled(chunk)
            if journaled.size:
                features = np.zeros((stop - start, values.shape[1]), np.float32)
                features[journaled - start] = values.astype(np.float32)
                missing[journaled - start] = False
                self.rows_journaled += int((~missing).sum())
                if not missing.any():  # killed while writing the chunk its journal completes
                    array.write_chunk(chunk, features)
                    continue
                self.buffers.setdefault(key, {})[chunk] = (features, ~missing)
            positions.append(start + np.flatnonzero(missing))
        if not positions or array.n_rows == 0:
            return np.zeros(0, dtype=np.int64)
        return row_of_position[np.concatenate(positions)]

    def needed_rows(self) -> np.ndarray:
        parts = [self.clean_rows, *self.variant_rows.values()]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def is_done(self) -> bool:
        """True when every chunk of every array is durable (read from the store, not the plan)."""
        return self.clean.is_complete() and all(array.is_complete() for array in self.corrupt.values())

    def passes(self) -> int:
        """Forward passes this encoder's arrays need in all (clean rows plus every corrupted variant)."""
        return sum(array.n_rows for array, _ in self.arrays())

    def passes_cached(self) -> int:
        """Forward passes kept from earlier runs: in complete chunks, or journaled for pending ones."""
        return sum(array.rows_done() for array, _ in self.arrays()) + self.rows_journaled

    def passes_pending(self) -> int:
        """Forward passes of the chunks :meth:`plan` found pending (this shard's part)."""
        return len(self.clean_rows) + sum(len(rows) for rows in self.variant_rows.values())

    def chunks_pending(self) -> int:
        return sum(len(array.pending_chunks()) for array, _ in self.arrays())

    def units(self, encoder: int) -> list[ChunkUnit]:
        """Every chunk of every array as a unit of work (this job is the ``encoder``-th of the walk)."""
        return [unit for k, (array, row_of_position) in enumerate(self.arrays())
                for unit in array_units(k, array.n_rows, array.chunk_rows, row_of_position, encoder)]

    def _store(self, key: Any, array: ChunkedFeatureArray, positions: np.ndarray, features: np.ndarray,
               stats: ExtractStats) -> None:
        """Put one forward call's rows in their chunks' buffers; write each chunk that is full, and
        journal the rows of each that is not (a kill then loses at most the call in flight)."""
        buffers = self.buffers.setdefault(key, {})
        chunk_of = positions // array.chunk_rows
        for chunk in dict.fromkeys(chunk_of.tolist()):
            take = chunk_of == chunk
            start, stop = array.chunk_bounds(chunk)
            if chunk not in buffers:
                buffers[chunk] = (np.zeros((stop - start, features.shape[1]), np.float32), np.zeros(stop - start, bool))
            rows, filled = buffers[chunk]
            rows[positions[take] - start] = features[take]
            filled[positions[take] - start] = True
            if filled.all():
                array.write_chunk(chunk, buffers.pop(chunk)[0])
                stats.chunks_written += 1
            else:
                array.journal(chunk, positions[take], features[take])

    def process_clean(self, rows: np.ndarray, images: torch.Tensor, stats: ExtractStats) -> None:
        """Embed the clean rows of one decoded batch that this encoder still needs."""
        clean_mask = np.isin(rows, self.clean_rows)
        if clean_mask.any():
            features = self._embed(images[torch.from_numpy(clean_mask)], stats)
            self._store("clean", self.clean, rows[clean_mask], features, stats)

    def variant_calls(self, rows: np.ndarray) -> dict[tuple[str, bytes, tuple[int, ...]], None]:
        """The corruption calls this encoder needs for one decoded batch: (corruption, rows mask, severities).

        Severities of one corruption that need the same rows are made in one call (one uint8->float
        conversion), then embedded one severity at a time so batches match an uninterrupted run.
        """
        groups: dict[tuple[str, bytes], list[int]] = {}
        for (name, severity) in self.corrupt:
            mask = np.isin(rows, self.variant_rows[(name, severity)])
            if mask.any():
                groups.setdefault((name, mask.tobytes()), []).append(severity)
        return {(name, mask, tuple(severities)): None for (name, mask), severities in groups.items()}

    def embed_variants(self, rows: np.ndarray, mask: np.ndarray, name: str, severities: Sequence[int],
                       variants: torch.Tensor, stats: ExtractStats) -> None:
        """Embed one corruption's variants (made by :func:`process_window`) of the ``mask`` rows of a batch."""
        test_position = np.searchsorted(self.test_rows, rows[mask])
        for severity, corrupted in zip(severities, variants, strict=True):
            features = self._embed(corrupted, stats)
            self._store((name, severity), self.corrupt[(name, severity)], test_position, features, stats)

    def _embed(self, images_uint8: torch.Tensor, stats: ExtractStats) -> np.ndarray:
        dtype = getattr(self.encoder, "input_dtype", torch.float32)
        x = images_uint8.to(dtype).div_(255.0) if images_uint8.dtype == torch.uint8 else images_uint8
        stats.add_forward(self.name, x.shape[0])
        with torch.inference_mode():
            features = self.encoder.embed(x).cpu().numpy()
        if features.dtype == np.float64:
            # Rounded to the stored float16 once, from float64: through float32 it would be rounded
            # twice, and a float32 rounding boundary is 8,192 times nearer (decision 0176).
            features = features.astype(FEATURE_DTYPE)
        return features.astype(np.float32, copy=False)


def _journaled_rows(array: ChunkedFeatureArray, chunk: int) -> int:
    """Rows of a pending chunk its journal holds, read only (the chunk may belong to a running shard)."""
    path = array.journal_path(chunk)
    if path is None or not path.exists():
        return 0
    start, stop = array.chunk_bounds(chunk)
    positions, _, _ = read_records(path, start, stop, int(array.array.shape[1]))
    return len(np.unique(positions))


def process_window(jobs: Sequence[_EncoderJob], rows: np.ndarray, images: torch.Tensor, dataset: Dataset,
                   stats: ExtractStats) -> None:
    """Every job embeds the rows of one decoded batch it still needs; each corrupted variant is made once.

    A variant depends only on the image, the corruption, the severity and the image's id (the
    corruption's random draws are seeded by those, :mod:`crs.corruptions.seeding`), never on the
    encoder: every encoder that needs the same call (same rows, same severities) embeds the
    tensor one call made. One call's variants are held at a time.
    """
    for job in jobs:
        job.process_clean(rows, images, stats)
    wanted: dict[tuple[str, bytes, tuple[int, ...]], list[_EncoderJob]] = {}
    for job in jobs:
        for call in job.variant_calls(rows):
            wanted.setdefault(call, []).append(job)
    for (name, mask_bytes, severities), users in wanted.items():
        mask = np.frombuffer(mask_bytes, dtype=bool)
        ids = [str(i) for i in dataset.ids[rows[mask]]]
        variants = apply_severities(images[torch.from_numpy(mask.copy())], dataset.modality, name,
                                    list(severities), ids)
        stats.variants_made += len(severities) * len(ids)
        for job in users:
            job.embed_variants(rows, mask, name, severities, variants, stats)


RUN_SETTINGS = "extract_settings"


def run_settings(rows: CorruptionRows, batch_size: int, variants: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """The settings every writer of one encoder group must share while it is unfinished: the rows
    the corrupted variants are made of, the batch size (batches decide a chunk's last bits) and the
    variants."""
    return {"corruption_rows": rows.requested if rows.requested is not None else "all",
            "corruption_rows_sha256": rows.digest, "batch_size": int(batch_size),
            "variants": [f"{name}/{severity}" for name, severity in variants]}


def _group_complete(group: Any) -> bool:
    flags = [np.asarray(node[:]) for name, node in group.members(max_depth=None)
             if name.endswith("__done") and hasattr(node, "shape")]
    return bool(flags) and all(bool(np.all(f != 0)) for f in flags)


def guard_mixed_runs(group: Any, where: str, settings: dict[str, Any], shard: tuple[int, int] | None,
                     store: Path, encoder: str) -> None:
    """Refuse a writer whose settings differ from those of an unfinished run on the same group.

    Such a run is a sharded one (its other tasks may start at any time) or one writing right now;
    a lone run may replace what an earlier, finished or abandoned, run left (as it always could).
    """
    recorded = cast(dict[str, Any] | None, group.attrs.get(RUN_SETTINGS))
    if recorded is not None and any(recorded.get(key) != value for key, value in settings.items()) \
            and not _group_complete(group):
        other_running = live_writer(store, encoder) is not None
        if shard is not None or other_running or recorded.get("sharded"):
            differ = ", ".join(f"{key} {recorded.get(key)!r} here, {settings[key]!r} asked"
                               for key in settings if recorded.get(key) != settings[key])
            raise for_setting(CacheError(
                f"{where}: an unfinished run with other settings is filling this cache ({differ}); finish it with "
                "its own settings, or use another cache folder (or delete the group to start over)"), "cache")
    group.attrs[RUN_SETTINGS] = {**settings, "sharded": shard is not None}


def batch_windows(n_rows: int, jobs: Sequence[_EncoderJob], batch_size: int) -> Iterator[tuple[int, int]]:
    """Row windows ``[start, stop)`` of at most ``batch_size`` rows that never straddle a chunk of any array.

    Every forward pass then embeds the rows of one window that fall in one chunk, all or none of
    them, so a chunk is always computed from the same batches whether it is extracted in one go,
    after a crash, or by another shard: resumed and sharded stores are bit-identical to an
    uninterrupted run (numerical kernels may depend on the batch's composition).
    """
    cuts = {0, n_rows}
    for job in jobs:
        for array, row_of_position in job.arrays():
            starts = np.arange(0, array.n_rows, array.chunk_rows)
            cuts.update(int(row) for row in row_of_position[starts])
    edges = sorted(cut for cut in cuts if 0 <= cut <= n_rows)
    for low, high in zip(edges, edges[1:], strict=False):
        for start in range(low, high, batch_size):
            yield start, min(start + batch_size, high)


def check_shard(shard: tuple[int, int] | None) -> tuple[int, int] | None:
    """Validate ``(index, count)`` for ``--shard i/n``."""
    if shard is None:
        return None
    index, count = (int(v) for v in shard)
    if count < 1 or not 0 <= index < count:
        raise for_setting(ValueError(f"shard {index}/{count} is invalid; use i/n with 0 <= i < n (e.g. 0/4 .. 3/4)"), "shard")
    return (index, count)






def _writable_cache(cache_root: Path) -> None:
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        probe = cache_root / f".crs-write-test-{id(cache_root)}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as error:
        raise for_setting(CacheError(
            f"cache folder {cache_root} is not writable ({error.strerror or error}); choose another cache folder"
        ), "cache") from None




def extract_dataset(
    dataset: Dataset,
    encoders: Sequence[Any],
    cache_root: Path,
    variants: Sequence[tuple[str, int]] = (),
    batch_size: int = 32,
    chunk_rows: int = 4096,
    device: str = "cpu",
    progress: bool = True,
    shard: tuple[int, int] | None = None,
    wait: bool = False,
    announce: Callable[[str], None] | None = None,
    threads: int | None = None,
    corruption_rows_wanted: int | None = None,
    on_decoded: Callable[[np.ndarray, torch.Tensor], None] | None = None,
) -> ExtractStats:
    """Fill the cache for ``dataset`` with every encoder's clean and corrupted features.

    ``corruption_rows_wanted``: make the corrupted variants for a patient-level subsample of about
    that many test images (:func:`crs.data.subsample.corruption_rows`) instead of the whole split.

    ``shard=(i, n)`` fills only the chunks of the ``i``-th of ``n`` stretches of rows with equal
    forward passes (:mod:`crs.extract.shards`), so ``n`` workers fill one store together. Each
    (store, encoder, shard) is written under one lock: a second writer fails naming the holder, or waits with ``wait=True``. The encoder's group becomes
    ``current`` (what stage 2 reads) once all of its chunks, from every shard, are complete.
    ``announce`` gets one line before the work starts: the forward passes, the cached part, the rest.
    ``threads`` fixes the forward pass's intra-op threads (default: the usable cores that other
    processes leave free, re-read as the run goes; see ``crs.extract.cores``).
    ``on_decoded(rows, images)`` sees each decoded window in its decode thread (the overlap check's
    prints share the decode: :class:`crs.extract.overlap.PrintCollector`).
    """
    started = time.perf_counter()
    shard = check_shard(shard)
    validate_for_extraction(dataset)
    stats = ExtractStats()
    cache_root = Path(cache_root)
    _writable_cache(cache_root)
    path = store_path(cache_root, dataset.name)
    test_rows = dataset.indices("test")
    rows = corruption_rows(np.asarray(dataset.ids)[test_rows], np.asarray(dataset.labels)[test_rows],
                           np.asarray(dataset.groups)[test_rows], corruption_rows_wanted if variants else None)
    if corruption_rows_wanted is not None and variants:
        log.info("%s: %s", dataset.name, rows.note())
        if announce is not None:
            announce(f"{dataset.name}: {rows.note()}")
    made: list[_EncoderJob] = []  # jobs whose arrays exist: a full disk is counted from their flags
    try:
        _extract_into(dataset, encoders, path, variants, rows, chunk_rows, batch_size, device, progress, shard,
                      wait, announce, threads, on_decoded, stats, made)
    except Exception as error:
        if not is_disk_full(error):
            raise
        needed = _needed_bytes(path, dataset, encoders, made, len(variants), len(rows.positions), chunk_rows,
                               batch_size)
        raise disk_full_error(path, needed, error) from None
    stats.seconds = time.perf_counter() - started
    return stats


def _extract_into(dataset: Dataset, encoders: Sequence[Any], path: Path, variants: Sequence[tuple[str, int]],
                  rows: CorruptionRows, chunk_rows: int, batch_size: int, device: str, progress: bool,
                  shard: tuple[int, int] | None, wait: bool, announce: Callable[[str], None] | None,
                  threads: int | None, on_decoded: Callable[[np.ndarray, torch.Tensor], None] | None,
                  stats: ExtractStats, made: list[_EncoderJob]) -> None:
    """The body of :func:`extract_dataset`: the layout under its lock, then every pending job's chunks."""
    with layout_lock(path, "create arrays"):
        store = FeatureStore(path, mode="a")
        store.write_table(dataset)
        ensure_same_images(store, dataset)  # ids say nothing of pixels: a changed folder is refused (0046)
        for encoder in encoders:
            made.append(_EncoderJob(encoder, store, dataset, variants, rows, chunk_rows, SUITE_VERSION, batch_size,
                                    shard, run_encoders=len(encoders)))
    all_jobs = list(made)
    jobs = []
    mine = shard_chunks(all_jobs, shard)
    with contextlib.ExitStack() as locks:
        for job, owned in zip(all_jobs, mine, strict=True):
            if job.is_done():
                log.info("%s / %s: cached (fingerprint %s), no forward pass", dataset.name, job.name, job.fingerprint)
                _mark_current(store, path, job)
                stats.add_forward(job.name, 0)
                continue
            purpose = f"crs extract {dataset.name} {job.name}" + (f" shard {shard[0]}/{shard[1]}" if shard else "")
            locks.enter_context(WriterLock(writer_lock_path(path, job.name, shard), purpose, wait=wait))
            job.plan(owned)
            jobs.append(job)
        stats.passes_planned = sum(job.passes() for job in all_jobs)
        stats.passes_cached_at_start = sum(job.passes_cached() for job in all_jobs)
        stats.passes_to_go_here = sum(job.passes_pending() for job in jobs)
        if announce is not None:
            announce(resume_line(dataset.name, len(dataset), stats.passes_planned, stats.passes_cached_at_start,
                                 len(all_jobs)))
        if jobs:
            _run(dataset, jobs, all_jobs, batch_size, device, progress, stats, threads, on_decoded)
        for job, owned in zip(all_jobs, mine, strict=True):
            if job not in jobs:
                continue
            if job.is_done():
                _mark_current(store, path, job)
            elif shard is not None and owned is not None and not any(set(array.pending_chunks()) & chunks
                                               for (array, _), chunks in zip(job.arrays(), owned, strict=True)):
                left = job.chunks_pending()
                stats.chunks_left_to_other_shards += left
                log.info("%s / %s: shard %d/%d done; %d chunk(s) left to other shards",
                         dataset.name, job.name, shard[0], shard[1], left)
            else:
                raise RuntimeError(f"{dataset.name} / {job.name}: extraction ended with unfinished chunks")


def shard_chunks(jobs: Sequence[_EncoderJob], shard: tuple[int, int] | None) -> list[list[set[int]] | None]:
    """For each job, the chunks of each of its arrays that ``shard`` fills (None: no shard, all of them).

    Every chunk of every job is cut by :func:`crs.extract.shards.assign`: shards get contiguous
    stretches of rows with equal forward passes, whichever encoders are still pending.
    """
    if shard is None:
        return [None] * len(jobs)
    units = [unit for index, job in enumerate(jobs) for unit in job.units(index)]
    mine: list[list[set[int]]] = [[set() for _ in job.arrays()] for job in jobs]
    for unit, owner in zip(units, assign(units, shard[1]), strict=True):
        if owner == shard[0]:
            mine[unit.encoder][unit.array].add(unit.chunk)
    return list(mine)


def _needed_bytes(path: Path, dataset: Dataset, encoders: Sequence[Any], made: Sequence[_EncoderJob],
                  n_variants: int, n_corrupt: int, chunk_rows: int, batch_size: int) -> int:
    """Disk bytes the store's unfinished chunks still need (whole blocks), for a full-disk message.

    Jobs whose arrays exist count their pending chunks from the flags; the others (the disk filled
    while the sample table or the arrays were made) count every chunk of the arrays they would create.
    """
    block = block_size(path)
    by_name = {job.name: job for job in made}
    sizes = [len(dataset), *([n_corrupt] * n_variants)]
    planned_chunks = chunk_rows_for(sizes, batch_size, chunk_rows, len(encoders))
    try:
        table_done = "id_digest" in (path / "zarr.json").read_text()
    except OSError:
        table_done = False
    # The table: its arrays' data and metadata, and the store's own; each new encoder group: its
    # groups' metadata (encoder, fingerprint, corrupt/, one per corruption).
    total = 0 if table_done else blocks(len(dataset) * 128, block) + 16 * block
    total += (len(encoders) + 2) * block  # lock files beside the store
    for encoder in encoders:
        dim = int(encoder.spec.dim)
        job = by_name.get(encoder.spec.name)
        try:
            if job is not None:
                total += sum(array_bytes(array.n_rows, array.chunk_rows, dim, array.pending_chunks(), block, True)
                             for array, _ in job.arrays())
                continue
        except Exception:  # noqa: BLE001  flags unreadable: count the arrays as new
            pass
        total += (3 + n_variants) * block
        for n_rows, rows_per_chunk in zip(sizes, planned_chunks, strict=True):
            total += array_bytes(n_rows, rows_per_chunk, dim, range(-(-n_rows // max(rows_per_chunk, 1))), block, False)
    return total


def resume_line(dataset: str, images: int, passes: int, cached: int, encoders: int) -> str:
    """What a (re)started extraction has to do, in the words of ``crs plan``."""
    head = f"{dataset}: {images:,} images, {encoders} encoder(s): "
    if cached == 0:
        return head + f"{passes:,} forward passes to go (nothing cached yet)"
    if cached == passes:
        return head + f"all {passes:,} forward passes already cached"
    return head + f"{cached:,} of {passes:,} forward passes already cached; {passes - cached:,} to go"


def _mark_current(store: FeatureStore, path: Path, job: _EncoderJob) -> None:
    for array, _ in job.arrays():
        array.drop_finished_journals()
    with layout_lock(path, "mark current"):
        store.mark_current(job.name, job.fingerprint)


def _run(dataset: Dataset, jobs: list[_EncoderJob], all_jobs: list[_EncoderJob], batch_size: int, device: str,
         progress: bool, stats: ExtractStats, threads: int | None = None,
         on_decoded: Callable[[np.ndarray, torch.Tensor], None] | None = None) -> None:
    """Decode each needed window once and let every job embed the rows it still needs.

    Windows are cut at the chunk edges of every encoder's arrays, finished ones included, so they
    do not depend on which encoders happen to be pending in this run. Decoding runs in worker
    threads ahead of the forward pass (PIL and torch release the GIL), and the forward pass's
    threads follow the cores this process may really use (:class:`ThreadGovernor`).
    """
    needed = np.unique(np.concatenate([job.needed_rows() for job in jobs]))
    n_variant_images = sum(
        int(np.isin(needed, rows).sum()) for job in jobs for rows in [job.clean_rows, *job.variant_rows.values()]
    )
    # The bar counts forward passes (an image and each of its corrupted variants, per encoder); the
    # images decoded so far are shown beside it.
    bar = tqdm(
        total=n_variant_images, unit=" forward passes", disable=not progress, leave=False,
        desc=f"extract {dataset.name} [{', '.join(job.name for job in jobs)}]",
    )
    is_needed = np.zeros(len(dataset), dtype=bool)
    is_needed[needed] = True
    windows = (start + np.flatnonzero(is_needed[start:stop])
               for start, stop in batch_windows(len(dataset), all_jobs, batch_size))
    windows = (rows for rows in windows if rows.size)
    plan = thread_plan(threads, device)
    log.info("%s: %s", dataset.name, plan.describe())

    def decode(rows: np.ndarray) -> torch.Tensor:
        try:
            images = torch.stack([dataset_image(dataset, int(i)) for i in rows])
        except DataError as error:
            raise DataError(f"{str(error).splitlines()[0]}; to go on without such images set skip_bad = true under "
                            f"[extract] (they are skipped and listed), or list every bad one first with "
                            f"`crs datasets check LOADER {dataset.root}`") from error
        if on_decoded is not None:
            on_decoded(rows, images)
        return images

    adaptive = plan.source == "affinity and cgroup quota" and not device.startswith("cuda")
    try:
        with ThreadGovernor(plan, adaptive=adaptive) as governor, \
                ThreadPoolExecutor(max_workers=plan.decode_workers, thread_name_prefix="crs-decode") as pool:
            ahead: deque[tuple[np.ndarray, Future[torch.Tensor]]] = deque()
            for rows in windows:
                ahead.append((rows, pool.submit(decode, rows)))
                if len(ahead) <= plan.decode_workers:  # keep one window per decode worker in flight
                    continue
                _embed_window(*ahead.popleft(), jobs, dataset, device, stats, bar, governor)
            while ahead:
                _embed_window(*ahead.popleft(), jobs, dataset, device, stats, bar, governor)
    except BaseException:
        bar.leave = True  # the bar ends its line where it stopped, so the error is printed on a line of its own
        bar.close()
        raise
    bar.close()


def _embed_window(rows: np.ndarray, decoded: Future[torch.Tensor], jobs: list[_EncoderJob], dataset: Dataset,
                  device: str, stats: ExtractStats, bar: Any, governor: ThreadGovernor) -> None:
    images = decoded.result().to(device)
    stats.images_decoded += len(rows)
    before = stats.total_forward
    process_window(jobs, rows, images, dataset, stats)
    bar.update(stats.total_forward - before)
    bar.set_postfix_str(f"{stats.images_decoded:,} images decoded", refresh=False)
    governor.tick()
