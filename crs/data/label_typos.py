"""Label values that look like typos, not classes: a one-row ``melanoma`` among benign/malignant rows.

The folder loader makes a class of every distinct value of a label column when the spec lists no
``class_names``; a mistyped row would become a class of its own and change the task (decision 0119).
A value is odd when it has fewer than :data:`MIN_CLASS_ROWS` rows and at most a tenth of the largest
class's, or when it differs from a larger class only in case, spaces, '_' or '-'. Listing it in
``class_names`` accepts it as a class.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from crs.data.shift import label_key

MIN_CLASS_ROWS = 5
RARE_SHARE = 0.1  # of the largest class
SHOWN_ROWS = 5


@dataclass(frozen=True)
class OddLabel:
    """One suspicious value: its rows (CSV row numbers, the header being row 1) and the class it may mean."""

    value: str
    rows: tuple[int, ...]
    why: str
    close: str | None
    classes: tuple[str, ...] = ()  # the values taken as classes, largest first (the guesses when none is close)

    def describe(self) -> str:
        shown = ", ".join(str(r) for r in self.rows[:SHOWN_ROWS]) + (" ..." if len(self.rows) > SHOWN_ROWS else "")
        return f"{self.value!r} has {len(self.rows)} row(s) (row {shown}), {self.why}; {did_you_mean(self.close, self.classes)}"


def did_you_mean(close: str | None, classes: Sequence[str]) -> str:
    """"did you mean 'x'?" for a close class, else the classes there are (the first few)."""
    if close:
        return f"did you mean {close!r}?"
    shown = ", ".join(repr(c) for c in classes[:6]) + (", ..." if len(classes) > 6 else "")
    return f"did you mean one of {shown}?"


def odd_labels(values: Sequence[str]) -> list[OddLabel]:
    """The odd values among ``values`` (one label per CSV row, in file order), largest classes first in ``close``."""
    counts = Counter(values)
    if len(counts) < 2:
        return []
    largest_value, largest = counts.most_common(1)[0]
    by_key: dict[str, list[str]] = {}
    for value in counts:
        by_key.setdefault(label_key(value), []).append(value)
    odd: dict[str, tuple[str, str | None]] = {}
    for same in by_key.values():
        if len(same) > 1:
            keep = max(same, key=lambda v: (counts[v], v))
            for value in same:
                if value != keep:
                    odd[value] = (f"spelled as {keep!r} ({counts[keep]} rows) but for case, spaces, '_' or '-'", keep)
    for value, n in counts.items():
        if value not in odd and n < MIN_CLASS_ROWS and n <= RARE_SHARE * largest:
            odd[value] = (f"fewer than {MIN_CLASS_ROWS} and under a tenth of {largest_value!r} ({largest} rows)", None)
    classes = [v for v, _ in counts.most_common() if v not in odd]
    found = []
    for value, (why, close) in odd.items():
        rows = tuple(i + 2 for i, v in enumerate(values) if v == value)
        found.append(OddLabel(value, rows, why, close or closest(value, classes), tuple(classes)))
    return sorted(found, key=lambda o: o.rows)


def closest(value: str, classes: Sequence[str]) -> str | None:
    """The class whose name is closest to ``value`` (case, spaces, '_' and '-' ignored), if any is close."""
    keys = {label_key(c): c for c in classes}
    match = difflib.get_close_matches(label_key(value), list(keys), n=1, cutoff=0.6)
    return keys[match[0]] if match else None


def odd_labels_message(odd: Sequence[OddLabel], column: str, source: str, classes: Sequence[str]) -> str:
    """One line: every odd value, and the two ways out (fix the rows, or accept it through ``class_names``)."""
    accepted = sorted(classes)
    return (f"folder: label column {column!r} of {source}: " + "; ".join(o.describe() for o in odd)
            + f"; a typo makes a class of its own: fix those rows, or accept every value as a class with "
              f"options.class_names = {accepted!r}")
