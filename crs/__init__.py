"""crs: rank frozen medical-image encoders by a Clinical Reliability Score.

Stage 1 (``Benchmark.extract``, ``crs extract``) caches each encoder's features once; stage 2
(``Benchmark.probe`` / ``score`` / ``report``) fits many light probes on the cache and scores
discrimination, calibration, label efficiency and robustness.

The public API is ``__all__`` below; ``docs/api.md`` walks through it from a notebook:

* :class:`Benchmark`, :class:`RunOutcome`: one spec's whole job, and what :meth:`Benchmark.run` returns.
* :func:`load_spec`, :class:`Spec`: read a TOML spec, or build one in Python.
* :func:`create_encoder`: build a registered encoder (it is ``crs.encoders.create``; the registry,
  ``EncoderSpec`` and ``register`` live in :mod:`crs.encoders`).
* :func:`fit_probes`: every probe of one (encoder, task) unit in one call, on arrays.
* :func:`score_records`, :class:`ScoreResult`: the CRS, bootstrap tiers and reversals from run records.
* :class:`RunFolder`: reads and writes a run folder (records, predictions, audit, score tables).

Example (runs as is: the built-in synthetic benchmark, no downloads, about a minute on a laptop)::

    >>> import crs
    >>> bench = crs.Benchmark.demo(output="crs-out/notebook")   # doctest: +SKIP
    >>> outcome = bench.run(progress=False)                     # doctest: +SKIP
    >>> outcome.score.crs[["crs", "rank"]]                      # doctest: +SKIP

``import crs`` stays cheap (a few tens of milliseconds): the names are loaded on first use through a
module ``__getattr__`` (PEP 562), because ``crs.benchmark`` pulls in torch, torchvision and
scikit-learn (seconds and about 1 GB), which a script that only reads a spec, a version or a run
folder should not pay for. ``from crs import Benchmark`` and ``crs.Benchmark`` work as usual.
"""

from __future__ import annotations

import importlib
import os
from importlib import metadata
from typing import TYPE_CHECKING, Any

# CPU forward passes give the same float32 bits on every x86 CPU with AVX2 (decision 0080): oneDNN and
# MKL otherwise pick kernels by instruction set, and a random-weight resnet18 on an AVX-512 machine
# differs from an AVX2 machine's in its float16 features (enough to flip a selected C on the tiny
# golden spec). Both libraries read these variables lazily, at their first kernel; set your own to override.
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
os.environ.setdefault("MKL_CBWR", "AVX2")

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from crs.benchmark import Benchmark, RunOutcome
    from crs.encoders import create as create_encoder
    from crs.evaluate.artifacts import RunFolder
    from crs.probes import fit_probes
    from crs.scoring.result import ScoreResult, score_records
    from crs.spec import Spec, load_spec


def _installed_version() -> str:
    """The version of the installed distribution (pyproject's ``version``; the one source of it)."""
    try:
        return metadata.version("crs")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__version__: str = _installed_version()

# public name -> (module, attribute in it)
_LAZY: dict[str, tuple[str, str]] = {
    "Benchmark": ("crs.benchmark", "Benchmark"),
    "RunOutcome": ("crs.benchmark", "RunOutcome"),
    "Spec": ("crs.spec", "Spec"),
    "load_spec": ("crs.spec", "load_spec"),
    "create_encoder": ("crs.encoders", "create"),
    "fit_probes": ("crs.probes", "fit_probes"),
    "score_records": ("crs.scoring.result", "score_records"),
    "ScoreResult": ("crs.scoring.result", "ScoreResult"),
    "RunFolder": ("crs.evaluate.artifacts", "RunFolder"),
}

__all__ = [
    "Benchmark",
    "RunFolder",
    "RunOutcome",
    "ScoreResult",
    "Spec",
    "__version__",
    "create_encoder",
    "fit_probes",
    "load_spec",
    "score_records",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and keep the name here (PEP 562)."""
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'crs' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
