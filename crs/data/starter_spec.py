"""Write the commented spec ``crs init`` leaves beside the user: it runs as is, and says how to change it.

The text is built from a :class:`~crs.data.inspect_folder.FolderGuess` and a few choices
(:class:`StarterChoices`). Encoders are named, not imported (this layer sits below the encoder
registry): the defaults per modality are registry names whose weights are on the Hugging Face Hub
(``crs weights fetch`` downloads them once into ``$CRS_WEIGHTS_DIR``; crs reads local files only);
specialists that need a checkpoint on disk are listed as comments. The CLI checks the names
against the registry before writing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from crs.data.inspect_folder import FolderGuess

# A general reference (the score's reference), a self-supervised general model, a biomedical
# vision-language model, and the modality's specialist where its weights are on the Hugging Face Hub.
STARTER_ENCODERS = {
    "chest_xray": ("resnet50", "dinov2_vit_b14", "biomedclip", "rad_dino"),
    "dermoscopy": ("resnet50", "dinov2_vit_b14", "biomedclip", "monet"),
    "fundus": ("resnet50", "dinov2_vit_b14", "biomedclip"),
}
# Specialists whose checkpoint must be downloaded by hand (`crs encoders show NAME` says from where).
CHECKPOINT_ENCODERS = {"chest_xray": ("chexzero",), "dermoscopy": ("panderm",), "fundus": ("retfound",)}
REFERENCE = "resnet50"
# --quick: a first look in minutes; the full protocol is the spec defaults (docs/crs.md).
QUICK = {
    "label_fractions": [0.25, 1.0], "seeds": [0, 1], "Cs": [0.01, 0.1, 1.0],
    "corruptions": ["gaussian_noise", "jpeg"], "severities": [1, 3], "n_boot": 200,
}
FULL = {
    "label_fractions": [0.01, 0.05, 0.1, 0.25, 1.0], "seeds": [0, 1, 2, 3, 4], "Cs": None,
    "corruptions": "all", "severities": [1, 2, 3, 4, 5], "n_boot": 1000,
}


@dataclass(frozen=True)
class ShiftChoice:
    """One shift target ``crs init`` found: its data-set name, folder and loader options (labels matched)."""

    name: str
    root: Path
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StarterChoices:
    """What the written spec runs: names, encoders and protocol size; ``None`` means the default."""

    name: str
    encoders: tuple[str, ...] = ()
    reference: str | None = None
    quick: bool = False
    weights: str | None = None
    input_size: int | None = None
    image_size: int = 224
    device: str | None = None
    cache: str = "cache"
    output: str | None = None
    shift_targets: tuple[ShiftChoice, ...] = ()


def data_set_name(root: Path | str) -> str:
    """A data-set name from a folder name: lower case, letters, digits, '-' and '_' only."""
    name = re.sub(r"[^a-z0-9_-]+", "-", Path(root).resolve().name.lower()).strip("-")
    return name or "my-data"


def starter_encoders(modality: str) -> tuple[str, ...]:
    return STARTER_ENCODERS.get(modality, STARTER_ENCODERS["chest_xray"])


def default_device() -> str:
    """``cuda`` where a CUDA device is visible, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def toml_value(value: Any) -> str:
    """A TOML literal for str, bool, int, float, list and (inline) dict values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def describe(guess: FolderGuess) -> list[tuple[str, str, str]]:
    """(what, the guess and why, how to change it) rows: printed by ``crs init`` and written atop the spec."""
    types = ", ".join(f"{n} {kind}" for kind, n in guess.image_types.items())
    if guess.kind == "multilabel":
        classes = ", ".join(f"{k} {v}" for k, v in guess.class_counts.items()) + " positives"
    else:
        classes = ", ".join(f"{k} {v}" for k, v in guess.class_counts.items())
    groups = (f"column {guess.group_column!r} ({guess.reasons.get('groups', '')})" if guess.group_column
              else "none: each image is its own group")
    others = [c for c in guess.group_candidates if c != guess.group_column]
    if others:
        groups += f"; other candidates {others}"
    splits = f"column {guess.split_column!r}" if guess.split_column else "drawn by group, 60/20/20, seed 0"
    rows = [
        ("csv", f"{guess.csv} ({guess.n_rows} rows); images in column {guess.image_column!r}", "--csv, --image-column"),
        ("images", types, "crs datasets check folder ROOT ... reads every one"),
        ("task", f"{guess.kind} on {list(guess.label_columns)} ({guess.reasons.get('task', '')})",
         "--label-column (repeat for multilabel), --kind"),
        ("classes", classes, "edit the CSV (merge or drop tiny classes)"),
        ("groups", groups, "--group-column"),
        ("splits", splits, "--split-column, or options.proportions"),
        ("modality", f"{guess.modality} ({guess.reasons.get('modality', '')}): picks the corruption suite", "--modality"),
        ("fit", f"{guess.fit} ({guess.reasons.get('fit', '')}); crop | pad | squash (squash distorts)", "--fit"),
    ]
    if guess.id_column:
        rows.append(("ids", f"column {guess.id_column!r} (unique)", "options.id_column"))
    subgroups = (f"columns {list(guess.subgroup_columns)} ({guess.reasons.get('subgroups', '')})"
                 if guess.subgroup_columns else "none found: name CSV columns in options.subgroups")
    rows.append(("subgroup", subgroups, "options.subgroups (docs/subgroups.md)"))
    return rows


def starter_spec_text(guess: FolderGuess, choices: StarterChoices) -> str:
    """The commented TOML spec for ``guess`` under ``choices``; ``crs run`` takes it as is."""
    protocol = QUICK if choices.quick else FULL
    encoders = choices.encoders or starter_encoders(guess.modality)
    reference = choices.reference or (REFERENCE if REFERENCE in encoders else encoders[0])
    device = choices.device or default_device()
    lines = [
        f"# crs spec for {guess.root}, written by `crs init` (it asked nothing; every guess below can be changed).",
        "# What it guessed, and how to change it (re-run `crs init` with the option, or edit this file):",
    ]
    width = max(len(what) for what, _, _ in describe(guess))
    for what, value, how in describe(guess):
        lines.append(f"#   {what:<{width}}  {value}")
        lines.append(f"#   {'':<{width}}  change: {how}")
    for warning in guess.warnings:
        lines.append(f"# WARNING: {warning}")
    lines += [
        "#",
        f"# Check the images once:  {check_command(guess)}",
        "# Fetch the weights once: crs weights fetch THIS_FILE   (into $CRS_WEIGHTS_DIR; crs reads local files only)",
        "# Then run:               crs run THIS_FILE   (report in the output folder: report.html)",
        "# Relative paths (cache, output) resolve against this file's folder.",
        "",
        f"name = {toml_value(choices.name)}",
        f"cache = {toml_value(choices.cache)}                 # features, reused by every later run",
        f"output = {toml_value(choices.output or f'crs-out/{choices.name}')}",
        "",
    ]
    if choices.encoders:
        lines.append("# Encoders as given to crs init.")
    else:
        lines += [
            f"# Encoders for {guess.modality}: a general reference ({REFERENCE}, the score's reference), a self-supervised",
            "# general model, a biomedical vision-language model and the modality's specialist. crs reads weights",
            "# from local files only: `crs weights fetch THIS_FILE` downloads them once from the Hugging Face Hub.",
        ]
    lines.append("encoders = [")
    lines += [f"    {toml_value(name)}," for name in encoders]
    for name in CHECKPOINT_ENCODERS.get(guess.modality, ()):
        if name not in encoders:
            lines.append(f"    # {toml_value(name)},   # needs its checkpoint on disk: crs encoders show {name}")
    lines += ["]", ""]
    defaults = {k: v for k, v in (("weights", choices.weights), ("input_size", choices.input_size)) if v is not None}
    if defaults:
        lines.append("[encoder_defaults]                 # applies to every encoder above")
        lines += [f"{k} = {toml_value(v)}" for k, v in defaults.items()]
        lines.append("")
    lines += [
        "[extract]",
        f"device = {toml_value(device)}" + ("                 # \"cuda\" on a GPU machine" if device == "cpu" else ""),
        "batch_size = 32",
        f"corruptions = {toml_value(protocol['corruptions'])}"
        + (f"                # the {guess.modality} suite: crs corruptions list" if protocol["corruptions"] == "all"
           else "   # --quick: two of the suite; \"all\" for the full one"),
        f"severities = {toml_value(protocol['severities'])}",
        "skip_bad = false                   # true: skip unreadable images and list them in the records",
        "",
        "[probe]",
        f"label_fractions = {toml_value(protocol['label_fractions'])}",
        f"seeds = {toml_value(protocol['seeds'])}",
    ]
    if protocol["Cs"] is not None:
        lines.append(f"Cs = {toml_value(protocol['Cs'])}")
    lines += [
        "jobs = 1                           # parallel probe workers",
        "",
        "[score]",
        f"reference_encoder = {toml_value(reference)}",
        f"n_boot = {protocol['n_boot']}",
        "",
        "[[datasets]]",
        f"name = {toml_value(choices.name)}",
        'loader = "folder"',
        f"root = {toml_value(guess.root)}",
        f"options = {toml_value({**guess.loader_options(), 'image_size': choices.image_size})}",
    ]
    targets = [
        {"name": shift.name, "loader": "folder", "root": str(shift.root),
         "options": {**shift.options, "image_size": choices.image_size}}
        for shift in choices.shift_targets
    ]
    if len(targets) == 1:
        lines += [
            "# Shift target: another site, evaluated only (every image in test) with the probes trained above;",
            "# its labels were matched to this data set's by name.",
            f"shift_target = {toml_value(targets[0])}",
        ]
    elif targets:
        lines += [
            "# Shift targets: other sites, each evaluated only (every image in test) with the probes trained above",
            "# and reported apart; robustness averages them. Their labels were matched to this data set's by name.",
            "shift_target = [",
            *(f"    {toml_value(target)}," for target in targets),
            "]",
        ]
    return "\n".join(lines) + "\n"


def check_command(guess: FolderGuess) -> str:
    """The `crs datasets check` command line that reads every image of the guessed data set once."""
    options = " ".join(f"-o {k}={_cli_value(v)}" for k, v in guess.loader_options().items())
    return f"crs datasets check folder {_cli_value(str(guess.root))} {options}"


def _cli_value(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return f"'{text}'" if re.search(r"[^A-Za-z0-9_./-]", text) else text
