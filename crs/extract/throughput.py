"""Forward passes per second per (encoder, device): measured where stored, else a labelled estimate.

``crs bench extract`` stores what it measured on this host (pipeline forward passes/s of
ResNet-50 and ViT-B/16) in :func:`measurements_path`. ``crs plan`` turns that into a time for any
encoder by its forward cost in GFLOPs (scaled from the measured encoders' effective GFLOP/s), and
says so. This host's figures come first; then those of other hosts of the same device kind (a job
script is planned on a login node for GPU nodes that measured themselves into a shared file, e.g.
``CRS_THROUGHPUT`` on the cluster's file system), named. With nothing stored the time is an
estimate and labelled one (on a GPU: a bare forward pass at an H200's peak, far above what a
decode-bound run reaches; issue 41).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

# Forward cost in GFLOPs as timm's tables count them (multiply-accumulates) at each catalog
# encoder's native input size, from the model cards and timm's tables; rounded, for planning only. Costs grow
# with the pixel count (patches for a ViT), so another input size scales by (size / native)^2.
NATIVE_GFLOPS: dict[str, float] = {
    "pixel_stats": 0.01, "resnet18": 1.8, "resnet50": 4.1, "efficientnet_b0": 0.39, "vit_tiny": 1.3,
    "vit_base": 17.6, "mae_vit_b16": 17.6, "clip_vit_b16": 17.6, "siglip2_vit_b16": 17.6, "biomedclip": 17.6,
    "chexzero": 4.4, "pubmedclip": 4.4, "dinov2_vit_b14": 152.0, "rad_dino": 152.0, "monet": 81.0,
    "panderm": 61.6, "retfound": 61.6, "medsiglip_448": 340.0, "medgemma_vision": 1400.0,
}
UNKNOWN_GFLOPS_AT_224 = 17.6  # an unlisted encoder is costed as a ViT-B/16 at its input size

# Fallback rates, labelled as estimates wherever they are used.
CPU_GFLOPS_PER_CORE = 15.0  # effective GFLOP/s of one core in the whole stage-1 pipeline (a guess)
GPU_GFLOPS = 17.6 * 20_000  # ViT-B/16 at 0.05 ms per pass on an H200 (DESIGN.md section 5): bare forward, peak


@dataclass(frozen=True)
class Rate:
    """Forward passes per second and where the figure comes from (``measured`` or ``estimate``)."""

    passes_per_s: float
    basis: str
    measured: bool

    def seconds(self, passes: int) -> float:
        return passes / self.passes_per_s if self.passes_per_s > 0 else float("inf")


def forward_gflops(name: str, input_size: int, native_size: int) -> float:
    """Estimated GFLOPs of one forward pass of encoder ``name`` at ``input_size`` pixels."""
    if name in NATIVE_GFLOPS:
        return NATIVE_GFLOPS[name] * (input_size / native_size) ** 2
    return UNKNOWN_GFLOPS_AT_224 * (input_size / 224) ** 2


def measurements_path() -> Path:
    """Where ``crs bench extract`` keeps its figures: ``$CRS_THROUGHPUT`` or ``~/.cache/crs/throughput.json``."""
    if os.environ.get("CRS_THROUGHPUT"):
        return Path(os.environ["CRS_THROUGHPUT"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "crs" / "throughput.json"


def load_measurements(path: Path | None = None) -> list[dict[str, Any]]:
    path = path or measurements_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def store_measurement(encoder: str, device: str, passes_per_s: float, gflops: float, path: Path | None = None,
                      threads: int | None = None) -> Path:
    """Keep one measured pipeline rate for this host (replacing an older one of the same encoder and device)."""
    path = path or measurements_path()
    host = socket.gethostname()
    kept = [m for m in load_measurements(path)
            if not (m.get("host") == host and m.get("encoder") == encoder and m.get("device") == device)]
    kept.append({"host": host, "encoder": encoder, "device": device, "passes_per_s": float(passes_per_s),
                 "gflops": float(gflops), "threads": threads})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(kept, indent=2))
    return path


def _kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def rate(name: str, gflops: float, device: str, cores: int, measurements: list[dict[str, Any]] | None = None) -> Rate:
    """Forward passes/s of one encoder on ``device``: from this host's stored figures, else an estimate."""
    kind = _kind(device)
    measurements = load_measurements() if measurements is None else measurements
    host = socket.gethostname()
    mine = [m for m in measurements
            if m.get("host") == host and _kind(str(m.get("device", ""))) == kind and m.get("passes_per_s")]
    same = [m for m in mine if m.get("encoder") == name]
    if same:
        return Rate(float(same[-1]["passes_per_s"]), f"measured by `crs bench extract` on {host}", True)
    gflops = max(gflops, 1e-3)
    if mine:
        effective = median(float(m["passes_per_s"]) * float(m["gflops"]) for m in mine)
        names = ", ".join(sorted({str(m["encoder"]) for m in mine}))
        return Rate(effective / gflops, f"scaled by GFLOPs from `crs bench extract` ({names}) on {host}", True)
    # Another host's figures (a job script is planned on a login node, run on GPU nodes that measured
    # themselves): the median over those hosts, named, rather than a peak-speed guess.
    theirs = [m for m in measurements
              if m.get("host") != host and _kind(str(m.get("device", ""))) == kind and m.get("passes_per_s")]
    if theirs:
        hosts = ", ".join(sorted({str(m.get("host")) for m in theirs}))
        same = [m for m in theirs if m.get("encoder") == name]
        if same:
            return Rate(median(float(m["passes_per_s"]) for m in same),
                        f"measured by `crs bench extract` on {hosts} (not this host)", True)
        effective = median(float(m["passes_per_s"]) * float(m["gflops"]) for m in theirs)
        names = ", ".join(sorted({str(m["encoder"]) for m in theirs}))
        return Rate(effective / gflops, f"scaled by GFLOPs from `crs bench extract` ({names}) on {hosts} "
                    "(not this host)", True)
    if kind == "cuda":
        return Rate(GPU_GFLOPS / gflops, "estimate: bare forward at an H200's peak, scaled by GFLOPs; "
                    "decode-bound end to end", False)
    return Rate(CPU_GFLOPS_PER_CORE * cores / gflops,
                f"estimate: {CPU_GFLOPS_PER_CORE:g} GFLOP/s per core x {cores} core(s); run `crs bench extract` "
                "to measure this host", False)
