"""Benchmark spec: a TOML file read into frozen, self-checking dataclasses; the one home of every default.

A spec names the data sets (each with any number of shift targets), the encoders, the probe protocol
(label fractions, seeds, C grid, backend) and the scoring choices (reference encoder, weights,
bootstrap size). Relative paths in a spec file (cache, output, data set roots, label-map and prompt
files) resolve against the file's folder, as in other TOML-configured tools; a spec built in Python
without a file (:func:`parse_spec` on a mapping) resolves them against the working folder.

Every config checks its own fields in ``__post_init__``, so a spec built in Python and the same
mistake in a TOML file fail with the same one-line :class:`SpecError`; :func:`parse_spec` adds only
what a TOML table can get wrong by itself (unknown or missing keys), reports every problem of a spec
at once, and resolves relative paths.
The defaults and the allowed values of every setting live here; the rooms that use them import them.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import logging
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

log = logging.getLogger(__name__)

AXES = ("discrimination", "calibration", "label_efficiency", "robustness")
"""The four axes of the CRS, in the order every table and array uses."""
COMPONENTS = ("dominance", "balance", "worst_axis")
"""The parts of the CRS, the keys of ``[score.weights]``."""
MEDIAN_REFERENCE = "median"
"""``reference_encoder`` of the virtual cohort-median encoder (per-axis median error), the default."""
TASK_KINDS = ("multiclass", "ordinal", "multilabel")
MODALITIES = ("dermoscopy", "fundus", "chest_xray")
# How a non-square image becomes the square canonical image (crs.data.fit; docs/decisions/0007-fit-modes-and-dicom-window.md).
FIT_MODES = ("crop", "pad", "squash")
# Per modality: a centred lesion or disc is kept by a centre crop; a chest film is padded so the
# apices and costophrenic angles are never cut. Pad (nothing lost, nothing distorted) otherwise.
DEFAULT_FIT = {"dermoscopy": "crop", "fundus": "crop", "chest_xray": "pad"}
"""Image modalities: each has its corruption suite and its default image fit."""
SEVERITIES = (1, 2, 3, 4, 5)
"""Corruption severities, mildest first."""

DEFAULT_FRACTIONS = (0.01, 0.05, 0.1, 0.25, 1.0)
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
DEFAULT_CS = (1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 10.0)
"""Inverse L2 strengths tried by the logistic and ridge families when the spec gives no ``Cs``."""
DEFAULT_KS = (5, 10, 20, 50, 100)
"""Neighbour counts tried by the knn family (its ``Cs``) when the spec gives none."""
DEFAULT_MIN_PER_CLASS = 3
DEFAULT_BATCH_SIZE = 32
DEFAULT_CHUNK_ROWS = 4096
DEFAULT_N_BOOT = 1000

PROBE_BACKENDS = ("sklearn", "torch", "cuml")
PROBE_FAMILIES = ("logistic", "ridge", "knn")
EXTRACT_PRECISIONS = ("auto", "float64")  # stage 1 compute: "auto" (bf16 autocast on CUDA, float32 on CPU), "float64" (CPU)
SELECTIONS = ("logloss", "auroc", "nll")
"""Validation criteria that choose C: log-loss (the default; a proper scoring rule, so the chosen C also
serves calibration), macro one-vs-rest AUROC, or ``nll`` (another name for log-loss)."""
VALIDATIONS = ("fraction", "full")
"""Validation split that chooses C: drawn at the training subset's label fraction, or the full split."""
ROBUSTNESS_FRACTIONS = ("full", "all")
"""Which probes are evaluated on the corrupted and shifted conditions: those of the full label
fraction (the only ones the robustness axis and the report read; the default), or every probe."""


def probe_grid(family: str, Cs: tuple[float, ...] | None = None) -> tuple[float, ...]:
    """The C grid a probe tries: ``Cs`` when given, else the family's default (neighbour counts for knn).

    The one place ``Cs = None`` is resolved, for a spec and for :func:`crs.probes.fit_probes` alike.
    """
    if Cs is not None:
        return tuple(float(c) for c in Cs)
    return tuple(float(k) for k in DEFAULT_KS) if family == "knn" else DEFAULT_CS


PLACEHOLDER = "FILL IN: "
"""Start of a value ``crs init --from-bundle`` leaves for the user (a folder on this machine); a spec that
still holds one is refused with the setting's name."""


class SpecError(ValueError):
    """A spec is malformed; the message names the field and what is expected.

    ``problems``: every problem found, one line each (one error reports them all at once).
    """

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


def _raise_problems(problems: Sequence[str], unknown: int = 0) -> None:
    """One :class:`SpecError` holding every problem (``unknown``: how many of them are unknown-key lines)."""
    problems = list(dict.fromkeys(problems))  # one line per problem, in the order found
    if not problems:
        return
    if len(problems) == 1:
        raise SpecError(problems[0])
    if unknown == len(problems):
        raise SpecError(f"unknown fields in {len(problems)} tables: " + " | ".join(problems), problems)
    raise SpecError(f"{len(problems)} problems in the spec: " + " | ".join(problems), problems)


SETTING_ATTRIBUTE = "crs_setting"
"""Attribute a library error may carry: the spec setting (``cache``, ``output``, ``shard`` ...) that fixes it.

Library messages speak of settings, never of command-line flags; the CLI names the flag of that setting.
"""


def for_setting(error: BaseException, setting: str) -> BaseException:
    """Tag ``error`` with the setting that fixes it (``raise for_setting(CacheError(...), "cache")``)."""
    setattr(error, SETTING_ATTRIBUTE, setting)
    return error


# --- field checks shared by the configs ----------------------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
}


def _scalar(where: str, key: str, value: Any, kind: str) -> Any:
    """``value`` checked as one ``kind`` (an int passes as a float, a bool never as a number)."""
    if kind == "bool":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, _TYPES[kind]) and not isinstance(value, bool)
    if not ok:
        raise SpecError(f"{where}: field {key!r} must be {kind}, got {type(value).__name__} {value!r}")
    return float(value) if kind == "float" else value


def _items(where: str, key: str, value: Any, kind: str) -> tuple:
    """A non-empty list (TOML) or tuple (Python) of ``kind``, as a tuple."""
    if not isinstance(value, list | tuple) or not value:
        raise SpecError(f"{where}: field {key!r} must be a non-empty list of {kind}, got {value!r}")
    return tuple(_scalar(where, key, item, kind) for item in value)


def _path(where: str, key: str, value: Any) -> Path:
    if isinstance(value, Path):
        return value
    return Path(_scalar(where, key, value, "str")).expanduser()


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):/")
"""A URL's scheme (two letters or more, so a Windows drive ``C:/`` is a path); ``Path`` keeps one slash of ``//``."""
URL_EXTRAS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3")}
"""Object-storage schemes crs knows: the package that serves each and the crs extra that installs it."""


def url_scheme(value: Any) -> str | None:
    """The scheme of a URL (``s3`` of ``s3://bucket/prefix``, lower case), None for a path."""
    match = _URL.match(str(value)) if isinstance(value, str | Path) else None
    return None if match is None else match.group(1).lower()


def refuse_cache_url(where: str, value: Any, servable: bool = False) -> None:
    """Refuse a cache given as a URL (``s3://bucket/prefix``) in one line naming the fix.

    Without this, ``Path("s3://bucket/prefix")`` is the relative folder ``s3:/bucket/prefix`` and a run
    writes a local folder named ``s3:``. A URL is never resolved as a path. ``servable``: the caller
    serves an ``s3://`` cache through a local mirror (decision 0178), so only a scheme crs cannot serve,
    or one whose package is missing, is refused.
    """
    scheme = url_scheme(value)
    if scheme is None:
        return
    if scheme not in URL_EXTRAS:
        raise SpecError(f"{where}: the cache {value} is a {scheme}:// URL, which crs cannot serve; "
                        "give a local or shared folder, or an s3:// URL")
    package, extra = URL_EXTRAS[scheme]
    if importlib.util.find_spec(package) is None:
        raise SpecError(f"{where}: the cache {value} is an {scheme}:// URL and {package} is not installed; "
                        f"pip install 'crs[{extra}]'")
    if servable:
        return
    raise SpecError(f"{where}: the cache {value} is an {scheme}:// URL; this command needs a folder: "
                    f"give the mirror folder, or `crs cache pull {value} FOLDER` first (docs/cache.md)")


MIRROR_VARIABLE = "CRS_CACHE_MIRROR"
"""Environment variable naming the folder that holds the local mirrors of URL caches (decision 0178)."""


def cache_url_text(value: Any) -> str:
    """A cache URL as written (``Path`` keeps one slash of ``s3://``: put the second back)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.\-]+):/(?!/)", r"\1://", str(value))


def mirror_folder(url: str) -> Path:
    """The local folder that mirrors the cache at ``url``: ``$CRS_CACHE_MIRROR`` (else
    ``$XDG_CACHE_HOME/crs/mirrors``, else ``~/.cache/crs/mirrors``) / the URL's sha256, 16 hex digits.
    Only the URL's digest names it: no bucket name or credential lands in a path."""
    root = os.environ.get(MIRROR_VARIABLE)
    if not root:
        root = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crs" / "mirrors")
    return Path(root).expanduser() / hashlib.sha256(url.encode()).hexdigest()[:16]


SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
              "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def cache_budget_bytes(value: Any, where: str = "spec") -> int | None:
    """``cache_budget`` in bytes: a whole number of bytes or text such as "8 GiB" / "500 MB"; None for
    "auto" (or unset): the read-through then takes a quarter of its disk's free space (decision 0187)."""
    if value is None or value == "auto":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number, unit = float(value), ""
    else:
        found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value) if isinstance(value, str) else None
        if found is None or found.group(2).lower() not in SIZE_UNITS:
            raise SpecError(f"{where}: cache_budget must be \"auto\", a number of bytes or a size such as "
                            f"\"8 GiB\" or \"500 MB\", got {value!r}")
        number, unit = float(found.group(1)), found.group(2).lower()
    size = int(number * SIZE_UNITS[unit])
    if size < 1:
        raise SpecError(f"{where}: cache_budget must be at least 1 byte, got {value!r}")
    return size


def _one_of(where: str, key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if _scalar(where, key, value, "str") not in allowed:
        raise SpecError(f"{where}: field {key!r} must be one of {allowed}, got {value!r}")
    return value


def _unknown_message(where: str, table: dict[str, Any], allowed: set[str] | tuple[str, ...] | list[str]) -> str | None:
    """One table's unknown keys, each with its "did you mean" where one is close (None: none unknown)."""
    unknown = sorted(set(table) - set(allowed))
    if not unknown:
        return None
    guesses = {key: difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6) for key in unknown}
    hint = "; ".join(f"did you mean {close[0]!r} for {key!r}?" for key, close in guesses.items() if close)
    every_guessed = all(guesses.values())  # the allowed list only where some key has no close guess
    return (f"{where}: unknown field(s) {unknown}" + (f"; {hint}" if hint else "")
            + ("" if every_guessed else f"; allowed: {sorted(allowed)}"))


def _reject_unknown(where: str, table: dict[str, Any], allowed: set[str] | tuple[str, ...]) -> None:
    message = _unknown_message(where, table, allowed)
    if message:
        raise SpecError(message)


def _set(config: Any, **values: Any) -> None:
    """Store normalised values on a frozen config (lists become tuples, ints become floats)."""
    for key, value in values.items():
        object.__setattr__(config, key, value)


def _label(kind: str, name: Any) -> str:
    return f"{kind} {name!r}" if isinstance(name, str) else kind


# --- the configs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetEntry:
    """One data set of the spec and its shift targets (other sites evaluated with its probes, in order).

    ``shift_targets`` also takes one entry; a target has no targets of its own.
    """

    name: str
    loader: str
    root: Path
    options: dict[str, Any] = field(default_factory=dict)
    shift_targets: tuple[DatasetEntry, ...] = ()

    def __post_init__(self) -> None:
        where = _label("dataset", self.name)
        _scalar(where, "name", self.name, "str")
        _scalar(where, "loader", self.loader, "str")
        _set(self, root=_path(where, "root", self.root))
        if not isinstance(self.options, dict):
            raise SpecError(f"{where}: field 'options' must be a table, got {self.options!r}")
        _set(self, options=dict(self.options))
        targets = self.shift_targets
        if isinstance(targets, DatasetEntry):
            targets = (targets,)
        if not isinstance(targets, list | tuple):
            raise SpecError(f"{where}: field 'shift_targets' must be a list of data set tables, got {targets!r}")
        for target in targets:
            if not isinstance(target, DatasetEntry):
                raise SpecError(f"{where}: a shift target must be a data set table, got {target!r}")
            if target.shift_targets:
                raise SpecError(f"{where}: its shift target {target.name!r} cannot have a shift_target of its own")
        _set(self, shift_targets=tuple(targets))

    @property
    def shift_target_names(self) -> tuple[str, ...]:
        """The names of this data set's shift targets, in spec order (each names its cache store)."""
        return tuple(target.name for target in self.shift_targets)


@dataclass(frozen=True)
class EncoderEntry:
    """One encoder of the spec. ``datasets``: the data sets it runs on (a specialist on its own
    modality, e.g. RETFound on fundus only); None, the default, means every data set of the spec.
    Its probes are evaluated on those data sets' shift targets too (docs/decisions/0038)."""

    name: str
    weights: str | None = None
    input_size: int | None = None
    datasets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        where = _label("encoder", self.name)
        if not _scalar(where, "name", self.name, "str"):
            raise SpecError(f"{where}: field 'name' must be a registered encoder name, got ''")
        if self.weights is not None:
            _scalar(where, "weights", self.weights, "str")
        if self.input_size is not None and _scalar(where, "input_size", self.input_size, "int") < 8:
            raise SpecError(f"{where}: input_size must be at least 8 pixels, got {self.input_size}")
        if self.datasets is not None:
            _set(self, datasets=_items(where, "datasets", self.datasets, "str"))
            repeated = sorted({name for name in self.datasets if self.datasets.count(name) > 1})
            if repeated:
                raise SpecError(f"{where}: data sets {repeated} are named more than once in its 'datasets'; name each once")


@dataclass(frozen=True)
class ExtractConfig:
    """Stage 1. ``chunk_rows`` caps the row chunks (sized so a kill loses little, decision 0031);
    ``threads`` = "auto" sets the forward pass's threads from the cores this process may use
    (affinity, cgroup quota) less those other processes keep busy; ``corruption_rows`` = N makes the
    corrupted variants for a fixed, stratified, patient-level subsample of about N test images per
    data set instead of the whole test split (decision 0032; unset: the whole split); ``precision`` =
    "float64" runs the encoders in float64 on the CPU, so features rounded to float16 agree across
    machines and thread counts by construction (decision 0176)."""

    batch_size: int = DEFAULT_BATCH_SIZE
    device: str = "cpu"
    corruptions: tuple[str, ...] | str = "all"
    severities: tuple[int, ...] = SEVERITIES
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    skip_bad: bool = False
    threads: int | str = "auto"  # intra-op threads on CPU; "auto": the usable cores others leave free
    corruption_rows: int | None = None  # corrupted variants for a patient-level subsample of about N test images
    precision: str = "auto"  # "auto": bf16 autocast on CUDA, float32 on CPU; "float64": CPU only (decision 0176)

    def __post_init__(self) -> None:
        where = "extract"
        if self.corruption_rows is not None and _scalar(where, "corruption_rows", self.corruption_rows, "int") < 1:
            raise SpecError(f"{where}: corruption_rows must be a positive number of test images (leave it out for "
                            f"the whole test split), got {self.corruption_rows}")
        if self.threads != "auto" and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                       or self.threads < 1):
            raise SpecError(f"{where}: threads must be \"auto\" or a number of threads (1 or more), got {self.threads!r}")
        _scalar(where, "device", self.device, "str")
        _one_of(where, "precision", self.precision, EXTRACT_PRECISIONS)
        if self.precision == "float64" and not self.device.startswith("cpu"):
            raise SpecError(f"{where}: precision = \"float64\" runs on the CPU only; set device = \"cpu\" "
                            f"or precision = \"auto\", got device {self.device!r}")
        _scalar(where, "skip_bad", self.skip_bad, "bool")
        if isinstance(self.corruptions, list | tuple) and not self.corruptions:
            _set(self, corruptions="none")  # an empty list: clean features only, as "none" says
        elif isinstance(self.corruptions, list | tuple):
            _set(self, corruptions=_items(where, "corruptions", self.corruptions, "str"))
        elif self.corruptions not in ("all", "none"):
            raise SpecError(
                f"{where}: field 'corruptions' must be \"all\", \"none\" (or []: clean features only) or a "
                f"list of names, got {self.corruptions!r}"
            )
        _set(self, severities=_items(where, "severities", self.severities, "int"))
        if any(s not in SEVERITIES for s in self.severities):
            raise SpecError(f"{where}: severities must lie in {SEVERITIES[0]}..{SEVERITIES[-1]}, got {self.severities}")
        if _scalar(where, "batch_size", self.batch_size, "int") < 1 or _scalar(where, "chunk_rows", self.chunk_rows, "int") < 1:
            raise SpecError(f"{where}: batch_size and chunk_rows must be positive")


@dataclass(frozen=True)
class ProbeConfig:
    """The stage-2 protocol. ``Cs = None`` means the family's default grid (:func:`probe_grid`, :attr:`grid`)."""

    backend: str = "sklearn"
    family: str = "logistic"
    label_fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    Cs: tuple[float, ...] | None = None
    selection: str = "logloss"
    validation: str = "fraction"
    robustness_fractions: str = "full"
    min_per_class: int = DEFAULT_MIN_PER_CLASS
    jobs: int | str = "auto"

    def __post_init__(self) -> None:
        where = "probe"
        _one_of(where, "backend", self.backend, PROBE_BACKENDS)
        _one_of(where, "family", self.family, PROBE_FAMILIES)
        _one_of(where, "selection", self.selection, SELECTIONS)
        _one_of(where, "validation", self.validation, VALIDATIONS)
        _one_of(where, "robustness_fractions", self.robustness_fractions, ROBUSTNESS_FRACTIONS)
        _set(self, label_fractions=_items(where, "label_fractions", self.label_fractions, "float"))
        _set(self, seeds=_items(where, "seeds", self.seeds, "int"))
        if any(not 0 < f <= 1 for f in self.label_fractions):
            raise SpecError(f"{where}: label_fractions must lie in (0, 1], got {self.label_fractions}")
        if 1.0 not in self.label_fractions:
            raise SpecError(f"{where}: label_fractions must include 1.0 (discrimination and robustness are read there)")
        if self.Cs is not None:
            _set(self, Cs=_items(where, "Cs", self.Cs, "float"))
            if any(not (c > 0 and math.isfinite(c)) for c in self.Cs):
                raise SpecError(f"{where}: Cs must be positive, got {self.Cs}")
            if self.family == "knn" and any(c != round(c) for c in self.Cs):
                raise SpecError(f"{where}: for the knn family Cs are neighbour counts (whole numbers >= 1), got {self.Cs}")
        if _scalar(where, "min_per_class", self.min_per_class, "int") < 1:
            raise SpecError(f"{where}: min_per_class must be at least 1, got {self.min_per_class}")
        if self.jobs != "auto" and _scalar(where, "jobs", self.jobs, "int") < 1:
            raise SpecError(f"{where}: jobs must be \"auto\" or a number of worker processes (1 or more), got {self.jobs}")

    @property
    def grid(self) -> tuple[float, ...]:
        """The C grid the probes try: ``Cs``, or the family's default when ``Cs`` is None."""
        return probe_grid(self.family, self.Cs)


@dataclass(frozen=True)
class ScoreConfig:
    """Scoring choices. An empty ``reference_encoder`` means ``"median"``: the virtual cohort-median
    encoder (per-axis median error; docs/decisions, median reference)."""

    reference_encoder: str = ""
    weights: dict[str, float] | None = None
    n_boot: int = DEFAULT_N_BOOT
    seed: int = 0
    case_bootstrap: bool = True
    equity: bool = False
    """The optional fifth axis: the worst-group AUROC (docs/subgroups.md); off keeps the four-axis CRS."""
    interval: str = "adaptive"
    """How the CRS and axis intervals are made: "adaptive" (default: the CRS's smooth part plus the dominance
    range per encoder, measured level, the axes the simultaneous box's; decisions 0180, 0181), "box" (the
    simultaneous box projected through the score for the CRS too, decision 0128) or "percentile" (the
    paper's percentile interval, printed with its measured level)."""
    headline: str = "smooth"
    """How the headline's "surely above" is read off its one family: "smooth" (default: the smooth part of
    the CRS joins the family, decision 0180), "bound" (decision 0166), "stepdown" or "pretest" (measured
    options, docs/crs.md 7b)."""
    reference_competes: bool = False
    """A named reference competes for the lead as in the paper's table; off, it is a baseline row left out of
    P(rank 1), the leading tier and the headline's leader (docs/crs.md section 4)."""
    subgroup_min_images: int = 50
    """Smallest patient subgroup scored (test images); smaller ones are reported as too small."""
    subgroup_min_positives: int = 10
    """Smallest number of positives per label in a scored subgroup."""
    zero_shot: bool = False
    """Zero-shot reliability of the vision-language encoders beside the probes (docs/zero_shot.md); off
    keeps the four-axis CRS and every table as they were."""
    prompts: dict[str, list[str]] | None = None
    """Data set name -> prompt files (TOML) for its zero-shot prototypes; a data set not named uses the
    built-in set. Several files give the spread over prompt sets."""

    def __post_init__(self) -> None:
        where = "score"
        _scalar(where, "reference_encoder", self.reference_encoder, "str")
        if _scalar(where, "equity", self.equity, "bool") and not self.case_bootstrap:
            raise SpecError(f"{where}: equity = true needs case_bootstrap = true (the worst-group AUROC is measured "
                            "on the per-case predictions); set both, or drop equity")
        for name in ("subgroup_min_images", "subgroup_min_positives"):
            if _scalar(where, name, getattr(self, name), "int") < 1:
                raise SpecError(f"{where}: {name} must be at least 1, got {getattr(self, name)}")
        _scalar(where, "seed", self.seed, "int")
        if _scalar(where, "interval", self.interval, "str") not in ("adaptive", "box", "percentile"):
            raise SpecError(f"{where}: interval must be 'adaptive', 'box' or 'percentile', got {self.interval!r}")
        headlines = ("smooth", "bound", "stepdown", "pretest")
        if _scalar(where, "headline", self.headline, "str") not in headlines:
            raise SpecError(f"{where}: headline must be one of {', '.join(map(repr, headlines))}, got {self.headline!r}")
        _scalar(where, "case_bootstrap", self.case_bootstrap, "bool")
        _scalar(where, "zero_shot", self.zero_shot, "bool")
        _scalar(where, "reference_competes", self.reference_competes, "bool")
        if self.prompts is not None:
            if not isinstance(self.prompts, dict):
                raise SpecError(f"{where}: field 'prompts' must be a table of data set = [prompt files]")
            _set(self, prompts={str(k): list(_items(f"{where}.prompts", str(k), [v] if isinstance(v, str) else v, "str"))
                                for k, v in self.prompts.items()})
        if _scalar(where, "n_boot", self.n_boot, "int") < 1:
            raise SpecError(f"{where}: n_boot must be at least 1, got {self.n_boot}")
        if self.weights is not None:
            if not isinstance(self.weights, dict):
                raise SpecError(
                    f"{where}: field 'weights' must be a table of CRS component = weight ({', '.join(COMPONENTS)})"
                )
            _reject_unknown(f"{where}.weights", self.weights, COMPONENTS)
            weights = {k: _scalar(f"{where}.weights", k, v, "float") for k, v in self.weights.items()}
            values = list(weights.values())
            if any(not (v >= 0 and math.isfinite(v)) for v in values) or sum(values) <= 0:
                raise SpecError(f"{where}.weights: weights must be finite, non-negative and not all zero, got {weights}")
            _set(self, weights=weights)


@dataclass(frozen=True)
class Spec:
    name: str
    cache: Path
    output: Path
    encoders: tuple[EncoderEntry, ...]
    datasets: tuple[DatasetEntry, ...]
    extract: ExtractConfig = ExtractConfig()
    probe: ProbeConfig = ProbeConfig()
    score: ScoreConfig = ScoreConfig()
    source: Path | None = None
    cache_url: str | None = None
    """The object-storage cache (``s3://bucket/prefix``) that ``cache``, its local mirror, is kept in step
    with (decision 0178); None for a cache folder. Given a URL as ``cache``, the spec moves it here."""
    cache_budget: int | str | None = None
    """A URL cache's read-through: the bytes of feature chunks stage 2 may keep in the mirror ("8 GiB";
    None or "auto": a quarter of the mirror disk's free space; decision 0187). Not used for a folder."""

    def __post_init__(self) -> None:
        where = "spec"
        if not _scalar(where, "name", self.name, "str"):
            raise SpecError(f"{where}: field 'name' must be a non-empty string")
        url = self.cache_url if self.cache_url is not None else self.cache
        if url_scheme(url) is not None:
            url = cache_url_text(url)
            refuse_cache_url(where, url, servable=True)
            _set(self, cache_url=url, cache=mirror_folder(url))
        elif self.cache_url is not None:
            raise SpecError(f"{where}: field 'cache_url' must be a URL such as s3://bucket/prefix, got {url!r}")
        cache_budget_bytes(self.cache_budget, where)
        _set(self, cache=_path(where, "cache", self.cache), output=_path(where, "output", self.output))
        if self.source is not None:
            _set(self, source=_path(where, "source", self.source))
        for key, cls in (("encoders", EncoderEntry), ("datasets", DatasetEntry)):
            entries = getattr(self, key)
            if not isinstance(entries, list | tuple) or not entries:
                raise SpecError(f"{where}: field {key!r} must be a non-empty list of {cls.__name__}, got {entries!r}")
            wrong = [entry for entry in entries if not isinstance(entry, cls)]
            if wrong:
                raise SpecError(f"{where}: field {key!r} holds {wrong[0]!r}, expected {cls.__name__}")
            _set(self, **{key: tuple(entries)})
        configs: tuple[tuple[str, type], ...] = (
            ("extract", ExtractConfig), ("probe", ProbeConfig), ("score", ScoreConfig)
        )
        for key, config in configs:
            if not isinstance(getattr(self, key), config):
                raise SpecError(f"{where}: field {key!r} must be a {config.__name__}, got {getattr(self, key)!r}")
        names = self.encoder_names
        if len(set(names)) != len(names):
            raise SpecError(f"{where}: encoder names repeat: {names}")
        _check_dataset_names(self.datasets)
        reference = self.score.reference_encoder or MEDIAN_REFERENCE
        if reference != MEDIAN_REFERENCE and reference not in names:
            raise SpecError(
                f"score: reference_encoder {reference!r} is not among the encoders {names} (or {MEDIAN_REFERENCE!r})"
            )
        _check_coverage(self.encoders, self.datasets, reference)
        _set(self, score=replace(self.score, reference_encoder=reference))

    @property
    def encoder_names(self) -> list[str]:
        return [entry.name for entry in self.encoders]

    def encoders_on(self, dataset: str) -> list[str]:
        """The encoders that run on ``dataset`` (a data set of the spec), in the spec's encoder order."""
        if dataset not in (entry.name for entry in self.datasets):
            raise SpecError(f"spec: no data set named {dataset!r}; it names {[entry.name for entry in self.datasets]}")
        return [entry.name for entry in self.encoders if entry.datasets is None or dataset in entry.datasets]

    @property
    def coverage(self) -> dict[str, tuple[str, ...]]:
        """Data set (task) -> the encoders that run on it, in spec order: the (encoder, task) pairs stage 1
        extracts, stage 2 probes and the score ranks (docs/decisions/0038)."""
        return {entry.name: tuple(self.encoders_on(entry.name)) for entry in self.datasets}

    @property
    def complete_coverage(self) -> bool:
        """True when every encoder runs on every data set: one leaderboard, no per-task ones."""
        return all(len(chosen) == len(self.encoders) for chosen in self.coverage.values())


def _check_coverage(encoders: tuple[EncoderEntry, ...], datasets: tuple[DatasetEntry, ...], reference: str) -> None:
    """An encoder's ``datasets`` name data sets of the spec; the reference, and at least one encoder, run on
    every data set (the overall leaderboard is over the encoders that run on every data set)."""
    if all(entry.datasets is None for entry in encoders):
        return
    names = [entry.name for entry in datasets]
    targets = {target.name: entry.name for entry in datasets for target in entry.shift_targets}
    for encoder in encoders:
        for name in encoder.datasets or ():
            if name in targets:
                raise SpecError(
                    f"encoder {encoder.name!r}: {name!r} in its 'datasets' is a shift target of data set "
                    f"{targets[name]!r}; name {targets[name]!r} (its probes are evaluated on its shift targets)"
                )
            if name not in names:
                raise SpecError(
                    f"encoder {encoder.name!r}: {name!r} in its 'datasets' is not a data set of the spec {names}; "
                    "fix the name or add the [[datasets]] table"
                )
    everywhere = [e.name for e in encoders if e.datasets is None or set(names) <= set(e.datasets)]
    if not everywhere:
        raise SpecError(
            "spec: no encoder runs on every data set, so there is no overall leaderboard; let at least one "
            "encoder run on every data set (leave out its 'datasets')"
        )
    if reference != MEDIAN_REFERENCE and reference not in everywhere:
        runs_on = next(e.datasets or () for e in encoders if e.name == reference)
        missing = [name for name in names if name not in runs_on]
        raise SpecError(
            f"score: reference_encoder {reference!r} does not run on data sets {missing}; the reference must run "
            f"on every data set: drop its 'datasets', or name one of {everywhere} or {MEDIAN_REFERENCE!r}"
        )


def _check_dataset_names(datasets: tuple[DatasetEntry, ...]) -> None:
    """Every data set and shift target needs its own name: it names the cache store and the records' rows."""
    seen: dict[str, str] = {}
    for entry in datasets:
        places = [(entry.name, f"data set {entry.name!r}")]
        places += [(target.name, f"shift target {target.name!r} of data set {entry.name!r}") for target in entry.shift_targets]
        for name, place in places:
            if name in seen:
                raise SpecError(
                    f"spec: data set names repeat: {place} and {seen[name]} are both named {name!r}; "
                    "give each data set and shift target its own name (it names its cache store)"
                )
            seen[name] = place


# --- TOML -> configs -----------------------------------------------------------------------------------

C = TypeVar("C")


def _require(where: str, table: dict[str, Any], key: str) -> Any:
    if key not in table:
        raise SpecError(f"{where}: missing required field {key!r}")
    return table[key]


def _table(where: str, value: Any, allowed: set[str] | tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{where}: must be a table, got {value!r}")
    _reject_unknown(where, value, allowed)
    return value


def _config(key: str, config: type[C], data: dict[str, Any], problems: list[str]) -> C | None:
    """One ``[extract]`` / ``[probe]`` / ``[score]`` table; the config checks its own values.

    On a bad value each field is tried alone, so every bad field of the table is reported, not the
    first one only (a check across fields shows once the fields themselves are right).
    """
    table = data.get(key, {})
    if not isinstance(table, dict):
        problems.append(f"{key}: must be a table, got {table!r}")
        return None
    names = {f.name for f in fields(config)}  # type: ignore[arg-type]
    known = {k: v for k, v in table.items() if k in names}  # unknown keys are said apart
    try:
        return config(**known)
    except SpecError as error:
        alone = []
        for name, value in known.items():
            try:
                config(**{name: value})
            except SpecError as one:
                alone.append(str(one))
        problems.extend(alone or [str(error)])
        return None


def _under(base: Path, value: Any) -> Any:
    """A path string resolved against ``base`` (anything else is left for the config's own check)."""
    if not isinstance(value, str):
        return value
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _is_map_file(value: Any) -> bool:
    """A ``label_map`` option naming a TOML file (a path), not a shipped map (a bare name)."""
    return isinstance(value, str) and (value.endswith(".toml") or "/" in value or os.sep in value)


def _cache_setting(value: Any) -> Any:
    """The spec's ``cache`` before it is resolved as a path: a URL crs cannot serve is refused, and a URL is
    never joined to the spec's folder."""
    refuse_cache_url("spec", value, servable=True)
    return value


def _dataset(where: str, value: Any, base: Path, allow_shift: bool = True) -> DatasetEntry:
    allowed = {"name", "loader", "root", "options"} | ({"shift_target"} if allow_shift else set())
    table = dict(_table(where, value, allowed))
    for key in ("name", "loader", "root"):
        _require(where, table, key)
    table["root"] = _under(base, table["root"])
    options = table.get("options")
    if isinstance(options, dict) and _is_map_file(options.get("label_map")):
        table["options"] = {**options, "label_map": str(_under(base, options["label_map"]))}
    if "shift_target" in table:
        table["shift_targets"] = _shift_targets(f"{where}.shift_target", table.pop("shift_target"), base)
    return DatasetEntry(**table)


def _shift_targets(where: str, value: Any, base: Path) -> tuple[DatasetEntry, ...]:
    """``shift_target``: one table, or an array of tables (``[[datasets.shift_target]]``) for several sites."""
    if isinstance(value, dict):
        return (_dataset(where, value, base, allow_shift=False),)
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: must be a table or a non-empty array of tables ([[datasets.shift_target]]), "
                        f"got {value!r}")
    return tuple(_dataset(f"{where}[{i}]", item, base, allow_shift=False) for i, item in enumerate(value))


def _encoders(value: Any, defaults: dict[str, Any], problems: list[str]) -> tuple[EncoderEntry, ...] | None:
    if not isinstance(value, list) or not value:
        problems.append("spec: field 'encoders' must be a non-empty list of names or tables")
        return None
    entries = []
    for i, item in enumerate(value):
        where = f"encoders[{i}]"
        if not isinstance(item, str | dict):
            problems.append(f"{where}: must be a name or a table, got {item!r}")
            continue
        table = {"name": item} if isinstance(item, str) else {k: v for k, v in item.items() if k in ENCODER_FIELDS}
        merged = {**defaults, **table}
        if "name" not in merged:
            problems.append(f"{where}: missing required field 'name'")
            continue
        try:
            entries.append(EncoderEntry(**merged))
        except SpecError as error:
            problems.append(str(error))
    return tuple(entries) if len(entries) == len(value) else None


TOP_FIELDS = ("name", "cache", "cache_budget", "output", "encoders", "encoder_defaults", "datasets", "extract", "probe", "score")
ENCODER_FIELDS = ("name", "weights", "input_size", "datasets")
DATASET_FIELDS = ("name", "loader", "root", "options", "shift_target")


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """One line per table of a spec mapping with unknown keys, each key with its "did you mean" where one is close.

    One pass over the whole spec, so two typos are reported together rather than one per run; tables of
    the wrong type are left to the checks that follow.
    """
    found: list[str] = []

    def visit(where: str, table: Any, allowed: Sequence[str]) -> None:
        message = _unknown_message(where, table, list(allowed)) if isinstance(table, dict) else None
        if message:
            found.append(message)

    visit("spec", data, TOP_FIELDS)
    visit("encoder_defaults", data.get("encoder_defaults"), ("weights", "input_size"))
    encoders = data.get("encoders")
    for i, item in enumerate(encoders if isinstance(encoders, list) else []):
        visit(f"encoders[{i}]", item, ENCODER_FIELDS)
    datasets = data.get("datasets")
    for i, item in enumerate(datasets if isinstance(datasets, list) else []):
        visit(f"datasets[{i}]", item, DATASET_FIELDS)
        target = item.get("shift_target") if isinstance(item, dict) else None
        for j, one in enumerate([target] if isinstance(target, dict) else target if isinstance(target, list) else []):
            where = "shift_target" if isinstance(target, dict) else f"shift_target[{j}]"
            visit(f"datasets[{i}].{where}", one, DATASET_FIELDS[:-1])
    for key, config in (("extract", ExtractConfig), ("probe", ProbeConfig), ("score", ScoreConfig)):
        visit(key, data.get(key), [f.name for f in fields(config)])
    score = data.get("score")
    if isinstance(score, dict):
        visit("score.weights", score.get("weights"), COMPONENTS)
    return found


def _known_keys(table: Any, allowed: Sequence[str]) -> Any:
    """``table`` without its unknown keys (those are reported apart), so its values can still be checked."""
    return {k: v for k, v in table.items() if k in allowed} if isinstance(table, dict) else table


def _checked(check: Any, *args: Any, problems: list[str]) -> Any:
    """``check(*args)``, its :class:`SpecError` kept in ``problems`` (then None) instead of raised."""
    try:
        return check(*args)
    except SpecError as error:
        problems.append(str(error))
        return None


def parse_spec(data: dict[str, Any], base: Path = Path(".")) -> Spec:
    """Validate a spec mapping (as read from TOML) into a :class:`Spec`; relative paths resolve against ``base``.

    Every problem of the spec is reported at once, in one :class:`SpecError` (``problems``: one line
    each): unknown keys anywhere, missing fields and bad values of every table. Checks across tables
    (coverage, the reference among the encoders) run once those are right.
    """
    unknown = unknown_fields(data)
    problems = list(unknown)
    problems += [f"{key} is still a placeholder ({value[len(PLACEHOLDER):]}); write it in the spec"
                 for key, value in spec_paths(data) if value.startswith(PLACEHOLDER)]
    name = data.get("name")
    if "name" not in data:
        problems.append("spec: missing required field 'name'")
    elif not isinstance(name, str) or not name:
        problems.append(f"spec: field 'name' must be a non-empty string, got {name!r}")
    if "cache" in data and _checked(_cache_setting, data["cache"], problems=problems) is None:
        data = {key: value for key, value in data.items() if key != "cache"}  # refused as a URL: reported once
    for key in ("cache", "output"):
        if key in data:
            _checked(_path, "spec", key, data[key], problems=problems)
    if _checked(cache_budget_bytes, data.get("cache_budget"), problems=problems) is None and \
            data.get("cache_budget") not in (None, "auto"):
        data = {key: value for key, value in data.items() if key != "cache_budget"}  # reported once
    defaults = data.get("encoder_defaults", {})
    if not isinstance(defaults, dict):
        problems.append("spec: field 'encoder_defaults' must be a table")
        defaults = {}
    defaults = _known_keys(defaults, ("weights", "input_size"))
    encoders = None
    if "encoders" not in data:
        problems.append("spec: missing required field 'encoders'")
    else:
        encoders = _encoders(data["encoders"], defaults, problems)
    raw_datasets = data.get("datasets")
    datasets: list[DatasetEntry] = []
    if "datasets" not in data:
        problems.append("spec: missing required field 'datasets'")
    elif not isinstance(raw_datasets, list) or not raw_datasets:
        problems.append("spec: field 'datasets' must be a non-empty list of [[datasets]] tables")
    else:
        for i, table in enumerate(raw_datasets):
            known = _known_keys(table, DATASET_FIELDS)
            if isinstance(known, dict) and isinstance(known.get("shift_target"), dict | list):
                target = known["shift_target"]
                known["shift_target"] = (_known_keys(target, DATASET_FIELDS[:-1]) if isinstance(target, dict)
                                         else [_known_keys(t, DATASET_FIELDS[:-1]) for t in target])
            entry = _checked(_dataset, f"datasets[{i}]", known, base, problems=problems)
            if entry is not None:
                datasets.append(entry)
    extract = _config("extract", ExtractConfig, data, problems)
    probe = _config("probe", ProbeConfig, data, problems)
    score = _config("score", ScoreConfig, _prompt_paths(data, base), problems)
    _raise_problems(problems, unknown=len(unknown))
    return Spec(
        name=name,  # type: ignore[arg-type]
        cache=data["cache"] if url_scheme(data.get("cache")) else _under(base, data.get("cache", "cache")),
        cache_budget=data.get("cache_budget"),
        output=_under(base, data.get("output", f"crs-out/{name}")),
        encoders=encoders,  # type: ignore[arg-type]
        datasets=tuple(datasets),
        extract=extract,  # type: ignore[arg-type]
        probe=probe,  # type: ignore[arg-type]
        score=score,  # type: ignore[arg-type]
    )


def _prompt_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """``[score] prompts`` file names resolved against the spec's folder, as data set roots are."""
    score = data.get("score")
    if not isinstance(score, dict) or not isinstance(score.get("prompts"), dict):
        return data
    prompts = {k: [str(_under(base, f)) for f in ([v] if isinstance(v, str) else v)] if isinstance(v, str | list) else v
               for k, v in score["prompts"].items()}
    return {**data, "score": {**score, "prompts": prompts}}


def spec_paths(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(setting, value) of every path a spec mapping gives or implies: cache, output, data set roots,
    label-map files and prompt files (defaults included). The one list :func:`load_spec` resolves."""
    found: list[tuple[str, Any]] = []
    name = data.get("name", "")
    for key, default in (("cache", "cache"), ("output", f"crs-out/{name}")):
        found.append((key, data.get(key, default)))
    datasets = data.get("datasets")
    for i, table in enumerate(datasets if isinstance(datasets, list) else []):
        if not isinstance(table, dict):
            continue
        target = table.get("shift_target")
        targets = [target] if isinstance(target, dict) else target if isinstance(target, list) else []
        for where, one in [(f"datasets[{i}]", table)] + [(f"datasets[{i}].shift_target", t) for t in targets]:
            if not isinstance(one, dict):
                continue
            found.append((f"{where}.root", one.get("root")))
            options = one.get("options")
            if isinstance(options, dict) and _is_map_file(options.get("label_map")):
                found.append((f"{where}.options.label_map", options["label_map"]))
    score = data.get("score")
    prompts = score.get("prompts") if isinstance(score, dict) else None
    for task, files in (prompts.items() if isinstance(prompts, dict) else []):
        for file in [files] if isinstance(files, str) else files if isinstance(files, list) else []:
            found.append((f"score.prompts.{task}", file))
    return [(key, value) for key, value in found if isinstance(value, str)]


def _holds_this_specs_work(key: str, folder: Path, data: Mapping[str, Any]) -> bool:
    """Whether ``folder`` (the old meaning of ``cache`` or ``output``) holds this spec's work: a store of one of
    its data sets (``<name>.zarr``) or a run folder's records. A stray ``cache/`` folder is no reason to warn."""
    if key == "output":
        return (folder / "records.parquet").is_file()
    datasets = data.get("datasets")
    names = [t.get("name") for t in datasets if isinstance(t, dict)] if isinstance(datasets, list) else []
    return any((folder / f"{name}.zarr").is_dir() for name in names if isinstance(name, str))


def moved_paths(data: Mapping[str, Any], spec_folder: Path, working_folder: Path) -> list[str]:
    """One line per relative path that an older crs (relative to the working folder) read elsewhere:
    it exists under the working folder but not under the spec's folder, where it now resolves (for
    ``cache`` and ``output``: only when the working folder's one holds this spec's stores or records)."""
    if spec_folder.resolve() == working_folder.resolve():
        return []
    lines = []
    for key, value in spec_paths(data):
        path = Path(value).expanduser()
        if path.is_absolute() or value.startswith(PLACEHOLDER):
            continue
        new, old = spec_folder / path, working_folder / path
        if key in ("cache", "output") and not _holds_this_specs_work(key, old, data):
            continue
        if old.exists() and not new.exists():
            relative = os.path.relpath(old.resolve(), spec_folder.resolve())
            keep = f"{relative!r} or an absolute path" if relative.count("..") <= 2 else repr(str(old.resolve()))
            lines.append(f"{key} = {value!r} resolves against the spec's folder ({new}, not there), no longer against "
                         f"the working folder ({old}, which exists); to keep using that one write {keep}")
    return lines


def load_spec(path: Path | str, base: Path | None = None) -> Spec:
    """Read and validate a TOML spec. Relative paths resolve against ``base`` (default: the spec file's folder).

    Where a relative path exists under the working folder but not under the spec's folder (a spec
    written when crs resolved against the working folder), one warning line per path says so.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file not found: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML ({error})") from error
    folder = path.absolute().parent
    spec = parse_spec(data, base if base is not None else folder)
    if base is None:
        for line in moved_paths(data, folder, Path.cwd()):
            log.warning("%s: %s", path, line)
    return replace(spec, source=path)


def spec_to_dict(spec: Spec) -> dict[str, Any]:
    """A JSON-friendly copy of the spec, embedded in run records for provenance."""

    def convert(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, tuple | list):
            return [convert(v) for v in value]
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if hasattr(value, "__dataclass_fields__"):
            return {f.name: convert(getattr(value, f.name)) for f in fields(value)}
        return value

    plain = convert(spec)
    if plain.get("cache_url") is None:
        plain.pop("cache_url", None)  # a folder cache's records stay as they were before URL caches
    if plain.get("cache_budget") is None:
        plain.pop("cache_budget", None)  # likewise: records without a budget stay as they were
    return plain


def spec_from_dict(data: Mapping[str, Any]) -> Spec:
    """The :class:`Spec` that :func:`spec_to_dict` wrote (e.g. the copy embedded in run records).

    Lists become tuples and path strings paths again, guided by each config's type hints; a field this
    crs version does not know is refused with its name (the run was written by another version: give
    the TOML spec instead). Checks that the configs run on construction run here too.
    """
    return _from_plain(Spec, data, "spec")


def _from_plain(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise SpecError(f"{where}: must be a table, got {data!r}")
    data = _upgrade(cls, data)
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(
            f"{where}: unknown field(s) {unknown} (written by another crs version?); load the TOML spec instead"
        )
    return cls(**{key: _plain_value(hints[key], value, f"{where}.{key}") for key, value in data.items()})


def _upgrade(cls: type, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A table an older crs wrote, in today's fields: a run folder's embedded spec outlives a release.

    Before several shift targets, a data set held one ``shift_target`` (a table or None).
    """
    if cls is DatasetEntry and "shift_target" in data and "shift_targets" not in data:
        upgraded = dict(data)
        target = upgraded.pop("shift_target")
        upgraded["shift_targets"] = [] if target is None else [target]
        return upgraded
    return data


def _plain_value(hint: Any, value: Any, where: str) -> Any:
    """``value`` (JSON types) as the type ``hint`` names: tuples, paths and nested configs."""
    if value is None:
        return None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        members = [a for a in args if a is not type(None)]
        fitting = [a for a in members if _plain_fits(a, value)] or members
        return _plain_value(fitting[0], value, where)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise SpecError(f"{where}: must be a list, got {value!r}")
        return tuple(_plain_value(args[0], item, where) for item in value)
    if hint is Path:
        return Path(value)
    if isinstance(hint, type) and is_dataclass(hint):
        return _from_plain(hint, value, where)
    if origin is dict:
        return dict(value)
    return value


def _plain_fits(hint: Any, value: Any) -> bool:
    origin = get_origin(hint)
    if origin is tuple:
        return isinstance(value, list | tuple)
    if origin is dict or (isinstance(hint, type) and is_dataclass(hint)):
        return isinstance(value, Mapping)
    if hint is Path:
        return isinstance(value, str)
    return isinstance(hint, type) and isinstance(value, hint)
