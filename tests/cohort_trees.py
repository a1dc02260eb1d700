"""Official-layout trees of the shift-target cohorts (HAM10000, PAD-UFES-20, Messidor-2, IDRiD, EyePACS,
ChestX-ray14, VinDr-CXR): real file names, CSV columns and folders, a few dozen tiny images each.

Each builder documents its exact counts, which the loader tests check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from data_trees import Tree, write_image

HAM_CLASSES = ("akiec", "bcc", "bkl", "df", "mel", "nv", "vasc")
PAD_CLASSES = ("ACK", "BCC", "MEL", "NEV", "SCC", "SEK")


def build_ham10000(root: Path) -> Tree:
    """7 dx x 3 images = 21, ISIC_0024306...; per class the first two images share a lesion, so 14 lesions.
    Images alternate between HAM10000_images_part_1 and _part_2. Ages 30..50, sexes alternate, two sites."""
    rows = []
    for c, dx in enumerate(HAM_CLASSES):
        for i in range(3):
            number = 24306 + c * 3 + i
            image = f"ISIC_{number:07d}"
            part = "HAM10000_images_part_1" if number % 2 == 0 else "HAM10000_images_part_2"
            write_image(root / part / f"{image}.jpg", seed=7000 + number, size=24)
            lesion = f"HAM_{c * 2 + (0 if i < 2 else 1):07d}"
            rows.append({"lesion_id": lesion, "image_id": image, "dx": dx, "dx_type": "histo", "age": 30 + c * 3 + i,
                         "sex": ("male", "female")[i % 2], "localization": ("back", "face")[c % 2], "dataset": "vidir_modern"})
    pd.DataFrame(rows).to_csv(root / "HAM10000_metadata.csv", index=False)
    return Tree(root, n_listed=21)


def build_pad_ufes_20(root: Path) -> Tree:
    """6 diagnostics x 3 images = 18 PNGs in images/imgs_part_1 (first 9) and imgs_part_2; 9 patients
    (PAT_<k>, two images each), Fitzpatrick 1-3 with one missing, gender FEMALE/MALE."""
    rows = []
    for c, diagnostic in enumerate(PAD_CLASSES):
        for i in range(3):
            number = c * 3 + i
            patient = f"PAT_{100 + number // 2}"
            image = f"{patient}_{200 + number}_{300 + number}.png"
            part = "imgs_part_1" if number < 9 else "imgs_part_2"
            write_image(root / "images" / part / image, seed=8000 + number, size=24, fmt="PNG")
            rows.append({"patient_id": patient, "lesion_id": 200 + number, "smoke": False, "drink": False,
                         "age": 40 + number, "gender": ("FEMALE", "MALE")[number % 2],
                         "fitspatrick": np.nan if number == 5 else float(1 + number % 3), "region": "FACE",
                         "diameter_1": 5.0, "diameter_2": 4.0, "diagnostic": diagnostic, "itch": "True",
                         "img_id": image, "biopsed": c != 3})
    pd.DataFrame(rows).to_csv(root / "metadata.csv", index=False)
    return Tree(root, n_listed=18)


def build_messidor2(root: Path) -> Tree:
    """10 images listed (5 examinations, left and right eye), grades 0-4 twice; one image ungradable, so 9
    kept in 5 groups. Images in IMAGES/, mixed .png, .JPG and .tif."""
    rows, pairs = [], []
    extensions = (".png", ".JPG", ".tif")
    for exam in range(5):
        names = []
        for eye in range(2):
            number = exam * 2 + eye
            name = f"2005{number:04d}_4380{number}_0100_PP{extensions[number % 3]}"
            fmt = {".png": "PNG", ".JPG": "JPEG", ".tif": "TIFF"}[extensions[number % 3]]
            write_image(root / "IMAGES" / name, seed=9000 + number, size=24, fmt=fmt)
            gradable = 0 if number == 7 else 1
            rows.append({"image_id": name, "adjudicated_dr_grade": np.nan if not gradable else number % 5,
                         "adjudicated_dme": 0, "adjudicated_gradable": gradable})
            names.append(name)
        pairs.append(";".join(names))
    pd.DataFrame(rows).to_csv(root / "messidor_data.csv", index=False)
    (root / "messidor-2.csv").write_text("Image1;Image2\n" + "\n".join(pairs) + "\n")
    return Tree(root, n_listed=9)


def build_idrid(root: Path) -> Tree:
    """B. Disease Grading/: training 10 images (grades 0-4 twice), testing 5 (IDRiD_001-005 again, grades 0-4).
    The official CSV header has a trailing space ("Risk of macular edema ") and empty trailing columns."""
    base = root / "B. Disease Grading"
    for part, folder, labels_csv, n in (
        ("train", "a. Training Set", "a. IDRiD_Disease Grading_Training Labels.csv", 10),
        ("test", "b. Testing Set", "b. IDRiD_Disease Grading_Testing Labels.csv", 5),
    ):
        lines = ["Image name,Retinopathy grade,Risk of macular edema ,,"]
        for i in range(n):
            name = f"IDRiD_{i + 1:03d}"
            write_image(base / "1. Original Images" / folder / f"{name}.jpg", seed=9500 + i + (50 if part == "test" else 0), size=24)
            lines.append(f"{name},{i % 5},{i % 3},,")
        (base / "2. Groundtruths").mkdir(parents=True, exist_ok=True)
        (base / "2. Groundtruths" / labels_csv).write_text("\n".join(lines) + "\n")
    return Tree(root, n_listed=15)


def build_eyepacs(root: Path) -> Tree:
    """trainLabels.csv: 6 patients (10, 13, 15, 16, 17, 19) x left/right = 12 images train/<image>.jpeg,
    levels cycling 0-4; retinopathy_solution.csv: 2 patients x 2 eyes = 4 test images."""
    rows = []
    for k, patient in enumerate((10, 13, 15, 16, 17, 19)):
        for e, eye in enumerate(("left", "right")):
            image = f"{patient}_{eye}"
            write_image(root / "train" / f"{image}.jpeg", seed=9700 + k * 2 + e, size=24, fmt="JPEG")
            rows.append({"image": image, "level": (k * 2 + e) % 5})
    pd.DataFrame(rows).to_csv(root / "trainLabels.csv", index=False)
    test = []
    for k, patient in enumerate((1, 2)):
        for e, eye in enumerate(("left", "right")):
            image = f"{patient}_{eye}"
            write_image(root / "test" / f"{image}.jpeg", seed=9800 + k * 2 + e, size=24, fmt="JPEG")
            test.append({"image": image, "level": k * 2 + e, "Usage": "Private"})
    pd.DataFrame(test).to_csv(root / "retinopathy_solution.csv", index=False)
    return Tree(root, n_listed=12)


NIH_LABELS = ("Atelectasis|Effusion", "No Finding", "Cardiomegaly", "Edema|Consolidation|Infiltration", "Effusion",
              "Mass|Nodule", "No Finding", "Atelectasis", "Cardiomegaly|Effusion", "Hernia", "Pneumothorax", "Edema")


def build_chestxray14(root: Path) -> Tree:
    """Data_Entry_2017.csv with 12 images of 5 patients (follow-ups 000, 001...), PNG (grey) in
    images_001/images (first 6) and images_002/images; test_list.txt names 5 images (patients 3 and 4)."""
    rows = []
    patients = (1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 5, 5)
    follow = {}
    for i, (patient, labels) in enumerate(zip(patients, NIH_LABELS, strict=True)):
        follow[patient] = follow.get(patient, -1) + 1
        name = f"{patient:08d}_{follow[patient]:03d}.png"
        folder = "images_001" if i < 6 else "images_002"
        write_image(root / folder / "images" / name, seed=9900 + i, size=32, fmt="PNG", gray=True)
        rows.append({"Image Index": name, "Finding Labels": labels, "Follow-up #": follow[patient], "Patient ID": patient,
                     "Patient Age": 30 + 7 * patient, "Patient Gender": "MF"[patient % 2], "View Position": "PA" if i % 3 else "AP",
                     "OriginalImage[Width": 32, "Height]": 32, "OriginalImagePixelSpacing[x": 0.14, "y]": 0.14})
    pd.DataFrame(rows).to_csv(root / "Data_Entry_2017.csv", index=False)
    test = [r["Image Index"] for r in rows if r["Patient ID"] in (3, 4)]
    (root / "test_list.txt").write_text("\n".join(test) + "\n")
    (root / "train_val_list.txt").write_text("\n".join(r["Image Index"] for r in rows if r["Patient ID"] not in (3, 4)) + "\n")
    return Tree(root, n_listed=12)


VINDR_LABELS = ("Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly", "Consolidation", "Edema",
                "Pleural effusion", "Pneumothorax", "Other diseases", "No finding")
VINDR_TEST_SPELLING = {"Other diseases": "Other disease"}  # the public test file's own spelling of that column


def build_vindr_cxr(root: Path) -> Tree:
    """annotations/image_labels_test.csv: 6 DICOM images (consensus rows); image_labels_train.csv: 2 images x
    3 radiologists (the first image's Cardiomegaly marked by 2 of 3: positive; Edema by 1 of 3: negative).
    Test labels: Atelectasis on images 0-2, Cardiomegaly 1-3, Pleural effusion 2-4, Edema 3, Consolidation 4, No finding 5,
    Other diseases 4 (second train image too). Spelled as the public files are: the test file says "Other disease",
    the train file "Other diseases". (The real files have 28 label columns; ten are enough to exercise the reader.)"""
    from dicom_factory import circle_film, write_film

    test = []
    for i in range(6):
        image_id = f"{i:02d}c3a4f6e3fd1bdc0a8a8fb3ab4ac2f{i}"
        write_film(root / "test" / f"{image_id}.dicom", circle_film(32, 32, 6 + i, seed=i))
        row = {"image_id": image_id, **dict.fromkeys(VINDR_LABELS, 0)}
        row["Atelectasis"] = int(i <= 2)
        row["Cardiomegaly"] = int(1 <= i <= 3)
        row["Pleural effusion"] = int(2 <= i <= 4)
        row["Edema"] = int(i == 3)
        row["Consolidation"] = int(i == 4)
        row["No finding"] = int(i == 5)
        row["Other diseases"] = int(i == 4)
        test.append(row)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(test).rename(columns=VINDR_TEST_SPELLING).to_csv(root / "annotations" / "image_labels_test.csv", index=False)
    train = []
    for i in range(2):
        image_id = f"tr{i:02d}a4f6e3fd1bdc0a8a8fb3ab4ac2f"
        write_film(root / "train" / f"{image_id}.dicom", circle_film(32, 32, 9, seed=50 + i))
        for rad in range(3):
            row = {"image_id": image_id, "rad_id": f"R{rad + 8}", **dict.fromkeys(VINDR_LABELS, 0)}
            row["Cardiomegaly"] = int(i == 0 and rad < 2)
            row["Edema"] = int(i == 0 and rad == 2)
            row["No finding"] = int(i == 1)
            row["Other diseases"] = int(i == 1)
            train.append(row)
    pd.DataFrame(train).to_csv(root / "annotations" / "image_labels_train.csv", index=False)
    return Tree(root, n_listed=6)


def structured_image(seed: int, width: int = 96, height: int = 72) -> Image.Image:
    """A picture with its own structure (a gradient in a random direction, 2-4 ellipses, stripes), not just
    noise: distinct seeds give distinct layouts, as distinct patients' images are."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:height, :width].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    base = 0.5 + 0.4 * ((np.cos(angle) * xx / width + np.sin(angle) * yy / height) - 0.5)
    pixels = np.repeat(base[..., None], 3, axis=2) * rng.uniform(0.5, 1.0, 3)
    for _ in range(int(rng.integers(2, 5))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(6, height / 2), rng.uniform(6, width / 2)
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
        pixels[inside] = rng.uniform(0, 1, 3)
    frequency = rng.uniform(0.05, 0.3)
    pixels += 0.08 * np.sin(frequency * (xx * np.cos(angle * 2) + yy * np.sin(angle * 2)))[..., None]
    pixels += rng.normal(0, 0.02, pixels.shape)
    return Image.fromarray((np.clip(pixels, 0, 1) * 255).round().astype(np.uint8))


def build_isic_structured(root: Path, n: int = 60) -> list[str]:
    """An ISIC 2019-layout tree of ``n`` structured JPEGs (ISIC_0000000...), classes cycling, one lesion each."""
    classes = ("MEL", "NV", "BCC", "AK", "BKL", "DF", "VASC", "SCC")
    truth, meta, names = [], [], []
    for i in range(n):
        name = f"ISIC_{i:07d}"
        path = root / "ISIC_2019_Training_Input" / f"{name}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        structured_image(i).save(path, quality=90)
        truth.append({"image": name, **{c: float(c == classes[i % 8]) for c in classes}, "UNK": 0.0})
        meta.append({"image": name, "age_approx": 40, "anatom_site_general": "torso", "lesion_id": f"BCN_{i:07d}", "sex": "male"})
        names.append(name)
    pd.DataFrame(truth).to_csv(root / "ISIC_2019_Training_GroundTruth.csv", index=False)
    pd.DataFrame(meta).to_csv(root / "ISIC_2019_Training_Metadata.csv", index=False)
    return names


def build_ham_with_copies(root: Path, isic_root: Path, isic_names: list[str], n_distinct: int = 60) -> dict[str, str]:
    """A HAM10000-layout tree: ``n_distinct`` structured images of its own (seeds 10,000+) plus 30 copies of
    ISIC images, planted as: 8 byte-identical, 8 resized to 2/3 and re-encoded, 7 re-encoded as JPEG at
    quality 55, 7 as 16-bit grey PNG of an 8-bit grey ISIC-side PNG twin (ISIC images 50-56 are written
    as 8-bit grey PNG bytes under their .jpg name). Returns {HAM image id: ISIC image id} of the copies."""
    folder = root / "HAM10000_images_part_1"
    folder.mkdir(parents=True, exist_ok=True)
    rows, planted = [], {}
    dx = ("akiec", "bcc", "bkl", "df", "mel", "nv", "vasc")
    for i in range(n_distinct):
        image = f"ISIC_{24306 + i:07d}"
        structured_image(10_000 + i).save(folder / f"{image}.jpg", quality=90)
        rows.append(image)
    for k in range(30):
        source_name = isic_names[k if k < 23 else 50 + (k - 23)]
        source_path = isic_root / "ISIC_2019_Training_Input" / f"{source_name}.jpg"
        image = f"ISIC_{25306 + k:07d}"
        target = folder / f"{image}.jpg"
        if k < 8:
            target.write_bytes(source_path.read_bytes())
        elif k < 16:
            with Image.open(source_path) as picture:
                picture.resize((64, 48), Image.Resampling.BILINEAR).save(target, format="JPEG", quality=80)
        elif k < 23:
            with Image.open(source_path) as picture:
                picture.save(target, format="JPEG", quality=55)
        else:
            with Image.open(source_path) as picture:
                grey = np.asarray(picture.convert("L"))
            Image.fromarray(grey).save(source_path, format="PNG")  # the ISIC side: 8-bit grey PNG bytes
            Image.fromarray(grey.astype(np.uint16) * 257).save(target, format="PNG")  # HAM side: 16-bit
        planted[image] = source_name
        rows.append(image)
    table = [{"lesion_id": f"HAM_{i:07d}", "image_id": image, "dx": dx[i % 7], "dx_type": "histo", "age": 50,
              "sex": "male", "localization": "back"} for i, image in enumerate(rows)]
    pd.DataFrame(table).to_csv(root / "HAM10000_metadata.csv", index=False)
    return planted


DERM7PT_DIAGNOSES = ("melanoma (in situ)", "clark nevus", "lentigo", "basal cell carcinoma", "seborrheic keratosis",
                     "dermatofibroma", "vascular lesion", "reed or spitz nevus")


def build_derm7pt(root: Path) -> Tree:
    """meta/meta.csv with 8 diagnoses x 2 cases = 16 cases (case_num 0-15), each a dermoscopic and a clinical
    JPEG under images/<folder>/ (Derm7pt's own naming, e.g. images/A1l/Aal002.jpg); sexes alternate."""
    rows = []
    for case in range(16):
        diagnosis = DERM7PT_DIAGNOSES[case // 2]
        folder = f"F{case // 4}"
        derm, clinic = f"{folder}/Dd{case:03d}.jpg", f"{folder}/Dc{case:03d}.jpg"
        write_image(root / "images" / derm, seed=6000 + case, size=24)
        write_image(root / "images" / clinic, seed=6100 + case, size=24)
        rows.append({"case_num": case, "diagnosis": diagnosis, "seven_point_score": 1, "pigment_network": "typical",
                     "notes": "", "clinic": clinic, "derm": derm, "elevation": "flat",
                     "location": ("back", "lower limbs")[case % 2], "sex": ("female", "male")[case % 2],
                     "management": "excision"})
    (root / "meta").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(root / "meta" / "meta.csv", index=False)
    return Tree(root, n_listed=16)


PADCHEST_ROWS = (  # (Projection, MethodLabel, Labels)
    ("PA", "Physician", "['pleural effusion', 'cardiomegaly']"),
    ("L", "Physician", "['pleural effusion']"),
    ("PA", "RNN_model", "['normal']"),
    ("AP", "RNN_model", "[' atelectasis', 'consolidation']"),
    ("PA", "Physician", "['pulmonary edema', 'cardiomegaly']"),
    ("AP_horizontal", "RNN_model", "['pleural effusion', 'chronic changes']"),
    ("L", "RNN_model", "['normal']"),
    ("PA", "RNN_model", None),
    ("PA", "Physician", "['atelectasis']"),
    ("PA", "RNN_model", "['normal']"),
)


def build_padchest(root: Path) -> Tree:
    """PADCHEST_..._01.02.19.csv with 10 rows of 4 patients; images are 16-bit grey PNGs in <ImageDir>/ (0 and 1).
    2 laterals (L) and 1 row without labels: 7 kept by default; 3 of those labelled by a physician."""
    rows = []
    for i, (projection, method, labels) in enumerate(PADCHEST_ROWS):
        image = f"2165092784{i:02d}_00-{i:03d}-{i:03d}.png"
        folder = str(i % 2)
        pixels = (np.random.default_rng(4000 + i).integers(0, 4096, (32, 32)) * 16).astype(np.uint16)
        (root / folder).mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(root / folder / image)
        rows.append({"ImageID": image, "ImageDir": int(folder), "StudyDate_DICOM": 20140610 + i, "StudyID": f"s{i}",
                     "PatientID": f"pat{i // 3}", "PatientBirth": 1950.0 + i, "PatientSex_DICOM": "MF"[i % 2],
                     "ViewPosition_DICOM": "POSTEROANTERIOR", "Projection": projection, "MethodProjection": "Manual review",
                     "Pediatric": "No", "ReportID": 100 + i, "Report": "texto", "MethodLabel": method, "Labels": labels})
    pd.DataFrame(rows).to_csv(root / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", index=False)
    return Tree(root, n_listed=7)


def build_ham_with_edits(root: Path, isic_root: Path, isic_names: list[str], edit, n_distinct: int = 40,
                         n_copies: int = 10) -> dict[str, str]:
    """A HAM10000-layout tree: ``n_distinct`` structured images of its own (seeds 20,000+) plus ``n_copies``
    ISIC images (every third of the first ones) passed through ``edit`` (a PIL image -> PIL image: a flip,
    a crop...) and re-encoded as JPEG at quality 85. Returns {HAM image id: ISIC image id} of the copies."""
    folder = root / "HAM10000_images_part_1"
    folder.mkdir(parents=True, exist_ok=True)
    rows, planted = [], {}
    for i in range(n_distinct):
        image = f"ISIC_{24306 + i:07d}"
        structured_image(20_000 + i).save(folder / f"{image}.jpg", quality=90)
        rows.append(image)
    for k in range(n_copies):
        source_name = isic_names[3 * k]
        image = f"ISIC_{25306 + k:07d}"
        with Image.open(isic_root / "ISIC_2019_Training_Input" / f"{source_name}.jpg") as picture:
            edit(picture.convert("RGB")).save(folder / f"{image}.jpg", format="JPEG", quality=85)
        planted[image] = source_name
        rows.append(image)
    dx = ("akiec", "bcc", "bkl", "df", "mel", "nv", "vasc")
    table = [{"lesion_id": f"HAM_{i:07d}", "image_id": image, "dx": dx[i % 7], "dx_type": "histo", "age": 50,
              "sex": "male", "localization": "back"} for i, image in enumerate(rows)]
    pd.DataFrame(table).to_csv(root / "HAM10000_metadata.csv", index=False)
    return planted
