"""The cross-data-set duplicate check: exact and near copies found, dropped from the shift target, listed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cohort_trees import build_ham_with_copies, build_isic_structured, structured_image
from PIL import Image

from crs.data import load_dataset
from crs.data.overlap import find_overlaps, fingerprint, fingerprint_file, screen_target


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    base = tmp_path_factory.mktemp("overlap")
    (base / "isic").mkdir()
    (base / "ham").mkdir()
    names = build_isic_structured(base / "isic")
    copies = build_ham_with_copies(base / "ham", base / "isic", names)
    return base, copies


def test_all_thirty_planted_copies_found_and_nothing_else(planted):
    base, copies = planted
    isic = load_dataset("isic2019", base / "isic")
    ham = load_dataset("ham10000", base / "ham")
    found = find_overlaps(fingerprint(isic), fingerprint(ham), "isic", "ham")
    assert {o.b_id: o.a_id for o in found} == copies  # all 30, each to its own source, no false pair
    kinds = [o.kind for o in found]
    assert kinds.count("exact") == 8 and kinds.count("near") == 22


def test_eight_and_sixteen_bit_png_of_one_film_print_alike(tmp_path):
    grey = np.asarray(structured_image(3).convert("L"))
    Image.fromarray(grey).save(tmp_path / "eight.png")
    Image.fromarray(grey.astype(np.uint16) * 257).save(tmp_path / "sixteen.png")
    with Image.open(tmp_path / "sixteen.png") as image:
        assert image.mode.startswith("I")  # really a 16-bit file
    sha_8, hash_8, detail_8 = fingerprint_file(tmp_path / "eight.png")
    sha_16, hash_16, detail_16 = fingerprint_file(tmp_path / "sixteen.png")
    assert sha_8 != sha_16 and hash_8 == hash_16
    assert float(detail_8 @ detail_16) > 0.999


def test_distinct_structured_images_are_never_called_copies(tmp_path):
    for i in range(80):
        structured_image(500 + i).save(tmp_path / f"{i:03d}.jpg", quality=85)
    table = tmp_path / "labels.csv"
    table.write_text("path,label\n" + "".join(f"{i:03d}.jpg,{'ab'[i % 2]}\n" for i in range(80)))
    data = load_dataset("folder", tmp_path, modality="dermoscopy")
    prints = fingerprint(data)
    pairs = [o for o in find_overlaps(prints, prints) if o.a_id != o.b_id]
    assert pairs == []


def test_screen_target_drops_or_keeps_and_reports(planted):
    base, copies = planted
    isic = load_dataset("isic2019", base / "isic")
    ham = load_dataset("ham10000", base / "ham", label_map="isic2019-to-ham10000", proportions=[0, 0, 1])
    kept, report = screen_target(isic, ham)
    assert len(kept) == len(ham) - 30 and not set(copies) & set(kept.ids)
    assert sorted(report["dropped"]) == sorted(copies) and report["n_overlapping"] == 30 and not report["allowed"]
    allowed, report = screen_target(isic, ham, allow_overlap=True)
    assert len(allowed) == len(ham) and report["allowed"] and report["dropped"] == []


def test_extract_drops_the_copies_from_the_target_and_the_audit_lists_them(planted, tmp_path):
    from crs import Benchmark
    from crs.cache.store import FeatureStore, store_path
    from crs.evaluate.audit import audit_tables

    base, copies = planted
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
name = "overlap"
cache = "{tmp_path / 'cache'}"
output = "{tmp_path / 'out'}"
encoders = ["pixel_stats"]
[encoder_defaults]
weights = "random"
input_size = 32
[extract]
batch_size = 32
corruptions = ["gaussian_noise"]
severities = [1]
[probe]
label_fractions = [1.0]
seeds = [0]
Cs = [1.0]
jobs = 1
[score]
reference_encoder = "pixel_stats"
[[datasets]]
name = "isic"
loader = "isic2019"
root = "{base / 'isic'}"
options = {{ image_size = 32 }}
shift_target = {{ name = "ham", loader = "ham10000", root = "{base / 'ham'}", options = {{ label_map = "isic2019-to-ham10000", proportions = [0.0, 0.0, 1.0] }} }}
""")
    bench = Benchmark(spec)
    bench.extract(progress=False)
    table = FeatureStore(store_path(bench.spec.cache, "ham")).read_table()
    assert len(table.ids) == 60 and not set(copies) & set(table.ids.tolist())
    audit = json.loads(json.dumps(audit_tables(bench.spec)))
    assert sorted(audit["shift_overlaps"]["ham"]["dropped"]) == sorted(copies)
    assert audit["overlap_allowed"] is False
    assert audit["shift_label_maps"]["ham"]["no_counterpart"] == ["SCC"]
    from crs.report.shifts import scored_classes

    assert scored_classes(["ham"], bench.spec.cache) == {
        "ham": "scored on MEL, NV, BCC, AK, BKL, DF, VASC (not scored: SCC), label map isic2019-to-ham10000"}


def test_cli_overlap_reports_the_pair_and_exits_1(planted, tmp_path):
    from click.testing import CliRunner

    from crs.cli.main import cli

    base, copies = planted
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
name = "o"
cache = "{tmp_path / 'cache'}"
encoders = ["pixel_stats"]
[[datasets]]
name = "isic"
loader = "isic2019"
root = "{base / 'isic'}"
shift_target = {{ name = "ham", loader = "ham10000", root = "{base / 'ham'}" }}
""")
    result = CliRunner().invoke(cli, ["datasets", "overlap", str(spec)])
    assert result.exit_code == 1, result.output
    assert "isic x ham: 30 image(s) of ham also in isic (8 exact, 22 near)" in result.output


def test_prints_are_reused_until_a_file_changes(planted, tmp_path, monkeypatch):
    import os

    import crs.data.overlap as overlap

    base, _ = planted
    isic = load_dataset("isic2019", base / "isic")
    first = overlap.fingerprint_cached(isic, tmp_path)
    assert len(list(tmp_path.glob("isic2019-*.npz"))) == 1

    def no_decode(path):
        raise AssertionError(f"decoded {path} again")

    monkeypatch.setattr(overlap, "fingerprint_file", no_decode)
    again = overlap.fingerprint_cached(isic, tmp_path)  # read back, no image decoded
    assert (again.phash == first.phash).all() and (again.sha256 == first.sha256).all()
    changed = base / "isic" / isic.paths[0]
    stat = changed.stat()
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(AssertionError, match="decoded"):
        overlap.fingerprint_cached(isic, tmp_path)


def test_block_size_does_not_change_what_is_found(planted):
    base, _ = planted
    isic = fingerprint(load_dataset("isic2019", base / "isic"))
    ham = fingerprint(load_dataset("ham10000", base / "ham"))
    whole = find_overlaps(isic, ham)
    assert find_overlaps(isic, ham, block=1) == whole == find_overlaps(isic, ham, block=7)
