"""The headline's answer: which encoder to build on, and only what the confidence sets support (issue 40 item 4).

Everything it says comes from one simultaneous family at the score's level (:mod:`crs.scoring.statements`,
decision 0166): the intervals on every pairwise difference of axis errors (:mod:`crs.scoring.comparisons`:
"A is better than C on calibration" only when that interval excludes 0) and the rank sets and leading tier
read off them (every competing encoder no other is surely above), so all of it holds together. The sentences name the
competing encoders only; a named reference is the yardstick (:mod:`crs.scoring.baseline`).
"""

from __future__ import annotations

from collections.abc import Sequence

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
    """{'calibration': ['C', 'D'], 'robustness': ['C']} -> 'better than C and D on calibration and than C on robustness'."""
    parts = [f"than {names_joined(rivals)} on {_axis_words(axis)}" for axis, rivals in found.items()]
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
            if not losses and beaten == set(rivals):
                sentences.append(f"Build on {leader}: better than every other encoder on at least one axis "
                                 f"{confident}, and worse on none.")
                return [*sentences, *_member_sentences([leader], rivals, comparisons, confident)]  # type: ignore[arg-type]
        sentences.append(f"Build on {leader}: its {level} rank confidence set{qualifier} is rank 1 alone, so the data "
                         "place its Clinical Reliability Score above every other encoder's.")
    else:
        sentences.append(f"Build on any of {names_joined(tier, 'or')}: the data do not separate them (each one's "
                         f"{level} rank confidence set{qualifier} contains rank 1).")
    if usable and len(contestants) > 1:
        sentences += _member_sentences(tier, contestants, comparisons, confident)  # type: ignore[arg-type]
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
        sentences.append(f"No axis separates {subject} from another competing encoder {confident}.")
    return sentences


def baseline_sentence(reference: str, competes: bool) -> str:
    """How a named reference takes part: the yardstick row, or (``reference_competes``) a contestant."""
    if competes:
        return (f"{reference} is the reference (0.5 on every axis by definition) and competes as in the paper's "
                "table (reference_competes = true): its rank says how the others compare with it, not that it is "
                "best in absolute terms.")
    return (f"{reference} is the reference: a baseline row at 0.5 on every axis by definition, the yardstick the "
            "others are scored against, not a contestant for the lead (set reference_competes = true for the "
            "paper's table).")
