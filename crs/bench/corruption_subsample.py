"""``python -m crs.bench.corruption_subsample``: what a corruption subsample changes at paper size.

One run per subsample size N (None: the whole test split): the paper-scale planted features
(:mod:`crs.bench.paper_scale`, imported with ``import-features``) with the corrupted conditions
on the patient-level subsample ``[extract] corruption_rows = N`` draws, then stage 2 and the score
with the paper's protocol. A subsample's corrupted features are the whole split's rows (drawn for
every test row, then subset), so runs differ only in which rows are evaluated. Records per encoder:
the robustness axis (mean AUROC under corruption and shift) with its bootstrap standard error and
95 % interval, the CRS, its rank and whether it is in the leading tier; per run: forward passes per
encoder and the wall seconds of each stage. Decision record 0032 holds the measured table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from crs.bench.paper_scale import TASKS, PaperScaleConfig, prepare, task_size
from crs.benchmark import Benchmark


def forward_passes(config: PaperScaleConfig, positions: dict[str, int]) -> dict[str, int]:
    """Forward passes per encoder that stage 1 would run: every image clean, plus each corrupted
    condition on the corrupted rows (``positions``: their count per task), plus each shift target."""
    clean = corrupted = 0
    for task in TASKS:
        size = task_size(task, config)
        clean += size.n_images + size.shift_images
        corrupted += positions[task.name] * len(size.conditions)
    return {"clean": clean, "corrupted": corrupted, "total": clean + corrupted}


def _rank(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):  # pandas' missing value (pd.NA) or NaN
        return None


def summarise(score: Any) -> list[dict[str, Any]]:
    """Per encoder: robustness (AUROC) point, bootstrap SE and 95 % interval; CRS, interval, rank, tier."""
    table = score.bootstrap.table
    replicates = (score.bootstrap.axis_error_replicates or {}).get("robustness")
    errors, analytic = score.point.errors, score.point.standard_errors
    rows = []
    for encoder in table.index.astype(str):
        row: dict[str, Any] = {
            "encoder": encoder, "crs": float(table.loc[encoder, "crs"]), "crs_low": float(table.loc[encoder, "crs_low"]),
            "crs_high": float(table.loc[encoder, "crs_high"]), "rank": int(table.loc[encoder, "rank"]),
            # a named reference's baseline row has no rank set (crs.scoring.baseline): None
            "rank_low": _rank(table.loc[encoder, "rank_low"]), "rank_high": _rank(table.loc[encoder, "rank_high"]),
            "leading_tier": bool(table.loc[encoder, "in_leading_tier"]),
        }
        row["robustness"] = 1.0 - float(errors.loc[encoder, "robustness"])
        if analytic is not None:  # the records' own standard error (what the noise floor uses)
            row["robustness_se_records"] = float(analytic.loc[encoder, "robustness"])
        if replicates is not None:
            robust = 1.0 - replicates[encoder].to_numpy(dtype=np.float64)
            row["robustness_se"] = float(np.std(robust, ddof=1))
            row["robustness_low"], row["robustness_high"] = (float(v) for v in np.percentile(robust, [2.5, 97.5]))
        rows.append(row)
    return rows


def run_one(config: PaperScaleConfig, work: Path, keep: bool = False) -> dict[str, Any]:
    """Prepare, probe and score one subsample size in ``work``; the work folder is deleted unless ``keep``."""
    work.mkdir(parents=True, exist_ok=True)
    config = replace(config, workdir=str(work))
    seconds: dict[str, float] = {}
    try:
        started = time.perf_counter()
        prepared = prepare(config, work)
        seconds["prepare"] = time.perf_counter() - started
        bench = Benchmark(work / "spec.toml")
        started = time.perf_counter()
        bench.probe(jobs=config.jobs, progress=False)
        seconds["probe"] = time.perf_counter() - started
        started = time.perf_counter()
        score = bench.score()
        seconds["score"] = time.perf_counter() - started
        from crs.bench.paper_scale import corruption_subsample

        positions = {task.name: len(corruption_subsample(work, task.name, config.corruption_rows)) for task in TASKS}
        return {"corruption_rows": config.corruption_rows, "encoders": config.encoders, "scale": config.scale,
                "n_boot": config.n_boot, "corrupted_rows": positions, "passes": forward_passes(config, positions),
                "seconds": seconds, "prepare": prepared, "leading_tier": list(score.bootstrap.leading_tier),
                "rows": summarise(score)}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crs.bench.corruption_subsample", description=__doc__)
    parser.add_argument("--rows", type=int, default=None, help="corruption_rows (default: the whole test split)")
    parser.add_argument("--encoders", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--jobs", default=None)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="JSON lines file the run's result is appended to")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    jobs = None if args.jobs is None else (args.jobs if args.jobs == "auto" else int(args.jobs))
    config = PaperScaleConfig(encoders=args.encoders, scale=args.scale, n_boot=args.n_boot, jobs=jobs,
                              corruption_rows=args.rows)
    result = run_one(config, args.workdir, args.keep)
    with open(args.out, "a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps({k: result[k] for k in ("corruption_rows", "passes", "seconds", "leading_tier")}))
    for row in result["rows"]:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
