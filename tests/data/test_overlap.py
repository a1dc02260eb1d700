"""The cross-data-set duplicate check: exact and near copies found, dropped from the shift target, listed."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from cohort_trees import build_ham_with_copies, build_ham_with_edits, build_isic_structured, structured_image
from PIL import Image

from crs.data import load_dataset
from crs.data.base import DataError
from crs.data.overlap import find_overlaps, fingerprint, fingerprint_file


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
    isic = load_dataset("isic2019", base / "isic", image_size=32)
    ham = load_dataset("ham10000", base / "ham", image_size=32)
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


def _flip(picture):
    return picture.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


@pytest.mark.parametrize("size", [32, 224])
def test_flipped_copies_are_found_and_nothing_else(tmp_path, size):
    """Re-released sets often differ by a left-right flip: 10 flipped, re-encoded copies among 40 distinct images."""
    from click.testing import CliRunner

    from crs.cli.main import cli

    names = build_isic_structured(tmp_path / "isic", n=40)
    planted = build_ham_with_edits(tmp_path / "ham", tmp_path / "isic", names, _flip)
    spec = _overlap_spec(tmp_path, size)
    result = CliRunner().invoke(cli, ["datasets", "overlap", str(spec), "--json"])
    assert result.exit_code == 1, result.output
    pairs = json.loads(result.output)
    assert {p["b_id"]: p["a_id"] for p in pairs} == planted  # each flipped copy to its own source, no other pair
    assert {p["kind"] for p in pairs} == {"flipped"} and min(p["correlation"] for p in pairs) >= 0.9


def _crop(fraction):
    def edit(picture):
        width, height = picture.size
        dx, dy = round(width * fraction), round(height * fraction)
        return picture.crop((dx, dy, width - dx, height - dy))
    return edit


@pytest.mark.parametrize("fraction", [0.02, 0.04, 0.05])
def test_copies_cropped_by_up_to_five_percent_per_side_are_found_and_nothing_else(tmp_path, fraction):
    """A re-release cropped by 2-5 % per side (pHash 6-10 bits away, plain detail correlation about 0.1-0.7):
    every one of these 10 small 96 x 72 pictures found through a zoom view (before decision 0147: 9 and 6 of 10
    at 4 and 5 %; docs/datasets.md has the rates per image family); the 40 distinct images join nothing."""
    names = build_isic_structured(tmp_path / "isic", n=40)
    planted = build_ham_with_edits(tmp_path / "ham", tmp_path / "isic", names, _crop(fraction))
    isic = load_dataset("isic2019", tmp_path / "isic", image_size=224)
    ham = load_dataset("ham10000", tmp_path / "ham", image_size=224)
    found = find_overlaps(fingerprint(isic), fingerprint(ham), "isic", "ham")
    assert all(planted.get(o.b_id) == o.a_id for o in found)  # no false pair: each found copy to its own source
    assert {o.b_id: o.a_id for o in found} == planted and "cropped" in {o.kind for o in found}


@pytest.mark.parametrize("modality", ["dermoscopy", "fundus", "chest_xray"])
def test_distinct_synthetic_images_are_never_called_copies_nor_flips(tmp_path, modality):
    """The generator's images of one site look alike (one anatomy, one layout, one camera): no view (plain,
    flip, zoom, flip and zoom) joins two of them (the second stage: decisions 0142, 0147)."""
    from crs.data.synthetic import load_synthetic

    data = load_synthetic(tmp_path, modality=modality, n_images=120, image_size=64)
    prints = fingerprint(data)
    again = dataclasses.replace(prints, sha256=np.char.add("again-", prints.sha256))  # every pair looked at
    pairs = find_overlaps(prints, again)
    assert {o.b_id for o in pairs if o.a_id == o.b_id} == set(data.ids)  # each image found as itself...
    assert [o for o in pairs if o.a_id != o.b_id] == []  # ...and as no other, through no view


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
options = {{ image_size = 32 }}
shift_target = {{ name = "ham", loader = "ham10000", root = "{base / 'ham'}" }}
""")
    result = CliRunner().invoke(cli, ["datasets", "overlap", str(spec)])  # no cache: it decodes itself
    assert result.exit_code == 1, result.output
    assert "isic x ham: 30 image(s) of ham also in isic (8 exact, 22 near)" in result.output


SPEC = """
name = "overlap"
cache = "{cache}"
output = "{out}"
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
root = "{isic}"
options = {{ image_size = 32 }}
shift_target = {{ name = "ham", loader = "ham10000", root = "{ham}", options = {{ label_map = "isic2019-to-ham10000", proportions = [0.0, 0.0, 1.0] }} }}
"""


def write_spec(folder, base):
    spec = folder / "spec.toml"
    spec.write_text(SPEC.format(cache=folder / "cache", out=folder / "out", isic=base / "isic", ham=base / "ham"))
    return spec


@pytest.fixture(scope="module")
def extracted(planted, tmp_path_factory):
    """The planted pair extracted once; every image PIL opens and every file hashed is counted."""
    import PIL.Image

    import crs.cache.images as images
    from crs import Benchmark

    base, _ = planted
    bench = Benchmark(write_spec(tmp_path_factory.mktemp("extracted"), base))
    opened, hashed = [], []
    real_open, real_digest = PIL.Image.open, images.file_digest
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PIL.Image, "open", lambda fp, *a, **k: opened.append(str(fp)) or real_open(fp, *a, **k))
        patch.setattr(images, "file_digest", lambda path: hashed.append(str(path)) or real_digest(path))
        bench.extract(progress=False)
    return bench, opened, hashed


def test_extract_decodes_and_hashes_each_image_once(extracted, planted):
    """The check shares stage 1's decode and the image record's sha256: one PIL open and one hash per file
    (before, the check read and decoded every source and target image a second time); only the two files of
    each candidate near pair are read again, by the second stage (decision 0142): 22 pairs, 44 files."""
    _, opened, hashed = extracted
    base, copies = planted
    files = sorted(str(p) for p in base.rglob("*.jpg"))
    assert len(files) == 150
    assert sorted(set(opened)) == files
    again = sorted(f for f in set(opened) if opened.count(f) > 1)
    assert len(again) == 44 and max(opened.count(f) for f in again) == 2
    assert sorted(hashed) == files


def test_extract_keeps_every_target_image_and_stage_2_leaves_the_copies_out(extracted, planted):
    from crs.cache.prints import kept_rows
    from crs.cache.store import FeatureStore, store_path
    from crs.evaluate.audit import audit_tables
    from crs.evaluate.units import evaluation_conditions, probe_units
    from crs.report.shifts import scored_classes

    bench, _, _ = extracted
    _, copies = planted
    store = FeatureStore(store_path(bench.spec.cache, "ham"))
    table = store.read_table()
    assert len(table.ids) == 90  # features of every target image; the copies are left out at stage 2
    kept = table.ids[kept_rows(store, table.ids, table.indices("test"))]
    assert len(kept) == 60 and not set(copies) & set(kept.tolist())
    unit = next(u for u in probe_units(bench.spec) if u.task == "isic")
    source = FeatureStore(store_path(bench.spec.cache, "isic"))
    source_table = source.read_table()
    shift = [c for c in evaluation_conditions(unit, bench.spec.cache, source, source_table,
                                              np.zeros((len(source_table.indices("test")), 1)))
             if c.condition == "shift"]
    assert [len(c.labels) for c in shift] == [60]
    assert not set(copies) & set(table.ids[shift[0].rows].tolist())
    audit = json.loads(json.dumps(audit_tables(bench.spec)))
    assert sorted(audit["shift_overlaps"]["ham"]["dropped"]) == sorted(copies)
    assert audit["shift_overlaps"]["ham"]["n_overlapping"] == 30
    assert audit["overlap_allowed"] is False
    assert audit["shift_label_maps"]["ham"]["no_counterpart"] == ["SCC"]
    assert scored_classes(["ham"], bench.spec.cache) == {
        "ham": "scored on MEL, NV, BCC, AK, BKL, DF, VASC (not scored: SCC), label map isic2019-to-ham10000"}


def test_prints_kept_by_extraction_are_those_a_standalone_decode_makes(extracted, planted):
    """The runner's prints and the stand-alone decode's (`crs datasets overlap` without a cache) are one print."""
    from crs.cache.prints import read_prints
    from crs.cache.store import FeatureStore, store_path
    from crs.data.shift import adopt_source_geometry

    bench, _, _ = extracted
    base, _ = planted
    isic = load_dataset("isic2019", base / "isic", image_size=32)
    ham = adopt_source_geometry(load_dataset("ham10000", base / "ham", label_map="isic2019-to-ham10000",
                                             proportions=[0, 0, 1]), isic)
    for name, dataset in (("isic", isic), ("ham", ham)):
        kept = read_prints(FeatureStore(store_path(bench.spec.cache, name)), dataset)
        alone = fingerprint(dataset)
        assert kept is not None and (kept.phash == alone.phash).all() and (kept.sha256 == alone.sha256).all()
        assert (kept.thumbs == alone.thumbs).all() and kept.thumbs.dtype == np.uint16


def test_cli_overlap_uses_the_prints_extraction_kept(extracted, monkeypatch):
    from click.testing import CliRunner

    import crs.data.overlap as overlap
    from crs.cli.main import cli

    bench, _, _ = extracted

    def no_decode(*args, **kwargs):
        raise AssertionError("decoded an image again")

    monkeypatch.setattr(overlap, "prints_of", no_decode)
    result = CliRunner().invoke(cli, ["datasets", "overlap", str(bench.spec.cache.parent / "spec.toml")])
    assert result.exit_code == 1, result.output
    assert "isic x ham: 30 image(s) of ham also in isic (8 exact, 22 near)" in result.output


def test_a_second_extract_decodes_nothing_and_a_store_without_prints_is_printed_again(extracted, monkeypatch):
    import PIL.Image

    import crs.extract.overlap as stage_overlap
    from crs.cache.prints import GROUP
    from crs.cache.store import FeatureStore, store_path

    bench, _, _ = extracted
    report = dict(FeatureStore(store_path(bench.spec.cache, "ham")).root.attrs["overlap"])

    def no_decode(*args, **kwargs):
        raise AssertionError("decoded an image again")

    with monkeypatch.context() as patch:
        patch.setattr(PIL.Image, "open", no_decode)
        bench.extract(progress=False)  # everything cached: the prints are read from the stores
    del FeatureStore(store_path(bench.spec.cache, "ham"), mode="a").root[GROUP]  # as a store from before prints
    printed = []
    real = stage_overlap.prints_of
    monkeypatch.setattr(stage_overlap, "prints_of", lambda d, rows, *a: printed.append(len(rows)) or real(d, rows, *a))
    bench.extract(progress=False)
    assert printed == [90]  # only the target's rows, decoded again, once
    assert dict(FeatureStore(store_path(bench.spec.cache, "ham")).root.attrs["overlap"]) == report


def test_allow_overlap_keeps_the_copies_and_marks_the_run(planted, tmp_path):
    from crs import Benchmark
    from crs.cache.prints import kept_rows
    from crs.cache.store import FeatureStore, store_path
    from crs.evaluate.audit import audit_tables

    base, _ = planted
    bench = Benchmark(write_spec(tmp_path, base))
    bench.extract(progress=False, allow_overlap=True)
    store = FeatureStore(store_path(bench.spec.cache, "ham"))
    table = store.read_table()
    assert len(kept_rows(store, table.ids, table.indices("test"))) == 90
    audit = audit_tables(bench.spec)
    assert audit["overlap_allowed"] is True and audit["shift_overlaps"]["ham"]["dropped"] == []
    assert audit["shift_overlaps"]["ham"]["n_overlapping"] == 30


def test_a_target_that_is_all_copies_is_refused(extracted, planted):
    from crs.extract.overlap import screen_target

    bench, _, _ = extracted
    base, _ = planted
    isic = load_dataset("isic2019", base / "isic", image_size=32)
    with pytest.raises(DataError, match="every image is also in 'isic2019'"):
        screen_target(isic, isic, bench.spec.cache)


def test_block_size_does_not_change_what_is_found(planted):
    base, _ = planted
    isic = fingerprint(load_dataset("isic2019", base / "isic", image_size=32))
    ham = fingerprint(load_dataset("ham10000", base / "ham", image_size=32))
    whole = find_overlaps(isic, ham)
    assert find_overlaps(isic, ham, block=1) == whole == find_overlaps(isic, ham, block=7)


def test_thumbnails_are_area_means_whatever_the_size():
    """A picture and its pixel-replicated double print alike, on the integer path (224 -> 448) and the
    fractional one (40 -> 80); a constant picture gives a constant thumbnail."""
    from crs.data.overlap import thumbnails

    rng = np.random.default_rng(0)
    for size in (224, 40):
        small = rng.integers(0, 256, (1, 3, size, size), dtype=np.uint8)
        double = small.repeat(2, axis=2).repeat(2, axis=3)
        assert np.abs(thumbnails(small) - thumbnails(double)).max() < 1e-6
    flat = np.full((1, 1, 50, 70), 51, dtype=np.uint8)
    assert np.allclose(thumbnails(flat), 0.2)


def test_a_sharded_extract_compares_once_its_last_shard_is_done_and_decodes_nothing_again(planted, tmp_path,
                                                                                          monkeypatch):
    """Each shard prints the rows it decodes; the comparison waits for the last shard, so no shard decodes
    the other shards' rows again to print them."""
    import crs.extract.overlap as stage_overlap
    from crs import Benchmark
    from crs.cache.store import FeatureStore, store_path

    base, copies = planted
    bench = Benchmark(write_spec(tmp_path, base))

    def no_decode(*args, **kwargs):
        raise AssertionError("decoded an image again to print it")

    monkeypatch.setattr(stage_overlap, "prints_of", no_decode)
    reports = []
    for index in range(2):
        bench.extract(progress=False, shard=(index, 2))
        reports.append(FeatureStore(store_path(bench.spec.cache, "ham")).root.attrs.get("overlap"))
    assert reports[0] is None  # the first shard left the comparison to the last
    assert sorted(reports[1]["dropped"]) == sorted(copies)


def _folder(root, pictures, names):
    """A `folder` data set of ``pictures`` saved under ``names`` (the suffix picks the format)."""
    root.mkdir(parents=True, exist_ok=True)
    for picture, name in zip(pictures, names, strict=True):
        picture.convert("RGB").save(root / name, **({"quality": 90} if name.endswith(".jpg") else {}))
    (root / "labels.csv").write_text("path,label\n" + "".join(f"{n},{'ab'[i % 2]}\n" for i, n in enumerate(names)))


CHEST_EDITS = {"jpeg": lambda p: p, "flip": _flip, "crop2": _crop(0.02), "crop3": _crop(0.03),
               "crop4": _crop(0.04), "crop5": _crop(0.05)}


@pytest.mark.parametrize("kind", ["films", "drawings"])
def test_distinct_synthetic_chest_images_are_never_copies_but_their_edited_copies_are(tmp_path, kind):
    """The generator's chest films (PNG, 64 px) and drawings (JPEG, 256 px) share one template: their 32 px
    thumbnails alone joined distinct ones (3,592 of 14,280 ordered pairs of films, 750 of 1,560 of drawings).
    The second stage (both files read again, compared whole at 64 px: decision 0142) joins none, and still
    finds each one's re-encoded, resized, flipped and 2-5 % cropped copies, each to its own source."""
    from crs.bench.overlap_edits import family
    from crs.data.shift import adopt_source_geometry
    from crs.data.synthetic import load_synthetic

    if kind == "films":
        source = load_synthetic(tmp_path / "films", modality="chest_xray", n_images=120, image_size=64)
        pictures = [Image.open(source.root / p).convert("RGB") for p in source.paths[:6]]
        resize = 2.0  # a re-release at twice the side
    else:
        drawn = family("chest", 40, 256)
        _folder(tmp_path / "drawings", drawn, [f"{i:03d}.jpg" for i in range(40)])
        source = load_dataset("folder", tmp_path / "drawings", modality="chest_xray", image_size=224)
        pictures, resize = drawn[:6], 0.75
    prints = fingerprint(source)
    again = dataclasses.replace(prints, sha256=np.char.add("again-", prints.sha256))  # every pair looked at
    pairs = find_overlaps(prints, again)
    assert [o for o in pairs if o.a_id != o.b_id] == []  # no two distinct images joined, through any view
    assert {o.b_id for o in pairs} == set(source.ids)  # each found as itself

    edits = dict(CHEST_EDITS, resize=lambda p: p.resize((round(p.width * resize), round(p.height * resize))))
    copies, names, planted = [], [], {}
    for i, picture in enumerate(pictures):
        for name, edit in edits.items():
            copies.append(edit(picture))
            names.append(f"{name}-{i}.jpg")  # every copy re-encoded as JPEG
            planted[f"{name}-{i}"] = str(source.ids[i])
    _folder(tmp_path / "copies", copies, names)
    target = adopt_source_geometry(load_dataset("folder", tmp_path / "copies", modality="chest_xray"), source)
    found = find_overlaps(prints, fingerprint(target))
    assert {o.b_id.rsplit(".", 1)[0]: o.a_id for o in found} == planted


def _overlap_spec(tmp_path, size):
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
name = "o"
cache = "{tmp_path / 'cache'}"
encoders = ["pixel_stats"]
[[datasets]]
name = "isic"
loader = "isic2019"
root = "{tmp_path / 'isic'}"
options = {{ image_size = {size} }}
shift_target = {{ name = "ham", loader = "ham10000", root = "{tmp_path / 'ham'}", options = {{ image_size = {size} }} }}
""")
    return spec


@pytest.mark.parametrize("fraction", [0.03, 0.05])
def test_copies_both_flipped_and_cropped_are_found_by_crs_datasets_overlap(tmp_path, fraction):
    """A re-release both mirrored and cropped (issue 39 item 8): each of the 10 copies found, to its own source,
    through a flipped zoom; the 40 distinct images of either data set join nothing (decision 0147)."""
    from click.testing import CliRunner

    from crs.cli.main import cli

    names = build_isic_structured(tmp_path / "isic", n=40)
    planted = build_ham_with_edits(tmp_path / "ham", tmp_path / "isic", names, lambda p: _crop(fraction)(_flip(p)))
    spec = _overlap_spec(tmp_path, 224)
    result = CliRunner().invoke(cli, ["datasets", "overlap", str(spec), "--json"])
    assert result.exit_code == 1, result.output
    pairs = json.loads(result.output)
    assert {p["b_id"]: p["a_id"] for p in pairs} == planted and len(pairs) == 10
    assert {p["kind"] for p in pairs} == {"flipped+cropped"}
    result = CliRunner().invoke(cli, ["datasets", "overlap", str(spec)])
    assert "isic x ham: 10 image(s) of ham also in isic (0 exact, 0 near, 10 flipped+cropped)" in result.output


@pytest.mark.parametrize("size", [64, 224])
def test_extract_leaves_out_a_target_image_that_is_a_flipped_and_cropped_copy(tmp_path, size):
    """The extract screen, as a run uses it: the target's flipped and 4 % cropped copies of source images are
    dropped from its evaluation and listed in the audit; its distinct images are kept."""
    from crs import Benchmark
    from crs.evaluate.audit import audit_tables

    names = build_isic_structured(tmp_path / "isic", n=40)
    planted = build_ham_with_edits(tmp_path / "ham", tmp_path / "isic", names, lambda p: _crop(0.04)(_flip(p)),
                                   n_copies=6)
    spec = write_spec(tmp_path, tmp_path)
    spec.write_text(spec.read_text().replace("image_size = 32", f"image_size = {size}"))
    bench = Benchmark(spec)
    bench.extract(progress=False)
    audit = audit_tables(bench.spec)
    assert sorted(audit["shift_overlaps"]["ham"]["dropped"]) == sorted(planted)
    assert {p["kind"] for p in audit["shift_overlaps"]["ham"]["pairs"]} == {"flipped+cropped"}


def test_cropped_copies_of_stationary_textures_are_found_and_distinct_textures_are_not_joined(tmp_path):
    """Smoothed colour noise, the hardest family measured (decision 0142 found 12-17 of 40 of its 2-5 % crops):
    every crop of 2-5 % per side, plain or flipped, found to its own source; no two distinct textures joined."""
    from crs.bench.overlap_edits import family

    textures = family("texture", 12, 256)
    _folder(tmp_path / "source", textures, [f"{i:03d}.jpg" for i in range(12)])
    source = load_dataset("folder", tmp_path / "source", modality="dermoscopy")
    edits = {f"crop{round(100 * f)}": _crop(f) for f in (0.02, 0.03, 0.04, 0.05)} | {
        "flipcrop4": lambda p: _crop(0.04)(_flip(p))}
    copies, names, planted = [], [], {}
    for i, picture in enumerate(textures[:6]):
        for name, edit in edits.items():
            copies.append(edit(picture))
            names.append(f"{name}-{i}.jpg")
            planted[f"{name}-{i}"] = str(source.ids[i])
    _folder(tmp_path / "copies", copies, names)
    target = load_dataset("folder", tmp_path / "copies", modality="dermoscopy")
    prints = fingerprint(source)
    found = find_overlaps(prints, fingerprint(target))
    assert {o.b_id.rsplit(".", 1)[0]: o.a_id for o in found} == planted
    again = dataclasses.replace(prints, sha256=np.char.add("again-", prints.sha256))  # every pair looked at
    assert [o for o in find_overlaps(prints, again) if o.a_id != o.b_id] == []
