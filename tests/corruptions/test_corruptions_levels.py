"""8-bit noise sampling: the exact output distributions, the alias tables that encode them, the sampler,
and how apply() routes whole-level and off-level images."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from crs.corruptions import apply, levels

CASES = [
    ("gaussian", 0.04),
    ("gaussian", 0.26),
    ("speckle", 0.45),
    ("impulse", 0.17),
    ("shot", 60.0),
    ("shot", 5.0),
]


def simulate_definition(kind: str, parameter: float, level: int, draws: int, rng) -> np.ndarray:
    """The float definition, per pixel, in float64 numpy: the output levels it gives for one input level."""
    x = np.full(draws, level / 255.0)
    if kind == "gaussian":
        y = x + parameter * rng.standard_normal(draws)
    elif kind == "speckle":
        y = x + x * parameter * rng.standard_normal(draws)
    elif kind == "impulse":
        u = rng.random(draws)
        y = np.where(u < parameter, (u < parameter / 2).astype(float), x)
    else:
        y = rng.poisson(x * parameter) / parameter
    return np.rint(np.clip(y, 0, 1) * 255).astype(int)


@pytest.mark.parametrize("kind,parameter", CASES)
def test_output_distribution_is_the_float_definition_rounded(kind, parameter):
    rng = np.random.default_rng(0)
    pmf = levels.PMFS[kind](parameter)
    assert np.allclose(pmf.sum(axis=1), 1.0, atol=1e-12) and pmf.min() >= 0
    for level in (0, 3, 128, 250, 255):
        observed = (
            np.bincount(simulate_definition(kind, parameter, level, 400_000, rng), minlength=256) / 400_000
        )
        assert 0.5 * np.abs(observed - pmf[level]).sum() < 0.01, (kind, parameter, level)


@pytest.mark.parametrize("kind,parameter", CASES)
def test_alias_table_encodes_the_distribution_within_2_to_the_minus_16(kind, parameter):
    exact = levels.PMFS[kind](parameter)
    implied = levels.implied_pmf(levels.alias_table(kind, parameter))
    assert np.abs(implied - exact).max() <= 2.0**-16
    assert np.allclose(implied.sum(axis=1), 1.0)


def test_impulse_and_black_speckle_are_exact_where_they_should_be():
    speckle = levels.PMFS["speckle"](0.45)
    assert speckle[0, 0] == 1.0  # black times anything stays black
    impulse = levels.PMFS["impulse"](0.2)
    assert impulse[100, 0] == pytest.approx(0.1) and impulse[100, 255] == pytest.approx(0.1)
    assert impulse[100, 100] == pytest.approx(0.8)
    shot = levels.PMFS["shot"](10.0)
    assert shot[0, 0] == 1.0  # no light, no photons


def test_sampler_follows_its_table():
    table = levels.alias_table("gaussian", 0.12)
    draws = levels.sample(np.full(300_001, 100, dtype=np.uint8), table, np.random.PCG64(3))
    assert draws.dtype == np.uint8 and draws.shape == (300_001,)
    expected = levels.implied_pmf(table)[100] * draws.size
    observed = np.bincount(draws, minlength=256)
    keep = expected > 5
    chi = stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum())
    assert chi.pvalue > 1e-3


def test_sampler_is_a_function_of_levels_and_stream():
    table = levels.alias_table("shot", 25.0)
    image = np.random.default_rng(1).integers(0, 256, (3, 17, 23), dtype=np.uint8)
    first = levels.sample(image, table, np.random.PCG64(9))
    again = levels.sample(image, table, np.random.PCG64(9))
    other = levels.sample(image, table, np.random.PCG64(10))
    assert first.shape == image.shape and np.array_equal(first, again) and not np.array_equal(first, other)
    # the input is not touched (the sampler writes levels into its own random words)
    assert np.array_equal(image, np.random.default_rng(1).integers(0, 256, (3, 17, 23), dtype=np.uint8))


@pytest.mark.parametrize("name", ["gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"])
def test_off_level_float_images_take_the_float_definition(name):
    # 0.3013 is no whole level: the continuous path; its output is not confined to levels
    x = torch.full((2, 3, 48, 48), 0.3013)
    out = apply(x, "dermoscopy", name, 3, ["a", "b"])
    assert abs(float(out.mean()) - 0.3013) < 0.03 or name == "impulse_noise"
    off_level = ((out * 255).round() / 255 - out).abs() > 1e-4
    assert bool(off_level.any())
    assert not torch.equal(out[0], out[1])


@pytest.mark.parametrize("name", ["gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"])
def test_whole_level_image_is_unmoved_by_an_off_level_batch_mate(name):
    whole = torch.randint(0, 256, (1, 3, 24, 24)).float() / 255
    off = torch.full((1, 3, 24, 24), 0.3013)
    alone = apply(whole, "dermoscopy", name, 2, ["w"])
    mixed = apply(torch.cat([off, whole]), "dermoscopy", name, 2, ["o", "w"])
    assert torch.equal(mixed[1], alone[0])
    assert torch.equal((alone * 255).round() / 255, alone)  # whole-level output stays on levels


@pytest.mark.parametrize("amount", [0.01, 0.17, 0.5])
def test_impulse_sampler_flips_amount_with_even_odds(amount):
    flip, salt = levels.impulse_thresholds(amount)
    assert salt * 2 == flip and abs(flip / 2**16 - amount) <= 2**-16
    image = np.random.default_rng(2).integers(1, 255, 400_000, dtype=np.uint8)
    out = levels.sample_impulse(image, amount, np.random.PCG64(4))
    flipped = out != image
    assert np.array_equal(np.isin(out[flipped], [0, 255]), np.ones(int(flipped.sum()), bool))
    n = image.size
    assert abs(flipped.mean() - amount) < 5 * np.sqrt(amount * (1 - amount) / n)
    assert abs((out == 255).mean() - amount / 2) < 5 * np.sqrt(amount / 2 / n)
    assert np.array_equal(levels.sample_impulse(image, amount, np.random.PCG64(4)), out)
