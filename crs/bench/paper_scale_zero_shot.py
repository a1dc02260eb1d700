"""Zero-shot in ``crs bench paper-scale``: simulated prototypes for its vision-language encoders, and
the zero-shot units and score measured beside the probes'.

Seven of the paper's fifteen encoders are vision-language models; here every second encoder
(``enc01``, ``enc03``, ...) is one. Its prototypes are simulated like its features: a class's
prototype is the class's latent direction through the encoder's own projection (the direction the
features carry its signal in), blurred by a random direction so zero-shot is good but not perfect,
and imported with :func:`crs.cache.prototypes.import_prototypes`, as a hosted model's would be.
Multilabel findings get CheXzero's positive/negative pair (softmax family, CLIP's scale of 100).

Measured as a user runs it (decision 0112). The ``probe`` stage runs with zero-shot on for the VLMs
(:func:`run_probe_stage`): each VLM unit's zero-shot inside its probe unit's pass, in the unit's own
``zero_shot`` clock phase (``probe_costs.csv``'s ``zero_shot_cpu_s``), the prototypes read before the
units (timed, ``zero_shot/prototypes.json``). The ``score`` stage, like ``crs score`` with zero-shot
on, scores the probes and then zero-shot's leaderboard, intervals and crossover
(:func:`crs.scoring.zero_shot.score_zero_shot`) in the same process (:func:`run_score_stage`, timed,
``zero_shot/score_cost.json``): its imports are the probe score's, paid once, as in a user's run. A
process of its own paid them again (scipy.stats, numba's cache: about 1 s per run), and the share
multiplied that by 7 VLMs. :func:`fused_stages` then reports the ``zero_shot`` and
``zero_shot_score`` stages from those timings, and the ``probe`` and ``score`` stages NET of them,
so the probe figures (issue 33) stay what they were without zero-shot. ``--stage zero_shot`` and
``--stage zero_shot_score`` still run each alone in a process of its own, for comparisons. The
spec keeps ``zero_shot = false``, so ``Benchmark.score`` itself is what it was.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ZERO_SHOT_STAGES = ("zero_shot", "zero_shot_score")
UNIT_COSTS = "zero_shot/unit_costs.csv"  # the standalone stage's per-unit CPU and wall seconds
PROTOTYPES_COST = "zero_shot/prototypes.json"  # CPU seconds the probe stage spent on the prototypes
SCORE_COST = "zero_shot/score_cost.json"  # CPU and wall seconds of the zero-shot score inside the score stage
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


def _has_prototypes(spec: Any, encoder: str) -> bool:
    from crs.cache.prototypes import stored_digests
    from crs.cache.store import FeatureStore, store_path

    return bool(stored_digests(FeatureStore(store_path(spec.cache, spec.datasets[0].name)), encoder))


def run_probe_stage(bench: Any, jobs: int | str | None) -> None:
    """Stage 2 as a user with ``[score] zero_shot = true`` runs it: the VLMs' zero-shot inside their
    probe units (:func:`crs.evaluate.stage.probe_spec`); the prototypes' CPU seconds written beside.
    A work folder without simulated prototypes runs the probes alone."""
    spec = bench.spec
    encoders = [name for name in vlm_names(list(spec.encoder_names)) if _has_prototypes(spec, name)]
    if not encoders:
        bench.probe(jobs=jobs, progress=False)
        return
    from crs.evaluate.stage import probe_spec
    from crs.evaluate.zero_shot import zero_shot_jobs

    started = time.process_time()
    zero_shot_jobs(spec, encoders=encoders)  # what probe_spec does first: timed here, then read again there
    prototypes_s = time.process_time() - started
    probe_spec(spec, jobs=jobs, progress=False, zero_shot_encoders=encoders)
    (Path(spec.output) / PROTOTYPES_COST).write_text(json.dumps({"cpu_s": prototypes_s}))


def run_score_stage(bench: Any) -> None:
    """The score as a user with ``[score] zero_shot = true`` runs it (``Benchmark.score``): the probes'
    score, then in the same process, when the run folder has zero-shot records, zero-shot's score,
    timed (``zero_shot/score_cost.json``: CPU seconds of the process, all threads, and wall)."""
    bench.score()
    spec = bench.spec
    if not (Path(spec.output) / "zero_shot" / "records.parquet").exists():
        return
    cpu, wall = time.process_time(), time.perf_counter()
    _score_zero_shot(bench)
    cost = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}
    (Path(spec.output) / SCORE_COST).write_text(json.dumps(cost))


def _score_zero_shot(bench: Any) -> None:
    from crs.scoring.settings import ScoreSettings
    from crs.scoring.zero_shot import score_zero_shot, write_zero_shot_score

    folder, spec = bench.folder, bench.spec

    def probe_predictions(encoder: str, task: str):
        # only the clean arrays are read (the crossover), not every condition of the file
        return folder.read_predictions_on_demand(encoder, task) if folder.has_predictions(encoder, task) else None

    settings = ScoreSettings.from_config(spec.score)
    write_zero_shot_score(spec.output, score_zero_shot(spec.output, settings, bench.records(), probe_predictions))


def zero_shot_unit_cpu_s(costs: pd.DataFrame) -> pd.Series:
    """Per unit of ``probe_costs.csv``: the CPU seconds zero-shot added to it. Its own clock phase
    (``zero_shot_cpu_s``) plus what its columns added to the probes' kernel calls (decision 0116: they
    ride along in the ``predict`` phase). That part cannot be timed apart inside one call, so it is
    estimated from the unit's twin: the same task's units without zero-shot (the bench's image-only
    encoders have the VLMs' sizes) predict the same conditions, and the VLM unit's ``predict_cpu_s``
    above their mean is counted as zero-shot's (never below 0; 0 without a twin). An estimate with
    the phase's noise between units (about +-0.5 s at CheXpert's size), stated as such."""
    own = costs["zero_shot_cpu_s"].astype(float) if "zero_shot_cpu_s" in costs else pd.Series(0.0, index=costs.index)
    if "predict_cpu_s" not in costs:
        return own
    fused = own > 0
    twins = costs[~fused].groupby("task")["predict_cpu_s"].mean()
    baseline = costs["task"].map(twins)
    riding = (costs["predict_cpu_s"] - baseline).clip(lower=0.0).fillna(0.0).where(fused, 0.0)
    return own + riding


def fused_stages(stages: list[Any], folder: Path) -> list[Any]:
    """``stages`` with the zero-shot that ran inside the probe and score stages split out.

    ``zero_shot``: what zero-shot added to the units (:func:`zero_shot_unit_cpu_s`) plus the prototypes
    (wall: the units' shared by the workers, one thread each); the ``probe`` stage keeps the rest. ``zero_shot_score``: the timing
    :func:`run_score_stage` wrote; the ``score`` stage keeps the rest. Neither zero-shot stage has a
    process start-up or imports of its own (``import_s`` 0). They follow the probes' stages."""
    folder = Path(folder)
    out = list(stages)
    path = folder / "probe_costs.csv"
    probe = next((s for s in out if s.stage == "probe"), None)
    costs = pd.read_csv(path) if probe is not None and path.exists() else None
    if probe is not None and costs is not None and "zero_shot_cpu_s" in costs and (costs["zero_shot_cpu_s"] > 0).any():
        prototypes_path = folder / PROTOTYPES_COST
        prototypes_s = float(json.loads(prototypes_path.read_text())["cpu_s"]) if prototypes_path.exists() else 0.0
        units_s = float(zero_shot_unit_cpu_s(costs).sum())
        workers = max(int(costs["worker_pid"].nunique()) if "worker_pid" in costs else 1, 1)
        zero = units_s + prototypes_s
        net = replace(probe, cpu_s=probe.cpu_s - zero, wall_s=probe.wall_s - units_s / workers - prototypes_s)
        fused = replace(probe, stage="zero_shot", cpu_s=zero, wall_s=units_s / workers + prototypes_s, import_s=0.0)
        out = [net if s is probe else s for s in out] + [fused]
    score = next((s for s in out if s.stage == "score"), None)
    score_path = folder / SCORE_COST
    if score is not None and score_path.exists():
        cost = json.loads(score_path.read_text())
        net = replace(score, cpu_s=score.cpu_s - cost["cpu_s"], wall_s=score.wall_s - cost["wall_s"])
        fused = replace(score, stage="zero_shot_score", cpu_s=float(cost["cpu_s"]), wall_s=float(cost["wall_s"]),
                        import_s=0.0)
        out = [net if s is score else s for s in out] + [fused]
    return out


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
        _score_zero_shot(bench)
    else:
        raise ValueError(f"unknown zero-shot stage {stage!r}")


def unit_ratio(folder: Path) -> dict[str, float]:
    """Per-unit CPU, free of each stage's start-up and imports: the zero-shot units' CPU seconds over
    the probe units' of the same (VLM encoder, task) pairs (``probe_costs.csv``), and both sums. Fused
    (decision 0112): a unit's ``zero_shot_cpu_s`` against the rest of its CPU; otherwise the standalone
    stage's ``zero_shot/unit_costs.csv``."""
    zero_path, probe_path = Path(folder) / UNIT_COSTS, Path(folder) / "probe_costs.csv"
    if not probe_path.exists():
        return {}
    probe = pd.read_csv(probe_path)
    if "zero_shot_cpu_s" in probe and (probe["zero_shot_cpu_s"] > 0).any():
        added = zero_shot_unit_cpu_s(probe)
        fused = probe["zero_shot_cpu_s"] > 0
        both = pd.DataFrame({"task": probe["task"][fused], "cpu_s_zero_shot": added[fused],
                             "cpu_s_probe": probe["cpu_s"][fused] - added[fused]})
    elif zero_path.exists():
        both = pd.read_csv(zero_path).merge(probe, on=["encoder", "task"], suffixes=("_zero_shot", "_probe"))
    else:
        return {}
    if both.empty:
        return {}
    out = {"unit_zero_shot_cpu_s": float(both["cpu_s_zero_shot"].sum()), "unit_probe_cpu_s": float(both["cpu_s_probe"].sum())}
    out["unit_ratio_cpu_s"] = out["unit_zero_shot_cpu_s"] / out["unit_probe_cpu_s"]
    for task, row in both.groupby("task"):
        out[f"unit_ratio_cpu_s_{task}"] = float(row["cpu_s_zero_shot"].sum() / row["cpu_s_probe"].sum())
    return out


def zero_shot_summary(stages: list[Any], encoders: int, folder: Path | None = None,
                      startup: Any | None = None, fused: bool = False,
                      score_15: Any | None = None) -> dict[str, float]:
    """CPU and wall seconds of the zero-shot stages and their share of stage 2 plus the score:
    zero-shot / (probe + score), and per part zero_shot / probe, zero_shot_score / score. The
    paper-size share puts 7 VLMs beside 15 encoders: each side's per-encoder cost times its count.
    Stage figures include each process's start-up and imports (which dominate at small scales);
    :func:`unit_ratio` (from ``folder``) compares the units alone.

    ``ratio_paper_cpu_s`` / ``ratio_paper_net_cpu_s``: zero-shot's added CPU / (probe + score) at 7
    VLMs of 15. ``fused``: zero-shot was measured inside the probe and score stages
    (:func:`fused_stages`: the ``zero_shot`` stage is the units' zero-shot phases plus the prototypes,
    ``zero_shot_score`` the zero-shot part of the score process, and the ``probe`` and ``score``
    stages are net of them); otherwise each is a standalone stage's process. ``score_15``: the score
    stage measured on 15 encoders (decision 0114); the denominator then takes its CPU seconds as
    measured instead of scaling the 2-encoder score's.

    ``startup`` (the bench's bare start-up stage) adds ``ratio_paper_net_cpu_s``: the same share with
    fixed costs counted as a run pays them. In a run, zero-shot works inside the probe and score
    processes (``crs.evaluate.stage``, ``Benchmark.score``), so the score stage's start-up is not its
    cost and its imports are paid once (the fused ``zero_shot`` stage has neither: all of it scales);
    the probe and score stages keep start-up and imports once, as ``fifteen_encoders`` counts them,
    and their per-encoder rest times 15 (decision 0108)."""
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

        def paper(name: str, count: int, per: int, start: float, own_process: bool = True) -> float:
            stage = by[name]
            if not own_process:  # measured inside another stage: no start-up, no imports of its own
                return float(stage.cpu_s) / per * count
            fixed = float(stage.import_s)
            return start + fixed + max(float(stage.cpu_s) - base - fixed, 0.0) / per * count

        zero = (paper("zero_shot", PAPER_VLMS, n_vlm, 0.0, own_process=not fused)
                + paper("zero_shot_score", PAPER_VLMS, n_vlm, 0.0, own_process=not fused))
        scored = float(score_15.cpu_s) if score_15 is not None else paper("score", 15, encoders, base)
        probes = paper("probe", 15, encoders, base) + scored
        out["zero_shot_paper_net_cpu_s"], out["probe_score_paper_cpu_s"] = zero, probes
        out["ratio_paper_net_cpu_s"] = zero / probes
    if score_15 is not None and folder is not None and all(name in by for name in ("zero_shot", "zero_shot_score")):
        out.update(probe_bound(folder, (float(by["zero_shot"].cpu_s) + float(by["zero_shot_score"].cpu_s)) / n_vlm,
                               float(score_15.cpu_s)))
    return out


EVALUATION_PHASES = ("predict_cpu_s", "metrics_cpu_s", "save_cpu_s")


def probe_bound(folder: Path, zero_shot_per_vlm: float, score_15_cpu_s: float) -> dict[str, float]:
    """Decision 0117's bound: zero-shot's CPU per VLM against what one encoder's probes pay to be
    evaluated (the predict, metrics and save phases of its units, on the same conditions; the mean
    over the image-only encoders, whose units carry no zero-shot) and scored (the 15-encoder score's
    CPU over 15). ``bound_ratio_cpu_s`` at most 1 meets it. Empty without the phases."""
    path = Path(folder) / "probe_costs.csv"
    if not path.exists():
        return {}
    costs = pd.read_csv(path)
    if not set(EVALUATION_PHASES) <= set(costs) or "zero_shot_cpu_s" not in costs:
        return {}
    plain = costs[costs["zero_shot_cpu_s"] <= 0]
    if plain.empty:
        return {}
    evaluation = float(plain[list(EVALUATION_PHASES)].sum(axis=1).groupby(plain["encoder"]).sum().mean())
    scored = score_15_cpu_s / 15
    return {"zero_shot_per_vlm_cpu_s": zero_shot_per_vlm, "probe_evaluation_cpu_s": evaluation,
            "probe_score_per_encoder_cpu_s": scored, "bound_ratio_cpu_s": zero_shot_per_vlm / (evaluation + scored)}


def summary_line(summary: dict[str, float]) -> str:
    units = (f"; per unit (no start-up): zero-shot {summary['unit_zero_shot_cpu_s']:.1f} s CPU against the same "
             f"encoders' probe units' {summary['unit_probe_cpu_s']:.1f} s ({100 * summary['unit_ratio_cpu_s']:.1f} %)"
             if "unit_ratio_cpu_s" in summary else "")
    net = (f"; with start-up and imports counted as a run pays them (zero-shot inside the probe and score "
           f"processes): {100 * summary['ratio_paper_net_cpu_s']:.1f} % at 7 VLMs of 15"
           if "ratio_paper_net_cpu_s" in summary else "")
    bound = (f"; per VLM {summary['zero_shot_per_vlm_cpu_s']:.1f} s CPU against its probes' evaluation "
             f"{summary['probe_evaluation_cpu_s']:.1f} s + score {summary['probe_score_per_encoder_cpu_s']:.1f} s: "
             f"{summary['bound_ratio_cpu_s']:.2f} (decision 0117: at most 1)" if "bound_ratio_cpu_s" in summary else "")
    return (f"  zero-shot ({PAPER_VLMS} of 15 encoders are VLMs): units CPU {summary['zero_shot_cpu_s']:.1f} s "
            f"({100 * summary['units_ratio_cpu_s']:.1f} % of the probe stage's), score CPU "
            f"{summary['zero_shot_score_cpu_s']:.1f} s ({100 * summary['score_ratio_cpu_s']:.1f} % of the score's); "
            f"together {100 * summary['ratio_cpu_s']:.1f} % of stage 2 + score as run, "
            f"{100 * summary['ratio_paper_cpu_s']:.1f} % at 7 VLMs of 15" + units + net + bound)
