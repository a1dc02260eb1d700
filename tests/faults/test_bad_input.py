"""Every bad input of the reliability issue, through the real command line: one line, non-zero exit.

Each test runs ``crs ...`` with click's CliRunner on ``crs.cli.main.cli`` and asserts the exit code and
the message (which names the bad thing and the fix). Where a run stops part-way, it also checks
that nothing half-written is marked complete: the store verifies with only ``incomplete`` chunks
and the interrupted encoder is not ``current``.
"""

from __future__ import annotations

import errno
import shutil

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from PIL import Image

from crs.cache.verify import verify_store
from crs.cli.main import cli

from faults_harness import write_fault_spec

FOLDER_SPEC = """
name = "bad"
cache = "{cache}"
output = "{out}"
encoders = ["pixel_stats"]

[encoder_defaults]
weights = "random"
input_size = 16

[extract]
batch_size = 4
chunk_rows = 4
corruptions = "none"

[[datasets]]
name = "folder"
loader = "folder"
root = "{root}"
options = {{ modality = "dermoscopy", kind = "multiclass", split_column = "split", image_size = 16 {extra} }}
"""


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), obj={})
    lines = result.output.strip().splitlines()
    return result.exit_code, (lines[-1] if lines else "")


def folder_tree(tmp_path, rows, extra=""):
    """A folder data set: 16 px PNGs and labels.csv with path,label,split rows."""
    root = tmp_path / "images"
    root.mkdir(parents=True, exist_ok=True)
    lines = ["path,label,split"]
    rng = np.random.default_rng(0)
    for i, (label, split) in enumerate(rows):
        name = f"img{i:03d}.png"
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(root / name)
        lines.append(f"{name},{label},{split}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(FOLDER_SPEC.format(cache=tmp_path / "cache", out=tmp_path / "out", root=root, extra=extra))
    return spec, root


GOOD_ROWS = [(label, split) for split in ("train", "train", "val", "test") for label in ("a", "b")] * 2


def spec_text(tmp_path, **replace):
    text = FOLDER_SPEC.format(cache=tmp_path / "cache", out=tmp_path / "out", root=tmp_path, extra="")
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"[extract]": "[extract]\nbatch_sise = 4"}, "extract: unknown field(s) ['batch_sise']"),
    ({"batch_size = 4": 'batch_size = "four"'}, "extract: field 'batch_size' must be int, got str 'four'"),
    ({'name = "bad"\n': ""}, "spec: missing required field 'name'"),
    ({'loader = "folder"\n': ""}, "datasets[0]: missing required field 'loader'"),
    ({"chunk_rows = 4": "chunk_rows = 4\nchunk_rows = 5"}, "not valid TOML"),
])
def test_malformed_spec(tmp_path, change, message):
    code, line = invoke("extract", str(spec_text(tmp_path, **change)), "-q")
    assert code == 2 and line.startswith("crs: error: ") and message in line


def test_unknown_encoder(tmp_path):
    code, line = invoke("extract", str(spec_text(tmp_path, **{'["pixel_stats"]': '["pixel_stat"]'})), "-q")
    assert code == 2 and "unknown encoder 'pixel_stat'; did you mean pixel_stats" in line


def test_unknown_data_set_loader(tmp_path):
    code, line = invoke("extract", str(spec_text(tmp_path, **{'loader = "folder"': 'loader = "isic2020"'})), "-q")
    assert code == 2 and "unknown data set loader 'isic2020'; known loaders:" in line


def test_missing_image(tmp_path):
    spec, root = folder_tree(tmp_path, GOOD_ROWS)
    (root / "img003.png").unlink()
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "image missing" in line and "img003.png" in line and "skip_bad" in line


def test_corrupt_image_stops_with_its_name_and_marks_nothing_half_done(tmp_path):
    spec, root = folder_tree(tmp_path, GOOD_ROWS)
    (root / "img009.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)  # a truncated PNG
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "image unreadable or truncated" in line and "img009.png" in line
    store = tmp_path / "cache" / "folder.zarr"
    assert not store.exists()  # the CLI's pre-flight check (crs check) found it before stage 1 began
    # Stage 1 on its own (the library, no pre-flight) meets it mid-run and marks nothing half done.
    from crs.benchmark import Benchmark
    from crs.data import DataError

    with pytest.raises(DataError, match=r"image unreadable or truncated: .*img009\.png"):
        Benchmark(str(spec)).extract(progress=False)
    assert {p.kind for p in verify_store(store)} == {"incomplete"}
    assert zarr.open_group(str(store), mode="r")["encoders/pixel_stats"].attrs.get("current") is None


def test_nan_features_from_an_encoder(tmp_path, monkeypatch):
    from crs.encoders.encoder import Encoder

    real_embed = Encoder.embed

    def embed_with_nan(self, x):
        features = real_embed(self, x)
        features[0, 0] = float("nan")
        return features

    monkeypatch.setattr(Encoder, "embed", embed_with_nan)
    spec, _ = folder_tree(tmp_path, GOOD_ROWS)
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "folder / pixel_stats" in line and "clean chunk 0" in line and "NaN or infinite" in line
    store = tmp_path / "cache" / "folder.zarr"
    assert {p.kind for p in verify_store(store)} == {"incomplete"}


def test_nan_features_from_an_import(reference, tmp_path):
    _, _, reference_store, _, _ = reference
    cache = tmp_path / "cache"
    shutil.copytree(reference_store, cache / "cxr.zarr")
    ids = [str(i) for i in zarr.open_group(str(cache / "cxr.zarr"), mode="r")["ids"][:].tolist()]
    features = np.ones((len(ids), 4), np.float32)
    features[5, 2] = np.inf
    np.save(tmp_path / "f.npy", features)
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    code, line = invoke("import-features", str(tmp_path / "f.npy"), "--ids", str(tmp_path / "ids.txt"),
                        "--dataset", "cxr", "--encoder", "outside", "--cache", str(cache))
    assert code == 2 and "NaN or infinite" in line and "1 row(s)" in line


def test_unexpected_label_values(tmp_path):
    spec, _ = folder_tree(tmp_path, GOOD_ROWS, extra=', class_names = ["a", "c"]')
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "labels ['b']" in line and "not in class_names ['a', 'c']" in line


def test_class_with_no_training_example(tmp_path):
    rows = [("a", "train")] * 4 + [("b", "val"), ("a", "val"), ("b", "test"), ("a", "test")]
    spec, _ = folder_tree(tmp_path, rows)
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "class(es) ['b'] have no examples in the train split" in line
    assert not (tmp_path / "cache" / "folder.zarr").exists()  # refused before anything was written


def test_empty_validation_split(tmp_path):
    rows = [("a", "train"), ("b", "train"), ("a", "test"), ("b", "test")]
    spec, _ = folder_tree(tmp_path, rows)
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "has no validation images" in line


def test_full_disk_leaves_nothing_half_written_marked_complete(tmp_path, monkeypatch):
    import zarr.storage._local as local

    spec, _ = folder_tree(tmp_path, GOOD_ROWS)
    original = local._put
    chunk_writes = {"n": 0}

    def put(path, value, exclusive=False):
        if "/c/" in str(path) and "clean/" in str(path):  # feature chunk files
            chunk_writes["n"] += 1
            if chunk_writes["n"] == 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return original(path, value, exclusive)

    monkeypatch.setattr(local, "_put", put)
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2
    # one line naming the store and the bytes (issue 31's full-disk message, crs/extract/runner.py)
    assert "disk full under the cache store" in line and "folder.zarr" in line and "still need about" in line
    assert "free that much space" in line
    store = tmp_path / "cache" / "folder.zarr"
    root = zarr.open_group(str(store), mode="r")
    group = next(iter(root["encoders/pixel_stats"].groups()))[1]
    assert np.asarray(group["clean__done"][:]).tolist() == [1, 1, 0, 0]  # the failed chunk is not marked
    assert {p.kind for p in verify_store(store)} == {"incomplete"}
    monkeypatch.setattr(local, "_put", original)  # space freed: the re-run resumes and finishes
    code, line = invoke("extract", str(spec), "-q")
    assert code == 0 and verify_store(store) == []


def test_unwritable_cache_folder(tmp_path):
    spec, _ = folder_tree(tmp_path, GOOD_ROWS)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, line = invoke("extract", str(spec), "--cache", str(blocker / "cache"), "-q")
    assert code == 2 and f"cache folder {blocker / 'cache'} is not writable" in line and "--cache" in line


def test_unwritable_output_folder(reference, tmp_path):
    spec = write_fault_spec(tmp_path, reference[1])
    shutil.copytree(reference[2], tmp_path / "cache" / "cxr.zarr")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, line = invoke("probe", str(spec), "--out", str(blocker / "out"), "-q")
    assert code == 2 and f"output folder {blocker / 'out'} is not writable" in line and "--out" in line


def test_test_split_with_one_class_is_refused_before_extraction(tmp_path):
    # every score would be NaN and the ranking would fail at the very end with "rankings contain NaN"
    rows = [("a", "train"), ("b", "train")] * 2 + [("a", "val"), ("b", "val"), ("a", "test"), ("a", "test")]
    spec, _ = folder_tree(tmp_path, rows)
    code, line = invoke("extract", str(spec), "-q")
    assert code == 2 and "test split (2 image(s)) holds only class 'a'" in line and "AUROC needs two classes" in line
    assert not (tmp_path / "cache" / "folder.zarr").exists()
    result = CliRunner().invoke(cli, ["check", str(spec)], obj={})
    assert result.exit_code == 1 and "holds only class 'a'" in result.output
