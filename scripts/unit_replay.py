"""One stage-2 unit of a kept ``--cache-unit`` store, with its fit replayed: the non-fit phases alone.

``dump`` fits the unit as a worker does and pickles the fitted probe set; ``replay`` loads that
pickle instead of fitting, so read, predict, metrics and save are measured without the fit
(decision 0107). Run the two code versions on one pickle to compare them, one process each:

    python -m crs.bench.probes --cache-unit chexpert --folder DIR --keep
    PYTHONPATH=OLD python scripts/unit_replay.py DIR/cache-chexpert dump probes.pkl OUT_OLD
    PYTHONPATH=OLD python scripts/unit_replay.py DIR/cache-chexpert replay probes.pkl OUT_OLD
    PYTHONPATH=NEW python scripts/unit_replay.py DIR/cache-chexpert replay probes.pkl OUT_NEW

Prints the unit's cost (``UnitCost``) as one JSON line; OUT holds its records and predictions file.
"""

from __future__ import annotations

import json
import pickle
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import torch

import crs.evaluate.units as units
from crs.bench.probes import PAPER_CS, PAPER_FRACTIONS, PAPER_SEEDS
from crs.evaluate.artifacts import RunFolder


def main(cache_root: Path, mode: str, pickled: Path, out: Path) -> None:
    torch.set_num_threads(1)
    fit = units.fit_probes

    def fit_or_replay(*args, **kwargs):
        if mode == "replay":
            return pickle.loads(pickled.read_bytes())
        probe_set = fit(*args, **kwargs)
        pickled.write_bytes(pickle.dumps(probe_set, protocol=4))
        return probe_set

    units.fit_probes = fit_or_replay  # type: ignore[assignment]
    settings = units.ProbeSettings(PAPER_FRACTIONS, PAPER_SEEDS, PAPER_CS, backend="torch")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    result = units.run_unit(units.ProbeUnit("synthetic", "unit"), cache_root, settings, RunFolder(out))
    assert result.cost is not None and result.predictions_file is not None
    result.records.to_parquet(out / "records.parquet")
    print(json.dumps({**asdict(result.cost), "file_bytes": result.predictions_file.stat().st_size}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
