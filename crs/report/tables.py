"""The report's tables: axis values with bootstrap intervals, the leaderboard, the stability tables.

Every interval on the page comes from the replicates of the CRS bootstrap, whichever level ran:
both bootstraps keep every axis's error per replicate (``bootstrap.axis_error_replicates``) and
the axis intervals are percentiles of those. So the interval on an encoder's AUROC comes from
exactly the replicates that give the interval on its CRS, and :func:`interval_note` says which
bootstrap that was.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from crs.evaluate.contest import contest_of_score
from crs.scoring.bootstrap import axes_from_box, interval_method
from crs.scoring.intervals import LEADERBOARD_INTERVALS, coverage_sentence, lowest_measured
from crs.scoring.reversals import contest_reversals_of

# axis -> (value column, short label, higher is better). Values are the scored measurements in their
# own units: value = 1 - error for the AUROC axes, the error itself for calibration
# (crs.scoring.formula.axis_errors_from_metrics).
AXIS_VALUES = {
    "discrimination": ("auroc", "AUROC", True),
    "calibration": ("calibration_error", "cal. error", False),
    "label_efficiency": ("label_auroc", "label AUROC", True),
    "robustness": ("robust_auroc", "robust AUROC", True),
}
AXIS_DESCRIPTIONS = {
    "auroc": "discrimination (clean macro AUROC)",
    "calibration_error": "calibration (debiased RMS calibration error, lower is better)",
    "label_auroc": "label efficiency (mean AUROC below 100\u00a0% labels)",
    "robust_auroc": "robustness (mean AUROC, corrupted and shifted)",
}


def axis_values(score) -> pd.DataFrame:
    """Per encoder: each scored axis in its own units (AUROC, RMS calibration error, label AUROC, robust AUROC).

    Mean over seeds per task, then over tasks (each task once): the values behind the axis errors.
    """
    errors = score.axis_errors
    return pd.DataFrame(
        {
            value: (1.0 - errors[axis]) if higher_is_better else errors[axis]
            for axis, (value, _label, higher_is_better) in AXIS_VALUES.items()
        }
    )


def is_case_level(bootstrap) -> bool:
    """True when the bootstrap resampled test cases as well as seeds and kept its axis replicates."""
    return getattr(bootstrap, "level", "seed") == "seed+case"


def bootstrap_name(bootstrap) -> str:
    """'paired seed x test-case bootstrap' or 'seed-only paired-seed bootstrap': the level that ran."""
    return "paired seed \u00d7 test-case bootstrap" if is_case_level(bootstrap) else "seed-only paired-seed bootstrap"


def confidence_label(alpha: float) -> str:
    """0.05 -> '95 %'."""
    return f"{100 * (1 - alpha):g}\u00a0%"


def shown_intervals(bootstrap) -> tuple[str, ...]:
    """The measured intervals of the leaderboard: the CRS and four axes, and the equity axis where it was scored."""
    kept = getattr(bootstrap, "axis_error_replicates", None) or {}
    return LEADERBOARD_INTERVALS + (("worst_group_auroc",) if "equity" in kept else ())


def interval_label(bootstrap, intervals: tuple[str, ...] | None = None) -> str:
    """The intervals' level as printed: '95 %' where no coverage was measured or every one of ``intervals``
    (default: the leaderboard's) reaches 0.93 for its worst encoder, else the nominal level with the lowest
    measured coverage (docs/crs.md 7b, decisions 0063, 0090), never a bare '95 %' that they do not reach."""
    level = confidence_label(bootstrap.alpha)
    chosen = shown_intervals(bootstrap) if intervals is None else intervals
    method = interval_method(bootstrap) if intervals is None else "percentile"
    worst = lowest_measured(float(bootstrap.alpha), chosen, method) if is_case_level(bootstrap) else None
    if worst is None:
        return level
    return f"{level} nominal, \u2265\u00a0{100 * worst:.0f}\u00a0% measured"


def interval_note(bootstrap) -> str:
    """One sentence naming the intervals' level, the bootstrap that made them and its replicate count."""
    level = confidence_label(bootstrap.alpha)
    if is_case_level(bootstrap):
        what = ("each replicate draws one multiset of seeds and, per task, one resample of whole patients or "
                "lesions (images where the data set has no group ids; the shifted site's apart) made as the test "
                "set was drawn, within label strata for crs's own split and without for an official or imported "
                "one (see the provenance box), the same draw for every encoder and condition")
    else:
        what = "each replicate draws one multiset of seeds, the same for every encoder and task; test cases are not resampled"
    method = interval_method(bootstrap)
    if method == "box":
        note = (f"Every interval (CRS and the four axes) comes from one {level} simultaneous box over every "
                f"encoder's axis errors (studentised max-|t| over the {bootstrap.n_boot} replicates of the "
                f"{bootstrap_name(bootstrap)}), the CRS taken at the box's two extreme corners, so all hold at "
                f"once, through ties: {what}.")
    elif method == "adaptive":  # decisions 0180, 0181
        note = (f"Each CRS interval is the {level} studentised interval of the CRS's smooth part (balance and "
                f"worst axis), widened by the dominance term's range where a Pareto relation or an error floor "
                f"is not settled: it holds per encoder, at the measured level below. The four axes' intervals "
                f"come from one {level} simultaneous box over every encoder's axis errors (studentised max-|t|), "
                f"so they hold at once; statements about several encoders' CRS at once (reversals with "
                f"confidence) read the box's CRS bounds. All over the same {bootstrap.n_boot} replicates of the "
                f"{bootstrap_name(bootstrap)}: {what}.")
    else:
        note = (f"Every interval (CRS and the four axes) is a {level} percentile interval over the same "
                f"{bootstrap.n_boot} replicates of the {bootstrap_name(bootstrap)}: {what}.")
    sentence = (coverage_sentence(float(bootstrap.alpha), shown_intervals(bootstrap), method)
                if is_case_level(bootstrap) else None)
    return f"{note} {sentence}" if sentence else note


def axis_value_replicates(score) -> dict[str, pd.DataFrame]:
    """Per axis value (auroc, calibration_error, label_auroc, robust_auroc): one row per bootstrap
    replicate, one column per encoder, from the replicate axis errors the bootstrap kept; all NaN
    where the axis was not measured or the bootstrap kept none."""
    encoders = [str(name) for name in score.axis_errors.index]
    kept = getattr(score.bootstrap, "axis_error_replicates", None) or {}
    n_boot = int(score.bootstrap.n_boot)
    out = {}
    for axis, (value, _label, higher_is_better) in AXIS_VALUES.items():
        if axis in kept:
            errors = kept[axis].reindex(columns=encoders).to_numpy(dtype=np.float64)
            replicates = 1.0 - errors if higher_is_better else errors
        else:
            replicates = np.full((n_boot, len(encoders)), np.nan)
        out[value] = pd.DataFrame(replicates, columns=encoders).rename_axis("replicate")
    return out


def axis_intervals(score, alpha: float | None = None) -> pd.DataFrame:
    """Percentile intervals of each axis value over the CRS bootstrap's own replicates.

    Returns columns ``<value>_low`` and ``<value>_high`` per encoder; NaN where an axis was not
    measured (for example robustness with no corruption and no shift target).
    """
    alpha = score.bootstrap.alpha if alpha is None else alpha
    encoders = [str(name) for name in score.axis_errors.index]
    out = pd.DataFrame(index=pd.Index(encoders, name="encoder"))
    table = getattr(score.bootstrap, "table", None)
    if table is not None and alpha == score.bootstrap.alpha and axes_from_box(score.bootstrap):  # decisions 0128, 0181
        for axis, (value, _label, higher_is_better) in AXIS_VALUES.items():
            if f"{axis}_error_box_low" not in table:
                out[f"{value}_low"] = out[f"{value}_high"] = np.nan
                continue
            low = table[f"{axis}_error_box_low"].reindex(encoders).to_numpy(dtype=np.float64)
            high = table[f"{axis}_error_box_high"].reindex(encoders).to_numpy(dtype=np.float64)
            out[f"{value}_low"], out[f"{value}_high"] = (1.0 - high, 1.0 - low) if higher_is_better else (low, high)
        return out
    for value, replicates in axis_value_replicates(score).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an axis never measured: NaN, not a made-up interval
            low, high = np.nanpercentile(
                replicates.to_numpy(dtype=np.float64), [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0
            )
        out[f"{value}_low"] = low
        out[f"{value}_high"] = high
    return out


def percent(share: float) -> str:
    """0.31 -> '31 %' (the report writes a space before the unit); 0.002 -> '<1 %', 0.998 -> '>99 %'.

    A share that rounds to 0 or 100 but is not says so: 1 of 500 replicates is not "never".
    """
    if not np.isfinite(share):  # a named reference's baseline row does not compete for rank 1
        return "n/a"
    text = f"{100 * share:.0f}"
    if text == "0" and share > 0:
        text = "<1"
    elif text == "100" and share < 1:
        text = ">99"
    return f"{text}\u00a0%"  # no-break space: the number and its unit stay on one line


def rank_shift(auroc_rank: int, crs_rank: int) -> str:
    """'▲2' when the CRS ranks an encoder two places higher than clean AUROC does, '▼1' lower, '=' same."""
    moved = int(auroc_rank) - int(crs_rank)
    if moved > 0:
        return f"▲{moved}"
    if moved < 0:
        return f"▼{-moved}"
    return "="


def reversal_partners(score) -> dict[str, list[str]]:
    """For each contestant, the contestants whose order against it flips between AUROC and CRS (a named
    reference that does not compete has none: crs.evaluate.contest)."""
    partners: dict[str, list[str]] = {str(name): [] for name in score.crs.index}
    for first, second in contest_reversals_of(score).reversed_pairs:
        partners.setdefault(first, []).append(second)
        partners.setdefault(second, []).append(first)
    return partners


def leaderboard(score, flags: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """The headline table as numbers, one row per encoder in CRS order.

    Columns: rank, encoder, crs, crs_low, crs_high, tier, p_rank1, auroc_rank, rank_shift,
    reversed_with, the four axis values with intervals, u per axis, worst axis, exposure. ``rank_label``,
    ``auroc_rank`` and ``rank_shift`` are among the contestants (:func:`crs.evaluate.contest.contest_of_score`,
    the rule every view reads): the baseline row has none, a shared lead reads "1–k".
    """
    table = score.crs.copy()
    contest = contest_of_score(score)
    values = axis_values(score).reindex(table.index)
    intervals = axis_intervals(score).reindex(table.index)
    partners = reversal_partners(score)
    names = [str(name) for name in table.index]
    board = pd.DataFrame(index=table.index.astype(str).rename(None))
    board["rank"] = table["rank"]
    board["encoder"] = table.index
    board["competes"] = [name != contest.baseline for name in names]
    board["contest_rank"] = [contest.rank.get(name, pd.NA) for name in names]
    board["rank_label"] = [contest.rank_label(name) for name in names]
    for column in ("crs", "crs_low", "crs_high", "p_rank1"):
        board[column] = table[column]
    board["overall_auroc_rank"] = table["auroc_rank"]
    board["auroc_rank"] = [contest.auroc_rank.get(name, np.nan) for name in names]
    board["tier"] = ["leading" if name in contest.tier else "" for name in names]
    board["baseline"] = ~board["competes"]
    board["rank_shift"] = [rank_shift(contest.auroc_rank[name], contest.rank[name]) if name in contest.rank else ""
                           for name in names]
    board["reversed_with"] = [", ".join(partners.get(name, [])) for name in names]
    for value, *_ in AXIS_VALUES.values():
        board[value] = values[value]
        board[f"{value}_low"] = intervals[f"{value}_low"]
        board[f"{value}_high"] = intervals[f"{value}_high"]
    for axis in AXIS_VALUES:
        if f"u_{axis}" in table:
            board[f"u_{axis}"] = table[f"u_{axis}"]
    board["worst_axis"] = table["worst_axis_name"].str.replace("_", " ")
    board["exposure"] = ["; ".join((flags or {}).get(name, [])) for name in table.index]
    return board.sort_values(["rank", "overall_auroc_rank", "encoder"]).reset_index(drop=True)


def format_interval(value: float, low: float, high: float, digits: int = 3) -> str:
    """'0.812 [0.801, 0.824]', or just the value when the interval is missing."""
    if value is None or not np.isfinite(value):
        return "n/a"
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def leaderboard_text(board: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard as display strings (Markdown and plain HTML use this one table)."""
    rows = []
    for row in board.itertuples(index=False):
        rows.append(
            {
                "CRS rank": row.rank_label,
                "encoder": row.encoder,
                "CRS [CI]": format_interval(row.crs, row.crs_low, row.crs_high),
                "tier": "reference" if row.baseline else (row.tier or ""),
                "P(rank 1)": percent(row.p_rank1) if np.isfinite(row.p_rank1) else "n/a",
                "AUROC rank": "\u2014" if row.baseline else f"{int(row.auroc_rank)} ({row.rank_shift})",
                **{label: format_interval(getattr(row, value), getattr(row, f"{value}_low"), getattr(row, f"{value}_high"))
                   for value, label, _ in AXIS_VALUES.values()},
                "worst axis": row.worst_axis,
                "exposure": row.exposure or "",
            }
        )
    return pd.DataFrame(rows)
