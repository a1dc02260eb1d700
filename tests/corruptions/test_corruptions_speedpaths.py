"""The fast paths give what the plain definitions give: uint8 tables and JPEG, box taps,
all severities at once, and per-image grey detection in mixed batches."""

from __future__ import annotations

import pytest
import torch

from crs.corruptions import SEVERITIES, apply, resample, suite
from crs.corruptions.api import apply_severities
from crs.corruptions.scenes import scenes
from crs.spec import MODALITIES

SIZE = 40


@pytest.mark.parametrize("modality", MODALITIES)
def test_apply_severities_is_stacked_apply(modality):
    batch = scenes(modality, 2, SIZE, seed=5)
    ids = ["s1", "s2"]
    for name in suite(modality):
        stacked = apply_severities(batch, modality, name, (0, *SEVERITIES), ids)
        assert stacked.shape == (6, *batch.shape) and stacked.dtype == batch.dtype
        assert torch.equal(stacked[0], batch)
        for k, severity in enumerate(SEVERITIES, start=1):
            assert torch.equal(stacked[k], apply(batch, modality, name, severity, ids)), (name, severity)


@pytest.mark.parametrize("modality", MODALITIES)
def test_uint8_and_float_inputs_agree(modality):
    # the uint8 fast paths (tables, direct JPEG, alias Poisson on whole levels) give the float path's
    # bytes, up to one grey level where float rounding lands on a .5 boundary
    batch = scenes(modality, 2, SIZE, seed=6)
    ids = ["f1", "f2"]
    for name in suite(modality):
        as_uint8 = apply(batch, modality, name, 3, ids).int()
        as_float = (apply(batch.float() / 255, modality, name, 3, ids) * 255).round().int()
        assert (as_uint8 - as_float).abs().max() <= 1, name


def test_grey_film_variant_does_not_depend_on_a_colour_batch_mate():
    films = scenes("chest_xray", 2, SIZE, seed=8)
    colour = scenes("dermoscopy", 1, SIZE, seed=8)
    for name in suite("chest_xray"):
        alone = apply(films, "chest_xray", name, 4, ["g1", "g2"])
        mixed = apply(torch.cat([films[:1], colour, films[1:]]), "chest_xray", name, 4, ["g1", "c", "g2"])
        assert torch.equal(mixed[0], alone[0]) and torch.equal(mixed[2], alone[1]), name


def test_box_taps_equal_the_box_matrix():
    x = torch.rand(2, 3, 37, 53, dtype=torch.float64)
    for factor in (0.7, 0.5, 0.3, 0.16):
        rows, cols = int(37 * factor), int(53 * factor)
        dense = resample.box_weights(37, rows).double() @ x @ resample.box_weights(53, cols).double().T
        taps = resample.box_resample(resample.box_resample(x, -2, rows), -1, cols)
        assert torch.allclose(taps, dense, atol=1e-6), factor


def test_impulse_salt_and_pepper_even_odds():
    flat = torch.full((4, 3, 64, 64), 0.5)
    out = apply(flat, "dermoscopy", "impulse_noise", 5, list("abcd"))  # 17 % flipped
    salt, pepper = float((out == 1).float().mean()), float((out == 0).float().mean())
    assert abs(salt - 0.085) < 0.01 and abs(pepper - 0.085) < 0.01
