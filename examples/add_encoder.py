"""Add your own encoder to crs, end to end.

Run:  python examples/add_encoder.py

1. Write a function that returns (torch module, preprocessing dict). The module maps a
   preprocessed batch (B, 3, H, W) to (B, dim); the dict holds the spec fields of its
   preprocessing, which crs applies batched on the device and hashes into the cache fingerprint.
2. Register an EncoderSpec whose source is "python:MODULE:FUNCTION".
3. Build it with crs.encoders.create(NAME) and embed images in [0, 1]; a benchmark spec can then
   list NAME beside the built-in encoders, and only this encoder is extracted.

To ship the encoder in an installed package instead, expose the specs through an entry point:

    [project.entry-points."crs.encoders"]
    my_encoder = "my_package.crs_plugin:specs"     # an EncoderSpec, a list, or a function returning them
"""

from __future__ import annotations

import torch
from torch import nn

import crs.encoders as encoders


class SmallConvNet(nn.Module):
    """A stand-in for your network: two conv blocks and global average pooling -> 32 features."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def build_encoder(weights: str | None):
    """crs calls this with None, "random" or a local weights path."""
    module = SmallConvNet()
    if weights not in (None, "random"):
        module.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    preprocessing = {"input_size": 96, "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25),
                     "interpolation": "bilinear", "crop_pct": 1.0, "resize_mode": "squash"}
    return module, preprocessing


SPEC = encoders.EncoderSpec(
    name="my_small_convnet", family="SmallConvNet", group="custom", source="python:add_encoder:build_encoder",
    input_size=96, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), interpolation="bilinear", crop_pct=1.0,
    resize_mode="squash", pooling="global average of the last conv block", dim=32, license="your licence",
    pretraining_data=("none: random weights in this example",),
)


def main() -> None:
    encoders.register(SPEC)
    encoder = encoders.create("my_small_convnet", weights="random")
    images = torch.rand(4, 3, 128, 128, generator=torch.Generator().manual_seed(0))  # your images in [0, 1]
    features = encoder.embed(images)
    print(f"{encoder!r}")
    print(f"features {tuple(features.shape)} {features.dtype}")
    print(f"fingerprint fields: {encoder.fingerprint_fields()}")


if __name__ == "__main__":
    main()
