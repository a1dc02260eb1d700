"""The GPU check's zero-shot part runs on the CPU and reports every figure (no timing is asserted)."""

from __future__ import annotations

import pytest

from crs.bench.zero_shot_cost import zero_shot_cost


@pytest.mark.slow
def test_zero_shot_cost_reports_each_prompt_set():
    (row,) = zero_shot_cost("cpu", rows=50, encoders=("chexzero",))
    assert row["isic2019_prompts"] == 72 and row["aptos2019_prompts"] == 20 and row["chexpert5_prompts"] == 24
    assert all(row[key] > 0 for key in ("build_s", "isic2019_encode_s", "chexpert5_encode_s", "predict_s"))
