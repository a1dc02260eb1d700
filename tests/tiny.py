"""A tiny synthetic benchmark spec shared by the end-to-end tests (seconds on 2 cores)."""

from __future__ import annotations

from pathlib import Path

TINY_SPEC = """
name = "tiny"
cache = "{cache}"
output = "{output}"
encoders = {encoders}

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
batch_size = 32
corruptions = ["gaussian_noise", "jpeg"]
severities = [1, 3]
chunk_rows = {chunk_rows}

[probe]
label_fractions = [0.25, 1.0]
seeds = [0, 1]
Cs = [0.01, 1.0]
jobs = 1

[score]
reference_encoder = "{reference}"
n_boot = 50

[[datasets]]
name = "derm"
loader = "synthetic"
root = "{data}"
options = {{ modality = "dermoscopy", n_images = {n_images}, image_size = 32 }}

[[datasets]]
name = "fundus"
loader = "synthetic"
root = "{data}"
options = {{ modality = "fundus", n_images = {n_images}, image_size = 32 }}

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "{data}"
options = {{ modality = "chest_xray", n_images = {n_images}, image_size = 32 }}
shift_target = {{ name = "cxr-b", loader = "synthetic", root = "{data}", options = {{ modality = "chest_xray", site = "b", n_images = 60, image_size = 32, shift_target = true }} }}
"""


def write_tiny_spec(
    folder: Path,
    encoders: tuple[str, ...] = ("pixel_stats", "resnet18"),
    data: Path | None = None,
    cache: Path | None = None,
    output: Path | None = None,
    n_images: int = 120,
    chunk_rows: int = 4096,
    reference: str | None = None,
) -> Path:
    """Write a tiny spec into ``folder`` and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    text = TINY_SPEC.format(
        cache=cache or folder / "cache",
        output=output or folder / "out",
        data=data or folder / "data",
        encoders="[" + ", ".join(f'"{e}"' for e in encoders) + "]",
        n_images=n_images,
        chunk_rows=chunk_rows,
        reference=reference or encoders[0],
    )
    path = folder / "spec.toml"
    path.write_text(text)
    return path
