"""What zero-shot costs: building a text tower, encoding each built-in prompt set, predicting from features.

Used by the GPU check (``--parts zero_shot``) and runnable on the CPU. Random weights: the figures
are the cost of the computation, not of any model's quality.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from crs.data import aptos2019, chexpert, isic2019
from crs.data.prompts import builtin_prompt_set
from crs.encoders.factory import create_text
from crs.evaluate.zero_shot import make_prototypes, probabilities, similarities

ENCODERS = ("clip_vit_b16", "chexzero")
TASKS = (isic2019.TASK, aptos2019.TASK, chexpert.TASK)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def zero_shot_cost(device: str = "cpu", rows: int = 100_000, encoders: tuple[str, ...] = ENCODERS) -> list[dict[str, Any]]:
    """Per encoder: text tower build seconds, per task the prompts and seconds to make its prototypes, and
    the seconds to turn ``rows`` cached features into zero-shot probabilities (CPU, numpy)."""
    out = []
    for name in encoders:
        started = time.perf_counter()
        text = create_text(name, "random").to(device)
        row: dict[str, Any] = {"encoder": name, "device": device, "build_s": time.perf_counter() - started}
        for task in TASKS:
            prompt_set = builtin_prompt_set(task)
            n_prompts = len({p for side in (prompt_set.positive, prompt_set.negative) for ps in side for p in ps})
            _sync(device)
            started = time.perf_counter()
            prototypes = make_prototypes(text, prompt_set, task.kind)
            _sync(device)
            row[f"{task.name}_prompts"] = n_prompts
            row[f"{task.name}_encode_s"] = time.perf_counter() - started
        features = np.random.default_rng(0).normal(size=(rows, text.spec.dim)).astype(np.float32)
        started = time.perf_counter()
        probabilities(similarities(features, prototypes), TASKS[-1].kind, prototypes.scale, prototypes.bias)
        row["predict_rows"] = rows
        row["predict_s"] = time.perf_counter() - started
        out.append(row)
    return out
