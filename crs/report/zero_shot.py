"""The report section "Zero-shot or a probe?" from ``<output>/zero_shot/score.json`` (the JSON and the
Markdown carry the same numbers: both are read from that one file)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from crs.report.stability import Table


def _f(value, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    if number != number:
        return "n/a"
    if number == float("inf"):
        return "never"
    return f"{number:.{digits}f}"


def zero_shot_records(out_dir: Path) -> pd.DataFrame | None:
    """The run's zero-shot records (for the label curve's zero-label point), or None without zero-shot."""
    path = Path(out_dir) / "zero_shot" / "records.parquet"
    return pd.read_parquet(path) if path.is_file() else None


def zero_shot_tables(out_dir: Path) -> tuple[str, list[Table]] | None:
    """(text, tables) of the section, or None when the run has no zero-shot score."""
    path = Path(out_dir) / "zero_shot" / "score.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    board = Table(
        "Zero-shot leaderboard: its own CRS over the encoders with a text tower, on discrimination, calibration "
        "(as shipped) and robustness; rank set and tier from a patient-level bootstrap. Label efficiency has no "
        "zero-label value and is not scored (docs/decisions/0057).",
        ("encoder", "CRS", "rank", "rank set", "leading tier", "1 - AUROC", "calibration error", "1 - robust AUROC"),
        tuple((row["encoder"], _f(row["crs"]), str(row["rank"]), f"{row['rank_low']}-{row['rank_high']}",
               "yes" if row["in_leading_tier"] else "", _f(row.get("error_discrimination")),
               _f(row.get("error_calibration")), _f(row.get("error_robustness"))) for row in data["leaderboard"]),
        title="Zero-shot leaderboard")
    rows = []
    for row in data["comparison"]:
        probes = " / ".join(f"{k[len('probe_auroc_'):]}: {_f(v)}" for k, v in row.items() if k.startswith("probe_auroc_"))
        rows.append((
            row["encoder"], row["task"], row["prompt_set"],
            f"{_f(row['zero_shot_auroc'])} [{_f(row['zero_shot_auroc_low'])}, {_f(row['zero_shot_auroc_high'])}]",
            f"{_f(row['ece_shipped'])} -> {_f(row.get('ece_fitted'))} (T {_f(row.get('temperature_fitted'), 2)})",
            _f(row.get("robustness_auroc")), probes or "n/a",
            f"{_f(row.get('crossover_fraction'))} [{_f(row.get('crossover_low'))}, {_f(row.get('crossover_high'))}]",
            _f(row.get("prompt_spread")),
        ))
    compare = Table(
        "Per vision-language model and task: zero-shot AUROC with its 95 % patient-level interval; calibration error "
        "as shipped -> after one temperature fitted on the full fraction's validation rows; robust AUROC (corruptions "
        "and shift); the probe's clean AUROC per label fraction; the crossover (smallest label fraction whose probe "
        "beats zero-shot, with its bootstrap interval; 'never' within the fractions run); the prompt spread (max - min "
        "AUROC over prompt variants).",
        ("encoder", "task", "prompt set", "zero-shot AUROC", "calibration shipped -> fitted", "robust AUROC",
         "probe AUROC by fraction", "crossover fraction", "prompt spread"),
        tuple(rows), title="Zero-shot against the probes")
    text = ("Vision-language encoders scored without labels: text prototypes from their own text tower, on the "
            "features already cached (no new image pass), with the probes' metrics and bootstrap.")
    return text, [board, compare]
