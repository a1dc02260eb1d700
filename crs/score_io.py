"""Score the run records of a spec and store every table beside them (parquet, JSON, text)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from crs.spec import Spec

SCORE_DIR = "score"


def score_and_save(spec: Spec, records: pd.DataFrame):
    """CRS table, bootstrap tiers, reversals and sensitivity for ``records``; written under ``output/score``."""
    from crs.score import score_records

    missing = sorted(set(spec.encoder_names) - set(records["encoder"]))
    if missing:
        raise ValueError(f"encoders {missing} have no run records; run `crs probe` after adding them")
    result = score_records(
        records, spec.score.reference_encoder, spec.score.weights, n_boot=spec.score.n_boot, seed=spec.score.seed,
        predictions_dir=Path(spec.output) / "predictions", case_level=spec.score.case_bootstrap,
    )
    folder = Path(spec.output) / SCORE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in result.tables().items():
        table.to_parquet(folder / f"{name}.parquet", index=False)
    (folder / "summary.json").write_text(json.dumps(result.summary(), indent=2, default=str))
    (folder / "score.txt").write_text(result.format() + "\n")
    return result


def load_or_score(spec: Spec, records: pd.DataFrame):
    """Scoring is cheap next to probing, so the report recomputes it rather than trusting stale tables."""
    return score_and_save(spec, records)
