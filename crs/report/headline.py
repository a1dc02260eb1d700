"""The report's opening sentences: who leads, whether the lead is real, and how AUROC would have ranked.

The reversal sentence says how many AUROC-vs-CRS reversals are robust when the bootstrap measured
that (``score.reversal_uncertainty``), and otherwise says plainly that the count is a point
estimate with no noise baseline: a headline count means little without the count noise alone makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from crs.report.tables import bootstrap_name, confidence_label, interval_label, is_case_level, percent
from crs.scoring.verdict import baseline_sentence, decision_sentences


def reversal_uncertainty(score) -> dict[str, Any] | None:
    """The bootstrap's reversal summary as a plain dict, or None when it was not computed.

    Expected keys (the bootstrap's reversal analysis provides them): ``n_robust`` (pairs whose AUROC
    and CRS orders are each held in at least ``robust_level`` of the replicates), ``count_low`` and
    ``count_high`` (bootstrap interval of the number of reversed pairs), ``robust_level`` (e.g.
    0.95), ``interval_level`` (e.g. 0.95) and ``n_boot``.
    """
    found = getattr(score, "reversal_uncertainty", None)
    if found is None:
        return None
    if hasattr(found, "summary"):
        found = found.summary()
    if not isinstance(found, Mapping) or "n_robust" not in found:
        return None
    return dict(found)


def reversal_sentence(n_reversed: int, n_pairs: int, auroc_leader: str, crs_leader: str,
                      uncertainty: Mapping[str, Any] | None = None) -> str:
    """How AUROC and CRS rankings disagree, with the robust count when the bootstrap gave one.

    Without ``uncertainty`` the sentence labels the count as a point estimate with no noise
    baseline rather than inventing one.
    """
    if auroc_leader != crs_leader:
        opening = f"Ranking by clean AUROC alone would have picked {auroc_leader}; "
        swaps = f"{n_reversed} of {n_pairs} encoder pairs swap order"
    elif n_reversed:
        opening = "Clean AUROC picks the same leader, but "
        swaps = f"{n_reversed} of {n_pairs} encoder pairs swap order further down"
    else:
        opening = ""
        swaps = f"clean AUROC orders every pair of encoders the same way (0 of {n_pairs} pairs swap)"
    if uncertainty is None:
        if not n_reversed:
            return (opening + swaps)[0].upper() + (opening + swaps)[1:] + "."
        return (f"{opening}{swaps} in the point estimate (not yet compared with what noise alone would "
                "produce: this run has no bootstrap reversal probabilities).")
    robust_level = float(uncertainty.get("robust_level", 0.95))
    interval_level = float(uncertainty.get("interval_level", 0.95))
    n_boot = uncertainty.get("n_boot")
    replicates = f" of {n_boot} bootstrap replicates" if n_boot else " of the bootstrap replicates"
    interval = ""
    if uncertainty.get("count_low") is not None and uncertainty.get("count_high") is not None:
        interval = (f"; {confidence_label(1 - interval_level)} interval of the count "
                    f"{int(uncertainty['count_low'])} to {int(uncertainty['count_high'])}")
    robust = (f"{int(uncertainty['n_robust'])} of them robustly (each order held in at least "
              f"{percent(robust_level)}{replicates}{interval})")
    text = f"{opening}{swaps}, {robust}." if n_reversed else f"{opening}{swaps}; {robust}."
    return text[0].upper() + text[1:]


def headline(score, board: pd.DataFrame) -> str:
    """The answer first: whom to build on and what the confidence sets say (crs.scoring.verdict), then the
    leader's point estimate, whether clean AUROC would have picked the same encoder, and the reference.

    A named reference that does not compete (the default, crs.scoring.baseline) is never the leader and
    needs no caution; where it competes (``reference_competes``) the page warns when it ranks first or
    when the leader changes under most reference choices."""
    competing = board[board["competes"]] if "competes" in board else board
    if competing.empty:  # the reference scored alone
        competing = board
    tier = [name for name, flag in zip(competing["encoder"], competing["tier"], strict=True) if flag]
    contestants = competing.sort_values("crs", ascending=False, kind="stable")["encoder"].tolist()
    comparisons = getattr(score, "comparisons", None)
    qualifier = "" if is_case_level(score.bootstrap) else " (seed resampling only)"
    decision = decision_sentences(tier, contestants, comparisons, confidence_label(score.bootstrap.alpha), qualifier)
    leader = competing.iloc[0]
    others = [name for name in tier if name != leader["encoder"]]
    auroc_first = board.sort_values(["auroc_rank", "rank"]).iloc[0]["encoder"]
    resampled = "seed and test-case resampling" if is_case_level(score.bootstrap) else "seed resampling"
    point = (f"{leader['crs']:.3f} ({interval_phrase(score.bootstrap, leader['crs_low'], leader['crs_high'])}), "
             f"first in {percent(leader['p_rank1'])} of {score.bootstrap.n_boot} {bootstrap_name(score.bootstrap)} "
             "replicates")
    disagreement: list[str] = []
    more_often = competing[competing["p_rank1"] > leader["p_rank1"]]
    if len(more_often):  # the point and the replicates disagree about who is first (issue 30)
        top = more_often.sort_values("p_rank1", ascending=False).iloc[0]
        disagreement.append(f"{top['encoder']} ranks first in more replicates ({percent(top['p_rank1'])}): the CRS jumps "
                     "where one encoder starts or stops dominating another and where the median reference "
                     "moves, so the replicates scatter around such a step instead of around the point estimate, "
                     "and the point leader need not lead most often. P(rank 1) describes the bootstrap; the leading "
                     "tier (simultaneous rank sets) is the confidence statement.")
    settings = getattr(score, "settings", None)
    reference_competes = score.reference == "median" or bool(getattr(settings, "reference_competes", True))
    parts = list(decision)
    if others or not decision:
        parts.append(f"{leader['encoder']} has the highest point estimate of the Clinical Reliability Score, {point}.")
    else:
        parts.append(f"Its Clinical Reliability Score is {point}; the lead holds under {resampled}.")
    parts.extend(disagreement)
    if reference_competes:  # a reference that cannot lead needs no caution
        parts.extend(caution_sentences(score, str(leader["encoder"])))
    summary = score.reversals.summary()
    parts.append(reversal_sentence(summary["n_reversed"], summary["n_pairs"], auroc_first, leader["encoder"],
                                   reversal_uncertainty(score)))
    if score.reference != "median" and score.reference in set(board["encoder"]):
        parts.append(baseline_sentence(score.reference, reference_competes))
        parts.append("The CRS is relative to a reference: another reference can reorder the encoders.")
    else:
        parts.append(reference_sentence(score.reference))
    return " ".join(parts)


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
