"""Small DICOM files for tests: films in every photometric case, with patient tags to search for.

Every file carries a patient name, id, birth date, institution and accession number, so a test
can search the cache, records and report for them (they must never appear there).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, RLELossless, generate_uid

PATIENT_NAME = "Tremblay^Odile^Quintessa"
PATIENT_ID = "PID-73915-QX"
PHI_VALUES = (PATIENT_NAME, PATIENT_ID, "Tremblay", "19470322", "Hopital-Saint-Zephyrin", "ACC-55810-ZZ")


def circle_film(height: int, width: int, radius: float, bits: int = 12, seed: int = 0) -> np.ndarray:
    """A film with a bright disc of ``radius`` pixels centred on a noisy background, ``bits`` deep."""
    rng = np.random.default_rng(seed)
    top = 2**bits - 1
    yy, xx = np.mgrid[:height, :width]
    inside = (yy - (height - 1) / 2) ** 2 + (xx - (width - 1) / 2) ** 2 <= radius**2
    film = rng.integers(int(top * 0.1), int(top * 0.3), size=(height, width))
    film[inside] = rng.integers(int(top * 0.7), int(top * 0.9), size=int(inside.sum()))
    return film.astype(np.uint16)


def write_film(
    path: Path,
    pixels: np.ndarray,
    photometric: str = "MONOCHROME2",
    bits_stored: int = 12,
    window: tuple[float, float] | None = None,
    voi_lut: tuple[list[int], np.ndarray] | None = None,
    rescale: tuple[float, float] | None = None,
    pixel_spacing: tuple[float, float] | None = None,
    modality: str = "CR",
    frames: int = 1,
    compress: bool = False,
    transfer_syntax: str | None = None,
    with_pixels: bool = True,
) -> Path:
    """Write one DICOM file (grey if ``pixels`` is 2-D, RGB if 3-D) with patient tags; return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"  # Digital X-Ray Image Storage - For Presentation
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.PatientName = PATIENT_NAME
    ds.PatientID = PATIENT_ID
    ds.PatientBirthDate = "19470322"
    ds.InstitutionName = "Hopital-Saint-Zephyrin"
    ds.AccessionNumber = "ACC-55810-ZZ"
    ds.Modality = modality
    if with_pixels:
        data = np.asarray(pixels)
        if frames > 1:
            data = np.stack([data] * frames)
        if data.ndim == 3 and data.shape[-1] == 3 and frames == 1:
            ds.set_pixel_data(data.astype(np.uint8), "RGB", 8)
        else:
            ds.set_pixel_data(data.astype(np.uint16), photometric, bits_stored)
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    if voi_lut is not None:
        item = Dataset()
        item.add_new("LUTDescriptor", "US", list(voi_lut[0]))  # both tags have an ambiguous VR: say it
        item.add_new("LUTData", "US", [int(v) for v in voi_lut[1]])
        ds.VOILUTSequence = Sequence([item])
    if rescale is not None:
        ds.RescaleSlope, ds.RescaleIntercept = rescale
    if pixel_spacing is not None:
        ds.PixelSpacing = list(pixel_spacing)
    if compress:
        ds.compress(RLELossless)
    if transfer_syntax is not None:  # a syntax no decoder reads: the stored bytes, encapsulated as it requires
        from pydicom.encaps import encapsulate

        ds.PixelData = encapsulate([bytes(ds.PixelData)])
        ds["PixelData"].VR = "OB"
        ds.file_meta.TransferSyntaxUID = transfer_syntax
    ds.save_as(path, enforce_file_format=True)
    return path


def shipped_file(name: str) -> Path | None:
    """A DICOM file that pydicom (or the pydicom-data package) ships, found without a network fetch."""
    import os

    import pydicom.data

    bundled = Path(os.path.dirname(pydicom.data.__file__)) / "test_files" / name
    if bundled.is_file():
        return bundled
    try:
        from pydicom.data import get_testdata_file

        found = get_testdata_file(name, download=False)
    except (TypeError, ValueError, OSError):
        return None
    return Path(found) if found else None


__all__ = ["PATIENT_ID", "PATIENT_NAME", "PHI_VALUES", "circle_film", "pydicom", "shipped_file", "write_film"]
