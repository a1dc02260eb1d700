"""Shift on every task, end to end at tiny size (the demo's layout): dermoscopy, fundus and chest each have
a synthetic second site; each is extracted, screened for overlap (nothing dropped), probed and scored."""

from __future__ import annotations

import json

from crs.benchmark import Benchmark

from tiny import write_tiny_spec


def test_demo_layout_scores_shift_on_all_three_tasks(tmp_path):
    path = write_tiny_spec(tmp_path, encoders=("pixel_stats",), n_images=120)
    text = path.read_text()
    data = tmp_path / "data"
    for name, modality in (("derm", "dermoscopy"), ("fundus", "fundus")):
        line = f'options = {{ modality = "{modality}", n_images = 120, image_size = 32 }}\n'
        assert line in text
        text = text.replace(line, line + (
            f'shift_target = {{ name = "{name}-b", loader = "synthetic", root = "{data}", options = {{ modality = '
            f'"{modality}", site = "b", n_images = 40, image_size = 32, shift_target = true }} }}\n'))
    path.write_text(text)
    bench = Benchmark(path)
    bench.extract(progress=False)
    bench.probe(progress=False)
    records = bench.folder.read_records()
    shifted = records[records["condition"] == "shift"]
    assert sorted(shifted["task"].unique()) == ["cxr", "derm", "fundus"]
    assert sorted(shifted["target"].unique()) == ["cxr-b", "derm-b", "fundus-b"]
    assert shifted["auroc"].notna().all()
    audit = json.loads(bench.folder.audit_path.read_text())
    assert {name: entry["n_overlapping"] for name, entry in audit["shift_overlaps"].items()} == {
        "derm-b": 0, "fundus-b": 0, "cxr-b": 0}
    assert audit["overlap_allowed"] is False
