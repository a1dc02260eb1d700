"""``crs init --from-bundle BUNDLE``: the bundle's spec as a TOML file, its local folders left as placeholders.

An extender runs the published spec (splits, fractions, seeds, probe and score settings) on their own
copy of the images, so everything is copied from the bundle's ``spec.json`` except what only this
machine knows: each data set's and shift target's root, the cache and the output (and prompt files,
when the run named any). Those get a :data:`crs.spec.PLACEHOLDER` value naming what to write; a spec
still holding one is refused by name. Whatever the bundle holds for them (an absolute path of the
publisher's machine, a relative path, a placeholder, nothing) is never copied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from crs.data.starter_spec import toml_value
from crs.spec import PLACEHOLDER, ExtractConfig, ProbeConfig, ScoreConfig

SPEC_FILE = "spec.json"
"""The bundle's copy of the spec embedded in its run records (``crs publish`` writes it)."""
CONFIGS = (("extract", ExtractConfig), ("probe", ProbeConfig), ("score", ScoreConfig))


def read_bundle_spec(bundle: Path) -> dict[str, Any]:
    """The spec mapping of ``bundle`` (a folder ``crs publish`` wrote), or a one-line error naming the fix."""
    path = Path(bundle) / SPEC_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{bundle}: no {SPEC_FILE}; give a bundle folder `crs publish RUN BUNDLE` wrote")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error}); publish the run again") from error
    if not isinstance(data, dict) or not data.get("name") or not data.get("datasets") or not data.get("encoders"):
        raise ValueError(f"{path}: holds no spec (name, encoders, datasets); publish the run again")
    return data


def _placeholder(what: str) -> str:
    return f"{PLACEHOLDER}{what}"


def _targets(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A data set's shift targets, as today's ``shift_targets`` list or an older run's single ``shift_target``."""
    targets = entry.get("shift_targets")
    if targets is None:
        targets = entry.get("shift_target")
    if isinstance(targets, Mapping):
        return [targets]
    return [t for t in targets or [] if isinstance(t, Mapping)]


def _dataset_table(entry: Mapping[str, Any], what: str) -> dict[str, Any]:
    table: dict[str, Any] = {"name": entry["name"], "loader": entry["loader"],
                             "root": _placeholder(f"the folder of {what} {entry['name']!r} on this machine")}
    if entry.get("options"):
        table["options"] = dict(entry["options"])
    return table


def _config_lines(key: str, config: type, values: Any, name: str) -> list[str]:
    """One ``[extract]`` / ``[probe]`` / ``[score]`` table: the fields this crs knows, None ones left out."""
    if not isinstance(values, Mapping):
        return []
    known = {f.name for f in fields(config)}
    lines = [f"[{key}]"]
    for field_name, value in values.items():
        if field_name not in known or value is None:
            continue
        if key == "score" and field_name == "prompts":  # prompt files are files of the publisher's machine
            value = {task: [_placeholder(f"prompt file {Path(str(f)).name!r} for {task!r} of {name!r} on this machine")
                            for f in files] for task, files in value.items()}
        lines.append(f"{field_name} = {toml_value(value)}")
    return lines + [""]


def _shared_defaults(encoders: list[Any]) -> dict[str, Any]:
    """``weights`` and ``input_size`` every encoder shares: written once under ``[encoder_defaults]``, so an
    encoder the extender adds by name runs as the published ones did (e.g. ``weights = "random"``)."""
    tables = [entry for entry in encoders if isinstance(entry, Mapping)]
    shared = {}
    for key in ("weights", "input_size"):
        values = {json.dumps(entry.get(key)) for entry in tables}
        if len(tables) == len(encoders) and len(values) == 1 and tables[0].get(key) is not None:
            shared[key] = tables[0][key]
    return shared


def _encoder_value(entry: Any, defaults: Mapping[str, Any]) -> Any:
    if isinstance(entry, str):
        return entry
    table = {k: v for k, v in entry.items() if k in ("name", "weights", "input_size", "datasets")
             and v is not None and k not in defaults}
    return table["name"] if list(table) == ["name"] else table


def bundle_spec_text(spec: Mapping[str, Any], bundle: Path) -> tuple[str, list[str]]:
    """(the TOML spec text, the settings left as placeholders) for a bundle's spec mapping."""
    name = str(spec["name"])
    to_fill = ["cache", "output"]
    defaults = _shared_defaults(list(spec["encoders"]))
    lines = [
        f"# crs spec from the bundle {bundle}, written by `crs init --from-bundle`: the published run's spec",
        "# (encoders, data sets, splits, fractions, seeds, probe and score settings), with the folders only this",
        f"# machine knows left as placeholders, values that start with {PLACEHOLDER.strip()!r}: each data set's root,",
        "# cache and output.",
        "# Relative paths resolve against this file's folder. Add the encoders you bring to `encoders`, then:",
        f"#   crs run THIS_FILE --extend {bundle}",
        "",
        f"name = {toml_value(name + '-extended')}         # this run's own name (the bundle's: {name}); sites list runs by name",
        f"cache = {toml_value(_placeholder('a folder for the features, e.g. cache'))}",
        f"output = {toml_value(_placeholder('a folder for the run, e.g. out'))}",
        "encoders = [",
        *(f"    {toml_value(_encoder_value(entry, defaults))}," for entry in spec["encoders"]),
        "]",
        "",
    ]
    if defaults:
        lines += ["[encoder_defaults]                 # as every published encoder ran; applies to those you add",
                  *(f"{key} = {toml_value(value)}" for key, value in defaults.items()), ""]
    for key, config in CONFIGS:
        lines += _config_lines(key, config, spec.get(key), name)
        if key == "score" and isinstance(spec.get(key), Mapping) and spec[key].get("prompts"):
            to_fill += [f"score.prompts.{task}" for task in spec[key]["prompts"]]
    for i, entry in enumerate(spec["datasets"]):
        lines += ["[[datasets]]"]
        table = _dataset_table(entry, "data set")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
        to_fill.append(f"datasets[{i}].root ({entry['name']})")
        targets = [_dataset_table(target, "shift target") for target in _targets(entry)]
        if targets:
            lines.append("shift_target = [")
            lines += [f"    {toml_value(target)}," for target in targets]
            lines.append("]")
            to_fill += [f"datasets[{i}].shift_target root ({target['name']})" for target in targets]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n", to_fill
