"""The embedded default benchmark: three small synthetic modalities, each with a shifted second site.

Images are generated deterministically from a seed, written once as PNG files with a CSV (so stage 1
exercises real decoding), and carry planted, learnable class signal:

* ``dermoscopy``: 8 classes named as ISIC 2019, imbalanced like it (tempered so every class has
  examples); a lesion on skin whose colour, size, border irregularity and texture depend on the
  class; 1 to 3 images per lesion (the group).
* ``fundus``: 5 ordinal grades named as APTOS 2019; a fundus disc with vessels; the number of
  bright exudates and dark haemorrhages grows with the grade; 2 eyes per patient (the group).
* ``chest_xray``: 5 findings named as CheXpert, multi-label; lungs, heart and findings drawn as
  intensity structures (wide heart, basal fluid, haze, bands, patches); 1 to 3 films per patient.
  ``site="b"`` draws a second hospital: other contrast, gamma, noise and a resolution loss;
  ``site="c"`` a third: over-exposed, flatter contrast, a little blur (another shift target).
* dermoscopy and fundus ``site="b"``: another site's camera (:func:`_second_camera`: colour cast,
  gamma, resolution loss, noise) over other patients, so ``crs demo`` scores shift on all three tasks.

Every data set also has a ``sex`` and an ``age`` column per group (patient or lesion), drawn from a
random stream of their own (:func:`demographics`), so adding them changed no image and no label.
They carry no planted signal in the images; :func:`plant_subgroup_failure` makes one encoder's
features blind for one group (the demo's planted finding, ``crs.cache.planted``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from crs.data.base import DataError, Dataset, Task, group_split

GENERATOR_VERSION = "2"
SITES = ("a", "b", "c")
"""Hospitals of the synthetic chest task: ``a`` the source, ``b`` and ``c`` shifted sites."""
SITES_OF = {"dermoscopy": ("a", "b"), "fundus": ("a", "b"), "chest_xray": SITES}
"""Sites per modality: dermoscopy and fundus have a second site ``b`` (another camera), chest three."""

DERM_CLASSES = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
# ISIC 2019 training proportions, tempered by a square root so rare classes still have examples.
DERM_PREVALENCE = np.sqrt(np.array([4522, 12875, 3323, 867, 2624, 239, 253, 628], dtype=float))
FUNDUS_GRADES = ("0", "1", "2", "3", "4")
FUNDUS_PREVALENCE = np.sqrt(np.array([1805, 370, 999, 193, 295], dtype=float))
CXR_FINDINGS = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion")
CXR_PREVALENCE = np.array([0.3, 0.25, 0.15, 0.25, 0.35])

MODALITY_TASK = {
    "dermoscopy": Task("dermoscopy", "multiclass", DERM_CLASSES),
    "fundus": Task("fundus", "ordinal", FUNDUS_GRADES),
    "chest_xray": Task("chest_xray", "multilabel", CXR_FINDINGS),
}


def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    axis = np.linspace(-1.0, 1.0, size, dtype=np.float32)
    return np.meshgrid(axis, axis, indexing="ij")


def _smooth_noise(rng: np.random.Generator, size: int, scale: int) -> np.ndarray:
    """Low-frequency noise: a coarse random grid upsampled bilinearly."""
    coarse = rng.standard_normal((scale, scale)).astype(np.float32)
    image = Image.fromarray(coarse, mode="F").resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.float32)


def _dermoscopy(rng: np.random.Generator, label: int, size: int) -> np.ndarray:
    yy, xx = _grid(size)
    skin = np.array([0.85, 0.65, 0.55]) + rng.normal(0, 0.04, 3)
    image = np.ones((size, size, 3), np.float32) * skin
    hue = np.array(
        [[0.25, 0.15, 0.2], [0.45, 0.3, 0.2], [0.75, 0.5, 0.55], [0.7, 0.4, 0.35],
         [0.55, 0.4, 0.25], [0.6, 0.45, 0.35], [0.6, 0.15, 0.25], [0.7, 0.55, 0.5]]
    )[label]
    radius = [0.55, 0.35, 0.45, 0.3, 0.5, 0.25, 0.3, 0.45][label] * rng.uniform(0.8, 1.2)
    irregularity = [0.25, 0.03, 0.12, 0.08, 0.1, 0.02, 0.05, 0.2][label]
    frequency = [9, 3, 5, 12, 7, 2, 4, 10][label]
    angle = np.arctan2(yy, xx)
    phase = rng.uniform(0, 2 * np.pi)
    border = radius * (1 + irregularity * np.sin(frequency * angle + phase) + 0.08 * _smooth_noise(rng, size, 6))
    distance = np.sqrt((xx - rng.normal(0, 0.08)) ** 2 + (yy - rng.normal(0, 0.08)) ** 2)
    inside = 1.0 / (1.0 + np.exp((distance - border) * 30))
    texture = 0.08 * np.sin(frequency * 3 * xx + phase) * np.cos(frequency * 3 * yy)
    lesion = hue + rng.normal(0, 0.06, 3) + texture[..., None]
    image = image * (1 - inside[..., None]) + lesion * inside[..., None]
    image += rng.normal(0, 0.03, image.shape)
    return image


def _fundus(rng: np.random.Generator, grade: int, size: int) -> np.ndarray:
    yy, xx = _grid(size)
    radius = np.sqrt(xx**2 + yy**2)
    disc = (radius < 0.95).astype(np.float32)
    base = np.array([0.75, 0.35, 0.15]) + rng.normal(0, 0.05, 3)
    shading = 1 - 0.35 * radius**2
    image = disc[..., None] * base * shading[..., None]
    for _ in range(6):
        theta = rng.uniform(0, 2 * np.pi)
        vessel = np.exp(-((np.sin(theta) * xx - np.cos(theta) * yy) ** 2) / 0.0015) * (radius < 0.9)
        image -= 0.25 * vessel[..., None] * np.array([0.2, 1.0, 1.0])
    optic = np.exp(-(((xx - 0.45) ** 2 + yy**2) / 0.02))
    image += 0.5 * optic[..., None] * np.array([1.0, 0.9, 0.6])
    n_spots = rng.poisson(1 + 5 * grade)
    for _ in range(n_spots):
        cy, cx = rng.uniform(-0.7, 0.7, 2)
        spot = np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / rng.uniform(0.002, 0.008)))
        colour = np.array([0.9, 0.85, 0.3]) if rng.random() < 0.5 else np.array([-0.4, -0.3, -0.1])
        image += spot[..., None] * colour
    image += rng.normal(0, 0.03, image.shape) * disc[..., None]
    return image


def _chest(rng: np.random.Generator, findings: np.ndarray, size: int, site: str) -> np.ndarray:
    yy, xx = _grid(size)
    image = 0.75 - 0.1 * yy + 0.05 * _smooth_noise(rng, size, 4)
    for side in (-1, 1):
        lung = ((xx - 0.42 * side) / 0.32) ** 2 + ((yy + 0.05) / 0.7) ** 2 < 1
        image = np.where(lung, image - 0.4, image)
    heart_width = 0.22 * (1.6 if findings[1] else 1.0) * rng.uniform(0.9, 1.1)
    heart = ((xx - 0.08) / heart_width) ** 2 + ((yy - 0.3) / 0.3) ** 2 < 1
    image = np.where(heart, 0.8, image)
    if findings[0]:  # atelectasis: a dense horizontal band
        band_y = rng.uniform(-0.1, 0.3)
        image += 0.25 * np.exp(-((yy - band_y) ** 2) / 0.003) * (np.abs(xx) > 0.15)
    if findings[2]:  # consolidation: a dense patch
        cy, cx = rng.uniform(-0.3, 0.4), rng.choice([-0.42, 0.42])
        image += 0.35 * np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / 0.02))
    if findings[3]:  # edema: diffuse perihilar haze
        image += 0.2 * np.exp(-((xx**2) / 0.15 + (yy**2) / 0.3)) + 0.05 * _smooth_noise(rng, size, 12)
    if findings[4]:  # effusion: fluid at the bases
        image += 0.3 / (1 + np.exp(-(yy - 0.45) * 25)) * (np.abs(xx) > 0.1)
    image += rng.normal(0, 0.03, image.shape)
    if site == "c":  # a third hospital: brighter and flatter, slightly blurred, less noise
        soft = Image.fromarray(image.astype(np.float32), mode="F").resize(
            (size * 3 // 4, size * 3 // 4), Image.Resampling.BILINEAR
        )
        image = np.asarray(soft.resize((size, size), Image.Resampling.BILINEAR), dtype=np.float32)
        image = np.clip(image, 0, 1) ** 0.7 * 0.7 + 0.25
        image += rng.normal(0, 0.02, image.shape)
    if site == "b":  # another hospital: lower resolution, other contrast and gamma, more noise
        small = Image.fromarray(image.astype(np.float32), mode="F").resize(
            (size // 2, size // 2), Image.Resampling.BILINEAR
        )
        image = np.asarray(small.resize((size, size), Image.Resampling.BILINEAR), dtype=np.float32)
        image = np.clip(image, 0, 1) ** 1.4 * 0.8 + 0.12
        image += rng.normal(0, 0.06, image.shape)
    return np.repeat(image[..., None], 3, axis=2)


def _second_camera(rng: np.random.Generator, image: np.ndarray, size: int, tint: tuple[float, float, float],
                   gamma: float) -> np.ndarray:
    """Another site's camera: a colour cast, another gamma, a resolution loss (2/3) and more sensor noise.

    Used for site ``b`` of dermoscopy (a smartphone-like camera) and fundus (another fundus camera);
    site ``a`` images never pass here, so they stay byte-identical."""
    channels = []
    for c in range(3):
        plane = Image.fromarray(np.clip(image[..., c], 0, 1).astype(np.float32), mode="F")
        small = plane.resize((size * 2 // 3, size * 2 // 3), Image.Resampling.BILINEAR)
        channels.append(np.asarray(small.resize((size, size), Image.Resampling.BILINEAR), dtype=np.float32))
    shifted = np.clip(np.stack(channels, axis=2), 0, 1) ** gamma * np.asarray(tint, dtype=np.float32)
    return shifted + rng.normal(0, 0.05, shifted.shape)


def _labels_and_groups(modality: str, n_images: int, rng: np.random.Generator):
    if modality == "dermoscopy":
        labels = rng.choice(len(DERM_CLASSES), size=n_images, p=DERM_PREVALENCE / DERM_PREVALENCE.sum())
    elif modality == "fundus":
        labels = rng.choice(len(FUNDUS_GRADES), size=n_images, p=FUNDUS_PREVALENCE / FUNDUS_PREVALENCE.sum())
    else:
        labels = (rng.random((n_images, len(CXR_FINDINGS))) < CXR_PREVALENCE).astype(np.float32)
    group_list: list[int] = []
    group = 0
    while len(group_list) < n_images:
        repeat = 2 if modality == "fundus" else int(rng.integers(1, 4))
        group_list.extend([group] * repeat)
        group += 1
    groups = np.array(group_list[:n_images])
    # Images of one group share the label (one lesion, one patient's eyes or studies) except
    # chest films, whose findings may change between studies.
    if modality != "chest_xray":
        first = {g: labels[i] for i, g in reversed(list(enumerate(groups)))}
        labels = np.array([first[g] for g in groups])
    return labels, groups


DEMOGRAPHICS_STREAM = 2**31 + 7
"""Last entropy word of the demographics draw (no image or label stream uses it)."""
SEXES = ("female", "male")


def demographics(groups: np.ndarray, seed: int, site: str, modality: str) -> pd.DataFrame:
    """``sex`` and ``age`` (whole years, 18-95) per row, constant within a group, from their own stream."""
    rng = np.random.default_rng([seed, SITES.index(site), list(MODALITY_TASK).index(modality), DEMOGRAPHICS_STREAM])
    names, first = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    sex = rng.integers(0, 2, size=len(names))
    age = np.clip(np.round(rng.normal(58.0, 16.0, size=len(names))), 18, 95).astype(np.int64)
    return pd.DataFrame({"sex": np.asarray(SEXES)[sex][first], "age": age[first]})


def plant_subgroup_failure(features: np.ndarray, in_group: np.ndarray, seed: int = 0) -> np.ndarray:
    """A copy of ``features`` whose rows in ``in_group`` are shuffled among themselves.

    The group's feature distribution is kept, but a row's features no longer belong to its image, so
    they carry no signal about its labels: an encoder blind for that group, and only for it.
    """
    out = np.array(features, copy=True)
    rows = np.flatnonzero(np.asarray(in_group, dtype=bool))
    out[rows] = out[np.random.default_rng([seed, DEMOGRAPHICS_STREAM]).permutation(rows)]
    return out


def generate_synthetic(
    root: Path, modality: str, n_images: int = 400, image_size: int = 64, seed: int = 0, site: str = "a"
) -> Path:
    """Write ``n_images`` PNGs and ``labels.csv`` under ``root`` (idempotent); return the folder."""
    if modality not in MODALITY_TASK:
        raise DataError(f"synthetic: modality {modality!r} is not one of {sorted(MODALITY_TASK)}")
    if site not in SITES:
        raise DataError(f"synthetic: site must be one of {SITES}, got {site!r}")
    if site not in SITES_OF[modality]:
        raise DataError(f"synthetic: modality {modality!r} has sites {SITES_OF[modality]}, not {site!r}")
    params = dict(version=GENERATOR_VERSION, modality=modality, n_images=n_images, image_size=image_size,
                  seed=seed, site=site)
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(root) / f"{modality}-{site}-{digest}"
    marker = folder / "params.json"
    if marker.exists():
        return folder
    (folder / "images").mkdir(parents=True, exist_ok=True)
    # Each site draws other patients: a different stream of the same seed (site a 0, b 1, c 2).
    stream = SITES.index(site)
    rng = np.random.default_rng([seed, stream, list(MODALITY_TASK).index(modality)])
    labels, groups = _labels_and_groups(modality, n_images, rng)
    rows = []
    for i in range(n_images):
        image_rng = np.random.default_rng([seed, stream + 1, list(MODALITY_TASK).index(modality), i])
        if modality == "dermoscopy":
            array = _dermoscopy(image_rng, int(labels[i]), image_size)
            if site == "b":
                array = _second_camera(image_rng, array, image_size, tint=(1.08, 0.97, 0.86), gamma=0.85)
        elif modality == "fundus":
            array = _fundus(image_rng, int(labels[i]), image_size)
            if site == "b":
                array = _second_camera(image_rng, array, image_size, tint=(0.8, 1.05, 1.1), gamma=1.25)
        else:
            array = _chest(image_rng, labels[i], image_size, site)
        image_id = f"{modality[:4]}{site}_{i:05d}"
        path = f"images/{image_id}.png"
        pixels = (np.clip(array, 0, 1) * 255).round().astype(np.uint8)
        Image.fromarray(pixels).save(folder / path)
        row: dict[str, str | float] = {"image_id": image_id, "path": path, "group": f"{site}{groups[i]:05d}"}
        if modality == "chest_xray":
            row.update({name: float(labels[i, j]) for j, name in enumerate(CXR_FINDINGS)})
        else:
            row["label"] = int(labels[i])
        rows.append(row)
    table = pd.DataFrame(rows)
    table = pd.concat([table, demographics(table["group"].to_numpy(), seed, site, modality)], axis=1)
    table.to_csv(folder / "labels.csv", index=False)
    marker.write_text(json.dumps(params, indent=2))
    return folder


def load_synthetic(
    root: Path,
    modality: str = "dermoscopy",
    n_images: int = 400,
    image_size: int = 64,
    seed: int = 0,
    site: str = "a",
    split_seed: int = 0,
    shift_target: bool = False,
) -> Dataset:
    """Generate (once) and load one synthetic data set; a shift target has every image in "test"."""
    folder = generate_synthetic(root, modality, n_images, image_size, seed, site)
    table = pd.read_csv(folder / "labels.csv", dtype={"image_id": str, "group": str})
    if "sex" not in table:  # a folder generated before the demographics: the same draw, made here
        table = pd.concat([table, demographics(table["group"].to_numpy(), seed, site, modality)], axis=1)
    task = MODALITY_TASK[modality]
    if task.kind == "multilabel":
        labels = table[list(CXR_FINDINGS)].to_numpy(np.float32)
    else:
        labels = table["label"].to_numpy(np.int64)
    groups = table["group"].to_numpy(str)
    if shift_target:
        splits = np.full(len(table), "test")
    else:
        splits = group_split(groups, labels, (0.6, 0.2, 0.2), seed=split_seed)
    name = f"synthetic-{modality}" + ("" if site == "a" else f"-site-{site}")
    return Dataset(
        name=name, root=folder, task=task, modality=modality, image_size=image_size,
        ids=table["image_id"].to_numpy(str), paths=table["path"].tolist(), groups=groups,
        labels=labels, splits=splits, metadata=table.drop(columns=["path"]),
        split_design="official" if shift_target else "stratified",  # a shift target: the whole site, no draw
    )
