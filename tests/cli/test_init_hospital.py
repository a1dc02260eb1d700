"""Issue 15's done-when test: a hospital folder of DICOM and PNG files, `crs init`, `crs run`, a report.

The folder mixes DICOM files that pydicom ships (CT, MR, a non-square JPEG 2000 and a 12-bit MR
with an overlay), generated films (MONOCHROME1 and 2, 12-bit with a window or a VOI LUT, RLE
compressed, non-square) and PNG photos. A second folder, with its label names spelled another
way, is the shift target. No patient tag of any file may reach the cache, the records or the report.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from crs.cli.main import cli

pydicom = pytest.importorskip("pydicom")
from dicom_factory import PHI_VALUES, circle_film, shipped_file, write_film  # noqa: E402

SHIPPED = ("CT_small.dcm", "MR_small.dcm", "JPEG2000.dcm", "examples_overlay.dcm", "MR_small_RLE.dcm")


def _phi_of_shipped() -> set[str]:
    values = set()
    for name in SHIPPED:
        path = shipped_file(name)
        if path is not None:
            ds = pydicom.dcmread(path, stop_before_pixels=True)
            values |= {str(ds.get("PatientName", "")), str(ds.get("PatientID", ""))}
    return {v for v in values if len(v) >= 4}


def _site(root: Path, n_per_class: int, spelling: dict[str, str], seed: int) -> Path:
    """A folder of films and photos with labels.csv (path, finding, patient_id); class signal in brightness."""
    rng = np.random.default_rng(seed)
    rows = []
    shipped = [p for p in (shipped_file(n) for n in SHIPPED) if p is not None]
    for i in range(2 * n_per_class):
        label = "normal" if i % 2 == 0 else "pneumonia"
        patient = f"p{seed}{i // 2:03d}"
        kind = i % 6
        height, width = (48, 64) if i % 3 else (64, 40)
        film = circle_film(height, width, radius=12 + 6 * (label == "pneumonia"), seed=seed * 1000 + i)
        if kind == 0 and i // 6 < len(shipped):  # each shipped file once: a copy in two splits is a leak
            source = shipped[i // 6]
            path = f"dicom/shipped_{i:03d}.dcm"
            (root / "dicom").mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(source.read_bytes())
        elif kind == 1:
            path = f"dicom/mono1_{i:03d}"  # no suffix: found by the DICM marker, as PACS exports name them
            write_film(root / path, 4095 - film, photometric="MONOCHROME1", window=(2048, 4096))
        elif kind == 2:
            lut = np.clip(np.arange(4096) * 1.5 - 600, 0, 4095).astype(np.uint16)
            path = f"dicom/voi_{i:03d}.dcm"
            write_film(root / path, film, voi_lut=([4096, 0, 12], lut))
        elif kind == 3:
            path = f"dicom/rle_{i:03d}.dcm"
            write_film(root / path, film, compress=True, rescale=(1.0, -1024.0))
        else:
            path = f"png/{i:03d}.png"
            (root / "png").mkdir(parents=True, exist_ok=True)
            grey = (film >> 4).astype(np.uint8)
            Image.fromarray(np.repeat(grey[..., None], 3, axis=2)).save(root / path)
        rows.append({"path": path, "finding": spelling[label], "patient_id": patient,
                     "age": int(rng.integers(20, 90))})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    return root


def test_hospital_folder_init_run_report_without_phi(tmp_path, monkeypatch):
    site_a = _site(tmp_path / "site-a", 24, {"normal": "Normal", "pneumonia": "Pneumonia"}, seed=1)
    site_b = _site(tmp_path / "site-b", 10, {"normal": "NORMAL", "pneumonia": "pneumonia"}, seed=2)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    spec_path = tmp_path / "hospital.toml"
    result = runner.invoke(cli, [
        "init", str(site_a), "--spec", str(spec_path), "--shift-target", str(site_b),
        "--encoders", "pixel_stats,resnet18", "--weights", "random", "--input-size", "32",
        "--image-size", "32", "--quick", "--device", "cpu",
    ])
    assert result.exit_code == 0, result.output
    assert "dicom" in result.output and "chest_xray" in result.output and "'patient_id'" in result.output

    # The check command init prints reads every image once and finds nothing wrong.
    check_line = next(line for line in result.output.splitlines() if line.startswith("next: crs datasets check"))
    check = runner.invoke(cli, shlex.split(check_line.removeprefix("next: crs ")) + ["--json"])
    assert check.exit_code == 0, check.output
    n_dicom = int(pd.read_csv(site_a / "labels.csv")["path"].str.startswith("dicom/").sum())
    assert json.loads(check.output)["dicom"]["n_files"] == n_dicom >= 24

    spec = tomllib.loads(spec_path.read_text())
    options = spec["datasets"][0]["options"]
    assert options["kind"] == "multiclass" and options["label_columns"] == "finding"
    assert options["group_column"] == "patient_id" and options["modality"] == "chest_xray" and options["fit"] == "pad"
    shift = spec["datasets"][0]["shift_target"]
    assert shift["options"]["class_names"] == ["Normal", "Pneumonia"]
    assert shift["options"]["proportions"] == [0.0, 0.0, 1.0]

    result = runner.invoke(cli, ["run", str(spec_path), "-q"])
    assert result.exit_code == 0, result.output
    out = tmp_path / spec["output"]
    assert (out / "report.html").is_file()
    records = pd.read_parquet(out / "records.parquet")
    assert set(records["condition"]) >= {"clean", "corrupt", "shift"}

    # No patient tag, of the generated or of the shipped files, anywhere in the cache, records or report.
    needles = [*PHI_VALUES, *_phi_of_shipped()]
    texts = dict(_readable_texts(tmp_path / spec["cache"])) | dict(_readable_texts(out))
    assert any(p.endswith("records.parquet") for p in texts) and any(".zarr" in p for p in texts)
    assert any("dicom/mono1_" in text for text in texts.values())  # the search does see the image ids
    leaks = {path: [n for n in needles if n in text] for path, text in texts.items()}
    assert not {path: found for path, found in leaks.items() if found}

    # The same PHI check on a published bundle of the run (issue 42 item 5).
    pytest.importorskip("cryptography")
    published = runner.invoke(cli, ["publish", str(out), str(tmp_path / "bundle")])
    assert published.exit_code == 0, published.output
    bundle_texts = dict(_readable_texts(tmp_path / "bundle"))
    assert any("dicom/mono1_" in text for text in bundle_texts.values())  # image ids are in a full bundle
    bundle_leaks = {path: [n for n in needles if n in text] for path, text in bundle_texts.items()}
    assert not {path: found for path, found in bundle_leaks.items() if found}

    # An aggregates-only bundle of the same run: no PHI and not even an image id (issue 42 items 3 and 5).
    shared = runner.invoke(cli, ["publish", str(out), str(tmp_path / "aggregates"), "--aggregates-only"])
    assert shared.exit_code == 0, shared.output
    shared_texts = dict(_readable_texts(tmp_path / "aggregates"))
    assert len(shared_texts) == 5
    ids = [str(i) for i in json.loads((tmp_path / "bundle" / "images.json").read_text())[spec["datasets"][0]["name"]]["files"]]
    assert any(i.startswith("dicom/") for i in ids)
    shared_leaks = {path: [n for n in [*needles, *ids, "dicom/"] if n in text] for path, text in shared_texts.items()}
    assert not {path: found for path, found in shared_leaks.items() if found}


def _readable_texts(folder: Path):
    """(path, text) for every file under ``folder``, decompressed: parquet tables with their metadata,
    npz arrays, zarr stores array by array with their attributes, anything else as raw bytes."""
    import json

    import pyarrow.parquet as pq
    import zarr

    for store in folder.rglob("*.zarr"):
        group = zarr.open_group(str(store), mode="r")
        parts = [json.dumps(dict(group.attrs), default=str)]
        for path, node in group.members(max_depth=None):
            parts.append(f"{path} {json.dumps(dict(node.attrs), default=str)}")
            if isinstance(node, zarr.Array) and node.dtype.kind in "OTU" or str(getattr(node, "dtype", "")) == "StringDType()":
                parts.append(" ".join(map(str, np.asarray(node[...]).ravel().tolist())))
        yield str(store), "\n".join(parts)
    for path in folder.rglob("*"):
        if not path.is_file() or any(part.endswith(".zarr") for part in path.parts):
            continue
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            yield str(path), table.to_pandas().to_csv() + str(table.schema.metadata)
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as arrays:
                yield str(path), " ".join(
                    f"{key} {arrays[key].tolist() if arrays[key].dtype.kind in 'US' else ''}" for key in arrays.files
                )
        else:
            yield str(path), path.read_bytes().decode("latin-1")


def test_init_writes_one_shift_target_per_folder(tmp_path, monkeypatch):
    """`--shift-target` repeated: each site inspected against the source, named apart, loaded as the spec's targets."""
    from crs.spec import load_spec

    site_a = _site(tmp_path / "site-a", 4, {"normal": "Normal", "pneumonia": "Pneumonia"}, seed=1)
    site_b = _site(tmp_path / "site-b", 3, {"normal": "NORMAL", "pneumonia": "pneumonia"}, seed=2)
    other_b = _site(tmp_path / "other" / "site-b", 3, {"normal": "normal", "pneumonia": "PNEUMONIA"}, seed=3)
    monkeypatch.chdir(tmp_path)
    spec_path = tmp_path / "sites.toml"
    result = CliRunner().invoke(cli, [
        "init", str(site_a), "--spec", str(spec_path), "--shift-target", str(site_b), "--shift-target", str(other_b),
        "--encoders", "pixel_stats", "--weights", "random", "--quick", "--device", "cpu",
    ])
    assert result.exit_code == 0, result.output
    assert f"{site_b} as 'site-b'" in result.output and f"{other_b} as 'site-b-2'" in result.output
    spec = load_spec(spec_path)
    (entry,) = spec.datasets
    assert entry.shift_target_names == ("site-b", "site-b-2")
    assert [t.root for t in entry.shift_targets] == [site_b.resolve(), other_b.resolve()]
    for target in entry.shift_targets:
        assert target.options["class_names"] == ["Normal", "Pneumonia"]
        assert target.options["proportions"] == [0.0, 0.0, 1.0]
