"""Benchmark spec: a TOML file read into frozen dataclasses, every field checked with a clear message.

A spec names the data sets (with an optional shift target each), the encoders, the probe protocol
(label fractions, seeds, C grid, backend) and the scoring choices (reference encoder, weights,
bootstrap size). Relative paths resolve against the working directory, as for any CLI.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

AXES = ("discrimination", "calibration", "label_efficiency", "robustness")
DEFAULT_FRACTIONS = (0.01, 0.05, 0.1, 0.25, 1.0)
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
DEFAULT_CS = (1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 10.0)


class SpecError(ValueError):
    """A spec is malformed; the message names the field and what is expected."""


SETTING_ATTRIBUTE = "crs_setting"
"""Attribute a library error may carry: the spec setting (``cache``, ``output``, ``shard`` ...) that fixes it.

Library messages speak of settings, never of command-line flags; the CLI names the flag of that setting.
"""


def for_setting(error: BaseException, setting: str) -> BaseException:
    """Tag ``error`` with the setting that fixes it (``raise for_setting(CacheError(...), "cache")``)."""
    setattr(error, SETTING_ATTRIBUTE, setting)
    return error


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    loader: str
    root: Path
    options: dict[str, Any] = field(default_factory=dict)
    shift_target: DatasetEntry | None = None


@dataclass(frozen=True)
class EncoderEntry:
    name: str
    weights: str | None = None
    input_size: int | None = None


@dataclass(frozen=True)
class ExtractConfig:
    batch_size: int = 32
    device: str = "cpu"
    corruptions: tuple[str, ...] | str = "all"
    severities: tuple[int, ...] = (1, 2, 3, 4, 5)
    chunk_rows: int = 4096
    skip_bad: bool = False


@dataclass(frozen=True)
class ProbeConfig:
    backend: str = "sklearn"
    family: str = "logistic"
    label_fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    Cs: tuple[float, ...] = DEFAULT_CS
    selection: str = "auroc"
    min_per_class: int = 3
    jobs: int = 1


@dataclass(frozen=True)
class ScoreConfig:
    reference_encoder: str = ""
    weights: dict[str, float] | None = None
    n_boot: int = 1000
    seed: int = 0
    case_bootstrap: bool = True


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

    @property
    def encoder_names(self) -> list[str]:
        return [entry.name for entry in self.encoders]


_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
}


def _check(where: str, key: str, value: Any, kind: str) -> Any:
    if kind == "bool":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, _TYPES[kind]) and not isinstance(value, bool)
    if not ok:
        raise SpecError(f"{where}: field {key!r} must be {kind}, got {type(value).__name__} {value!r}")
    return float(value) if kind == "float" else value


def _check_list(where: str, key: str, value: Any, kind: str) -> tuple:
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: field {key!r} must be a non-empty list of {kind}, got {value!r}")
    return tuple(_check(where, key, item, kind) for item in value)


def _reject_unknown(where: str, table: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _require(where: str, table: dict[str, Any], key: str) -> Any:
    if key not in table:
        raise SpecError(f"{where}: missing required field {key!r}")
    return table[key]


def _config(where: str, cls: type, table: Any, lists: dict[str, str], scalars: dict[str, str]):
    if not isinstance(table, dict):
        raise SpecError(f"{where}: must be a table, got {table!r}")
    _reject_unknown(where, table, {f.name for f in fields(cls)})
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in lists:
            values[key] = _check_list(where, key, value, lists[key])
        elif key in scalars:
            values[key] = _check(where, key, value, scalars[key])
        else:
            values[key] = value
    return cls(**values)


def _dataset(where: str, table: Any, base: Path, allow_shift: bool = True) -> DatasetEntry:
    if not isinstance(table, dict):
        raise SpecError(f"{where}: must be a table, got {table!r}")
    allowed = {"name", "loader", "root", "options"} | ({"shift_target"} if allow_shift else set())
    _reject_unknown(where, table, allowed)
    name = _check(where, "name", _require(where, table, "name"), "str")
    loader = _check(where, "loader", _require(where, table, "loader"), "str")
    root = Path(_check(where, "root", _require(where, table, "root"), "str")).expanduser()
    options = table.get("options", {})
    if not isinstance(options, dict):
        raise SpecError(f"{where}: field 'options' must be a table, got {options!r}")
    shift = None
    if "shift_target" in table:
        shift = _dataset(f"{where}.shift_target", table["shift_target"], base, allow_shift=False)
    return DatasetEntry(name, loader, root if root.is_absolute() else base / root, dict(options), shift)


def _encoders(value: Any, defaults: dict[str, Any]) -> tuple[EncoderEntry, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("spec: field 'encoders' must be a non-empty list of names or tables")
    entries = []
    for i, item in enumerate(value):
        where = f"encoders[{i}]"
        table = {"name": item} if isinstance(item, str) else item
        if not isinstance(table, dict):
            raise SpecError(f"{where}: must be a name or a table, got {item!r}")
        _reject_unknown(where, table, {"name", "weights", "input_size"})
        merged = {**defaults, **table}
        name = _check(where, "name", _require(where, merged, "name"), "str")
        weights = merged.get("weights")
        if weights is not None:
            weights = _check(where, "weights", weights, "str")
        input_size = merged.get("input_size")
        if input_size is not None:
            input_size = _check(where, "input_size", input_size, "int")
        entries.append(EncoderEntry(name, weights, input_size))
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise SpecError(f"spec: encoder names repeat: {names}")
    return tuple(entries)


def parse_spec(data: dict[str, Any], base: Path = Path(".")) -> Spec:
    """Validate a spec mapping (as read from TOML) into a :class:`Spec`."""
    _reject_unknown(
        "spec", data,
        {"name", "cache", "output", "encoders", "encoder_defaults", "datasets", "extract", "probe", "score"},
    )
    name = _check("spec", "name", _require("spec", data, "name"), "str")
    cache = Path(_check("spec", "cache", data.get("cache", "cache"), "str")).expanduser()
    output = Path(_check("spec", "output", data.get("output", f"crs-out/{name}"), "str")).expanduser()
    defaults = data.get("encoder_defaults", {})
    if not isinstance(defaults, dict):
        raise SpecError("spec: field 'encoder_defaults' must be a table")
    _reject_unknown("encoder_defaults", defaults, {"weights", "input_size"})
    encoders = _encoders(_require("spec", data, "encoders"), defaults)
    raw_datasets = _require("spec", data, "datasets")
    if not isinstance(raw_datasets, list) or not raw_datasets:
        raise SpecError("spec: field 'datasets' must be a non-empty list of [[datasets]] tables")
    datasets = tuple(_dataset(f"datasets[{i}]", t, base) for i, t in enumerate(raw_datasets))
    dataset_names = [d.name for d in datasets] + [d.shift_target.name for d in datasets if d.shift_target]
    if len(set(dataset_names)) != len(dataset_names):
        raise SpecError(f"spec: data set names repeat: {dataset_names}")

    extract_table = dict(data.get("extract", {}))
    corruptions = extract_table.pop("corruptions", "all")
    if isinstance(corruptions, list):
        corruptions = _check_list("extract", "corruptions", corruptions, "str")
    elif corruptions not in ("all", "none"):
        raise SpecError(f"extract: field 'corruptions' must be 'all', 'none' or a list of names, got {corruptions!r}")
    extract = _config(
        "extract", ExtractConfig, extract_table, {"severities": "int"},
        {"batch_size": "int", "device": "str", "chunk_rows": "int", "skip_bad": "bool"},
    )
    extract = ExtractConfig(**{**extract.__dict__, "corruptions": corruptions})
    if any(s not in range(1, 6) for s in extract.severities):
        raise SpecError(f"extract: severities must lie in 1..5, got {extract.severities}")
    if extract.batch_size < 1 or extract.chunk_rows < 1:
        raise SpecError("extract: batch_size and chunk_rows must be positive")

    probe = _config(
        "probe", ProbeConfig, data.get("probe", {}),
        {"label_fractions": "float", "seeds": "int", "Cs": "float"},
        {"backend": "str", "family": "str", "selection": "str", "min_per_class": "int", "jobs": "int"},
    )
    if any(not 0 < f <= 1 for f in probe.label_fractions):
        raise SpecError(f"probe: label_fractions must lie in (0, 1], got {probe.label_fractions}")
    if 1.0 not in probe.label_fractions:
        raise SpecError("probe: label_fractions must include 1.0 (discrimination and robustness are read there)")
    if any(c <= 0 for c in probe.Cs):
        raise SpecError(f"probe: Cs must be positive, got {probe.Cs}")

    score_table = dict(data.get("score", {}))
    weights = score_table.pop("weights", None)
    if weights is not None:
        if not isinstance(weights, dict):
            raise SpecError("score: field 'weights' must be a table of CRS component = weight (dominance, balance, worst_axis)")
        _reject_unknown("score.weights", weights, {"dominance", "balance", "worst_axis"})
        weights = {k: _check("score.weights", k, v, "float") for k, v in weights.items()}
    score = _config(
        "score", ScoreConfig, score_table, {},
        {"reference_encoder": "str", "n_boot": "int", "seed": "int", "case_bootstrap": "bool"},
    )
    reference = score.reference_encoder or "median"  # the cohort-median encoder (docs/crs.md)
    if reference != "median" and reference not in [e.name for e in encoders]:
        raise SpecError(
            f"score: reference_encoder {reference!r} is not among the encoders {[e.name for e in encoders]} "
            "(or \"median\")"
        )
    score = ScoreConfig(reference, weights, score.n_boot, score.seed, score.case_bootstrap)

    return Spec(
        name=name,
        cache=cache if cache.is_absolute() else base / cache,
        output=output if output.is_absolute() else base / output,
        encoders=encoders,
        datasets=datasets,
        extract=extract,
        probe=probe,
        score=score,
    )


def load_spec(path: Path | str, base: Path | None = None) -> Spec:
    """Read and validate a TOML spec. Relative paths resolve against ``base`` (default: the cwd)."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file not found: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: not valid TOML ({error})") from error
    spec = parse_spec(data, base if base is not None else Path.cwd())
    return Spec(**{**spec.__dict__, "source": path})


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

    return convert(spec)
