"""Package attributes imported on first access (PEP 562), so that importing a package stays light.

``crs.corruptions`` and ``crs.encoders`` name functions that need torch (about 2 CPU s a process);
scoring, reports and the probe stage import those packages without ever calling them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, targets: Mapping[str, str],
                 public: Iterable[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level ``__getattr__`` and ``__dir__``: ``targets`` maps each lazy name to the
    module that defines it; the value is imported on first access and kept in the package."""
    names = set(public)

    def __getattr__(name: str) -> Any:
        if name not in targets:  # a submodule not yet imported, or a typo
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(targets[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | names)

    return __getattr__, __dir__
