"""Zero-shot prompt sets: data files with a hash, one per task (docs/zero_shot.md).

A prompt set is a TOML file::

    name = "isic2019-names-x-templates"
    templates = ["a dermoscopic image of {}.", "{}."]      # optional; default ["{}"]
    [classes]                                               # multiclass and ordinal tasks
    MEL = ["melanoma", "malignant melanoma"]                 # names or descriptors, one list per class
    ...
    [positive] / [negative]                                 # multilabel tasks: one binary problem per finding

The prompts of a class are every template filled with every one of its names (CLIP's prompt
ensemble; a descriptor ensemble is the same with descriptors for names). A multilabel task needs a
positive list per finding; the negative list (CheXzero's pairs) is used by the softmax family, the
sigmoid family (SigLIP) scores the positive prompts with its own bias. Built-in sets cover ISIC 2019,
APTOS 2019, CheXpert and the synthetic tasks; a spec may name its own file per task.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from crs.data.base import Task

BUILTIN_DIR = Path(__file__).resolve().parent / "prompt_sets"


class PromptSetError(ValueError):
    """A prompt file that cannot serve its task; the message names the file, the class and the fix."""


@dataclass(frozen=True)
class PromptSet:
    """Per class, its positive prompts (and negative prompts for a multilabel task), plus a content hash."""

    name: str
    source: str
    class_names: tuple[str, ...]
    positive: tuple[tuple[str, ...], ...]
    negative: tuple[tuple[str, ...], ...] = ()
    templates: tuple[str, ...] = ("{}",)

    @property
    def digest(self) -> str:
        """sha256 of the prompts themselves (not the file's bytes): comments and layout do not move the key."""
        body = {"classes": list(self.class_names), "positive": [list(p) for p in self.positive],
                "negative": [list(p) for p in self.negative]}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def n_variants(self) -> int:
        """Prompt variants for the sensitivity spread: variant j takes each class's j-th prompt (cycling)."""
        return max(len(p) for p in (*self.positive, *self.negative))


def _strings(where: str, value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise PromptSetError(f"{where}: give a non-empty list of strings, got {value!r}")
    empty = [v for v in value if not v.strip()]
    if empty:
        raise PromptSetError(f"{where}: an empty prompt or name; every entry needs text")
    return list(value)


def _per_class(where: str, table: object, task: Task) -> dict[str, list[str]]:
    if not isinstance(table, dict):
        raise PromptSetError(f"{where}: must be a table of class = [names], got {table!r}")
    extra = sorted(set(table) - set(task.class_names))
    if extra:
        raise PromptSetError(f"{where}: names classes {extra} that task {task.name!r} lacks "
                             f"(its classes: {list(task.class_names)}); remove or rename them")
    missing = [name for name in task.class_names if name not in table]
    if missing:
        raise PromptSetError(f"{where}: no prompts for classes {missing} of task {task.name!r}; add a list for each")
    return {name: _strings(f"{where}.{name}", table[name]) for name in task.class_names}


def parse_prompt_set(data: dict, task: Task, source: str) -> PromptSet:
    """Check a parsed prompt file against ``task`` and expand templates x names."""
    allowed = {"name", "templates", "classes", "positive", "negative"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise PromptSetError(f"{source}: unknown keys {unknown}; use {sorted(allowed)}")
    templates = _strings(f"{source}: templates", data.get("templates", ["{}"]))
    bad = [t for t in templates if t.count("{}") != 1]
    if bad:
        raise PromptSetError(f"{source}: template {bad[0]!r} must hold '{{}}' exactly once (where the class name goes)")
    multilabel = task.kind == "multilabel"
    key = "positive" if multilabel else "classes"
    if key not in data:
        raise PromptSetError(f"{source}: a {task.kind} task needs a [{key}] table of class = [names]")
    if (not multilabel and ("positive" in data or "negative" in data)) or (multilabel and "classes" in data):
        raise PromptSetError(f"{source}: a {task.kind} task takes "
                             f"{'[positive] and [negative]' if multilabel else '[classes]'} tables only")

    def expand(names: dict[str, list[str]]) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(t.format(n) for n in names[c] for t in templates) for c in task.class_names)

    positive = expand(_per_class(f"{source}: [{key}]", data[key], task))
    negative = expand(_per_class(f"{source}: [negative]", data["negative"], task)) if "negative" in data else ()
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise PromptSetError(f"{source}: 'name' must be a non-empty string")
    return PromptSet(name, source, tuple(task.class_names), positive, negative, tuple(templates))


def load_prompt_set(path: Path | str, task: Task) -> PromptSet:
    """Read and check one prompt file for ``task``."""
    path = Path(path)
    if not path.is_file():
        raise PromptSetError(f"prompt file {path} not found; name an existing TOML file or drop it to use the built-in set")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise PromptSetError(f"prompt file {path} is not valid TOML: {error}") from None
    return parse_prompt_set(data, task, str(path))


def builtin_prompt_set(task: Task) -> PromptSet:
    """The built-in set whose classes are the task's (ISIC 2019, APTOS 2019, CheXpert, the synthetic tasks)."""
    for path in sorted(BUILTIN_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        table = data.get("positive" if task.kind == "multilabel" else "classes", {})
        if set(table) == set(task.class_names):
            return parse_prompt_set(data, task, f"built-in:{path.name}")
    raise PromptSetError(f"no built-in prompt set has the classes of task {task.name!r} ({list(task.class_names)}); "
                         "write a prompt file for it (docs/zero_shot.md) and name it in the spec")
