"""Row-chunk sizes that bound what a killed extraction loses.

Stage 1 walks the data set in row order and fills every array of an encoder together (clean rows,
and each corrupted variant of the test rows), so at any moment each array has at most one chunk
started and not yet durable: a kill loses at most the sum of the arrays' chunk sizes. Chunks are
therefore sized from the run, not fixed: each array's share of a loss budget
``L = max(1 % of the encoder's forward passes, one decoded batch's forward passes)``, in proportion
to its rows, so the sum of the chunk sizes never exceeds ``L`` (issue 24 measured a 4,096-row
corrupted chunk spanning about 20,000 data-set rows: a kill redid up to 11 % of a run).
"""

from __future__ import annotations

from collections.abc import Sequence

LOSS_SHARE = 0.01  # at most this share of a run's forward passes is redone after a kill


def loss_budget(array_rows: Sequence[int], batch_size: int) -> int:
    """Forward passes a kill may lose for one encoder: 1 % of them, or one decoded batch if that is more.

    One decoded batch of ``batch_size`` images costs ``batch_size`` passes per array it feeds (the
    clean array and every corrupted variant).
    """
    passes = sum(array_rows)
    return max(int(passes * LOSS_SHARE), batch_size * len(array_rows))


def chunk_rows_for(array_rows: Sequence[int], batch_size: int, cap: int) -> list[int]:
    """Rows per chunk for each array, so that the chunk sizes sum to at most :func:`loss_budget`.

    ``cap`` (``[extract] chunk_rows``) is an upper bound per array; a chunk is at least one row.
    """
    passes = sum(array_rows)
    if passes == 0:
        return [max(1, min(cap, batch_size)) for _ in array_rows]
    budget = loss_budget(array_rows, batch_size)
    return [max(1, min(cap, rows * budget // passes)) for rows in array_rows]
