"""One corruption grid per modality of the spec: its first test image under each corruption x severity.

Rows are the corruptions the run evaluated for that data set (the whole suite when the records
name none), columns clean and severities 1 to 5; each variant comes from ``crs.corruptions.apply``
with the image's own id, so it is the variant stage 1 fed the encoders. The tiles are composed into
one array and drawn with a single ``imshow``: ``crs.corruptions.corruption_grid`` draws one axes per
tile, which took 2.7 s per modality here against well under a second for the montage.

Stage 2 may run on a copied cache with no images, so a grid that cannot be drawn becomes a note
naming why, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from crs.corruptions import SEVERITIES, suite
from crs.data import load_entry
from crs.data.base import safe_join
from crs.data.images import load_image
from crs.report.style import report_style, save

TILE_PIXELS = 112
GAP_PIXELS = 6


@dataclass(frozen=True)
class GridResult:
    grids: tuple[tuple[Path, str, str], ...]  # (png, modality, data set)
    notes: tuple[str, ...]


def montage(tiles: list[list[np.ndarray]], gap: int = GAP_PIXELS) -> np.ndarray:
    """Rows of equally sized (H, W, 3) uint8 tiles -> one uint8 image with white gaps between tiles."""
    height, width = tiles[0][0].shape[:2]
    rows, columns = len(tiles), max(len(row) for row in tiles)
    canvas = np.full((rows * (height + gap) - gap, columns * (width + gap) - gap, 3), 255, dtype=np.uint8)
    for r, row in enumerate(tiles):
        for c, tile in enumerate(row):
            canvas[r * (height + gap): r * (height + gap) + height, c * (width + gap): c * (width + gap) + width] = tile
    return canvas


def _tile(image_chw, size: int = TILE_PIXELS) -> np.ndarray:
    """uint8 (3, H, W) tensor -> (size, size, 3) array, enlarged by pixel repetition (no smoothing of the corruption)."""
    array = np.asarray(image_chw).transpose(1, 2, 0)
    factor = max(1, round(size / array.shape[0]))
    return np.repeat(np.repeat(array, factor, axis=0), factor, axis=1)


def draw_grid(image_chw, modality: str, corruptions: list[str], image_id: str, path: Path, title: str) -> Path:
    """Save the montage of ``image_chw`` under each corruption (rows) at clean and severities 1..5."""
    import torch

    from crs.corruptions import apply  # torch: only when a grid is drawn

    batch = torch.as_tensor(image_chw)[None]
    clean = _tile(batch[0])
    tiles = [[clean] + [_tile(apply(batch, modality, name, severity, [image_id])[0]) for severity in SEVERITIES]
             for name in corruptions]
    canvas = montage(tiles)
    tile_size = clean.shape[0] + GAP_PIXELS
    with report_style():
        fig, ax = plt.subplots(figsize=(canvas.shape[1] / 100 + 1.6, canvas.shape[0] / 100 + 0.7))
        ax.imshow(canvas, interpolation="nearest")
        ax.set_xticks([c * tile_size + clean.shape[1] / 2 for c in range(len(SEVERITIES) + 1)],
                      ["clean"] + [f"severity {s}" for s in SEVERITIES])
        ax.xaxis.tick_top()
        ax.set_yticks([r * tile_size + clean.shape[0] / 2 for r in range(len(corruptions))],
                      [name.replace("_", " ") for name in corruptions])
        ax.tick_params(length=0)
        ax.grid(False)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_title(title, fontsize=11, pad=22)
        fig.tight_layout()
        return save(fig, path)


def corruption_grids(spec, folder: Path, evaluated: dict[str, list[str]] | None = None) -> GridResult:
    """A grid for the first data set of each modality in ``spec``; notes for those that cannot be drawn.

    ``evaluated`` maps a data set name to the corruptions its run records hold (rows of its grid).
    """
    if spec is None:
        return GridResult((), ("corruption grids skipped: the report was built without the spec, "
                               "so it does not know where the images are",))
    evaluated = evaluated or {}
    grids, notes, done = [], [], set()
    for entry in spec.datasets:
        try:
            dataset = load_entry(entry)
        except Exception as error:  # images or CSVs absent on this machine
            notes.append(f"corruption grid for {entry.name} skipped: data set not readable here ({_first_line(error)})")
            continue
        if dataset.modality in done:
            continue
        test = np.flatnonzero(np.asarray(dataset.splits) == "test")
        if not len(test):
            notes.append(f"corruption grid for {entry.name} skipped: no test images")
            continue
        first = int(test[0])
        known = suite(dataset.modality)
        rows = [name for name in evaluated.get(entry.name, []) if name in known] or known
        try:
            # the data set's own fit mode, as stage 1 decoded it (crs.data.images.dataset_image)
            image = load_image(safe_join(Path(dataset.root), str(dataset.paths[first])), dataset.image_size,
                               dataset.fit)
            path = draw_grid(image, dataset.modality, rows, str(dataset.ids[first]),
                             Path(folder) / f"corruption_grid_{dataset.modality}.png",
                             f"{dataset.modality}: first test image of {entry.name} "
                             f"({dataset.image_size} px, {dataset.fit})")
        except Exception as error:  # an unreadable image must not sink the report
            notes.append(f"corruption grid for {entry.name} skipped: {_first_line(error)}")
            continue
        grids.append((path, dataset.modality, entry.name))
        done.add(dataset.modality)
    return GridResult(tuple(grids), tuple(notes))


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
