"""What an interrupted stage 1 leaves for the next run, in one line (printed when a run is stopped by Ctrl-C).

Every row chunk flagged complete is kept: a restart recomputes none of them
(:mod:`crs.evaluate.kept` says the same of stage 2).
"""

from __future__ import annotations

from pathlib import Path

from crs.cache.inspect import list_cache
from crs.extract.plan import ExtractPlan


def kept_by_extraction(plan: ExtractPlan, cache_root: Path | str) -> str:
    """Forward passes and row chunks finished in the groups the plan extracts into; plainly "nothing" when
    stage 1 stopped before it made the cache folder (not an error of the user's: nothing was written yet)."""
    if not Path(cache_root).is_dir():
        return (f"nothing was kept yet: stage 1 stopped before it wrote any features (the cache folder "
                f"{cache_root} is not made yet); the next run starts from the beginning")
    wanted = {(row.dataset, row.encoder, row.cached_group) for row in plan.rows}
    done = total = 0
    for store in list_cache(cache_root):
        for group in store.groups:
            if (store.dataset, group.encoder, group.fingerprint) in wanted:
                done += sum(array.chunks_done for array in group.arrays)
                total += sum(array.n_chunks for array in group.arrays)
    chunks = f" ({done:,} of {total:,} row chunks)" if total else ""
    return (f"kept {plan.cached_passes:,} of {plan.passes:,} forward passes in the cache{chunks}; "
            "a restart recomputes none of them")
