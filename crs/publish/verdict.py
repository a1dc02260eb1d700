"""What "verified" means, once, for ``crs verify``, ``crs merge`` and the leaderboard site (DESIGN 8g).

A bundle is **verified** only when every check its kind admits was made and held: the manifest (every
file present and unchanged, none added), every file accounted for (an input the re-score reads, an
output it re-derives and compares, or a file ``crs run --extend`` checks against the extender's data),
the re-score reproduced (an aggregates bundle's: its CRS table from its axis errors and replicates), and a
signature checked against a key the reader named. A check that failed makes it **failed**; a check
that was not made (no key named, an unsigned bundle, no re-score) leaves it **incomplete**, shown as
what is missing ("unsigned", "signature not checked", "not re-scored"), never as verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from crs.evaluate.compare import Comparison


class Checks(Protocol):
    """What the checks found (:class:`crs.publish.verify.Verification` is one; this module does not import it)."""

    @property
    def kind(self) -> str: ...
    @property
    def manifest_problems(self) -> tuple[str, ...]: ...
    @property
    def contents_problems(self) -> tuple[str, ...]: ...
    @property
    def signature(self) -> str: ...
    @property
    def rescore(self) -> Comparison | None: ...
    @property
    def key(self) -> str | None: ...

VERIFIED = "verified"
INCOMPLETE = "incomplete"
FAILED = "failed"
UNSIGNED = "unsigned"
NOT_CHECKED = "signature not checked"
NOT_RESCORED = "not re-scored"


@dataclass(frozen=True)
class Verdict:
    """One bundle's verdict: ``state`` (verified, incomplete, failed), what held, what is missing, what failed."""

    state: str
    held: tuple[str, ...]
    missing: tuple[str, ...]
    failures: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return self.state == VERIFIED

    @property
    def label(self) -> str:
        """The short word a reader sees first: ``verified``, ``NOT verified``, or what is missing."""
        if self.state == VERIFIED:
            return "verified"
        if self.state == FAILED:
            return "NOT verified"
        return ", ".join(self.missing)

    @property
    def detail(self) -> str:
        """What failed (failed), else what held."""
        return "; ".join(self.failures if self.state == FAILED else self.held)

    def line(self) -> str:
        """``verified (manifest holds; ...)``, ``unsigned (manifest holds; ...)``, ``NOT verified: re-score FAILED: ...``."""
        if self.state == FAILED:
            return f"{self.label}: {self.detail}"
        return f"{self.label} ({self.detail})"


def _reproduced_line(verdict: str) -> str:
    return verdict.removeprefix("NOT reproduced: ")


def judge(verification: Checks) -> Verdict:
    """The verdict on ``verification`` (what :func:`crs.publish.verify.verify_bundle` found)."""
    held: list[str] = []
    missing: list[str] = []
    failures: list[str] = list(verification.manifest_problems)
    if not verification.manifest_problems:
        held.append("manifest holds")
    failures += list(verification.contents_problems)
    if not verification.contents_problems:
        held.append("every file accounted for")
    if verification.rescore is not None:
        if verification.rescore.holds:
            held.append("re-score reproduced")
        else:
            failures.append(f"re-score FAILED: {_reproduced_line(verification.rescore.verdict())}")
    elif failures:
        pass  # not re-scored because the files failed: the failure says enough
    else:
        missing.append(NOT_RESCORED)
    signature = verification.signature.split(" (", 1)[0]
    key = f" with {verification.key}" if verification.key else ""
    if signature == "valid":
        held.append(f"signature valid{key}")
    elif signature == "unsigned":
        missing.insert(0, UNSIGNED)
    elif signature == "not checked":
        missing.insert(0, NOT_CHECKED)
    elif signature == "invalid":
        failures.append(f"signature invalid{key} (the bundle changed after signing, or the key is another's)")
    else:
        failures.append(f"unsigned, but a key was named{key}")
    state = FAILED if failures else INCOMPLETE if missing else VERIFIED
    return Verdict(state, tuple(held), tuple(missing), tuple(failures))
