"""One corruption grid per modality of the spec: its first test image under every corruption x severity.

Stage 2 may run on a copied cache with no images, so a grid that cannot be drawn becomes a note
naming why, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GridResult:
    grids: tuple[tuple[Path, str, str], ...]  # (png, modality, data set)
    notes: tuple[str, ...]


def corruption_grids(spec, folder: Path) -> GridResult:
    """Draw a grid for the first data set of each modality; return the PNGs and notes on skipped ones."""
    if spec is None:
        return GridResult((), ("corruption grids skipped: the report was built without the spec, so the images are unknown",))
    from crs.corruptions import corruption_grid
    from crs.data import load_dataset
    from crs.data.base import safe_join
    from crs.data.images import load_image

    grids, notes, done = [], [], set()
    for entry in spec.datasets:
        try:
            dataset = load_dataset(entry.loader, entry.root, **entry.options)
        except Exception as error:  # images or CSVs missing on this machine
            notes.append(f"corruption grid for {entry.name} skipped: data set not readable here ({_first_line(error)})")
            continue
        if dataset.modality in done:
            continue
        test = [i for i, split in enumerate(dataset.splits) if split == "test"]
        if not test:
            notes.append(f"corruption grid for {entry.name} skipped: no test images")
            continue
        first = test[0]
        try:
            image = load_image(safe_join(Path(dataset.root), str(dataset.paths[first])), dataset.image_size)
            path = corruption_grid(image, dataset.modality, Path(folder) / f"corruption_grid_{dataset.modality}.png",
                                   image_id=str(dataset.ids[first]))
        except Exception as error:
            notes.append(f"corruption grid for {entry.name} skipped: {_first_line(error)}")
            continue
        grids.append((path, dataset.modality, entry.name))
        done.add(dataset.modality)
    return GridResult(tuple(grids), tuple(notes))


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
