"""One run of a few minutes on a GPU machine: what stage 1 and stage 2 cost on the device (``scripts/gpu_check.sh``).

Four measurements, each written to ``gpu_check.json`` and ``gpu_check.md`` in the output folder:

1. **Extraction**, ViT-B/16 (``vit_base``) and ResNet-50 (``resnet50``) with random weights: images/s
   through the pipeline (``crs.bench.extract.run_one``: decode PNG files, corrupt the test split,
   preprocess, forward, write the zarr cache) against two bare forward passes of ready-made batches on
   the device: ``Encoder.embed`` (what the pipeline calls: bf16 autocast on CUDA) and the network alone
   in bf16 autocast with channels-last inputs and weights (the fastest plain PyTorch way).
2. **Corruption suites**: device milliseconds per clean image to make every corruption x severity of the
   chest X-ray (13 x 5) and dermoscopy (16 x 5) suites from a uint8 batch at 224 px.
3. **Probes at paper size**: ``fit_probes(backend="torch")`` on an ISIC-2019-sized unit (15,199 train,
   5,066 validation and test rows, D = 1,024, 8 classes, 5 fractions x 5 seeds x 5 C) on the device
   and on one CPU thread (as a stage-2 worker runs it), with the AUROC difference between the two; and
   a CheXpert-sized unit (114,705 / 38,205 / 38,117 rows, 5 labels) on the device (on the CPU too with
   ``--cpu-chexpert``: minutes).
4. **cuML parity**, when ``cuml`` imports: the same ISIC-sized unit with ``backend="cuml"``, AUROC
   against the torch backend (bound 0.002).
5. **A real stage-1 run** (``crs.bench.stage1_run``): a few thousand CheXpert-geometry JPEGs, ``crs
   extract`` with the same encoders and the whole chest suite on the device; forward passes/s end to
   end against the bare forward pass, and the decode and corruption shares of the run.

``--device cpu --quick`` runs every part at toy sizes in seconds (the test does); its figures mean
nothing. Random weights and generated data: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from crs.bench.devices_run import devices_run
from crs.bench.extract import run_one as pipeline_vs_bare
from crs.bench.probes import BenchSize, synthetic_unit
from crs.bench.stage1_run import stage1_run
from crs.bench.zero_shot_cost import zero_shot_cost
from crs.corruptions import SEVERITIES, suite
from crs.corruptions.api import apply_severities
from crs.corruptions.scenes import scenes
from crs.encoders import create
from crs.probes import fit_probes, macro_auroc

EXTRACT_ENCODERS = ("vit_base", "resnet50")
MODALITIES = ("chest_xray", "dermoscopy")
FRACTIONS = (0.01, 0.05, 0.1, 0.25, 1.0)
ISIC_UNIT = BenchSize(15_199, 5_066, 5_066, 1024, 8, 5, FRACTIONS, 5, 5, 0)
CHEXPERT_UNIT = BenchSize(114_705, 38_205, 38_117, 1024, 8, 5, FRACTIONS, 5, 5, 0)
QUICK_UNIT = BenchSize(300, 120, 120, 24, 4, 3, (0.25, 1.0), 2, 3, 0)


@dataclass(frozen=True)
class Sizes:
    extract_images: int = 512
    extract_batch: int = 128
    extract_repeats: int = 2
    image_size: int = 224
    bare_batch: int = 256
    bare_iterations: int = 20
    corruption_batch: int = 64
    corruption_repeats: int = 3
    stage1_images: int = 3000
    probe_units: tuple[tuple[str, BenchSize], ...] = (("isic2019", ISIC_UNIT), ("chexpert", CHEXPERT_UNIT))


QUICK = Sizes(extract_images=24, extract_batch=8, extract_repeats=1, image_size=64, bare_batch=2, bare_iterations=1,
              corruption_batch=2, corruption_repeats=1, stage1_images=30, probe_units=(("isic2019", QUICK_UNIT), ("chexpert", QUICK_UNIT)))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _best_seconds(work: Callable[[], object], device: str, repeats: int) -> float:
    """Best of ``repeats`` timed runs after one warm-up run (device work synchronised)."""
    work()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        _sync(device)
        best = min(best, time.perf_counter() - started)
    return best


# --- 1. extraction ------------------------------------------------------------------------------------

def bare_channels_last(name: str, device: str, batch: int, iterations: int) -> dict[str, float]:
    """Images/s of ``Encoder.embed`` and of the bare network in bf16 autocast with channels-last memory."""
    encoder = create(name, weights="random", device=device)
    size = encoder.spec.input_size
    images = torch.rand(batch, 3, size, size, device=device)
    embed_s = _best_seconds(lambda: [encoder.embed(images) for _ in range(iterations)], device, 2)
    prepared = encoder.preprocess(images).contiguous(memory_format=torch.channels_last)
    module = encoder.module.to(memory_format=torch.channels_last)
    forward = encoder._forward  # the network + pooling, without crs's checks and dtype cast

    @torch.inference_mode()
    def channels_last() -> None:
        for _ in range(iterations):
            if device.startswith("cuda"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    forward(prepared)
            else:
                forward(prepared)

    channels_last_s = _best_seconds(channels_last, device, 2)
    del module
    return {"embed_images_per_s": batch * iterations / embed_s,
            "channels_last_bf16_images_per_s": batch * iterations / channels_last_s}


def extraction(device: str, sizes: Sizes, encoders: tuple[str, ...] = EXTRACT_ENCODERS) -> list[dict[str, Any]]:
    results = []
    for name in encoders:
        pipeline = pipeline_vs_bare(name, n_images=sizes.extract_images, batch_size=sizes.extract_batch,
                                    device=device, repeats=sizes.extract_repeats, image_size=sizes.image_size)
        bare = bare_channels_last(name, device, sizes.bare_batch, sizes.bare_iterations)
        results.append({
            "encoder": name, "device": device, "batch_size": sizes.extract_batch,
            "pipeline_images_per_s": pipeline.pipeline_images_per_s,
            "pipeline_bare_embed_images_per_s": pipeline.bare_images_per_s,
            "pipeline_over_bare_embed": pipeline.ratio,
            "bare_batch": sizes.bare_batch, **bare,
            "pipeline_over_channels_last_bf16": pipeline.pipeline_images_per_s / bare["channels_last_bf16_images_per_s"],
        })
    return results


# --- 2. corruption suites -----------------------------------------------------------------------------

def corruption_suites(device: str, sizes: Sizes) -> list[dict[str, Any]]:
    """Milliseconds of device time per clean image for every corruption x severity of a suite."""
    results = []
    for modality in MODALITIES:
        images = scenes(modality, sizes.corruption_batch, sizes.image_size).to(device)
        ids = [f"{modality}-{i}" for i in range(len(images))]
        per_corruption = {}
        for name in suite(modality):
            work = partial(apply_severities, images, modality, name, SEVERITIES, ids)
            seconds = _best_seconds(work, device, sizes.corruption_repeats)
            per_corruption[name] = 1000 * seconds / len(images)
        results.append({
            "modality": modality, "device": device, "batch": len(images), "size": sizes.image_size,
            "variants_per_image": len(per_corruption) * len(SEVERITIES),
            "ms_per_clean_image": sum(per_corruption.values()), "ms_per_clean_image_by_corruption": per_corruption,
        })
    return results


# --- 3. probes -----------------------------------------------------------------------------------------

def _fit_and_evaluate(unit, device: str, backend: str = "torch") -> dict[str, Any]:
    options: dict[str, Any] = {"device": device} if backend == "torch" else {}
    started, cpu = time.perf_counter(), time.process_time()
    probe_set = fit_probes(unit.X_train, unit.y_train, unit.X_val, unit.y_val, list(unit.subsets), unit.kind,
                           backend=backend, Cs=unit.Cs, n_classes=unit.n_classes, **options)
    _sync(device)
    fit_s, fit_cpu = time.perf_counter() - started, time.process_time() - cpu
    started = time.perf_counter()
    auroc = np.asarray(macro_auroc(unit.y_test, probe_set.predict_proba(unit.X_test)))
    return {"fit_s": fit_s, "fit_cpu_s": fit_cpu, "evaluate_clean_s": time.perf_counter() - started,
            "auroc": auroc, "selected_C": np.asarray(probe_set.selected_C)}


def probes(device: str, sizes: Sizes, cpu_chexpert: bool = False) -> list[dict[str, Any]]:
    """Torch backend on ``device`` and on one CPU thread, per paper-sized unit; AUROC difference between them."""
    results = []
    for task, size in sizes.probe_units:
        kind = "multilabel" if task == "chexpert" else "multiclass"
        unit = synthetic_unit(size, kind)
        row: dict[str, Any] = {"task": task, "n_train": size.n_train, "n_val": size.n_val, "n_test": size.n_test,
                               "dim": size.dim, "probes": len(unit.subsets), "Cs": len(unit.Cs)}
        on_device = _fit_and_evaluate(unit, device) if device != "cpu" else None
        if on_device is not None:
            row.update({f"{device}_{k}": v for k, v in on_device.items() if k not in ("auroc", "selected_C")})
        if task != "chexpert" or cpu_chexpert or device == "cpu":
            with threadpool_limits(1):
                threads = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    on_cpu = _fit_and_evaluate(unit, "cpu")
                finally:
                    torch.set_num_threads(threads)
            row.update({f"cpu_1thread_{k}": v for k, v in on_cpu.items() if k not in ("auroc", "selected_C")})
            if on_device is not None:
                row["max_abs_dauroc_device_vs_cpu"] = float(np.max(np.abs(on_device["auroc"] - on_cpu["auroc"])))
                row["selected_C_differs"] = int((on_device["selected_C"] != on_cpu["selected_C"]).sum())
                row["fit_speedup_device_vs_cpu"] = on_cpu["fit_s"] / on_device["fit_s"]
        results.append(row)
    return results


# --- 4. cuML ---------------------------------------------------------------------------------------------

def cuml_parity(device: str, sizes: Sizes) -> dict[str, Any]:
    try:
        import cuml  # noqa: F401  (optional: the `gpu` extra)
    except Exception as error:  # ImportError, or a CUDA library it cannot load
        return {"available": False, "reason": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
    unit = synthetic_unit(sizes.probe_units[0][1], "multiclass")
    reference = _fit_and_evaluate(unit, device)
    try:
        result = _fit_and_evaluate(unit, device, backend="cuml")
    except Exception as error:
        return {"available": True, "error": f"{type(error).__name__}: {error}"}
    return {"available": True, "fit_s": result["fit_s"], "torch_fit_s": reference["fit_s"],
            "max_abs_dauroc_vs_torch": float(np.max(np.abs(result["auroc"] - reference["auroc"]))),
            "within_0.002": bool(np.max(np.abs(result["auroc"] - reference["auroc"])) <= 0.002)}


# --- the run -------------------------------------------------------------------------------------------

def machine(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cpu_count": os.cpu_count(), "device": device}
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
        info["cuda"] = torch.version.cuda
    return info


def run(device: str = "cuda", quick: bool = False, out: Path | str = "gpu-check", cpu_chexpert: bool = False,
        parts: tuple[str, ...] = ("extraction", "corruptions", "probes", "cuml", "stage1", "devices"),
        encoders: tuple[str, ...] = EXTRACT_ENCODERS, echo=print) -> dict[str, Any]:
    """Measure every part, write ``gpu_check.json`` and ``gpu_check.md`` under ``out``, return the results."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device is visible to torch; run on the GPU machine, or pass --device cpu")
    sizes = QUICK if quick else Sizes()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(device), "quick": quick, "seconds": {}}
    steps = {"extraction": lambda: extraction(device, sizes, encoders), "corruptions": lambda: corruption_suites(device, sizes),
             "probes": lambda: probes(device, sizes, cpu_chexpert), "cuml": lambda: cuml_parity(device, sizes),
             "stage1": lambda: stage1_run(device, sizes.stage1_images, encoders, sizes.extract_batch, sizes.image_size,
                                          max(1, sizes.bare_iterations // 2),
                                          input_size=sizes.image_size if quick else None),
             "devices": lambda: devices_run(device, min(sizes.stage1_images, 600), encoders, sizes.extract_batch,
                                            sizes.image_size, input_size=sizes.image_size if quick else None),
             "zero_shot": lambda: zero_shot_cost(device, 2_000 if quick else 200_000)}
    unknown = sorted(set(parts) - set(steps))
    if unknown:
        raise ValueError(f"unknown part(s) {unknown}; choose from {sorted(steps)}")
    for part in parts:
        started = time.perf_counter()
        try:
            results[part] = steps[part]()
        except Exception as error:  # one failing part must not lose the others' figures
            results[part] = {"error": f"{type(error).__name__}: {error}"}
        results["seconds"][part] = time.perf_counter() - started
        echo(f"gpu-check: {part} done in {results['seconds'][part]:.1f} s")
        _write(results, out)  # after every part, so a run cut short keeps what it measured
    echo(markdown(results))
    return results


def _write(results: dict[str, Any], out: Path) -> None:
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2, default=float))
    (out / "gpu_check.md").write_text(markdown(results))


def _cells(values: list[object]) -> str:
    return "| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in values) + " |"


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [f"# GPU check ({m.get('gpu', m['device'])}, torch {m['torch']}, {m['cpu_count']} CPU cores"
             + (", QUICK sizes: figures mean nothing" if results["quick"] else "") + ")", ""]
    if isinstance(results.get("extraction"), list):
        lines += ["## Extraction (random weights, images/s)", "",
                  "| encoder | pipeline | bare `embed` | pipeline / bare | bare bf16 channels-last | pipeline / that |",
                  "|---|---|---|---|---|---|"]
        for r in results["extraction"]:
            lines.append(_cells([r["encoder"], r["pipeline_images_per_s"], r["pipeline_bare_embed_images_per_s"],
                                 r["pipeline_over_bare_embed"], r["channels_last_bf16_images_per_s"],
                                 r["pipeline_over_channels_last_bf16"]]))
        lines.append("")
    if isinstance(results.get("corruptions"), list):
        lines += ["## Corruption suites (all corruptions x 5 severities)", "",
                  "| modality | variants per image | ms per clean image | batch x size |", "|---|---|---|---|"]
        for r in results["corruptions"]:
            lines.append(_cells([r["modality"], r["variants_per_image"], r["ms_per_clean_image"],
                                 f"{r['batch']} x {r['size']} px"]))
        lines.append("")
    if isinstance(results.get("probes"), list):
        device = m["device"]
        lines += ["## Torch probe backend, one unit (fit seconds)", "",
                  f"| task | rows train / val / test | {device} fit | CPU 1 thread fit | speed-up | max abs dAUROC | C differs |",
                  "|---|---|---|---|---|---|---|"]
        for r in results["probes"]:
            lines.append(_cells([r["task"], f"{r['n_train']} / {r['n_val']} / {r['n_test']}",
                                 r.get(f"{device}_fit_s", "-"), r.get("cpu_1thread_fit_s", "-"),
                                 r.get("fit_speedup_device_vs_cpu", "-"), r.get("max_abs_dauroc_device_vs_cpu", "-"),
                                 r.get("selected_C_differs", "-")]))
        lines.append("")
    if isinstance(results.get("stage1"), dict) and "error" not in results["stage1"]:
        r = results["stage1"]
        lines += ["## Stage 1 on CheXpert-geometry JPEGs (the chest suite, 65 variants per test image)", "",
                  "| images (test) | encoders | forward passes | passes/s end to end | bare forward s | "
                  "pipeline / bare | decode s (1 thread) | decode / wall | corrupt s | corrupt / wall |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines.append(_cells([f"{r['images']} ({r['test_images']})", " + ".join(r["encoders"]), r["forward_passes"],
                             r["passes_per_s"], r["bare_forward_s"], r["pipeline_over_bare"], r["decode_s"],
                             r["decode_share"], r["corrupt_s"], r["corrupt_share"]]))
        lines.append("")
    if isinstance(results.get("devices"), dict) and "error" not in results["devices"]:
        r = results["devices"]
        lines += ["## Stage 1 on every device (one worker per device, `crs extract --devices`)", ""]
        if "skipped" in r:
            lines += [f"skipped: {r['skipped']}", ""]
        else:
            lines += ["| devices | forward passes | one device s | all devices s | speed-up | caches bit-identical |",
                      "|---|---|---|---|---|---|"]
            lines.append(_cells([", ".join(r["devices"]), r["passes"], r["seconds_one_device"],
                                 r["seconds_all_devices"], r["speedup"], r["bit_identical"]]))
            lines.append("")
    if isinstance(results.get("zero_shot"), list):
        lines += ["## Zero-shot (random weights): text tower build, prototypes per built-in prompt set, prediction", "",
                  "| encoder | build s | ISIC prompts / s | APTOS prompts / s | CheXpert prompts / s | predict rows / s |",
                  "|---|---|---|---|---|---|"]
        for r in results["zero_shot"]:
            lines.append(_cells([r["encoder"], r["build_s"], f"{r['isic2019_prompts']} / {r['isic2019_encode_s']:.2f}",
                                 f"{r['aptos2019_prompts']} / {r['aptos2019_encode_s']:.2f}",
                                 f"{r['chexpert5_prompts']} / {r['chexpert5_encode_s']:.2f}",
                                 f"{r['predict_rows']} / {r['predict_s']:.2f}"]))
        lines.append("")
    if "cuml" in results:
        lines += ["## cuML parity", "", "```", json.dumps(results["cuml"], default=float), "```", ""]
    errors = {part: value["error"] for part, value in results.items()
              if isinstance(value, dict) and "error" in value and part != "cuml"}
    for part, error in errors.items():
        lines.append(f"**{part} failed:** {error}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crs.bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="toy sizes (a CPU smoke run; figures mean nothing)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-check", help="folder for gpu_check.json/.md")
    parser.add_argument("--cpu-chexpert", action="store_true", help="also fit the CheXpert-sized unit on the CPU")
    parser.add_argument("--parts", default="extraction,corruptions,probes,cuml,stage1,devices,zero_shot")
    parser.add_argument("--encoders", default=",".join(EXTRACT_ENCODERS), help="registry names for the extraction part")
    args = parser.parse_args(argv)
    try:
        run(args.device, args.quick, args.out, args.cpu_chexpert, tuple(p for p in args.parts.split(",") if p),
            tuple(e for e in args.encoders.split(",") if e))
    except (RuntimeError, ValueError) as error:
        print(f"gpu_check: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
