"""The streamed, batched stage 2 writes its predictions and unit costs through the run folder.

That it reproduces the golden records under the pre-move protocol is tested once, in
tests/test_golden_house.py (which pins the same protocol); this module checks what streaming adds.
"""

from __future__ import annotations

import numpy as np
import pytest

from tiny import write_tiny_spec

OLD_PROTOCOL = '[probe]\nselection = "auroc"\nvalidation = "full"\n'


@pytest.fixture(scope="module")
def old_protocol_run(tmp_path_factory):
    from crs.benchmark import Benchmark
    from crs.spec import load_spec

    folder = tmp_path_factory.mktemp("stage2_golden")
    path = write_tiny_spec(folder)
    path.write_text(path.read_text().replace("[probe]\n", OLD_PROTOCOL))
    bench = Benchmark(load_spec(path))
    bench.extract(progress=False)
    records = bench.probe(progress=False).records
    return {"records": records, "records_seed_aggregated": bench.folder.read_aggregate()}, bench.folder


def test_streamed_predictions_and_unit_costs_are_in_the_run_folder(old_protocol_run):
    tables, folder = old_protocol_run
    records = tables["records"]
    costs = folder.read_unit_costs()
    assert len(costs) == records.drop_duplicates(["encoder", "task"]).shape[0]
    assert (costs["peak_rss_bytes"] > 0).all() and (costs["wall_s"] > 0).all()
    assert not list(folder.predictions_dir.glob("*.partial"))
    arrays = folder.read_predictions("pixel_stats", "cxr")
    clean = records[(records.encoder == "pixel_stats") & (records.task == "cxr") & (records.condition == "clean")]
    assert arrays["clean_probs"].shape[0] == (clean.label_fraction == 1.0).sum()
    assert arrays["clean_all_probs"].shape[0] == len(clean)
    assert arrays["clean_all_probs"].dtype == np.float16 and arrays["clean_probs"].dtype == np.float32
    assert "shift__cxr-b_probs" in arrays and any(key.startswith("corrupt__") for key in arrays)
    assert "shift_probs" not in arrays  # one stem per target, named: shift__<target>
    # the patient or lesion of every clean test row and shift row, for the group-level bootstrap
    assert len(arrays["clean_groups"]) == len(arrays["clean_labels"])
    assert len(arrays["shift_groups__cxr-b"]) == len(arrays["shift__cxr-b_labels"])
