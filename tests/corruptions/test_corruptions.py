"""Every corruption: shape and dtype, determinism per image id, severity 0 identity, monotone degradation."""

from __future__ import annotations

import pytest
import torch

import crs.corruptions as corruptions
from crs.corruptions import CorruptionError, apply, suite
from crs.corruptions.scenes import scenes

SIZE = 48
# Spatial constants scale with side / 224, so below ~96 px the mildest blurs fall under one grey
# level (chest gaussian_blur severity 1 at 48 px is sigma 0.21 px) and rightly round to identity.
MONOTONE_SIZE = 96
CASES = [(modality, name) for modality in corruptions.MODALITIES for name in suite(modality)]


@pytest.fixture(scope="module")
def images() -> dict[str, torch.Tensor]:
    return {modality: scenes(modality, 3, SIZE, seed=1) for modality in corruptions.MODALITIES}


def mean_psnr(clean: torch.Tensor, corrupted: torch.Tensor) -> float:
    mse = ((clean.double() - corrupted.double()) / 255).pow(2).flatten(1).mean(1)
    return float((10 * torch.log10(1 / mse)).mean())


def test_suites_are_the_issue_lists():
    assert set(suite("dermoscopy")) == {
        "gaussian_noise",
        "shot_noise",
        "impulse_noise",
        "speckle_noise",
        "defocus_blur",
        "motion_blur",
        "zoom_blur",
        "brightness_up",
        "brightness_down",
        "contrast_up",
        "contrast_down",
        "pixelate",
        "jpeg",
        "black_corners",
        "hair",
        "colour_temperature",
    }
    assert set(suite("fundus")) == {
        "gaussian_noise",
        "speckle_noise",
        "defocus_blur",
        "motion_blur",
        "brightness_down",
        "contrast_down",
        "uneven_illumination",
        "pixelate",
        "jpeg",
    }
    assert set(suite("chest_xray")) == {
        "gaussian_noise",
        "shot_noise",
        "impulse_noise",
        "speckle_noise",
        "gaussian_blur",
        "brightness_up",
        "brightness_down",
        "contrast_up",
        "contrast_down",
        "gamma_up",
        "gamma_down",
        "pixelate",
        "jpeg",
    }
    assert isinstance(corruptions.SUITE_VERSION, str) and corruptions.SUITE_VERSION


@pytest.mark.parametrize("modality,name", CASES)
def test_shape_dtype_and_identity(images, modality, name):
    batch = images[modality]
    ids = ["a", "b", "c"]
    for dtype in (torch.uint8, torch.float32, torch.float16):
        x = batch if dtype == torch.uint8 else (batch.float() / 255).to(dtype)
        out = apply(x, modality, name, 3, ids)
        assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device
        if dtype != torch.uint8:
            assert float(out.min()) >= 0 and float(out.max()) <= 1
        clean = apply(x, modality, name, 0, ids)
        assert torch.equal(clean, x) and clean.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("modality,name", CASES)
def test_same_id_same_variant_whatever_the_batch(images, modality, name):
    batch = images[modality]
    ids = ["p1", "p2", "p3"]
    whole = apply(batch, modality, name, 4, ids)
    reversed_order = apply(batch.flip(0), modality, name, 4, ids[::-1]).flip(0)
    one_by_one = torch.cat([apply(batch[i : i + 1], modality, name, 4, ids[i : i + 1]) for i in range(3)])
    # shard: two images with a stranger in the batch
    mixed = apply(torch.cat([batch[2:3], batch[0:1]]), modality, name, 4, ["p3", "p1"])
    assert torch.equal(whole, reversed_order)
    assert torch.equal(whole, one_by_one)
    assert torch.equal(whole[2], mixed[0]) and torch.equal(whole[0], mixed[1])


@pytest.mark.parametrize("modality,name", CASES)
def test_psnr_falls_with_severity(modality, name):
    batch = scenes(modality, 3, MONOTONE_SIZE, seed=1)
    ids = ["m1", "m2", "m3"]
    psnr = [mean_psnr(batch, apply(batch, modality, name, s, ids)) for s in corruptions.SEVERITIES]
    assert all(a > b for a, b in zip(psnr, psnr[1:], strict=False)), (
        f"{modality}/{name}: PSNR by severity {psnr}"
    )


RANDOM = [
    c
    for c in CASES
    if c[1]
    in {
        "gaussian_noise",
        "shot_noise",
        "impulse_noise",
        "speckle_noise",
        "motion_blur",
        "hair",
        "colour_temperature",
        "uneven_illumination",
    }
]


@pytest.mark.parametrize("modality,name", RANDOM)
def test_different_ids_draw_different_randomness(modality, name):
    # copies of one image under different ids must not all agree; under one id they must
    # (eight ids: colour_temperature's only draw is a sign, equal for two ids half the time)
    image = scenes(modality, 1, SIZE, seed=2)
    copies = image.expand(8, -1, -1, -1).contiguous()
    distinct = apply(copies, modality, name, 5, [f"id{k}" for k in range(8)])
    same = apply(copies, modality, name, 5, ["x"] * 8)
    assert any(not torch.equal(distinct[0], distinct[k]) for k in range(1, 8))
    assert all(torch.equal(same[0], same[k]) for k in range(1, 8))


def test_noise_changes_with_severity_seed():
    # seeds include the severity: the noise pattern at severity 2 is not a rescaled severity 1 pattern
    image = torch.full((1, 3, 16, 16), 0.5)
    one = apply(image, "dermoscopy", "gaussian_noise", 1, ["z"]) - 0.5
    two = apply(image, "dermoscopy", "gaussian_noise", 2, ["z"]) - 0.5
    assert not torch.allclose(one / 0.04, two / 0.08, atol=1e-3)


def test_chest_noise_is_grey():
    image = scenes("chest_xray", 2, SIZE)
    for name in ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "jpeg"):
        out = apply(image, "chest_xray", name, 4, ["a", "b"])
        assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 1], out[:, 2]), name


def test_golden_photometric_values():
    # 0.5 grey: brightness 1.5 -> 0.75; gamma 0.4 -> 0.5 ** 0.4 = 0.7579; contrast keeps a flat image
    flat = torch.full((1, 3, 8, 8), 0.5)
    assert torch.allclose(apply(flat, "chest_xray", "brightness_up", 5, ["g"]), torch.tensor(0.75))
    assert torch.allclose(apply(flat, "chest_xray", "gamma_down", 5, ["g"]), torch.tensor(0.5**0.4))
    # (torchvision's grey weights 0.2989 + 0.587 + 0.114 sum to 0.9999, hence the 1e-4 tolerance)
    assert torch.allclose(apply(flat, "chest_xray", "contrast_down", 5, ["g"]), flat, atol=1e-4)
    # black corners at radius 0.9 of half the side: the corner pixel is 0, the centre kept
    ones = torch.ones(1, 3, 20, 20)
    out = apply(ones, "dermoscopy", "black_corners", 5, ["g"])
    assert out[0, :, 0, 0].eq(0).all() and out[0, :, 10, 10].eq(1).all()


def test_impulse_fraction_matches_amount():
    # severity 5 flips 17 % of pixels to 0 or 1; on a 0.5 grey image those are the changed ones
    flat = torch.full((4, 3, 64, 64), 0.5)
    out = apply(flat, "dermoscopy", "impulse_noise", 5, list("abcd"))
    assert abs(float((out != 0.5).float().mean()) - 0.17) < 0.01


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda x: apply(x, "ultrasound", "jpeg", 1, ["a"]), "dermoscopy, fundus, chest_xray"),
        (lambda x: apply(x, "fundus", "hair", 1, ["a"]), "gaussian_noise"),
        (lambda x: apply(x, "fundus", "jpeg", 6, ["a"]), "0 (clean), 1, 2, 3, 4, 5"),
        (lambda x: apply(x, "fundus", "jpeg", True, ["a"]), "valid severities"),
        (lambda x: apply(x, "fundus", "jpeg", 1, ["a", "b"]), "one id per image"),
        (lambda x: apply(x[:, :1], "fundus", "jpeg", 1, ["a"]), "(B, 3, H, W)"),
        (lambda x: apply(x.long(), "fundus", "jpeg", 1, ["a"]), "uint8 or float"),
    ],
)
def test_bad_inputs_name_the_valid_choices(call, needle):
    with pytest.raises(CorruptionError, match=None) as error:
        call(torch.zeros(1, 3, 8, 8, dtype=torch.uint8))
    assert needle in str(error.value)
    assert isinstance(error.value, ValueError)
