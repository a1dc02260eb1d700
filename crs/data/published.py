"""Image counts of the public data sets as published, for planning a run before the data is on disk.

``crs plan`` uses them only when a spec's data root does not exist, and labels every count it
derives from them as such. The test split is about 20 % of the patients (lesions) by the loaders'
default split, so the test counts are estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PublishedSize:
    modality: str
    images: int
    test_images: int
    source: str
    lists: dict[str, int] = field(default_factory=dict)  # images per official list file (``image_lists``)


PUBLISHED_SIZES: dict[str, PublishedSize] = {
    "isic2019": PublishedSize("dermoscopy", 25_331, 5_066, "ISIC 2019 training set; test = 20 % (estimate)"),
    "aptos2019": PublishedSize("fundus", 3_662, 732, "APTOS 2019 train.csv; test = 20 % (estimate)"),
    "chexpert": PublishedSize("chest_xray", 191_229, 37_879,
                              "CheXpert-v1.0-small frontal images (train.csv + valid.csv, measured in issue 24)"),
    "mimic_cxr": PublishedSize("chest_xray", 5_000, 0, "MIMIC-CXR-JPG official test split, frontal (order of)"),
    "ham10000": PublishedSize("dermoscopy", 10_015, 2_003, "HAM10000_metadata.csv; test = 20 % (estimate)"),
    "pad_ufes_20": PublishedSize("dermoscopy", 2_298, 460, "PAD-UFES-20 metadata.csv; test = 20 % (estimate)"),
    "messidor2": PublishedSize("fundus", 1_744, 349, "Messidor-2 gradable images (adjudicated); test = 20 % (estimate)"),
    "idrid": PublishedSize("fundus", 516, 103, "IDRiD disease grading, training 413 + testing 103"),
    "eyepacs": PublishedSize("fundus", 35_126, 7_025, "EyePACS trainLabels.csv; test = 20 % (estimate)"),
    "chestxray14": PublishedSize("chest_xray", 112_120, 25_596, "Data_Entry_2017.csv; official test_list.txt 25,596",
                                 {"test_list.txt": 25_596, "train_val_list.txt": 86_524}),
    "vindr_cxr": PublishedSize("chest_xray", 3_000, 3_000, "VinDr-CXR test set (consensus labels)"),
}
