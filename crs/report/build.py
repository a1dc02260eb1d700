"""Assemble the report from the score result and the run records."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from crs.report import plots

LEADERBOARD_COLUMNS = [
    "rank", "crs", "crs_low", "crs_high", "in_leading_tier", "auroc_rank", "auroc",
    "u_discrimination", "u_calibration", "u_label_efficiency", "u_robustness", "worst_axis_name",
]


def leaderboard(score) -> pd.DataFrame:
    """The headline table: CRS with interval and tier, the four axes, AUROC rank beside CRS rank."""
    table = score.crs.copy()
    errors = score.axis_errors
    table["AUROC"] = 1 - errors["discrimination"]
    table["ECE"] = errors["calibration"]
    table["label eff."] = 1 - errors["label_efficiency"]
    table["retention"] = 1 - errors["robustness"]
    table["tier"] = ["leading" if flag else "" for flag in table["in_leading_tier"]]
    table["reversal"] = ["<>" if a != c else "" for a, c in zip(table["auroc_rank"], table["rank"], strict=True)]
    columns = ["rank", "crs", "crs_low", "crs_high", "tier", "auroc_rank", "reversal",
               "AUROC", "ECE", "label eff.", "retention", "worst_axis_name"]
    return table.sort_values("rank")[columns].rename(columns={"auroc_rank": "AUROC rank", "worst_axis_name": "worst axis"})


def _image_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


def write_report(score, records: pd.DataFrame, out_dir: Path, title: str = "crs report") -> Path:
    """Write report.md, report.html and figures/*.png under ``out_dir``; return the HTML path."""
    out_dir = Path(out_dir)
    figures = out_dir / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    made = [
        (plots.axis_profiles(score.crs, figures / "axis_profiles.png"), "Axis profile per encoder (reference = 0.5)"),
        (plots.rank_slope(score.crs, figures / "rank_slope.png"), "AUROC rank vs CRS rank"),
        (plots.label_efficiency_curves(records, figures / "label_efficiency.png"), "Label-efficiency curves"),
    ]
    if (records["condition"] == "corrupt").any():
        made.append((plots.severity_curves(records, figures / "severity.png"), "AUROC against corruption severity"))
    board = leaderboard(score)
    summary = score.summary()
    reversals = summary["rank_reversals"]
    lines = [
        f"# {title}", "",
        f"Reference encoder: **{score.reference}**. Leading tier: **{', '.join(summary['leading_tier'])}**.", "",
        board.to_markdown(floatfmt=".3f") if _has_tabulate() else board.to_string(float_format=lambda v: f"{v:.3f}"),
        "",
        f"AUROC vs CRS: {reversals['n_reversed']} of {reversals['n_pairs']} pairs reversed, "
        f"Kendall tau {reversals['kendall_tau']:.3f}, mean |rank displacement| {reversals['mean_abs_displacement']:.2f}.",
        "",
        *[f"![{alt}](figures/{path.name})" for path, alt in made],
    ]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;font-size:14px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
figure{{margin:1.5em 0}}img{{max-width:100%}}figcaption{{color:#555;font-size:13px}}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Reference encoder: <b>{html.escape(score.reference)}</b>. Leading tier: <b>{html.escape(', '.join(summary['leading_tier']))}</b>.</p>
{board.to_html(float_format=lambda v: f"{v:.3f}", border=0)}
<p>AUROC vs CRS: {reversals['n_reversed']} of {reversals['n_pairs']} pairs reversed, Kendall tau {reversals['kendall_tau']:.3f},
mean |rank displacement| {reversals['mean_abs_displacement']:.2f}.</p>
{''.join(_image_tag(path, alt) for path, alt in made)}
</body></html>"""
    path = out_dir / "report.html"
    path.write_text(page)
    return path


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True
