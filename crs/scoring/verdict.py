"""The headline's answer: which encoder to build on, and only what the confidence sets support (issue 40 item 4).

Everything it says comes from one simultaneous family at the score's level (:mod:`crs.scoring.statements`,
decision 0166): the intervals on every pairwise difference of axis errors (:mod:`crs.scoring.comparisons`:
"A is better than C on calibration" only when that interval excludes 0) and the rank sets and leading tier
read off them (every competing encoder no other is surely above), so all of it holds together. The sentences name the
competing encoders only; a named reference is the yardstick (:mod:`crs.scoring.baseline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from crs.scoring.comparisons import Comparisons


def names_joined(names: Sequence[str], last: str = "and") -> str:
    """'A', 'A and B', 'A, B and C'."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


def _axis_words(axis: str) -> str:
    return axis.replace("_", " ")


def wins_and_losses(
    comparisons: Comparisons, encoder: str, rivals: Sequence[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per axis (in the comparisons' order), the rivals ``encoder`` is better than and worse than with confidence."""
    wins: dict[str, list[str]] = {}
    losses: dict[str, list[str]] = {}
    for axis in comparisons.axes:
        better = set(comparisons.better_than(encoder, axis))
        beaten = [rival for rival in rivals if rival != encoder and encoder in comparisons.better_than(rival, axis)]
        won = [rival for rival in rivals if rival in better]
        if won:
            wins[axis] = won
        if beaten:
            losses[axis] = beaten
    return wins, losses


def _clauses(found: dict[str, list[str]], word: str) -> str:
    """{'calibration': ['C', 'D'], 'robustness': ['C']} -> 'better than C and D on calibration and than C on
    robustness'; axes with the same rivals share one clause ('worse than C on discrimination and label
    efficiency'), so no rival is named twice in a row."""
    grouped: dict[tuple[str, ...], list[str]] = {}
    for axis, rivals in found.items():
        grouped.setdefault(tuple(rivals), []).append(_axis_words(axis))
    parts = [f"than {names_joined(rivals)} on {names_joined(axes)}" for rivals, axes in grouped.items()]
    return f"{word} " + names_joined(parts)


def decision_sentences(
    tier: Sequence[str], contestants: Sequence[str], comparisons: Comparisons | None, level: str = "95 %",
    qualifier: str = "",
) -> list[str]:
    """The opening sentences: whom to build on (the leading tier), then per tier member the axes on which
    it is better or worse than another competing encoder with confidence.

    ``tier``: the leading tier, best point CRS first; ``contestants``: every competing encoder;
    ``comparisons``: the simultaneous axis comparisons (None: those sentences are left out); ``level``:
    the confidence level as printed ("95 %"); ``qualifier``: appended to "with confidence" (for example
    " over seed resampling only" when the test set was not resampled).
    """
    contestants = list(contestants)
    tier = [name for name in tier if name in contestants]
    if not contestants:
        return ["Only the reference was scored: there is no other encoder to build on or compare."]
    if not tier:
        return []
    confident = f"with {level} confidence{qualifier}"
    usable = comparisons is not None and all(name in comparisons.encoders for name in contestants)
    sentences: list[str] = []
    if len(tier) == 1 and len(contestants) == 1:
        sentences.append(f"Build on {tier[0]}: it is the only encoder competing for the lead.")
    elif len(tier) == 1:
        leader = tier[0]
        rivals = [name for name in contestants if name != leader]
        if usable:
            wins, losses = wins_and_losses(comparisons, leader, rivals)  # type: ignore[arg-type]
            beaten = {rival for found in wins.values() for rival in found}
            if not losses and beaten == set(rivals):  # one sentence: the axes it wins on, said once
                sentences.append(f"Build on {leader}: {confident} it is {_clauses(wins, 'better')}, and worse "
                                 "than no other encoder on any axis.")
                return sentences
        sentences.append(f"Build on {leader}: its {level} rank confidence set{qualifier} is rank 1 alone, so the data "
                         "place its Clinical Reliability Score above every other encoder's.")
    else:
        sentences.append(f"Build on any of {names_joined(tier, 'or')}: the data do not separate them (each one's "
                         f"{level} rank confidence set{qualifier} contains rank 1).")
    if usable and len(contestants) > 1:  # a shared lead: only what separates its members, said once
        sentences += _member_sentences(tier, tier if len(tier) > 1 else contestants, comparisons, confident)  # type: ignore[arg-type]
    return sentences


def _member_sentences(tier: list[str], contestants: list[str], comparisons: Comparisons, confident: str) -> list[str]:
    """One sentence with a clause per tier member that is better or worse than a rival on some axis, and one
    naming the members no axis separates from any rival."""
    clauses, silent = [], []
    for name in tier:
        wins, losses = wins_and_losses(comparisons, name, [rival for rival in contestants if rival != name])
        said = [_clauses(found, word) for found, word in ((wins, "better"), (losses, "worse")) if found]
        if said:
            clauses.append(f"{name} is {', but '.join(said)}")
        else:
            silent.append(name)
    sentences = []
    if clauses:
        text = "; ".join(clauses)
        sentences.append(f"{confident[0].upper()}{confident[1:]}: {text}.")
    if silent:
        subject = names_joined(silent, "or")
        sentences.append(f"No axis separates {subject} from {'another member of the tier' if len(contestants) == len(tier) > 1 else 'another competing encoder'} {confident}.")
    return sentences


def baseline_sentence(reference: str, competes: bool) -> str:
    """How a named reference takes part: the yardstick row, or (``reference_competes``) a contestant; and that
    the CRS is relative to it."""
    if competes:
        return (f"{reference} is the reference (0.5 on every axis by definition) and competes as in the paper's "
                "table (reference_competes = true): its rank says how the others compare with it, and another "
                "reference can reorder the encoders.")
    return (f"{reference} is the reference: a baseline row at 0.5 on every axis by definition, the yardstick, not "
            "a contestant (reference_competes = true for the paper's table); another reference can reorder the "
            "encoders.")


def reference_verdict(reference: str, table: pd.DataFrame, contestants: Sequence[str],
                      comparisons: Comparisons | None, level: str = "95 %",
                      below_reference: Sequence[str] | None = None) -> str:
    """The first sentence when a named reference that does not compete scores above every candidate (issue 46
    item 7): that no candidate beats it, and how firmly. ``below_reference``: the candidates the headline's
    one family (:class:`crs.scoring.statements.Statements`) places surely below the reference, so this
    sentence holds together with the rest of the headline (decision 0166); without it (a score read back
    without its family) the box's simultaneous CRS intervals decide. "" when some candidate's point CRS
    reaches the reference's."""
    names = [str(name) for name in contestants]
    if reference not in table.index or not names:
        return ""
    crs = table["crs"].astype(float)
    if float(crs[reference]) <= float(crs[names].max()):
        return ""
    best = names[0]
    if below_reference is not None:
        reaching = [name for name in names if name not in set(below_reference)]
    elif "crs_high" in table and "crs_low" in table:
        floor = float(table.loc[reference, "crs_low"])
        reaching = [name for name in names if not float(table.loc[name, "crs_high"]) < floor]
    else:
        reaching = names
    if not reaching:
        sentence = (f"No candidate beats the reference {reference}: with {level} confidence its Clinical "
                    f"Reliability Score ({float(crs[reference]):.3f}) is above every candidate's (highest: {best}, "
                    f"{float(crs[best]):.3f}).")
    else:
        sentence = (f"No candidate's point Clinical Reliability Score reaches the reference {reference}'s "
                    f"({float(crs[reference]):.3f}); the data do not separate {names_joined(reaching)} from it at "
                    f"{level}, so they do not say whether {'it beats' if len(reaching) == 1 else 'they beat'} the "
                    "reference.")
    return sentence


def reference_gains(reference: str, contestants: Sequence[str], comparisons: Comparisons | None,
                    level: str = "95 %") -> str:
    """The candidates better than a named reference on some axis with confidence, one clause per candidate."""
    if comparisons is None or reference not in comparisons.encoders:
        return ""
    gains = []
    for name in contestants:
        axes = [_axis_words(axis) for axis in comparisons.axes
                if name in comparisons.encoders and reference in comparisons.better_than(name, axis)]
        if axes:
            gains.append(f"{name} on {names_joined(axes)}")
    return f"Better than {reference} with {level} confidence: {'; '.join(gains)}." if gains else ""


def not_separated_sentence(crs_detectable, axis_detectable, level: str = "95 %") -> str:
    """What the data could have found where they separate nothing (issue 47 item 4): "not separated" is not
    "equal". ``crs_detectable`` / ``axis_detectable``: :class:`crs.scoring.detectable.Detectable` or None."""
    found = [d for d in (crs_detectable, axis_detectable) if d is not None]
    if not found:
        return ""
    said = names_joined([d.words() for d in found])
    power = f"{100 * found[0].power:.0f}\u00a0%"
    return (f"Not separated is not equal: this test set finds {said} with about {power} power at {level}; smaller "
            "true differences would likely go unseen.")


@dataclass(frozen=True)
class Opening:
    """The answer's parts, so that the report can put the answer first and the detail below the table while
    the terminal prints them in order: ``verdict`` (a named reference that beats every candidate), ``gains``
    (candidates better than it on an axis), ``decision`` (whom to build on), ``members`` (the axes that
    separate the tier), ``not_separated`` (what could have been detected), ``baseline`` (how the reference
    takes part); "" or empty where there is nothing to say."""

    verdict: str
    gains: str
    decision: str
    members: tuple[str, ...]
    not_separated: str
    baseline: str

    def sentences(self) -> list[str]:
        return [s for s in (self.verdict, self.gains, self.decision, *self.members, self.not_separated, self.baseline) if s]


def _below_reference(score, reference: str) -> tuple[str, ...] | None:
    """The candidates the headline's family places surely below ``reference``: from the score's
    :class:`~crs.scoring.statements.Statements`, or from its stored summary when read back (None: neither)."""
    statements = getattr(score, "statements", None)
    if statements is not None and reference in statements.encoders:
        return statements.surely_below(reference)
    stored = getattr(score, "stored_headline_family", None)
    if stored and "below_reference" in stored:
        return tuple(str(name) for name in stored["below_reference"])
    return None


def opening(score, level: str | None = None) -> Opening:
    """The answer first, for the report and the terminal alike: whether any candidate beats a named reference
    that does not compete, whom to build on (the leading tier of the contestants) with the axes that
    separate them, what difference the data could have found where they separate nothing, and how the
    reference takes part. The contestants and the baseline row come from :func:`crs.evaluate.contest.contest_of_score`,
    the one rule every view reads."""
    from crs.evaluate.contest import contest_of_score
    from crs.scoring.bootstrap import simultaneous_crs
    from crs.scoring.detectable import detectable_axis, detectable_crs

    table = score.crs.set_axis([str(name) for name in score.crs.index])
    # the reference sentence and the detectable difference without the family read the box's CRS bounds,
    # which hold for every encoder at once (decision 0181), not the per-encoder printed ones
    together = simultaneous_crs(table, getattr(score.bootstrap, "table", None))
    contest = contest_of_score(score)
    boot = score.bootstrap
    level = level or f"{100 * (1 - boot.alpha):g} %"
    qualifier = "" if getattr(boot, "level", "seed") == "seed+case" else " (seed resampling only)"
    comparisons = getattr(score, "comparisons", None)
    reference = contest.baseline or ""  # "": no named reference outside the contest
    below = _below_reference(score, reference) if reference else None
    verdict = reference_verdict(reference, together, contest.contestants, comparisons, level, below) if reference else ""
    gains = reference_gains(reference, contest.contestants, comparisons, level) if verdict else ""
    decision = decision_sentences(contest.tier, contest.contestants, comparisons, level, qualifier)
    if verdict and decision:
        decision[0] = f"Among the candidates, {decision[0][0].lower()}{decision[0][1:]}"
    tier_pairs = [(a, b) for i, a in enumerate(contest.tier) for b in contest.tier[i + 1:]]
    rivals = list(contest.tier if contest.shared_lead else contest.contestants)  # as the member sentences compare
    silent = [name for name in contest.tier if comparisons is not None and name in comparisons.encoders
              and not any(wins_and_losses(comparisons, name, rivals))]
    axis_pairs = [(name, rival) for name in silent for rival in rivals if rival != name]
    named = list(contest.contestants)
    if verdict and below is not None:  # the candidates the headline's family does not separate from the reference
        tier_pairs += [(reference, name) for name in contest.contestants if name not in below]
        named.append(reference)
    elif verdict and "crs_high" in together and "crs_low" in together:  # a score without its family: the box decides
        floor = float(together.loc[reference, "crs_low"])
        tier_pairs += [(reference, name) for name in contest.contestants
                       if float(together.loc[name, "crs_high"]) >= floor]
        named.append(reference)
    replicates = getattr(boot, "replicates", None)
    statements = getattr(score, "statements", None)
    if statements is not None:
        lower = (pd.DataFrame(statements.difference_low, index=list(statements.encoders), columns=list(statements.encoders))
                 if statements.difference_low is not None else None)
    else:  # a score read back from disk: the bounds its summary stored
        from crs.scoring.statements import stored_difference_low

        lower = stored_difference_low(getattr(score, "stored_headline_family", None))
    crs_found = (detectable_crs(replicates, table["crs"], named, tier_pairs, float(boot.alpha), lower=lower)
                 if tier_pairs and replicates is not None else None)
    auroc_found = detectable_axis(comparisons, "discrimination", axis_pairs, "AUROC") if axis_pairs else None
    settings = getattr(score, "settings", None)
    median = score.reference == "median" or bool(getattr(settings, "median_reference", False))
    baseline = (baseline_sentence(score.reference, bool(getattr(settings, "reference_competes", False)))
                if not median and score.reference in table.index else "")
    return Opening(verdict, gains, decision[0] if decision else "", tuple(decision[1:]),
                   not_separated_sentence(crs_found, auroc_found, level), baseline)


def opening_sentences(score, level: str | None = None) -> list[str]:
    """:func:`opening` as sentences in order (the terminal, ``summary.json``'s headline)."""
    return opening(score, level).sentences()
