"""Row-chunk sizes that bound what a killed extraction loses.

Stage 1 walks a data set in row order and fills every array of every encoder together (clean
rows, and each corrupted variant of the test rows), so at any moment each array has at most one
chunk started and not yet durable: a kill loses at most the sum of the chunk sizes of all arrays
being filled. Chunks are therefore sized from the run, not fixed: the run's loss budget
``L = max(1 % of its forward passes, min(one batch per array, 512 passes))`` is shared by all of
its arrays (every encoder's) in proportion to their rows, so the chunk sizes sum to at most ``L``
(issue 24 measured a 4,096-row corrupted chunk spanning about 20,000 data-set rows; issue 31 a
floor of one batch *per array and encoder*: a kill redid 4.3 % of a run of 85,335 passes).

The floor is not one batch: every chunk costs three files and six fsyncs, and a budget of 32
passes for a run of a few hundred made the tiny spec write 10x the chunks and take twice as long
(docs/decisions/0093). Only a run with fewer forward passes than 100 times its arrays can lose
more than ``L``: one row per array, the smallest chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

LOSS_SHARE = 0.01  # at most this share of a run's forward passes is redone after a kill ...
SMALL_RUN_PASSES = 512  # ... or, on a run under 51,200 passes, this many (one batch per array if less)


def loss_budget(array_rows: Sequence[int], batch_size: int, encoders: int = 1) -> int:
    """Forward passes a kill may lose in a run: 1 % of them, or, if that is more, one batch per array
    up to :data:`SMALL_RUN_PASSES` (and never under one batch).

    ``array_rows``: the rows of one encoder's arrays (clean, then each corrupted variant); the run
    fills ``encoders`` encoders' arrays of these sizes at once.
    """
    passes = sum(array_rows) * encoders
    one_batch_per_array = batch_size * len(array_rows) * encoders
    return max(int(passes * LOSS_SHARE), batch_size, min(one_batch_per_array, SMALL_RUN_PASSES))


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
