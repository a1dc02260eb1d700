"""``crs bench``: speed measured as ratios against the obvious way, side by side in one run."""

from __future__ import annotations

import click

from crs.bench import corruptions as corruptions_bench
from crs.bench import extract as extract_bench
from crs.bench import paper_scale as paper_scale_bench
from crs.bench import probes as probes_bench
from crs.cli.stages import JobsType


@click.group("bench")
def bench() -> None:
    """Benchmarks (ratios against a baseline measured in the same run; absolute times are context only)."""


@bench.command("probes")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--quick", is_flag=True, help="Small sizes, for a smoke run.")
@click.option("--device", default="cpu", show_default=True)
def probes(as_json: bool, quick: bool, device: str) -> None:
    """Stage 2 for one unit: crs probe engine against a careful scikit-learn loop."""
    probes_bench.run(json_out=as_json, quick=quick, device=device)


@bench.command("corruptions")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--markdown", "as_markdown", is_flag=True, help="Print the per-corruption table of docs/corruptions.md."
)
def corruptions(as_json: bool, as_markdown: bool) -> None:
    """The chest X-ray corruption suite: batched torch against two per-image loops.

    The published MedMNIST-C 0.1.0 loop (the suite's source), and a tuned PIL/numpy/scipy loop of our
    exact definitions (the stricter baseline).
    """
    corruptions_bench.run(json_out=as_json, markdown_out=as_markdown)


@bench.command("extract")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--quick", is_flag=True, help="Fewer images, one repeat.")
@click.option("--device", default="cpu", show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Fixed intra-op threads [default: auto].")
@click.option("--no-save", is_flag=True, help="Do not store the figures for `crs plan`.")
@click.option("--beside-busy", type=click.IntRange(min=1), default=None, metavar="N",
              help="Instead: stage 1 idle and beside N busy-loop processes, auto threads and fixed threads.")
@click.option("--encoder", default="resnet18", show_default=True, help="Encoder for --beside-busy.")
def extract(as_json: bool, quick: bool, device: str, threads: int | None, no_save: bool, beside_busy: int | None,
            encoder: str) -> None:
    """Stage 1 pipeline forward passes/s as a ratio of the bare forward pass (resnet50, vit_base, random weights).

    The figures are stored for this host (~/.cache/crs/throughput.json) so `crs plan` can time a run.
    """
    if beside_busy is not None:
        results = extract_bench.run_neighbour(encoder, busy=beside_busy, repeats=1 if quick else 2,
                                              n_images=24 if quick else 48)
        extract_bench.print_neighbour(results, as_json)
        return
    extract_bench.run(json_out=as_json, quick=quick, device=device, save=not no_save, threads=threads)


@bench.command("paper-scale")
@click.option("--encoders", default=2, show_default=True, type=click.IntRange(min=1), help="Encoders to generate.")
@click.option("--scale", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Multiply every row count (1 = the paper's sizes; 0.01 for a quick run).")
@click.option("--dim", default=1024, show_default=True, type=click.IntRange(min=2), help="Feature dimension.")
@click.option("--max-corruptions", default=None, type=click.IntRange(min=0),
              help="Corruptions per task (default: the modality's whole suite), each at every severity.")
@click.option("--severities", default="1,2,3,4,5", show_default=True, help="Comma-separated severities.")
@click.option("--n-boot", default=1000, show_default=True, type=click.IntRange(min=1), help="Score bootstrap replicates.")
@click.option("--jobs", default=None, type=JobsType(), help="Stage-2 workers, or 'auto' [default: the spec's default].")
@click.option("--workdir", default=None, type=click.Path(file_okay=False),
              help="Folder for the generated cache and run [default: a new temporary folder].")
@click.option("--keep", is_flag=True, help="Keep the work folder (cache, run folder, spec) instead of deleting it.")
@click.option("--reuse", is_flag=True,
              help="Measure the stages again on a work folder a --keep run prepared (--workdir); no generation or import.")
@click.option("--in-process", is_flag=True,
              help="Run the stages in this process (quick runs: no start-up per stage; peaks are upper bounds).")
@click.option("--subgroups", is_flag=True,
              help="Score patient subgroups too (Sex, Age band, AP/PA as CheXpert's CSV has them); the score "
                   "stage's figures then include them (docs/subgroups.md: how the share was measured).")
@click.option("--corruption-rows", type=click.IntRange(min=1), default=None, metavar="N",
              help="Corrupted conditions on the patient-level subsample of about N test images ([extract] "
                   "corruption_rows; decision 0032). `python -m crs.bench.corruption_subsample` compares sizes.")
@click.option("--no-zero-shot", is_flag=True,
              help="Leave out the zero-shot units of the simulated vision-language encoders (every second one).")
@click.option("--measure-fifteen/--no-measure-fifteen", default=None,
              help="Measure the score and report at 15 encoders on a run folder replicated from the measured one "
                   "(no new fits, predictions linked; deleted after unless --keep) [default: on with --reuse or at "
                   "full size].")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def paper_scale(encoders: int, scale: float, dim: int, max_corruptions: int | None, severities: str, n_boot: int,
                jobs: int | str | None, workdir: str | None, keep: bool, reuse: bool, in_process: bool,
                subgroups: bool, corruption_rows: int | None, no_zero_shot: bool, measure_fifteen: bool | None,
                as_json: bool) -> None:
    """Stage 2 and scoring at the paper's sample counts: probe, score and report timed separately.

    Generates features with planted signal for ISIC 2019, APTOS 2019 and CheXpert (+ a MIMIC-CXR-sized
    shift target) at their real sizes, imports them as a user would, then measures wall, CPU and
    peak RSS of each stage in its own process. Full size needs about 6.6 GB of disk per encoder.
    """
    try:
        levels = tuple(int(level) for level in severities.split(",") if level.strip())
    except ValueError:
        raise click.BadParameter(f"{severities!r} is not a comma-separated list of severities",
                                 param_hint="--severities") from None
    if reuse and workdir is None:
        raise click.UsageError("--reuse measures a work folder a --keep run prepared: name it with --workdir")
    config = paper_scale_bench.PaperScaleConfig(encoders=encoders, scale=scale, dim=dim, severities=levels,
                                                max_corruptions=max_corruptions, n_boot=n_boot, jobs=jobs,
                                                workdir=workdir, keep=keep or reuse, reuse=reuse,
                                                in_process=in_process, subgroups=subgroups,
                                                corruption_rows=corruption_rows, zero_shot=not no_zero_shot,
                                                measure_fifteen=measure_fifteen, keep_fifteen=keep)
    paper_scale_bench.run(config, json_out=as_json, echo=click.echo)


@bench.command("readthrough")
@click.option("--scale", default=0.01, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Row counts as a fraction of the paper's (the cache's size grows with it).")
@click.option("--encoders", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--dim", default=1024, show_default=True, type=click.IntRange(min=2))
@click.option("--max-corruptions", default=4, show_default=True, type=click.IntRange(min=0),
              help="Corruptions per task, each at every severity.")
@click.option("--jobs", default=None, type=JobsType(), help="Stage-2 workers [default: the spec's].")
@click.option("--workdir", default=None, type=click.Path(file_okay=False), help="Work folder [default: a temporary one].")
@click.option("--keep", is_flag=True, help="Keep the work folder.")
@click.option("--repeats", default=2, show_default=True, type=click.IntRange(min=1),
              help="Local and warm runs, alternating; the best of each is reported.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def readthrough(scale: float, encoders: int, dim: int, max_corruptions: int, jobs: int | str | None,
                workdir: str | None, keep: bool, repeats: int, as_json: bool) -> None:
    """Stage 2 from a URL cache (local S3 server) through the read-through against a local folder: cold, warm,
    and with a budget below the working set, side by side in one run; wall/CPU ratios and bytes fetched."""
    import json
    from dataclasses import asdict

    from crs.bench import readthrough as readthrough_bench

    result = readthrough_bench.run(scale, encoders, dim, max_corruptions, jobs, workdir, keep,
                                   echo=lambda line: click.echo(line, err=as_json), repeats=repeats)
    click.echo(json.dumps(asdict(result), indent=2) if as_json else readthrough_bench.format_result(result))


@bench.command("all")
@click.option("--quick", is_flag=True, help="Smoke sizes.")
@click.pass_context
def all_(ctx: click.Context, quick: bool) -> None:
    """Every benchmark in turn."""
    ctx.invoke(extract, as_json=False, quick=quick, device="cpu")
    ctx.invoke(corruptions, as_json=False, as_markdown=False)
    ctx.invoke(probes, as_json=False, quick=quick, device="cpu")
    import importlib.util

    if all(importlib.util.find_spec(package) for package in ("s3fs", "moto")):
        ctx.invoke(readthrough, scale=0.003 if quick else 0.01, encoders=1 if quick else 2, dim=1024,
                   max_corruptions=4, jobs=None, workdir=None, keep=False, repeats=1 if quick else 2, as_json=False)
    else:
        click.echo("readthrough: skipped (needs s3fs and moto[server]: pip install -e '.[dev]')")
