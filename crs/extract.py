"""Stage 1: decode each image once, make its corrupted variants, run every pending encoder, cache.

One pass over a data set serves all encoders: a batch is decoded once, its corrupted variants are
made from the decoded tensor on the encoder's device, and each encoder embeds only the rows whose
cache chunks are not yet complete. A second run over a complete cache runs no forward pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from crs.cache.fingerprint import fingerprint
from crs.cache.store import FEATURE_DTYPE, FeatureStore, store_path
from crs.cache.writer import ChunkedFeatureArray
from crs.data.base import Dataset
from crs.data.images import load_image

log = logging.getLogger("crs.extract")


@dataclass
class ExtractStats:
    """Counters that make cache reuse visible: a second run must show zero forward passes."""

    images_decoded: int = 0
    forward_images: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add_forward(self, encoder: str, n: int) -> None:
        self.forward_images[encoder] = self.forward_images.get(encoder, 0) + n

    def merge(self, other: ExtractStats) -> None:
        self.images_decoded += other.images_decoded
        for name, n in other.forward_images.items():
            self.add_forward(name, n)
        self.seconds += other.seconds

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
        "image_size": dataset.image_size,
    }


class _EncoderJob:
    """One encoder's pending work on one data set: which arrays, which chunks, row buffers."""

    def __init__(self, encoder: Any, store: FeatureStore, dataset: Dataset, variants: Sequence[tuple[str, int]],
                 test_rows: np.ndarray, chunk_rows: int, suite_version: str):
        self.encoder = encoder
        self.image_ids = dataset.ids
        self.name = encoder.spec.name
        fields = encoder_fingerprint_fields(encoder, dataset, suite_version)
        self.fingerprint = fingerprint(fields)
        self.store = store
        group = store.encoder_group(self.name, self.fingerprint, fields)
        dim = int(encoder.spec.dim)
        self.clean = ChunkedFeatureArray(group, "clean", len(dataset), dim, chunk_rows)
        self.corrupt = {
            (name, severity): ChunkedFeatureArray(group, f"corrupt/{name}/{severity}", len(test_rows), dim, chunk_rows)
            for name, severity in variants
        }
        self.test_rows = test_rows
        # Row buffers: array -> chunk -> (features, filled mask)
        self.buffers: dict[Any, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.clean_rows = self._pending_rows(self.clean, np.arange(len(dataset)))
        self.variant_rows = {key: self._pending_rows(array, test_rows) for key, array in self.corrupt.items()}

    @staticmethod
    def _pending_rows(array: ChunkedFeatureArray, row_of_position: np.ndarray) -> np.ndarray:
        """Data-set rows (not array positions) whose chunk in ``array`` is not yet complete."""
        positions = [np.arange(*array.chunk_bounds(c)) for c in array.pending_chunks()]
        if not positions or array.n_rows == 0:
            return np.zeros(0, dtype=np.int64)
        return row_of_position[np.concatenate(positions)]

    def needed_rows(self) -> np.ndarray:
        parts = [self.clean_rows, *self.variant_rows.values()]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def is_done(self) -> bool:
        """True when every chunk of every array is durable (read from the store, not the plan)."""
        return self.clean.is_complete() and all(array.is_complete() for array in self.corrupt.values())

    def _store(self, key: Any, array: ChunkedFeatureArray, positions: np.ndarray, features: np.ndarray) -> None:
        buffers = self.buffers.setdefault(key, {})
        for position, row in zip(positions.tolist(), features, strict=True):
            chunk = position // array.chunk_rows
            if chunk not in buffers:
                start, stop = array.chunk_bounds(chunk)
                buffers[chunk] = (np.zeros((stop - start, row.shape[0]), np.float32), np.zeros(stop - start, bool))
            start, _ = array.chunk_bounds(chunk)
            buffers[chunk][0][position - start] = row
            buffers[chunk][1][position - start] = True
            if buffers[chunk][1].all():
                array.write_chunk(chunk, buffers.pop(chunk)[0])

    def process(self, rows: np.ndarray, images: torch.Tensor, modality: str, stats: ExtractStats) -> None:
        """Embed the clean and corrupted rows of one decoded batch that this encoder still needs."""
        clean_mask = np.isin(rows, self.clean_rows)
        if clean_mask.any():
            features = self._embed(images[torch.from_numpy(clean_mask)], stats)
            self._store("clean", self.clean, rows[clean_mask], features)
        test_position = np.searchsorted(self.test_rows, rows)
        for (name, severity), array in self.corrupt.items():
            mask = np.isin(rows, self.variant_rows[(name, severity)])
            if not mask.any():
                continue
            from crs.corruptions import apply as apply_corruption

            selected = images[torch.from_numpy(mask)]
            ids = [str(i) for i in self.image_ids[rows[mask]]]
            corrupted = apply_corruption(selected, modality, name, severity, ids)
            features = self._embed(corrupted, stats)
            self._store((name, severity), array, test_position[mask], features)

    def _embed(self, images_uint8: torch.Tensor, stats: ExtractStats) -> np.ndarray:
        x = images_uint8.float().div_(255.0) if images_uint8.dtype == torch.uint8 else images_uint8
        stats.add_forward(self.name, x.shape[0])
        with torch.inference_mode():
            features = self.encoder.embed(x)
        return features.float().cpu().numpy()


def resolve_variants(modality: str, corruptions: Sequence[str] | str, severities: Sequence[int]) -> list[tuple[str, int]]:
    """The (corruption, severity) pairs to extract for a modality, checked against its suite."""
    if corruptions == "none":
        return []
    from crs.corruptions import suite

    available = list(suite(modality))
    if corruptions == "all":
        names = available
    else:
        unknown = [c for c in corruptions if c not in available]
        if unknown:
            raise ValueError(f"corruptions {unknown} are not in the {modality} suite; available: {available}")
        names = list(corruptions)
    return [(name, int(severity)) for name in names for severity in severities]


def extract_dataset(
    dataset: Dataset,
    encoders: Sequence[Any],
    cache_root: Path,
    variants: Sequence[tuple[str, int]] = (),
    batch_size: int = 32,
    chunk_rows: int = 4096,
    device: str = "cpu",
    progress: bool = True,
) -> ExtractStats:
    """Fill the cache for ``dataset`` with every encoder's clean and corrupted features."""
    from crs.corruptions import SUITE_VERSION

    started = time.perf_counter()
    stats = ExtractStats()
    store = FeatureStore(store_path(cache_root, dataset.name), mode="a")
    store.write_table(dataset)
    test_rows = dataset.indices("test")
    jobs = []
    for encoder in encoders:
        job = _EncoderJob(encoder, store, dataset, variants, test_rows, chunk_rows, SUITE_VERSION)
        if job.is_done():
            log.info("%s / %s: cached (fingerprint %s), no forward pass", dataset.name, job.name, job.fingerprint)
            store.mark_current(job.name, job.fingerprint)
            stats.add_forward(job.name, 0)
        else:
            jobs.append(job)
    if not jobs:
        stats.seconds = time.perf_counter() - started
        return stats
    needed = np.unique(np.concatenate([job.needed_rows() for job in jobs]))
    n_variant_images = sum(
        int(np.isin(needed, rows).sum()) for job in jobs for rows in [job.clean_rows, *job.variant_rows.values()]
    )
    bar = tqdm(
        total=n_variant_images, unit="img", disable=not progress, leave=False,
        desc=f"extract {dataset.name} [{', '.join(job.name for job in jobs)}]",
    )
    for start in range(0, len(needed), batch_size):
        rows = needed[start:start + batch_size]
        images = torch.stack([load_image(dataset.root / dataset.paths[i], dataset.image_size) for i in rows])
        stats.images_decoded += len(rows)
        images = images.to(device)
        before = stats.total_forward
        for job in jobs:
            job.process(rows, images, dataset.modality, stats)
        bar.update(stats.total_forward - before)
    bar.close()
    for job in jobs:
        if not job.is_done():
            raise RuntimeError(f"{dataset.name} / {job.name}: extraction ended with unfinished chunks")
        store.mark_current(job.name, job.fingerprint)
    stats.seconds = time.perf_counter() - started
    return stats
