"""A picture of one image under every corruption (rows) and severity (columns), for clinicians."""

from __future__ import annotations

from pathlib import Path

import torch

from crs.corruptions.api import CorruptionError, apply, suite
from crs.spec import SEVERITIES


def corruption_grid(
    image_uint8_chw: torch.Tensor, modality: str, path: Path | str, image_id: str = "grid"
) -> Path:
    """Save a PNG grid: column 0 the clean image, columns 1..5 the severities, one row per corruption.

    ``image_id`` seeds the random corruptions exactly as in stage 1, so the grid shows the variant
    the encoder would see for an image of that id.
    """
    import matplotlib  # heavy (about 0.5 s), and only this helper draws

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    image = torch.as_tensor(image_uint8_chw)
    if image.ndim != 3 or image.shape[0] != 3 or image.dtype != torch.uint8:
        raise CorruptionError(
            f"the grid needs one uint8 image of shape (3, H, W), got {image.dtype} {tuple(image.shape)}"
        )
    names = suite(modality)
    batch = image[None].cpu()
    columns = (0, *SEVERITIES)
    figure, axes = plt.subplots(
        len(names), len(columns), figsize=(1.6 * len(columns) + 1.2, 1.6 * len(names)), squeeze=False
    )
    for row, name in enumerate(names):
        for column, severity in enumerate(columns):
            variant = apply(batch, modality, name, severity, [image_id])[0]
            axis = axes[row, column]
            axis.imshow(variant.permute(1, 2, 0).numpy())
            axis.set_xticks([])
            axis.set_yticks([])
            if row == 0:
                axis.set_title("clean" if severity == 0 else f"severity {severity}", fontsize=9)
            if column == 0:
                axis.set_ylabel(name.replace("_", " "), fontsize=9)
    figure.suptitle(f"{modality}: corruptions by severity", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.5 / figure.get_figheight()))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
