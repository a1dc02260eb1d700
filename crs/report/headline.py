"""The report's opening: the answer first (whom to build on, whether any candidate beats the reference, what
the data could have detected, the lead's point estimate), and under the leaderboard what backs it (the axes,
what clean AUROC alone would have picked among the candidates, the reference's part). Contestants and ranks
come from :mod:`crs.evaluate.contest`; the sentences of the decision from :mod:`crs.scoring.verdict`.
"""

from __future__ import annotations

import pandas as pd

from crs.evaluate.contest import contest_of_score
from crs.report.tables import bootstrap_name, confidence_label, interval_label, is_case_level, percent
from crs.scoring.reversals import contest_reversals
from crs.scoring.verdict import names_joined, opening


def headline(score, board: pd.DataFrame | None = None) -> str:
    """The answer, short and each thing said once (issue 46 items 7, 8, 14): from
    :func:`crs.scoring.verdict.opening`, whether a candidate beats the reference, whom to build on, what the
    data could have found where they separate nothing; the lead's point estimate with what P(rank 1)
    describes; cautions where a competing reference leads. The detail (axes, AUROC, the reference's part)
    is :func:`headline_details`, printed under the leaderboard. ``board`` is unused (kept for callers)."""
    contest = contest_of_score(score)
    table = score.crs.set_axis([str(name) for name in score.crs.index])
    found = opening(score, confidence_label(score.bootstrap.alpha))
    parts = [found.verdict, found.decision, found.not_separated, point_sentence(score, table, contest)]
    settings = getattr(score, "settings", None)
    reference_competes = score.reference == "median" or bool(getattr(settings, "reference_competes", False))
    if reference_competes and contest.leader is not None:  # a reference that cannot lead needs no caution
        parts.extend(caution_sentences(score, contest.leader))
    return " ".join(part for part in parts if part)


def headline_details(score) -> str:
    """What backs the answer, under the leaderboard: the candidates better than the reference on an axis, the
    axes that separate the tier, what clean AUROC alone would have picked among the candidates (ties and
    confident reversals said as such), and how the reference takes part."""
    contest = contest_of_score(score)
    table = score.crs.set_axis([str(name) for name in score.crs.index])
    found = opening(score, confidence_label(score.bootstrap.alpha))
    parts = [found.gains, *found.members]
    parts.append(auroc_sentence(contest_reversals(table, contest.contestants, getattr(score, "comparisons", None),
                                                  getattr(score.bootstrap, "table", None)), contest))
    if score.reference == "median" or score.reference not in table.index:
        parts.append(reference_sentence(score.reference))
    else:
        parts.append(found.baseline)
    return " ".join(part for part in parts if part)


def point_sentence(score, table: pd.DataFrame, contest) -> str:
    """The lead's point estimate and P(rank 1), saying what each holds fixed (issue 46 item 8): the tier is the
    confidence statement; P(rank 1) only describes the bootstrap; a shared lead is not a first place."""
    if contest.leader is None or len(contest.contestants) < 2:  # alone, it is first in every replicate
        return ""
    boot = score.bootstrap
    replicates = f"{boot.n_boot} {bootstrap_name(boot)} replicates"
    if contest.shared_lead:
        shares = ", ".join(f"{name} {table.loc[name, 'crs']:.3f} ({percent(table.loc[name, 'p_rank1'])})"
                           for name in contest.tier)
        return (f"Point CRS (P(rank 1), the share of the {replicates} in which each scores highest: a description "
                f"of the bootstrap, not a confidence statement): {shares}; the order among them is not established.")
    leader = table.loc[contest.leader]
    if contest.baseline and float(table.loc[contest.baseline, "crs"]) > float(leader["crs"]):  # interval said already
        text = f"{contest.leader} scores highest among the candidates in {percent(leader['p_rank1'])} of the {replicates}."
    else:
        text = (f"{contest.leader}'s Clinical Reliability Score is {leader['crs']:.3f} "
                f"({interval_phrase(boot, leader['crs_low'], leader['crs_high'])}); it scores highest in "
                f"{percent(leader['p_rank1'])} of the {replicates}.")
    rivals = [name for name in contest.contestants[1:] if float(table.loc[name, "p_rank1"]) > float(leader["p_rank1"])]
    if rivals:  # the point and the replicates disagree about who is first (issue 30, issue 46 item 8)
        top = max(rivals, key=lambda name: float(table.loc[name, "p_rank1"]))
        text += (f" {top} scores highest in more replicates ({percent(table.loc[top, 'p_rank1'])}): the dominance term "
                 "jumps, so replicates scatter around its steps; P(rank 1) describes the bootstrap, the leading tier "
                 "is the confidence statement.")
    return text


def auroc_sentence(found, contest) -> str:
    """What ranking by clean AUROC alone would have picked among the contestants (issue 46 item 7): ties said
    as ties, reversals counted among contestants, with those held with confidence (issue 47 item 5)."""
    if len(found.contestants) < 2:
        return ""
    if len(found.auroc_leaders) > 1:
        opening = (f"Clean AUROC cannot pick a leader: {names_joined(list(found.auroc_leaders))} tie at "
                   "the highest AUROC")
    elif contest.leader is not None and found.auroc_leaders and found.auroc_leaders[0] not in contest.tier:
        opening = f"Ranking by clean AUROC alone would have picked {found.auroc_leaders[0]}"
    else:
        opening = "Clean AUROC picks the same lead"
    if not found.n_reversed:
        return f"{opening}; no pair of candidates swaps order between AUROC and CRS."
    confident = (f"{found.n_confident} with confidence ({'; '.join(f'{a} above {b} on AUROC, below on CRS' for a, b in found.confident_pairs)})"
                 if found.n_confident else "none with confidence (no pair's AUROC and CRS orders are both held by the "
                 "simultaneous intervals)")
    return f"{opening}; {found.n_reversed} of {found.n_pairs} pairs of candidates swap order, {confident}."


def caution_sentences(score, leader: str) -> list[str]:
    """Warnings a reader needs before trusting the first name: the leader is the reference itself, or
    another reference choice would change the leader more often than not (the stability section)."""
    found = []
    if score.reference != "median" and leader == score.reference:
        found.append(f"Caution: the first-ranked encoder, {leader}, is the reference itself, which scores 0.5 on "
                     "every axis by definition; its rank says how the others compare with it, not that it is best "
                     "in absolute terms.")
    stability = getattr(score, "stability", None)
    if stability is not None and len(getattr(stability, "references", ())):
        summary = stability.summary()
        total, kept = int(summary["n_references"]), int(summary["leader_unchanged_under_references"])
        if total and total - kept > total / 2:
            found.append(f"Caution: the leader changes under {total - kept} of {total} reference choices (each "
                         "encoder and the cohort median; see \"How stable is this ranking?\"): this ranking "
                         "depends on the reference.")
    return found


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def interval_phrase(bootstrap, low: float, high: float) -> str:
    """The CRS interval in words; a seed-only interval is named so, and a zero-width one is refused as an interval."""
    if is_case_level(bootstrap):
        return f"{interval_label(bootstrap)} CI {low:.3f} to {high:.3f}"
    if abs(high - low) <= 1e-12:
        return "no interval: every seed gave the same measurements and the test set was not resampled"
    return f"seed-only {confidence_label(bootstrap.alpha)} interval {low:.3f} to {high:.3f}, test set not resampled"


def reference_sentence(reference: str) -> str:
    """The CRS is relative: each axis is scored against a reference's error; say which."""
    if reference == "median":
        return ("The CRS is relative to a reference: here the cohort-median encoder (per-axis median error), so "
                "u = 0.5 means median on that axis and no encoder gets 0.5 by being the reference.")
    return (f"The CRS is relative to a reference: here {reference} (0.5 on every axis by definition); another "
            "reference can reorder the encoders.")


def reversal_note_text(found, baseline: str | None) -> str:
    """The leaderboard's note on AUROC against CRS, among the contestants only, with the confident pairs."""
    left_out = f" ({baseline}, the baseline row, left out)" if baseline else ""
    pairs = (f" ({', '.join(f'{a} > {b} by AUROC, {b} > {a} by CRS' for a, b in found.reversed_pairs)})"
             if found.reversed_pairs else "")
    confident = (f"{found.n_confident} with confidence ({', '.join(f'{a} / {b}' for a, b in found.confident_pairs)})"
                 if found.n_confident else "none with confidence")
    return (f"AUROC vs CRS among the candidates{left_out}: {found.n_reversed} of {found.n_pairs} pairs reversed in "
            f"the point estimate{pairs}, {confident} (both orders held by the simultaneous intervals); Kendall tau "
            f"{found.tau_text()}, mean |rank displacement| {found.mean_abs_displacement:.2f}.")
