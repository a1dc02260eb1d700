"""The built encoder: preprocessing + frozen network + pooling, and its cache fingerprint fields."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from crs.encoders.preprocess import preprocess
from crs.encoders.registry import EncoderError, EncoderSpec


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


PRECISIONS = ("auto", "float64")
"""``auto``: bf16 autocast on CUDA, float32 on CPU; ``float64``: module and preprocessing in float64 on
the CPU, so a summation-order difference (threads, kernels, CPU) is ~1e-16 relative and almost never
crosses a float16 rounding boundary of the stored feature (decision 0176)."""


class Encoder:
    """A frozen encoder on a device: ``embed(x)`` maps images in [0, 1] to float32 (B, dim), or to
    float64 with ``precision="float64"`` (CPU only)."""

    def __init__(self, spec: EncoderSpec, network: Network, device: str | torch.device = "cpu",
                 precision: str = "auto"):
        self.spec = spec
        self.device = torch.device(device)
        if precision not in PRECISIONS:
            raise EncoderError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if precision == "float64" and self.device.type != "cpu":
            raise EncoderError(f"precision float64 runs on the CPU only, got device {str(self.device)!r}; "
                               "use device cpu or precision auto")
        self.precision = precision
        self.module = network.module.eval().requires_grad_(False).to(self.device)
        if precision == "float64":
            self.module = self.module.double()
        self._forward = network.forward
        self.weights_digest = network.weights_digest
        self.load_summary = network.load_summary

    @property
    def dtype(self) -> str:
        """The compute dtype: bf16 autocast on CUDA, float32 on CPU, or float64 (it enters the fingerprint)."""
        if self.precision == "float64":
            return "float64"
        return "bfloat16-autocast" if self.device.type == "cuda" else "float32"

    @property
    def input_dtype(self) -> torch.dtype:
        """The float dtype images in [0, 1] are made in, preprocessed in, and embedded to."""
        return torch.float64 if self.precision == "float64" else torch.float32

    def preprocess(self, x: torch.Tensor) -> torch.Tensor:
        """Resize, crop and normalise float (B, 3, H, W) images in [0, 1] per the spec, on the device."""
        return preprocess(x.to(self.device, non_blocking=True), self.spec, self.input_dtype)

    @torch.inference_mode()
    def forward_preprocessed(self, x: torch.Tensor) -> torch.Tensor:
        """Network + pooling on an already preprocessed batch; (B, dim) in :attr:`input_dtype`."""
        if self.device.type == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = self._forward(x)
        else:
            out = self._forward(x.to(self.input_dtype))
        out = out.to(self.input_dtype)
        if out.ndim != 2 or out.shape[1] != self.spec.dim:
            raise RuntimeError(
                f"encoder {self.spec.name!r} produced shape {tuple(out.shape)}, its spec declares dim {self.spec.dim}")
        return out

    @torch.inference_mode()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Preprocess + forward + pooling: float (B, 3, H, W) in [0, 1] -> (B, dim) in :attr:`input_dtype`."""
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
        precision = "" if self.precision == "auto" else f", precision={self.precision!r}"
        return (f"Encoder({self.spec.name!r}, source={self.spec.source!r}, device={str(self.device)!r}{precision}, "
                f"weights={self.weights_digest[:16]!r})")
