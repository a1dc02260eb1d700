"""DICOM decoding: the display chain (rescale, VOI LUT or window, MONOCHROME1), refusals, privacy.

Real files are the ones pydicom ships (and pydicom-data, installed from the registry, never fetched);
generated files cover each photometric case with known answers.
"""

from __future__ import annotations

import numpy as np
import pytest

from crs.data.base import DataError
from crs.data.dicom import PERCENTILE_WINDOW, _read, looks_like_dicom, read_dicom, scan_dicom
from crs.data.images import load_image

pydicom = pytest.importorskip("pydicom")
from pydicom.pixels import apply_modality_lut, apply_voi_lut  # noqa: E402

from dicom_factory import PATIENT_ID, PATIENT_NAME, circle_film, shipped_file, write_film  # noqa: E402


def _shipped(name: str):
    path = shipped_file(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pydicom-data)")
    return path


def test_monochrome1_film_and_its_monochrome2_twin_decode_to_the_same_image(tmp_path):
    film = circle_film(48, 80, radius=15, bits=12)
    mono2 = write_film(tmp_path / "mono2.dcm", film, "MONOCHROME2", window=(2048, 4096))
    # The twin stores 4095 - value with white = 0; its window is the mirror image (LINEAR: c' = 4095 - c + 1).
    mono1 = write_film(tmp_path / "mono1.dcm", 4095 - film, "MONOCHROME1", window=(2048, 4096))
    a, b = read_dicom(mono2), read_dicom(mono1)
    assert a.dtype == np.uint8 and a.shape == (48, 80)
    np.testing.assert_array_equal(a, b)
    assert a.min() < 80 and a.max() > 170  # the disc is bright and the background dark in both
    np.testing.assert_array_equal(load_image(mono2, 40, "pad"), load_image(mono1, 40, "pad"))
    # Without the inversion the two would be negatives of each other.
    uninverted = np.rint((4095 - film) / 4095 * 255).astype(np.uint8)
    assert np.abs(uninverted.astype(int) - b).mean() > 60


def test_monochrome1_twin_without_window_uses_the_same_percentile_window(tmp_path):
    film = circle_film(40, 40, radius=10, bits=12, seed=3)
    a = read_dicom(write_film(tmp_path / "m2.dcm", film, "MONOCHROME2"))
    b = read_dicom(write_film(tmp_path / "m1.dcm", 4095 - film, "MONOCHROME1"))
    assert np.abs(a.astype(int) - b).max() <= 1 and (a == b).mean() > 0.99


def test_real_monochrome1_film_matches_its_monochrome2_twin(tmp_path):
    source = _shipped("RG3_UNCI.dcm")  # a 10-bit MONOCHROME1 computed radiograph with a window
    ds = pydicom.dcmread(source)
    top = 2 ** int(ds.BitsStored) - 1
    twin = pydicom.dcmread(source)
    twin.PhotometricInterpretation = "MONOCHROME2"
    twin.PixelData = (top - ds.pixel_array).astype(ds.pixel_array.dtype).tobytes()
    twin.WindowCenter = top - float(ds.WindowCenter) + 1
    twin.save_as(tmp_path / "twin.dcm")
    a, b = read_dicom(source), read_dicom(tmp_path / "twin.dcm")
    np.testing.assert_array_equal(a, b)
    assert a.std() > 20


def test_12_bit_film_with_voi_lut_decodes_to_the_window_the_lut_gives(tmp_path):
    film = circle_film(32, 48, radius=9, bits=12, seed=5)
    lut = np.rint((np.arange(4096) / 4095) ** 0.5 * 65535).astype(np.uint16)  # a gamma curve, 16-bit output
    path = write_film(tmp_path / "voi.dcm", film, voi_lut=([4096, 0, 16], lut), window=(100, 50))
    decoded = read_dicom(path)
    ds = pydicom.dcmread(path)
    by_pydicom = apply_voi_lut(apply_modality_lut(ds.pixel_array, ds), ds)  # the LUT is preferred to the window
    np.testing.assert_array_equal(decoded, np.rint(by_pydicom / 65535 * 255).astype(np.uint8))
    np.testing.assert_array_equal(decoded, np.rint(lut[film] / 65535 * 255).astype(np.uint8))  # by hand
    no_lut = read_dicom(write_film(tmp_path / "plain.dcm", film))
    assert np.abs(no_lut.astype(int) - decoded).mean() > 10


def test_real_voi_lut_file(tmp_path):
    path = _shipped("vlut_04.dcm")
    ds = pydicom.dcmread(path)
    depth = int(ds.VOILUTSequence[0].LUTDescriptor[2])
    expected = np.rint(apply_voi_lut(ds.pixel_array, ds) / (2**depth - 1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(read_dicom(path), expected)


def test_rescale_slope_intercept_then_window_in_hounsfield_units(tmp_path):
    stored = circle_film(32, 32, radius=8, bits=12, seed=7)
    path = write_film(tmp_path / "ct.dcm", stored, rescale=(1.0, -1024.0), window=(40, 400), modality="CT")
    hu = stored.astype(float) - 1024
    by_hand = np.clip((hu - 39.5) / 399 + 0.5, 0, 1)  # DICOM LINEAR window, PS3.3 C.11.2.1.2.1
    decoded = read_dicom(path)
    assert np.abs(decoded.astype(int) - np.rint(by_hand * 255)).max() <= 1
    ignoring_rescale = np.clip((stored - 39.5) / 399 + 0.5, 0, 1)
    assert np.abs(decoded / 255 - ignoring_rescale).mean() > 0.2


def test_without_voi_a_robust_percentile_window_is_used():
    path = _shipped("CT_small.dcm")  # 16-bit CT with rescale, no window
    ds = pydicom.dcmread(path)
    values = apply_modality_lut(ds.pixel_array, ds)
    low, high = np.percentile(values, PERCENTILE_WINDOW)
    expected = np.rint(np.clip((values - low) / (high - low), 0, 1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(read_dicom(path), expected)


@pytest.mark.parametrize("name", ["MR_small_RLE.dcm", "MR_small_jp2klossless.dcm", "MR_small_jpeg_ls_lossless.dcm",
                                  "MR_small_bigendian.dcm", "MR_small_implicit.dcm"])
def test_compressed_and_other_transfer_syntaxes_decode_like_the_plain_file(name):
    np.testing.assert_array_equal(read_dicom(_shipped(name)), read_dicom(_shipped("MR_small.dcm")))


def test_colour_files_decode_to_rgb():
    rgb = read_dicom(_shipped("SC_rgb_rle.dcm"))
    ybr = read_dicom(_shipped("SC_rgb_dcmtk_+eb+cy+n1.dcm"))  # YBR JPEG: converted to RGB by pydicom
    assert rgb.shape == (100, 100, 3) and rgb.dtype == np.uint8
    assert np.abs(rgb.astype(int) - ybr).mean() < 3
    sixteen = read_dicom(_shipped("SC_rgb_rle_16bit.dcm"))
    assert np.abs(rgb.astype(int) - sixteen).max() <= 1


def test_multi_frame_and_non_image_objects_are_refused_with_one_line_naming_the_file(tmp_path):
    cases = {
        write_film(tmp_path / "cine.dcm", circle_film(16, 16, 4), frames=3): "multi-frame",
        _shipped("SC_rgb_rle_2frame.dcm"): "multi-frame",
        _shipped("rtplan.dcm"): "no pixel data",
        write_film(tmp_path / "sr.dcm", None, with_pixels=False): "no pixel data",
        write_film(tmp_path / "mpeg.dcm", circle_film(16, 16, 4), transfer_syntax="1.2.840.10008.1.2.4.100"):
            "unsupported transfer syntax",
    }
    for path, kind in cases.items():
        with pytest.raises(DataError) as caught:
            read_dicom(path)
        message = str(caught.value)
        assert kind in message and str(path) in message and "\n" not in message
        assert PATIENT_NAME not in message and PATIENT_ID not in message
        problem, _ = scan_dicom(path)
        assert problem is not None and problem.kind == kind


def test_patient_tags_are_never_parsed(tmp_path):
    path = write_film(tmp_path / "film.dcm", circle_film(16, 16, 4))
    ds = _read(path)
    assert "PixelData" in ds and "PatientName" not in ds and "PatientID" not in ds and "PatientBirthDate" not in ds


def test_dicom_found_by_its_marker_without_a_suffix(tmp_path):
    path = write_film(tmp_path / "IM00042", circle_film(20, 30, 6))
    assert looks_like_dicom(path) and not looks_like_dicom(tmp_path / "absent")
    image = load_image(path, 24, "crop")
    assert image.shape == (3, 24, 24) and image.dtype.is_floating_point is False


def test_non_square_pixels_are_resampled_to_square(tmp_path):
    # Rows 0.2 mm apart, columns 0.1 mm: a 20 mm disc spans 100 columns but only 50 rows.
    height, width = 60, 120
    yy, xx = np.mgrid[:height, :width]
    disc = ((yy - 29.5) / 25) ** 2 + ((xx - 59.5) / 50) ** 2 <= 1
    film = np.where(disc, 3500, 500).astype(np.uint16)
    decoded = read_dicom(write_film(tmp_path / "aniso.dcm", film, pixel_spacing=(0.2, 0.1), window=(2048, 4096)))
    assert decoded.shape == (120, 120)
    rows, cols = np.nonzero(decoded > 128)
    assert abs((rows.max() - rows.min()) - (cols.max() - cols.min())) <= 2


def test_missing_dicom_file_is_named(tmp_path):
    with pytest.raises(DataError, match="image not found: .*gone.dcm"):
        load_image(tmp_path / "gone.dcm", 16)


def test_weighted_percentile_is_numpys_percentile():
    from crs.data.dicom import weighted_percentile

    rng = np.random.default_rng(0)
    for _ in range(300):
        stored = rng.integers(-50, int(rng.integers(2, 4000)), int(rng.integers(1, 3000)))
        slope, intercept = float(rng.choice([1.0, 0.37, -2.5])), float(rng.choice([0.0, -1024.3]))
        levels, counts = np.unique(stored, return_counts=True)
        np.testing.assert_array_equal(weighted_percentile(levels * slope + intercept, counts, PERCENTILE_WINDOW),
                                      np.percentile(stored * slope + intercept, PERCENTILE_WINDOW))


@pytest.mark.parametrize("name", ["CT_small.dcm", "MR_small.dcm", "RG3_UNCI.dcm", "vlut_04.dcm", "mlut_18.dcm"])
def test_the_lookup_table_gives_what_the_chain_gives_pixel_by_pixel(name):
    from crs.data.dicom import _display, grey_to_uint8

    ds = pydicom.dcmread(_shipped(name))
    np.testing.assert_array_equal(grey_to_uint8(ds.pixel_array, ds), _display(ds.pixel_array, ds))
