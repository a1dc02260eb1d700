"""torchvision, imported on first use by the corruption ops.

Importing torchvision costs about 2 s (it loads ``torch._dynamo``), and most importers of the
suites (scoring, reports, the probe stage) read their definitions without corrupting an image.
"""

from __future__ import annotations

from types import ModuleType


def functional() -> ModuleType:
    """``torchvision.transforms.v2.functional`` (imported once, then Python's module cache)."""
    import torchvision.transforms.v2.functional as module

    return module
