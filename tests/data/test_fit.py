"""Fit modes: a non-square picture becomes square without distortion (crop, pad), or squashed on request."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from crs.data import load_dataset
from crs.data.base import DEFAULT_FIT, FIT_MODES, DataError
from crs.data.fit import fit_square
from crs.data.images import load_image
from crs.extract.runner import encoder_fingerprint_fields


def _disc_picture(path, width: int, height: int, radius: float, stripes: bool = False):
    yy, xx = np.mgrid[:height, :width]
    disc = (yy - (height - 1) / 2) ** 2 + (xx - (width - 1) / 2) ** 2 <= radius**2
    pixels = np.where(disc, 230, 40).astype(np.uint8)
    if stripes:  # white stripes on the left and right borders: crop cuts them, pad keeps them
        pixels[:, :3] = 255
        pixels[:, -3:] = 255
    Image.fromarray(np.repeat(pixels[..., None], 3, axis=2)).save(path)
    return path


def _disc_extent(image) -> tuple[int, int]:
    """(height, width) in pixels of the bright disc (above the half-way grey between disc and background)."""
    rows, cols = np.nonzero(image[0].numpy().astype(int) > 135)
    return int(rows.max() - rows.min() + 1), int(cols.max() - cols.min() + 1)


@pytest.mark.parametrize("shape", [(120, 80), (80, 120), (150, 60)])
@pytest.mark.parametrize("fit", ["crop", "pad"])
def test_a_circle_stays_round_in_crop_and_pad(tmp_path, shape, fit):
    width, height = shape
    path = _disc_picture(tmp_path / "disc.png", width, height, radius=min(width, height) / 4)
    image = load_image(path, 48, fit)
    assert tuple(image.shape) == (3, 48, 48)
    rows, cols = _disc_extent(image)
    assert abs(rows - cols) <= 1, (fit, shape, rows, cols)


def test_squash_distorts_a_circle(tmp_path):
    path = _disc_picture(tmp_path / "disc.png", 120, 60, radius=15)
    rows, cols = _disc_extent(load_image(path, 48, "squash"))
    assert rows >= cols + 8  # a 2:1 picture squashed to 1:1: the disc is twice as tall as wide


def test_crop_cuts_the_long_side_and_pad_adds_black_bars(tmp_path):
    path = _disc_picture(tmp_path / "wide.png", 120, 60, radius=15, stripes=True)
    cropped = load_image(path, 60, "crop")[0].numpy()
    padded = load_image(path, 60, "pad")[0].numpy()
    assert cropped[:, :2].max() < 255  # the border stripes lie outside the centred square
    assert padded[:12].max() == 0 and padded[-12:].max() == 0  # 120x60 -> 60x30 centred: 15 black rows each side
    assert padded[30, 0] > 200  # the left stripe kept


def test_square_pictures_decode_exactly_as_before_in_every_mode(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "square.png"
    Image.fromarray(rng.integers(0, 256, (50, 50, 3), dtype=np.uint8)).save(path)
    before = np.asarray(Image.open(path).convert("RGB").resize((32, 32), Image.Resampling.BILINEAR))
    for fit in FIT_MODES:
        np.testing.assert_array_equal(load_image(path, 32, fit).permute(1, 2, 0).numpy(), before)
        np.testing.assert_array_equal(load_image(path, 50, fit).permute(1, 2, 0).numpy(),
                                      np.asarray(Image.open(path).convert("RGB")))


def test_fit_square_keeps_mode_and_size_for_exact_short_side():
    picture = Image.new("L", (64, 32), 9)
    assert fit_square(picture, 32, "crop").size == (32, 32)
    assert fit_square(picture, 32, "pad").mode == "L"
    with pytest.raises(DataError, match="crop.*pad.*squash"):
        fit_square(picture, 32, "stretch")


def _folder(tmp_path, modality="chest_xray"):
    (tmp_path / "img").mkdir()
    rows = []
    for i in range(12):
        Image.new("RGB", (40, 30), (i * 10, 0, 0)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"path": f"img/{i}.png", "label": "ab"[i % 2]})
    pd.DataFrame(rows).to_csv(tmp_path / "labels.csv", index=False)
    return tmp_path


def test_fit_is_a_data_set_option_with_a_modality_default(tmp_path):
    root = _folder(tmp_path)
    for modality, fit in DEFAULT_FIT.items():
        assert load_dataset("folder", root, modality=modality).fit == fit
    dataset = load_dataset("folder", root, modality="dermoscopy", fit="squash")
    assert dataset.fit == "squash" and dataset.subset(np.arange(3)).fit == "squash"
    with pytest.raises(DataError, match="fit='round'"):
        load_dataset("folder", root, modality="fundus", fit="round")


class _Encoder:
    def fingerprint_fields(self):
        return {"source": "test", "preprocessing": {"input_size": 32}}


def test_fit_enters_the_cache_fingerprint(tmp_path):
    root = _folder(tmp_path)
    pad = encoder_fingerprint_fields(_Encoder(), load_dataset("folder", root, modality="chest_xray"), "v")
    crop = encoder_fingerprint_fields(_Encoder(), load_dataset("folder", root, modality="chest_xray", fit="crop"), "v")
    assert pad["image_fit"] == "pad" and crop["image_fit"] == "crop"
    assert {k: v for k, v in pad.items() if k != "image_fit"} == {k: v for k, v in crop.items() if k != "image_fit"}


def test_squash_on_a_grey_picture_is_the_old_decode_bit_for_bit(tmp_path):
    rng = np.random.default_rng(1)
    for mode, shape in (("L", (37, 90)), ("RGB", (61, 40, 3))):
        path = tmp_path / f"{mode}.png"
        Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(path)
        old = np.asarray(Image.open(path).convert("RGB").resize((32, 32), Image.Resampling.BILINEAR))
        np.testing.assert_array_equal(load_image(path, 32, "squash").permute(1, 2, 0).numpy(), old)
