"""Every pixel format a loader may meet decodes into the 8-bit range (decision 0045), or is refused naming the file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from crs.cli.datasets import datasets
from crs.data import DataError, load_dataset
from crs.data.check import check_dataset
from crs.data.images import dataset_image, decode_image, load_image

RAMP16 = (np.arange(32 * 32, dtype=np.int64).reshape(32, 32) * 64).astype(np.uint16)  # 0 .. 65472


def expected_from_16(values: np.ndarray, bits: int = 16) -> np.ndarray:
    top = (1 << bits) - 1
    return ((values.astype(np.int64) * 255 + top // 2) // top).astype(np.uint8)


def write_16bit_folder(root, n: int = 12) -> None:
    """A folder data set of 16-bit grey PNGs shaped like a film: values spread over the 16-bit range."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        film = rng.integers(2_000, 60_000, size=(24, 24)).astype(np.uint16)
        Image.fromarray(film).save(root / f"f{i}.png")
        rows.append({"path": f"f{i}.png", "label": ["a", "b"][i % 2], "split": ["train", "val", "test"][i % 3]})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)


def test_16bit_grey_png_data_set_is_not_white(tmp_path):
    # Before decision 0045, PIL's convert("RGB") clipped every value above 255: 99+ % of pixels at 255.
    write_16bit_folder(tmp_path)
    dataset = load_dataset("folder", tmp_path, modality="chest_xray", split_column="split")
    image = dataset_image(dataset, 0).numpy()
    assert (image == 255).mean() < 0.01
    film = np.asarray(Image.open(tmp_path / "f0.png")).astype(np.int64)
    # no resize (24 px into a pad to the data set's size would resize; compare unresized decode instead)
    decoded = np.asarray(decode_image(tmp_path / "f0.png", grey_ok=True))
    np.testing.assert_array_equal(decoded, expected_from_16(film))
    assert 2_000 * 255 // 65535 <= decoded.min() and decoded.max() <= 60_000 * 255 // 65535 + 1


@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_16bit_scaled_by_type_maximum_not_clipped(tmp_path, fmt):
    path = tmp_path / f"ramp.{fmt.lower()}"
    Image.fromarray(RAMP16).save(path, format=fmt)
    assert Image.open(path).mode == "I;16"
    decoded = decode_image(path)
    assert decoded.mode == "RGB"
    rgb = np.asarray(decoded)
    np.testing.assert_array_equal(rgb[..., 0], expected_from_16(RAMP16))
    assert (rgb[..., 0] == rgb[..., 2]).all()
    assert rgb.min() == 0 and rgb.max() == 255  # 65472 * 255 / 65535 rounds to 255


def test_mode_I_from_ppm_is_16_bit(tmp_path):
    path = tmp_path / "film.pgm"
    Image.fromarray(RAMP16).save(path)
    assert Image.open(path).mode in ("I", "I;16", "I;16B")
    np.testing.assert_array_equal(np.asarray(decode_image(path, grey_ok=True)), expected_from_16(RAMP16))


def test_eight_bit_modes_unchanged(tmp_path):
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, size=(16, 16), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(grey).save(tmp_path / "grey.png")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "rgb.png")), rgb)
    assert decode_image(tmp_path / "grey.png", grey_ok=True).mode == "L"
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "grey.png", grey_ok=True)), grey)
    # RGBA and LA: alpha dropped, stored colour kept
    rgba = np.concatenate([rgb, np.full((16, 16, 1), 7, np.uint8)], axis=2)
    Image.fromarray(rgba).save(tmp_path / "rgba.png")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "rgba.png")), rgb)
    Image.fromarray(np.stack([grey, np.zeros_like(grey)], axis=2), mode="LA").save(tmp_path / "la.png")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "la.png", grey_ok=True)), grey)
    # "1": black and white as 0 and 255
    Image.fromarray(grey > 127).save(tmp_path / "bw.png")
    assert Image.open(tmp_path / "bw.png").mode == "1"
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "bw.png", grey_ok=True)),
                                  np.where(grey > 127, 255, 0))


def test_palette_with_and_without_transparency_and_cmyk(tmp_path):
    palette_image = Image.new("P", (8, 8))
    palette_image.putpalette([0, 0, 0, 200, 10, 20, 30, 40, 250] + [0] * 759)
    palette_image.putdata([i % 3 for i in range(64)])
    palette_image.save(tmp_path / "p.png")
    palette_image.save(tmp_path / "pt.png", transparency=1)
    expected = np.array([[0, 0, 0], [200, 10, 20], [30, 40, 250]], np.uint8)[np.arange(64) % 3].reshape(8, 8, 3)
    for name in ("p.png", "pt.png"):
        assert Image.open(tmp_path / name).mode == "P"
        np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / name)), expected)
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # pure red in PIL's conversion
    cmyk.save(tmp_path / "c.tiff")
    assert np.asarray(decode_image(tmp_path / "c.tiff"))[0, 0].tolist() == [255, 0, 0]


def test_float_in_unit_range_scaled_and_others_refused(tmp_path):
    unit = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    Image.fromarray(unit).save(tmp_path / "unit.tiff")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "unit.tiff", grey_ok=True)),
                                  np.rint(unit.astype(np.float64) * 255).astype(np.uint8))
    Image.fromarray(unit * 1000).save(tmp_path / "hu.tiff")
    with pytest.raises(DataError, match=r"hu\.tiff: float pixels in \[0, 1000\]"):
        load_image(tmp_path / "hu.tiff", 8)
    signed = Image.fromarray(np.full((8, 8), -5, np.int32))
    signed.save(tmp_path / "signed.tiff")
    with pytest.raises(DataError, match=r"signed\.tiff: signed integer pixels"):
        decode_image(tmp_path / "signed.tiff")


def test_unknown_mode_refused_naming_the_file(tmp_path):
    lab = Image.new("LAB", (8, 8), (50, 0, 0))
    lab.save(tmp_path / "lab.tiff")
    assert Image.open(tmp_path / "lab.tiff").mode == "LAB"
    with pytest.raises(DataError, match=r"lab\.tiff: mode LAB has no faithful 8-bit mapping"):
        decode_image(tmp_path / "lab.tiff")


def test_datasets_check_reports_modes_and_refuses_unmappable(tmp_path):
    write_16bit_folder(tmp_path)
    Image.fromarray(np.full((8, 8), 500.0, np.float32)).save(tmp_path / "bad.tiff")
    table = pd.read_csv(tmp_path / "labels.csv")
    table.loc[len(table)] = {"path": "bad.tiff", "label": "a", "split": "test"}
    table.to_csv(tmp_path / "labels.csv", index=False)
    options = {"modality": "chest_xray", "split_column": "split"}
    report = check_dataset("folder", tmp_path, **options)
    assert report.pixel_formats == {"F 32-bit": 1, "I;16 16-bit": 12}
    assert report.n_unreadable == 1 and len(report.problems) == 1
    assert "bad.tiff" in report.problems[0] and "cannot map to 8 bit" in report.problems[0]
    result = CliRunner().invoke(datasets, ["check", "folder", str(tmp_path), "-o", "modality=chest_xray",
                                           "-o", "split_column=split"])
    assert result.exit_code == 1
    assert "pixels     F 32-bit 1, I;16 16-bit 12" in result.output
    (tmp_path / "bad.tiff").unlink()
    table.drop(index=len(table) - 1).to_csv(tmp_path / "labels.csv", index=False)
    assert check_dataset("folder", tmp_path, **options).ok
