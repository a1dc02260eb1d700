"""Stage 1 on every device of a node: one worker process per device, each filling one shard.

Shards are stretches of rows with equal forward passes (:mod:`crs.extract.shards`), so each
worker decodes (mostly) its own images: an image is decoded about once per node, and within a
worker once for every encoder of the spec. Workers are spawned processes (CUDA cannot be forked);
the store they fill together is bit-identical to one process's (batches are cut at every chunk
edge, whichever worker computes a chunk).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from crs.extract.runner import ExtractStats
from crs.spec import Spec, for_setting


def parse_devices(text: str) -> list[str]:
    """``"cuda:0,cuda:1"`` -> the list; ``"all"`` -> every CUDA device here (at least one needed)."""
    if text.strip().lower() == "all":
        import torch

        count = torch.cuda.device_count()
        if count == 0:
            raise for_setting(ValueError("'all' devices asked, but this machine has no CUDA device; "
                                         "name them (e.g. cpu,cpu) or run without"), "devices")
        return [f"cuda:{k}" for k in range(count)]
    devices = [part.strip() for part in text.split(",") if part.strip()]
    bad = [d for d in devices if not (d == "cpu" or d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit()))]
    if not devices or bad:
        raise for_setting(ValueError(f"devices {text!r}: each must be cpu, cuda or cuda:N, comma-separated "
                                     "(e.g. cuda:0,cuda:1), or all"), "devices")
    return devices


def _worker(spec: Spec, device: str, index: int, count: int, threads: int | None,
            allow_overlap: bool = False) -> ExtractStats:
    from crs.extract.stage import extract_spec

    extract = dataclasses.replace(spec.extract, device=device)
    if threads is not None:
        extract = dataclasses.replace(extract, threads=threads)
    return extract_spec(dataclasses.replace(spec, extract=extract), progress=False, shard=(index, count),
                        allow_overlap=allow_overlap)


def extract_on_devices(spec: Spec, devices: Sequence[str], allow_overlap: bool = False) -> ExtractStats:
    """Stage 1 of ``spec`` with one worker process per entry of ``devices`` (shard k on device k).

    ``allow_overlap`` goes to every worker (all must screen the shift targets alike: the kept or
    dropped images decide the target's rows, hence its cache group).
    """
    count = len(devices)
    # CPU workers share the cores: each gets its part instead of each taking them all.
    cpu_workers = sum(1 for device in devices if device == "cpu")
    threads = None
    if cpu_workers > 1 and spec.extract.threads == "auto":
        from crs.extract.cores import usable_cores

        threads = max(1, usable_cores() // cpu_workers)
    stats = ExtractStats()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
        futures = [pool.submit(_worker, spec, device, index, count, threads if device == "cpu" else None,
                               allow_overlap)
                   for index, device in enumerate(devices)]
        for future in futures:
            stats.merge(future.result())
    return stats
