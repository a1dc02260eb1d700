"""The report section "Zero-shot or a probe?" from ``<output>/zero_shot/score.json`` (the JSON and the
Markdown carry the same numbers: both are read from that one file)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from crs.report.stability import Table
from crs.scoring.zero_shot import read_zero_shot_summary
from crs.scoring.zero_shot_text import auroc_text, chance_flag, crossover_text, fixed, number


def zero_shot_records(out_dir: Path) -> pd.DataFrame | None:
    """The run's zero-shot records (for the label curve's zero-label point), or None without zero-shot."""
    path = Path(out_dir) / "zero_shot" / "records.parquet"
    return pd.read_parquet(path) if path.is_file() else None


def _auroc_from_error(error) -> str:
    """The leaderboard's mean AUROC (1 - its error), flagged below chance."""
    value = number(error)
    return "n/a" if value is None else f"{1 - value:.3f}{chance_flag(1 - value)}"


def zero_shot_tables(out_dir: Path) -> tuple[str, list[Table]] | None:
    """(text, tables) of the section, or None when the run has no zero-shot score."""
    data = read_zero_shot_summary(out_dir)
    if data is None:
        return None
    board = Table(
        "Zero-shot leaderboard: its own CRS over the encoders with a text tower scored on every task, on "
        "discrimination (clean AUROC), calibration (error as shipped) and robustness (AUROC over corruptions and "
        "shift), each averaged over tasks; rank set and tier from one simultaneous 95 % family over a patient-level "
        "bootstrap (an encoder leaves the tier only when another is surely above it; docs/decisions/0185). Label "
        "efficiency has no zero-label value and is not scored (docs/decisions/0057). An AUROC below 0.5 is worse than chance.",
        ("encoder", "CRS", "rank", "rank set", "leading tier", "AUROC", "calibration error", "robust AUROC"),
        tuple((row["encoder"], fixed(row["crs"]), str(row["rank"]), f"{row['rank_low']}-{row['rank_high']}",
               "yes" if row["in_leading_tier"] else "", _auroc_from_error(row.get("error_discrimination")),
               fixed(row.get("error_calibration")), _auroc_from_error(row.get("error_robustness")))
              for row in data["leaderboard"]),
        title="Zero-shot leaderboard")
    rows = []
    for row in data["comparison"]:
        probes = " / ".join(f"{k[len('probe_auroc_'):]}: {fixed(v)}" for k, v in row.items() if k.startswith("probe_auroc_"))
        rows.append((
            row["encoder"], row["task"], row["prompt_set"],
            auroc_text(row["zero_shot_auroc"], row["zero_shot_auroc_low"], row["zero_shot_auroc_high"]),
            f"{fixed(row['ece_shipped'])} -> {fixed(row.get('ece_fitted'))} (T {fixed(row.get('temperature_fitted'), 2)})",
            auroc_text(row.get("robustness_auroc")), probes or "n/a",
            crossover_text(row) if "crossover_fraction" in row else "n/a",
            fixed(row.get("prompt_spread")),
        ))
    compare = Table(
        "Per vision-language model and task: zero-shot AUROC with its 95 % patient-level interval (below 0.5 is worse "
        "than chance: the prompts point the wrong way); calibration error as shipped -> after one temperature fitted "
        "on the full fraction's validation rows; robust AUROC (corruptions and shift); the probe's clean AUROC per "
        "label fraction; the crossover: the smallest label fraction (and its number of labels) whose probe beats "
        "zero-shot, with its bootstrap interval ('at most' the smallest fraction run when the probe wins there "
        "already, 'never' when no fraction run beats it); the prompt spread (max - min AUROC over prompt variants).",
        ("encoder", "task", "prompt set", "zero-shot AUROC", "calibration shipped -> fitted", "robust AUROC",
         "probe AUROC by fraction", "crossover (labels)", "prompt spread"),
        tuple(rows), title="Zero-shot against the probes")
    text = ("Vision-language encoders scored without labels: text prototypes from their own text tower, on the "
            "features already cached (no new image pass), with the probes' metrics and bootstrap.")
    left_out = data.get("not_ranked") or []
    if left_out:
        text += (" Not ranked overall, by the spec's design: "
                 + "; ".join(f"{row['encoder']} ({row['tasks']} only)" for row in left_out)
                 + ": the zero-shot leaderboard is over the encoders scored on every task (as the CRS's, "
                   "docs/decisions/0038); their tasks are in the comparison below.")
    return text, [board, compare]
