"""Row-chunk sizes: how many files a run writes, and what a crash of the whole machine may lose.

Stage 1 walks a data set in row order and fills every array of every encoder together (clean
rows, and each corrupted variant of the test rows), so at any moment each array has at most one
chunk started and not yet durable. What a *kill* loses does not depend on the chunks: every
forward call's rows of an unfinished chunk go to the chunk's journal (:mod:`crs.cache.journal`)
as soon as they are computed, so a SIGKILL loses at most the one forward call in flight, at most
``batch_size`` passes, on a run of any size (docs/decisions/0101).

Chunks are what stays after a crash of the machine (power cut, kernel panic, a node that
vanishes): the journal is not fsynced, so such a crash may lose every open chunk. Chunk sizes are
therefore sized from the run: ``L = max(1 % of its forward passes, one batch per array and
encoder)`` is shared by all of its arrays (every encoder's) in proportion to their rows, so the open
chunks sum to at most ``L``. Chunks smaller than that only cost time: every chunk is three files
and six fsyncs (decision 0093's 512-pass cap made the demo write 4.5x the chunk files and its
extraction take 40 % longer; docs/decisions/0102 drops the cap).
"""

from __future__ import annotations

from collections.abc import Sequence

LOSS_SHARE = 0.01  # a crash of the machine loses at most this share of a run's forward passes ...


def kill_loss_budget(array_rows: Sequence[int], batch_size: int, encoders: int = 1) -> int:
    """The promise for a kill (SIGKILL, preemption, ``scancel``) of one writer: at most
    ``max(1 % of the run's forward passes, one batch)``. The journal keeps it for any run (it
    loses at most the forward call in flight, at most one batch)."""
    return max(int(sum(array_rows) * encoders * LOSS_SHARE), batch_size)


def loss_budget(array_rows: Sequence[int], batch_size: int, encoders: int = 1) -> int:
    """Forward passes a crash of the machine may lose in a run (the open chunks, whose journals
    may not have reached the disk): 1 % of them, or one batch per array and encoder if that is more.

    ``array_rows``: the rows of one encoder's arrays (clean, then each corrupted variant); the run
    fills ``encoders`` encoders' arrays of these sizes at once.
    """
    passes = sum(array_rows) * encoders
    return max(int(passes * LOSS_SHARE), batch_size * len(array_rows) * encoders)


def chunk_rows_for(array_rows: Sequence[int], batch_size: int, cap: int, encoders: int = 1) -> list[int]:
    """Rows per chunk for each of one encoder's arrays, so that the chunk sizes of all ``encoders``
    encoders' arrays together sum to at most :func:`loss_budget` (at least one row per array).

    Arrays whose proportional share is under one row get one row, and the rest of the budget is
    shared by the others in proportion to their rows. ``cap`` (``[extract] chunk_rows``) is an
    upper bound per array. Every encoder of a run gets the same sizes.
    """
    arrays = [int(rows) for rows in array_rows]
    if sum(arrays) == 0:
        return [max(1, min(cap, batch_size)) for _ in arrays]
    budget = loss_budget(arrays, batch_size, encoders)
    sizes = [1] * len(arrays)
    shared = [k for k, rows in enumerate(arrays) if rows > 0]
    left = budget
    while shared:
        passes = sum(arrays[k] for k in shared) * encoders
        small = [k for k in shared if arrays[k] * left // passes < 1]
        if not small:
            for k in shared:
                sizes[k] = arrays[k] * left // passes
            break
        left -= len(small) * encoders  # these get one row each, in every encoder
        shared = [k for k in shared if k not in small]
        if left <= 0:
            break
    return [max(1, min(cap, size)) for size in sizes]
