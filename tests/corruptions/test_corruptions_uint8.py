"""contrast_uint8 and pixelate_uint8 give the float path's bytes: pixelate exactly, contrast up to one
level on rare pixels; the nearest upsample picks the pixels F.interpolate(nearest-exact) picks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from crs.corruptions import SEVERITIES, apply_severities, ops, suite
from crs.corruptions.scenes import scenes
from crs.corruptions.uint8_ops import (
    contrast_uint8,
    nearest_exact_index,
    pixelate_uint8,
    upsample_nearest_exact,
)
from crs.spec import MODALITIES

SHAPES = [(37, 53), (40, 40)]
CASES = [
    (modality, name)
    for modality in MODALITIES
    for name in suite(modality)
    if name.startswith("contrast_") or name == "pixelate"
]


def test_registered_for_uint8_batches():
    assert ops.UINT8_OPERATORS[ops.contrast] is contrast_uint8
    assert ops.UINT8_OPERATORS[ops.pixelate] is pixelate_uint8


def mixed_batch(modality: str, height: int, width: int, seed: int) -> torch.Tensor:
    """Scenes of ``modality`` cropped to height x width, a uniform-noise colour image, a flat image,
    and a grey film whose levels are all odd (box averages of it land on .5 boundaries)."""
    g = torch.Generator().manual_seed(seed)
    side = max(height, width)
    films = scenes(modality, 3, side, seed=seed)[..., :height, :width]
    noise = torch.randint(0, 256, (1, 3, height, width), generator=g, dtype=torch.uint8)
    flat = torch.full((1, 3, height, width), 200, dtype=torch.uint8)
    odd = (
        (torch.randint(0, 128, (1, 1, height, width), generator=g) * 2 + 1)
        .to(torch.uint8)
        .expand(-1, 3, -1, -1)
    )
    return torch.cat([films, noise, flat, odd]).contiguous()


def float_path(batch: torch.Tensor, modality: str, name: str, ids: list[str]) -> torch.Tensor:
    """The float definition's bytes: round(float output * 255), half to even."""
    out = apply_severities(batch.float() / 255, modality, name, SEVERITIES, ids)
    return (out * 255).round().to(torch.int32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("modality", "name"), CASES)
def test_uint8_equals_float_path(modality, name, shape):
    batch = mixed_batch(modality, *shape, seed=3)
    ids = [f"u{k}" for k in range(len(batch))]
    fast = apply_severities(batch, modality, name, SEVERITIES, ids).to(torch.int32)
    reference = float_path(batch, modality, name, ids)
    assert not torch.equal(fast[0], batch.to(torch.int32))  # the corruption did something
    if name == "pixelate":
        assert torch.equal(fast, reference)
    else:
        off = (fast - reference).abs()
        assert int(off.max()) <= 1
        assert float((off > 0).float().mean()) < 1e-3


def test_contrast_tables_are_per_image():
    # one image's table follows its own mean: the same film next to a bright or a dark batch mate
    film = scenes("chest_xray", 1, 32, seed=1)
    bright, dark = torch.full_like(film, 250), torch.full_like(film, 5)
    with_bright = apply_severities(
        torch.cat([film, bright]), "chest_xray", "contrast_up", SEVERITIES, ["f", "b"]
    )
    with_dark = apply_severities(torch.cat([film, dark]), "chest_xray", "contrast_up", SEVERITIES, ["f", "d"])
    assert torch.equal(with_bright[:, 0], with_dark[:, 0])
    assert not torch.equal(with_bright[:, 1], with_dark[:, 1])


def test_contrast_uint8_on_one_and_three_channels():
    # a grey film as one channel and as three equal channels: the same mean, so the same bytes
    film = scenes("chest_xray", 2, 24, seed=2)
    context = ops.Context(["a", "b"], "contrast_down", 5, 24, 24, torch.device("cpu"), False)
    one = contrast_uint8(film[:, :1], 0.4, context)
    three = contrast_uint8(film, 0.4, context)
    assert one.shape == (2, 1, 24, 24) and three.shape == film.shape and one.dtype == torch.uint8
    assert torch.equal(three, one.expand_as(three))


def picked_by_interpolate(source: int, target: int) -> torch.Tensor:
    positions = torch.arange(source, dtype=torch.float64).view(1, 1, source, 1)
    return F.interpolate(positions, size=(target, 1), mode="nearest-exact").view(target).long()


@pytest.mark.parametrize(
    ("source", "target"), [(35, 224), (49, 224), (67, 224), (89, 224), (112, 224), (300, 224)]
)
def test_nearest_exact_index_is_interpolates(source, target):
    assert torch.equal(nearest_exact_index(source, target), picked_by_interpolate(source, target))


def test_nearest_exact_index_rounds_the_position_to_float32():
    # (6, 37), (12, 37), (24, 37) and (30, 53) are pairs where floor((j + 0.5) * source / target) in
    # float64 picks another pixel than ATen's float32 position; the sweep covers all small sizes
    for source in range(1, 65):
        for target in range(1, 65):
            assert torch.equal(nearest_exact_index(source, target), picked_by_interpolate(source, target))


@pytest.mark.parametrize(("small", "full"), [((5, 8), (37, 53)), ((20, 20), (40, 40)), ((11, 16), (37, 53))])
def test_upsample_equals_interpolate_on_uint8_and_float(small, full):
    images = torch.randint(
        0, 256, (2, 3, *small), generator=torch.Generator().manual_seed(4), dtype=torch.uint8
    )
    ours = upsample_nearest_exact(images, *full)
    assert torch.equal(ours, F.interpolate(images, size=full, mode="nearest-exact"))
    assert torch.equal(ours.float(), F.interpolate(images.float(), size=full, mode="nearest-exact"))
