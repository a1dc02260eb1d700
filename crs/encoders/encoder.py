"""The built encoder: preprocessing + frozen network + pooling, and its cache fingerprint fields."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from crs.encoders.preprocess import preprocess
from crs.encoders.registry import EncoderSpec


@dataclass
class Network:
    """What a loader returns: the module, a function from preprocessed input to (B, dim) embeddings,
    the weights digest, and a line about how the weights were loaded."""

    module: nn.Module
    forward: Callable[[torch.Tensor], torch.Tensor]
    weights_digest: str
    load_summary: str = ""


def state_digest(module: nn.Module) -> str:
    """sha256 over every tensor of a module's state dict (name, shape, dtype, bytes)."""
    sha = hashlib.sha256()
    for key, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        sha.update(f"{key}:{tuple(t.shape)}:{t.dtype}\n".encode())
        sha.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return sha.hexdigest()


class Encoder:
    """A frozen encoder on a device: ``embed(x)`` maps images in [0, 1] to float32 (B, dim)."""

    def __init__(self, spec: EncoderSpec, network: Network, device: str | torch.device = "cpu"):
        self.spec = spec
        self.device = torch.device(device)
        self.module = network.module.eval().requires_grad_(False).to(self.device)
        self._forward = network.forward
        self.weights_digest = network.weights_digest
        self.load_summary = network.load_summary

    @property
    def dtype(self) -> str:
        """The compute dtype: bf16 autocast on CUDA, float32 elsewhere (it enters the fingerprint)."""
        return "bfloat16-autocast" if self.device.type == "cuda" else "float32"

    def preprocess(self, x: torch.Tensor) -> torch.Tensor:
        """Resize, crop and normalise float (B, 3, H, W) images in [0, 1] per the spec, on the device."""
        return preprocess(x.to(self.device, non_blocking=True), self.spec)

    @torch.inference_mode()
    def forward_preprocessed(self, x: torch.Tensor) -> torch.Tensor:
        """Network + pooling on an already preprocessed batch; float32 (B, dim)."""
        if self.device.type == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = self._forward(x)
        else:
            out = self._forward(x)
        out = out.float()
        if out.ndim != 2 or out.shape[1] != self.spec.dim:
            raise RuntimeError(
                f"encoder {self.spec.name!r} produced shape {tuple(out.shape)}, its spec declares dim {self.spec.dim}")
        return out

    @torch.inference_mode()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Preprocess + forward + pooling: float (B, 3, H, W) in [0, 1] -> float32 (B, dim)."""
        return self.forward_preprocessed(self.preprocess(x))

    def fingerprint_fields(self) -> dict[str, Any]:
        """Everything that changes the embedding; the cache hashes it into the encoder fingerprint."""
        return {
            "name": self.spec.name,
            "source": self.spec.source,
            "weights": self.weights_digest,
            "preprocessing": self.spec.preprocessing_fields(),
            "pooling": self.spec.pooling,
            "dim": self.spec.dim,
            "build_options": [[k, repr(v)] for k, v in self.spec.build_options],
            "dtype": self.dtype,
        }

    def __repr__(self) -> str:
        return f"Encoder({self.spec.name!r}, source={self.spec.source!r}, device={str(self.device)!r}, weights={self.weights_digest[:16]!r})"
