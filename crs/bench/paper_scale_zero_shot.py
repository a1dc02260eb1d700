"""Zero-shot in ``crs bench paper-scale``: simulated prototypes for its vision-language encoders, and
the zero-shot units and score measured beside the probes'.

Seven of the paper's fifteen encoders are vision-language models; here every second encoder
(``enc01``, ``enc03``, ...) is one. Its prototypes are simulated like its features: a class's
prototype is the class's latent direction through the encoder's own projection (the direction the
features carry its signal in), blurred by a random direction so zero-shot is good but not perfect,
and imported with :func:`crs.cache.prototypes.import_prototypes`, as a hosted model's would be.
Multilabel findings get CheXzero's positive/negative pair (softmax family, CLIP's scale of 100).

Two stages, each in a process of its own like the others: ``zero_shot`` (stage 2's zero-shot units,
:func:`crs.evaluate.zero_shot.zero_shot_spec`) and ``zero_shot_score`` (its leaderboard, intervals and
crossover, :func:`crs.scoring.zero_shot.score_zero_shot`). The spec keeps ``zero_shot = false`` so the
probe and score stages measure exactly what they did before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ZERO_SHOT_STAGES = ("zero_shot", "zero_shot_score")
UNIT_COSTS = "zero_shot/unit_costs.csv"  # per zero-shot unit: CPU and wall seconds (beside probe_costs.csv)
PAPER_VLMS = 7  # of the paper's fifteen encoders
SCALE = 100.0  # CLIP's clamped logit scale
PROMPT_NOISE = 0.6  # weight of the random direction mixed into each prototype


def is_vlm(encoder: int) -> bool:
    """Every second encoder (1, 3, 5, ...) stands for a vision-language model."""
    return encoder % 2 == 1


def vlm_names(names: list[str]) -> list[str]:
    return [name for k, name in enumerate(names) if is_vlm(k)]


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def simulated_prototypes(kind: str, directions: np.ndarray, mix: np.ndarray, seed: list[int]) -> dict[str, Any]:
    """Prototypes (K, D) from the classes' latent directions (K, LATENT) through the encoder's ``mix``
    (LATENT, D), each blurred by a random unit direction; for multilabel also the negative of each."""
    rng = np.random.default_rng(seed)
    clean = _unit(directions @ mix)
    blur = _unit(rng.standard_normal(clean.shape))
    out: dict[str, Any] = {"positive": _unit(clean + PROMPT_NOISE * blur), "scale": SCALE, "link": "softmax",
                           "prompt_set": "simulated"}
    if kind == "multilabel":
        out["negative"] = _unit(-clean + PROMPT_NOISE * _unit(rng.standard_normal(clean.shape)))
    return out


def import_simulated(cache: Path, dataset: str, encoder: str, prototypes: dict[str, Any], work: Path) -> None:
    from crs.cache.prototypes import import_prototypes

    path = work / "prototypes.npz"
    np.savez(path, **prototypes)
    import_prototypes(cache, dataset, encoder, path)
    path.unlink()


def run_zero_shot_stage(stage: str, spec_path: Path) -> None:
    """``zero_shot``: the zero-shot units of the VLM encoders; ``zero_shot_score``: their score."""
    from crs.benchmark import Benchmark

    bench = Benchmark(spec_path)
    spec = bench.spec
    if stage == "zero_shot":
        from crs.evaluate.zero_shot import zero_shot_spec

        costs: list[dict] = []
        zero_shot_spec(spec, encoders=vlm_names(list(spec.encoder_names)), costs=costs)
        pd.DataFrame(costs).to_csv(Path(spec.output) / UNIT_COSTS, index=False)
    elif stage == "zero_shot_score":
        from crs.scoring.settings import ScoreSettings
        from crs.scoring.zero_shot import score_zero_shot, write_zero_shot_score

        folder = bench.folder

        def probe_predictions(encoder: str, task: str):
            # only the clean arrays are read (the crossover), not every condition of the file
            return folder.read_predictions_on_demand(encoder, task) if folder.has_predictions(encoder, task) else None

        settings = ScoreSettings.from_config(spec.score)
        write_zero_shot_score(spec.output, score_zero_shot(spec.output, settings, bench.records(), probe_predictions))
    else:
        raise ValueError(f"unknown zero-shot stage {stage!r}")


def unit_ratio(folder: Path) -> dict[str, float]:
    """Per-unit CPU, free of each stage's start-up and imports: the zero-shot units' CPU seconds over
    the probe units' of the same (VLM encoder, task) pairs (``probe_costs.csv``), and both sums."""
    zero_path, probe_path = Path(folder) / UNIT_COSTS, Path(folder) / "probe_costs.csv"
    if not (zero_path.exists() and probe_path.exists()):
        return {}
    zero, probe = pd.read_csv(zero_path), pd.read_csv(probe_path)
    both = zero.merge(probe, on=["encoder", "task"], suffixes=("_zero_shot", "_probe"))
    if both.empty:
        return {}
    out = {"unit_zero_shot_cpu_s": float(both["cpu_s_zero_shot"].sum()), "unit_probe_cpu_s": float(both["cpu_s_probe"].sum())}
    out["unit_ratio_cpu_s"] = out["unit_zero_shot_cpu_s"] / out["unit_probe_cpu_s"]
    for task, row in both.groupby("task"):
        out[f"unit_ratio_cpu_s_{task}"] = float(row["cpu_s_zero_shot"].sum() / row["cpu_s_probe"].sum())
    return out


def zero_shot_summary(stages: list[Any], encoders: int, folder: Path | None = None,
                      startup: Any | None = None) -> dict[str, float]:
    """CPU and wall seconds of the zero-shot stages and their share of stage 2 plus the score:
    zero-shot / (probe + score), and per part zero_shot / probe, zero_shot_score / score. The
    paper-size share puts 7 VLMs beside 15 encoders: each side's per-encoder cost times its count.
    Stage figures include each process's start-up and imports (which dominate at small scales);
    :func:`unit_ratio` (from ``folder``) compares the units alone.

    ``startup`` (the bench's bare start-up stage) adds ``ratio_paper_net_cpu_s``: the same share with
    fixed costs counted as a run pays them. In a run, zero-shot works inside the probe and score
    processes (``crs.evaluate.stage``, ``Benchmark.score``), so its stages' start-up is not its cost
    and its imports are paid once; the probe and score stages keep start-up and imports once, as
    ``fifteen_encoders`` counts them, and their per-encoder rest times 15 (decision 0108)."""
    by = {s.stage: s for s in stages}
    out: dict[str, float] = unit_ratio(folder) if folder is not None else {}
    n_vlm = max(sum(is_vlm(k) for k in range(encoders)), 1)
    for measure in ("cpu_s", "wall_s"):
        zero_shot, zero_score, probe, score = (float(getattr(by[name], measure)) if name in by else float("nan")
                                               for name in ("zero_shot", "zero_shot_score", "probe", "score"))
        out[f"zero_shot_{measure}"] = zero_shot
        out[f"zero_shot_score_{measure}"] = zero_score
        out[f"units_ratio_{measure}"] = zero_shot / probe
        out[f"score_ratio_{measure}"] = zero_score / score
        out[f"ratio_{measure}"] = (zero_shot + zero_score) / (probe + score)
        out[f"ratio_paper_{measure}"] = ((zero_shot + zero_score) / n_vlm * PAPER_VLMS) / ((probe + score) / encoders * 15)
    if startup is not None and all(name in by for name in ("zero_shot", "zero_shot_score", "probe", "score")):
        base = float(startup.cpu_s)

        def paper(name: str, count: int, per: int, start: float) -> float:
            stage = by[name]
            fixed = float(stage.import_s)
            return start + fixed + max(float(stage.cpu_s) - base - fixed, 0.0) / per * count

        zero = paper("zero_shot", PAPER_VLMS, n_vlm, 0.0) + paper("zero_shot_score", PAPER_VLMS, n_vlm, 0.0)
        probes = paper("probe", 15, encoders, base) + paper("score", 15, encoders, base)
        out["zero_shot_paper_net_cpu_s"], out["probe_score_paper_cpu_s"] = zero, probes
        out["ratio_paper_net_cpu_s"] = zero / probes
    return out


def summary_line(summary: dict[str, float]) -> str:
    units = (f"; per unit (no start-up): zero-shot {summary['unit_zero_shot_cpu_s']:.1f} s CPU against the same "
             f"encoders' probe units' {summary['unit_probe_cpu_s']:.1f} s ({100 * summary['unit_ratio_cpu_s']:.1f} %)"
             if "unit_ratio_cpu_s" in summary else "")
    net = (f"; with start-up and imports counted as a run pays them (zero-shot inside the probe and score "
           f"processes): {100 * summary['ratio_paper_net_cpu_s']:.1f} % at 7 VLMs of 15"
           if "ratio_paper_net_cpu_s" in summary else "")
    return (f"  zero-shot ({PAPER_VLMS} of 15 encoders are VLMs): units CPU {summary['zero_shot_cpu_s']:.1f} s "
            f"({100 * summary['units_ratio_cpu_s']:.1f} % of the probe stage's), score CPU "
            f"{summary['zero_shot_score_cpu_s']:.1f} s ({100 * summary['score_ratio_cpu_s']:.1f} % of the score's); "
            f"together {100 * summary['ratio_cpu_s']:.1f} % of stage 2 + score as run, "
            f"{100 * summary['ratio_paper_cpu_s']:.1f} % at 7 VLMs of 15" + units + net)
