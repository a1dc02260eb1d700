"""Words for the zero-shot numbers of ``score.json``: AUROC with chance flagged, the crossover in label
fractions and labels, and the terminal's summary. The report's section and ``crs score`` read the
same file through these, so the page and the terminal say the same thing (docs/zero_shot.md)."""

from __future__ import annotations

import math

NEVER = "never"
WORSE_THAN_CHANCE = "worse than chance"
CHANCE = 0.5


def number(value) -> float | None:
    """``value`` as a finite float, inf for "never", or None when missing."""
    if value == NEVER:
        return math.inf
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if out != out else out


def fixed(value, digits: int = 3) -> str:
    found = number(value)
    if found is None:
        return "n/a"
    return NEVER if math.isinf(found) else f"{found:.{digits}f}"


def chance_flag(auroc, high=None) -> str:
    """" (worse than chance)" when the AUROC, and its interval's upper end where given, are below 0.5;
    " (below 0.5; its interval reaches chance)" when only the point is; else ""."""
    value, upper = number(auroc), number(high)
    if value is None or value >= CHANCE:
        return ""
    if upper is not None and upper >= CHANCE:
        return " (below 0.5; its interval reaches chance)"
    return f" ({WORSE_THAN_CHANCE})"


def auroc_text(auroc, low=None, high=None) -> str:
    """``0.801 [0.780, 0.822]``, flagged when below chance."""
    interval = "" if low is None and high is None else f" [{fixed(low)}, {fixed(high)}]"
    return f"{fixed(auroc)}{interval}{chance_flag(auroc, high)}"


def percent(fraction: float) -> str:
    return f"{100 * fraction:g} %"


def _labels(value) -> str:
    found = number(value)
    return "" if found is None or math.isinf(found) else f"{found:,.0f} labels"


def crossover_point(row: dict) -> str:
    """The crossover of one comparison row: ``10 % (60 labels)``, ``at most 1 % (6 labels)`` when the
    probe wins already at the smallest fraction run, ``never`` when no fraction beats zero-shot."""
    value, smallest = number(row.get("crossover_fraction")), _smallest(row)
    if value is None and row.get("crossover_fraction", "") is None and smallest is not None:
        value = math.inf  # a score.json written before "never" was spelled out held null for it
    if value is None:
        return "n/a"
    if math.isinf(value):
        largest = smallest_to_largest(row)[1]
        return f"{NEVER} (no probe up to {percent(largest)} beats it)" if largest is not None else NEVER
    labels = _labels(row.get("crossover_labels"))
    if smallest is not None and value <= smallest:
        return f"at most {percent(value)}" + (f" ({labels}; fewer were not tried)" if labels else "")
    return percent(value) + (f" ({labels})" if labels else "")


def _bound(value, smallest) -> str:
    found = number(value)
    if found is None:
        return "n/a"
    if math.isinf(found):
        return NEVER
    return f"at most {percent(found)}" if smallest is not None and found <= smallest else percent(found)


def crossover_text(row: dict) -> str:
    """The crossover with its bootstrap interval (``10 % (60 labels) [1 %, 100 %]``); one value when
    every replicate agrees."""
    point = crossover_point(row)
    low, high = row.get("crossover_low"), row.get("crossover_high")
    if number(low) is None and number(high) is None:
        return point
    smallest = _smallest(row)
    low_text, high_text = _bound(low, smallest), _bound(high, smallest)
    if low_text == high_text == _bound(row.get("crossover_fraction"), smallest):
        return f"{point}, in every bootstrap replicate"
    return f"{point} [{low_text}, {high_text}]"


def _smallest(row: dict) -> float | None:
    found = number(row.get("smallest_fraction"))
    return found if found is not None else smallest_to_largest(row)[0]


def smallest_to_largest(row: dict) -> tuple[float | None, float | None]:
    fractions = [float(k[len("probe_auroc_"):]) for k in row if k.startswith("probe_auroc_")]
    return (min(fractions), max(fractions)) if fractions else (None, None)


def tier_level(summary: dict) -> str:
    """" (one simultaneous 95 % family: no other encoder is surely above these)" when the tier was read off
    the family (decision 0185), "" for a score.json written before it or with one ranked encoder."""
    family = summary.get("headline_family")
    if not family:
        return ""
    return (f" (one simultaneous {percent(float(family['level']))} family: no other encoder is surely above "
            f"{'it' if len(family.get('leading_tier') or []) == 1 else 'these'})")


def summary_lines(summary: dict) -> list[str]:
    """A few lines for the terminal: the zero-shot leader and tier, each (encoder, task)'s AUROC and
    crossover, and who is not ranked overall."""
    lines = []
    board = summary.get("leaderboard") or []
    if board:
        tier = [row["encoder"] for row in board if row.get("in_leading_tier")]
        leader = board[0]
        lines.append(f"zero-shot leaderboard (its own CRS, no labels): {leader['encoder']} first (CRS "
                     f"{fixed(leader.get('crs'))}); leading tier: {', '.join(tier) or 'none'}{tier_level(summary)}")
    for row in summary.get("comparison") or []:
        text = (f"zero-shot {row['encoder']} x {row['task']}: AUROC "
                f"{auroc_text(row.get('zero_shot_auroc'), row.get('zero_shot_auroc_low'), row.get('zero_shot_auroc_high'))}")
        if row.get("crossover_fraction") is not None:
            text += f"; crossover to a probe: {crossover_point(row)}"
        lines.append(text)
    for row in summary.get("not_ranked") or []:
        lines.append(f"zero-shot: {row['encoder']} not ranked overall, by the spec's design ({row['tasks']} only)")
    return lines
