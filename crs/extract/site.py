"""What a SLURM site asks of a job: account, QOS, memory, node features, GPUs, CPUs, extra lines.

One :class:`SiteOptions` feeds both the array script of ``crs plan --sbatch`` (as ``#SBATCH`` lines)
and ``crs extract --slurm`` (as submitit parameters), so the two submit the same job. What the
cluster itself can tell (``sinfo``: the partition's CPUs per node; ``scontrol show config``: whether
``--gpus`` is understood) is asked once, here; without SLURM's commands the options pass as given.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_CPUS = 8
REQUEUE_SIGNAL_SECONDS = 300  # a task is warned this long before its time limit, stops, and requeues itself


class SiteError(ValueError):
    """A site option that cannot work on this cluster; the message says which and what to pass."""


@dataclass(frozen=True)
class SiteOptions:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    mem: str | None = None
    constraint: str | None = None
    gres: str | None = None  # replaces the GPU request (e.g. "gpu:a100:1")
    cpus_per_task: int | None = None  # None: DEFAULT_CPUS, capped by the partition's nodes
    gpus_per_task: int = 0
    gpu_flag: str = "gpus"  # "gpus" (select/cons_tres) or "gres" (older sites)
    extra: tuple[str, ...] = ()  # whole sbatch options, e.g. "--reservation=x" (passed through)
    time_minutes: int | None = None  # None: from the plan's estimate
    notes: tuple[str, ...] = field(default=(), compare=False)

    def header_lines(self) -> list[str]:
        """The ``#SBATCH`` lines of these options (not the array, time and output lines)."""
        lines = [f"#SBATCH --cpus-per-task={self.cpus_per_task or DEFAULT_CPUS}"]
        for key in ("partition", "account", "qos", "mem", "constraint"):
            value = getattr(self, key)
            if value:
                lines.append(f"#SBATCH --{key}={value}")
        gpu = self.gpu_request()
        if gpu:
            lines.append(f"#SBATCH --{gpu[0]}={gpu[1]}")
        lines += [f"#SBATCH {option}" for option in self.extra]
        return lines

    def gpu_request(self) -> tuple[str, str] | None:
        if self.gres:
            return ("gres", self.gres)
        if self.gpus_per_task <= 0:
            return None
        return ("gpus", str(self.gpus_per_task)) if self.gpu_flag == "gpus" else ("gres", f"gpu:{self.gpus_per_task}")

    def submitit_parameters(self) -> dict[str, Any]:
        """The same options as submitit's ``SlurmExecutor.update_parameters`` keywords."""
        params: dict[str, Any] = {"cpus_per_task": self.cpus_per_task or DEFAULT_CPUS}
        for key in ("partition", "account", "qos", "mem", "constraint"):
            if getattr(self, key):
                params[key] = getattr(self, key)
        gpu = self.gpu_request()
        if gpu and gpu[0] == "gres":
            params["gres"] = gpu[1]
        elif gpu:
            params["gpus_per_node"] = self.gpus_per_task
        extra: dict[str, Any] = {}
        for option in self.extra:
            key, _, value = option.lstrip("-").partition("=")
            extra[key.replace("-", "_")] = value if value else True
        if extra:
            params["additional_parameters"] = extra
        return params


def parse_extra(options: tuple[str, ...]) -> tuple[str, ...]:
    """``--sbatch-option`` values as whole options: ``reservation=x`` or ``--reservation=x``."""
    made = []
    for option in options:
        text = option.strip()
        if text.startswith("#SBATCH"):
            text = text[len("#SBATCH"):].strip()
        if not text or " " in text.split("=", 1)[0]:
            raise SiteError(f"--sbatch-option {option!r} is not one sbatch option; pass it as --name=value")
        made.append(text if text.startswith("-") else f"--{text}")
    return tuple(made)


def _run(command: list[str]) -> str | None:
    if shutil.which(command[0]) is None:
        return None
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def partition_cpus(partition: str | None) -> tuple[str, int] | None:
    """The partition (the default one when None) and the most CPUs one of its nodes has, from ``sinfo``."""
    out = _run(["sinfo", "-h", "-N", "-o", "%P %c"])
    if out is None:
        return None
    found: dict[str, int] = {}
    default = None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2 or not parts[1].rstrip("+").isdigit():
            continue
        name = parts[0]
        if name.endswith("*"):
            name = name[:-1]
            default = name
        found[name] = max(found.get(name, 0), int(parts[1].rstrip("+")))
    chosen = partition or default
    if chosen is None or chosen not in found:
        return None
    return chosen, found[chosen]


def gpus_flag_understood() -> bool | None:
    """Whether ``--gpus`` works (``select/cons_tres``), from ``scontrol show config``; None if unknown."""
    out = _run(["scontrol", "show", "config"])
    if out is None:
        return None
    for line in out.splitlines():
        if line.split("=")[0].strip() == "SelectType":
            return "cons_tres" in line
    return None


def fit_to_cluster(options: SiteOptions) -> SiteOptions:
    """Cap CPUs at what the partition's nodes have and pick ``--gpus`` or ``--gres`` as the cluster
    understands them; an explicit request a node cannot meet is refused, naming the most there is."""
    notes = list(options.notes)
    cpus = options.cpus_per_task
    found = partition_cpus(options.partition)
    if found is not None:
        name, most = found
        if cpus is not None and cpus > most:
            raise SiteError(f"--cpus-per-task {cpus}: the nodes of partition {name} have at most {most} CPUs "
                            f"(sinfo); pass --cpus-per-task {most} or less")
        if cpus is None and most < DEFAULT_CPUS:
            cpus = most
            notes.append(f"--cpus-per-task {most}: the most a node of partition {name} has (sinfo)")
    flag = options.gpu_flag
    if options.gpus_per_task and not options.gres and gpus_flag_understood() is False:
        flag = "gres"
        notes.append(f"--gres=gpu:{options.gpus_per_task}: this cluster's select plugin does not take --gpus")
    return replace(options, cpus_per_task=cpus, gpu_flag=flag, notes=tuple(notes))


def signal_seconds(time_limit_seconds: int) -> int:
    """How long before the limit a task is warned: :data:`REQUEUE_SIGNAL_SECONDS`, at most half the limit."""
    return max(10, min(REQUEUE_SIGNAL_SECONDS, time_limit_seconds // 2))
