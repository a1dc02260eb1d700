"""Assemble the report: figures (PNG), reliability cards, one self-contained HTML page and Markdown.

The HTML page carries every image inline as a data URI and no scripts, fonts or links outside the
page, so it opens offline, attached to an e-mail or from an archive.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from crs.evaluate.artifacts import RunFolder
from crs.evaluate.contest import contest_of_score
from crs.report import plots, plots_runs
from crs.report import subgroups as subgroup_report
from crs.report.cards import build_cards
from crs.report.headline import headline, headline_details, reversal_note_text
from crs.report.leaderboards import (
    has_task_leaderboards,
    overall_sentence,
    placement_table,
    specialist_cards,
    task_tables,
)
from crs.report.provenance import encoder_provenance, exposure_flags, task_infos
from crs.report.robustness_precision import standard_error_note, subsample_notes
from crs.report.run_provenance import design_rows, provenance_rows, provenance_summary
from crs.report.shifts import shift_table, shift_targets
from crs.report.stability import Table, leave_one_out_table, reference_table, stability_text
from crs.report.style import encoder_styles
from crs.report.subgroup_plots import subgroup_plots
from crs.report.tables import (
    AXIS_VALUES,
    axis_values,
    bootstrap_name,
    interval_label,
    interval_note,
    is_case_level,
    leaderboard,
    leaderboard_text,
    percent,
)
from crs.report.zero_shot import zero_shot_records, zero_shot_tables
from crs.scoring.intervals import SUBGROUP_INTERVALS, coverage_sentence
from crs.scoring.reversals import contest_reversals_of

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


@dataclass(frozen=True)
class Figure:
    path: Path
    caption: str
    width: int = 0
    data_uri: str = ""


@dataclass(frozen=True)
class Details:
    """A part of a section shown collapsed (HTML ``<details>``): a one-line summary, then lines and tables."""

    summary: str
    lines: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()


@dataclass
class Section:
    anchor: str
    title: str
    text: str = ""
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    summary: str = ""
    """One line read first, above everything else of the section."""
    findings: list[str] = field(default_factory=list)
    """Results the reader must not miss, shown highlighted right after the summary."""
    details: list[Details] = field(default_factory=list)


def _figure(path: Path | None, caption: str) -> Figure | None:
    if path is None:
        return None
    with Image.open(path) as image:
        width = image.size[0]
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return Figure(Path(path), caption, width, f"data:image/png;base64,{data}")


def _add(section: Section, path: Path | None, caption: str, missing: str = "") -> None:
    figure = _figure(path, caption)
    if figure is not None:
        section.figures.append(figure)
    elif missing:
        section.notes.append(missing)


def _board_rows(board: pd.DataFrame, text: pd.DataFrame, styles, flags) -> list[dict]:
    rows = []
    for (_, row), (_, shown) in zip(board.iterrows(), text.iterrows(), strict=True):
        def split(cell: str) -> dict:
            value, _, ci = cell.partition(" ")
            return {"value": value, "ci": ci}

        rows.append({
            "rank": shown["CRS rank"], "encoder": row["encoder"], "colour": styles[row["encoder"]].colour,
            "crs": f"{row['crs']:.3f}", "crs_ci": split(shown["CRS [CI]"])["ci"],
            "leading": bool(row["tier"]), "p_rank1": shown["P(rank 1)"], "auroc_rank": "\u2014" if row["baseline"] else int(row["auroc_rank"]),
            "shift": row["rank_shift"], "reversed_with": row["reversed_with"],
            "axes": [split(shown[label]) for _, label, _ in AXIS_VALUES.values()],
            "worst_axis": row["worst_axis"],
            "flags": [{"short": f.short(), "text": f.text()} for f in flags.get(row["encoder"], [])],
        })
    return rows


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub Markdown table (no tabulate dependency)."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in table.columns) + " |",
             "|" + "|".join("---" for _ in table.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def _settings(score, records: pd.DataFrame) -> list[tuple[str, str]]:
    settings = score.settings.as_dict() if hasattr(score.settings, "as_dict") else dict(score.settings)
    rows = [
        ("encoders", ", ".join(sorted(records["encoder"].unique()))),
        ("tasks", ", ".join(sorted(records["task"].unique()))),
        ("label fractions", ", ".join(f"{f:g}" for f in sorted(records["label_fraction"].astype(float).unique()))),
        ("seeds", ", ".join(str(s) for s in sorted(records["seed"].unique()))),
        ("run records", str(len(records))),
    ]
    targets = shift_targets(records)
    if targets:
        rows.insert(2, ("shift targets", "; ".join(f"{task}: {', '.join(names)}" for task, names in targets.items())))
    rows += [(key.replace("_", " "), _setting_text(value)) for key, value in settings.items()]
    point = getattr(score, "point", None)
    if point is not None:
        rows.append(("error floors (noise level of the reference's errors)",
                     ", ".join(f"{axis.replace('_', ' ')} {value:.4f}" for axis, value in point.floor.items())))
    return rows


def _setting_text(value) -> str:
    """A setting as a reader wants it: floats to 4 significant digits (weights 0.3333, not 0.3333333333333333)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{key.replace('_', ' ')} {_setting_text(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_setting_text(item) for item in value)
    return str(value)


def write_report(score, records: pd.DataFrame, out_dir: Path, title: str = "crs report", *,
                 predictions_dir: Path | None = None, spec=None, cache_root: Path | None = None,
                 draw_corruption_grids: bool = True) -> Path:
    """Write report.md, report.html and figures/*.png under ``out_dir``; return the HTML path.

    ``predictions_dir`` (default ``out_dir/predictions``) feeds the reliability diagrams; ``spec``
    gives the data sets (for modalities, exposure flags and corruption grids) and the cache root
    (for the weights digests), which ``cache_root`` overrides. Each missing input removes only the
    parts that need it, with a note on the page.
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    folder = out_dir / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    predictions_dir = Path(predictions_dir) if predictions_dir is not None else out_dir / "predictions"
    cache_root = cache_root if cache_root is not None else getattr(spec, "cache", None)
    records_file = RunFolder(predictions_dir.parent).records_path
    provenance_box = provenance_rows(_run_provenance(predictions_dir.parent),
                                     records_file.stat().st_mtime if records_file.is_file() else None) + design_rows(score)

    order = score.crs.sort_values(["rank", "auroc_rank"]).index.astype(str).tolist()
    # encoders ranked only in their tasks' leaderboards (specialists) follow, with their own colours
    everyone = list(order)
    if has_task_leaderboards(score):
        everyone += [str(name) for name in score.placement.index if str(name) not in order]
    styles = encoder_styles(everyone)
    tasks = sorted(str(t) for t in records["task"].unique())
    infos = task_infos(tasks, spec, cache_root)
    runs_on = {name: sorted(map(str, records.loc[records["encoder"].astype(str) == name, "task"].unique()))
               for name in everyone}
    provenance = {name: encoder_provenance(name, runs_on[name] or tasks, cache_root) for name in everyone}
    flags = {name: exposure_flags(provenance[name], infos) for name in everyone}
    board = leaderboard(score, {name: [f.short() for f in flags[name]] for name in order})
    text = leaderboard_text(board)

    reference_words = ("the cohort-median encoder's (per-axis median error)" if score.reference == "median"
                       else f"the reference encoder's ({score.reference})")
    axes = Section("profiles", "Where each encoder stands on the four axes",
                   f"u = 1 / (1 + error / reference error), with {reference_words} error as reference: 0.5 "
                   "matches it, 1 is perfect. Errors below the noise level of the reference's error (its "
                   "standard error) count as equal to it.")
    contest = contest_of_score(score)  # the rule every view reads: contestants, their ranks, the baseline row
    found = contest_reversals_of(score)
    _add(axes, plots.axis_profiles(score.crs, styles, folder / "axis_profiles.png", score.reference, contest),
         "Axis profile per encoder: u per axis, worst axis hatched, dashed line at the reference (0.5).")
    _add(axes, plots.pareto_views(axis_values(score).reindex(order), styles, folder / "pareto.png"),
         "Pareto view: clean macro AUROC against calibration (RMS calibration error), label efficiency (mean AUROC below "
         "100 % labels) and robustness (mean AUROC under corruption and shift).")
    ranks = Section("ranks", "Does clean AUROC pick the same encoder?")
    _add(ranks, plots.rank_slope(score.crs, found, styles, folder / "rank_slope.png", contest),
         "Rank by clean AUROC (left) against rank by CRS (right) among the candidates; crossing solid lines are "
         "reversed pairs, and a pair is reversed with confidence when both orders are held by the simultaneous "
         "intervals.")
    case_level = is_case_level(score.bootstrap)
    resampled = ("Seeds and, within strata, whole patients or lesions are resampled jointly for every encoder "
                 f"({score.bootstrap.n_boot} replicates of the {bootstrap_name(score.bootstrap)})"
                 if case_level else
                 f"Seeds are resampled jointly for every encoder ({score.bootstrap.n_boot} replicates of the "
                 f"{bootstrap_name(score.bootstrap)}; test cases are not resampled)")
    uncertainty = Section("uncertainty", "Is the lead real?", f"{resampled}.")
    contestants = list(contest.contestants)  # ranks among the candidates: the baseline row takes no rank
    replicates = score.bootstrap.replicates.set_axis([str(c) for c in score.bootstrap.replicates.columns], axis=1)
    _add(uncertainty, plots.bootstrap_ranks(replicates[contestants], contestants,
                                            folder / "bootstrap_ranks.png",
                                            level="seed \u00d7 test-case" if case_level else "paired-seed"),
         f"Share of the {score.bootstrap.n_boot} {bootstrap_name(score.bootstrap)} replicates in which each "
         "encoder takes each CRS rank.")
    stable = Section("stability", "How stable is this ranking?", stability_text(score.stability, score.reference),
                     tables=[reference_table(score.stability)])
    if getattr(score, "equity_stability", None) is not None:
        stable.tables.append(subgroup_report.equity_table(score.equity_stability))
    if len(score.stability.leave_one_out):
        stable.tables.append(leave_one_out_table(score.stability))
    else:
        stable.notes.append("Leave-one-encoder-out needs at least three encoders: with two, the one left has "
                            "nothing to be ranked against.")
    _add(stable, plots.weight_sensitivity(score.sensitivity, styles, folder / "weight_sensitivity.png"),
         "Weight sensitivity: how often each encoder leads under other CRS weights, and how far the ranking moves "
         "(the data and the reference held fixed at the point estimates: how much the ranking leans on the weights, "
         "not how sure the data are).")
    labels = Section("labels", "Label efficiency")
    _add(labels, plots_runs.label_efficiency_curves(records, styles, folder / "label_efficiency.png",
                                                    zero_shot_records(out_dir)),
         "Clean macro AUROC against the share of training labels used (log scale), mean ± 1 SD over seeds. "
         "The label-efficiency axis is the mean AUROC over the fractions below 100 %."
         + (" Dashed: each vision-language encoder's zero-shot AUROC with zero labels (where its curve crosses "
            "it is the crossover)." if (out_dir / "zero_shot" / "records.parquet").is_file() else ""))
    robustness = Section("robustness", "Robustness to acquisition corruptions and other sites")
    modalities = {task: info.modality for task, info in infos.items()}
    _add(robustness, plots_runs.severity_curves(records, styles, folder / "severity.png", modalities),
         "Macro AUROC against corruption severity per corruption family (severity 0 = clean).",
         "No corrupted evaluations in these run records: severity curves skipped.")
    sites = shift_table(records, everyone, cache_root)
    if sites is not None:
        robustness.tables.append(sites)
    if draw_corruption_grids:
        from crs.report.grids import corruption_grids  # torch and the image loaders: only for the grids

        corrupt = records[records["condition"] == "corrupt"]
        evaluated = {str(task): sorted(map(str, rows["corruption"].unique())) for task, rows in corrupt.groupby("task")}
        grids = corruption_grids(spec, folder, evaluated)
        for path, modality, dataset in grids.grids:
            _add(robustness, path, f"Corruption grid, {modality}: the first test image of {dataset} under every "
                                   "corruption evaluated (rows) at every severity (columns), as the encoders would see it.")
        robustness.notes.extend(grids.notes)
    calibration = Section("calibration", "Calibration on clean and shifted data")
    predictions = plots_runs.load_predictions(predictions_dir, everyone, tasks)
    precision = standard_error_note(score, order)
    robustness.notes.extend([*([precision] if precision else []), *subsample_notes(predictions)])
    _add(calibration, plots_runs.reliability_diagrams(predictions, styles, folder / "reliability.png",
                                                      shift_targets(records)),
         "Reliability diagrams: observed frequency against predicted probability; the diagonal is perfect calibration.",
         f"No predictions found under {predictions_dir}: reliability diagrams skipped.")
    sections = [axes, ranks, uncertainty, stable, labels, robustness, calibration, _subgroup_section(score, styles, folder)]
    zero_shot = zero_shot_tables(out_dir)
    if zero_shot is not None:  # only a run with [score] zero_shot = true has it
        sections.append(Section("zero_shot", "Zero-shot or a probe?", zero_shot[0], tables=zero_shot[1]))
    if has_task_leaderboards(score):
        per_task = Section(
            "tasks", "Leaderboards per task",
            "Some encoders run on some data sets only (the spec's `datasets` on an encoder). The leaderboard above "
            "is the overall one, over the encoders that run on every task; here each task has its own leaderboard, "
            "a CRS on that task alone over every encoder that runs on it, with its own reference "
            f"({'the median of that leaderboard' if score.reference == 'median' else score.reference}), bootstrap "
            "tier, reversals and stability. Ranks in different leaderboards are not comparable.",
            tables=[placement_table(score), *task_tables(score, {n: [f.short() for f in flags[n]] for n in everyone})])
        sections.insert(0, per_task)

    # the overall cards compare with the overall encoders only (the median reference's values among them)
    cards = build_cards(score, records[records["encoder"].astype(str).isin(order)], board, provenance, flags)
    if has_task_leaderboards(score):
        cards += specialist_cards(score, records, provenance, flags)
    if getattr(score, "subgroup_gaps", None) is not None:
        cards = [dataclasses.replace(card, subgroups=tuple(subgroup_report.card_lines(score.subgroup_gaps, card.encoder)))
                 for card in cards]
    reversal_note = reversal_note_text(found, contest.baseline)
    head = " ".join(filter(None, [headline(score, board), overall_sentence(score)]))
    details = headline_details(score)  # what backs the answer, under the table (issue 46 item 14)
    gaps = getattr(score, "subgroup_gaps", None)
    subgroup_line = subgroup_report.opening_line(gaps) if gaps is not None and len(gaps) else ""
    settings = _settings(score, records)
    page = _render_html(
        title=title, headline=head, board=_board_rows(board, text, styles, flags), reference=score.reference,
        reversal_note=reversal_note, interval_note=interval_note(score.bootstrap), details=details,
        ci_label=interval_label(score.bootstrap), sections=sections,
        axis_labels=[label for _, label, _ in AXIS_VALUES.values()],
        cards=[{**card.__dict__, "colour": styles[card.encoder].colour,
                "p_rank1": percent(card.p_rank1) if np.isfinite(card.p_rank1) else "n/a"} for card in cards],
        settings=settings, provenance=provenance_box, subgroup_line=subgroup_line,
        provenance_summary=provenance_summary(provenance_box),
    )
    path = out_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    (out_dir / "report.md").write_text(
        _markdown(title, head, text, " ".join(filter(None, [details, reversal_note, interval_note(score.bootstrap)])),
                  sections, cards, settings,
                  out_dir, provenance_box, subgroup_line), encoding="utf-8"
    )
    (out_dir / "report_build_seconds.txt").write_text(f"{time.perf_counter() - started:.2f}\n")
    return path


def _subgroup_section(score, styles, folder: Path) -> Section:
    """Who does it fail? A one-line summary and the findings (gaps whose interval excludes 0) first; a
    dot-and-whisker plot per attribute with two groups or more to compare; every worst-group line, the
    per-group table and the groups too small to judge collapsed below; why not, when there is nothing."""
    section = Section("subgroups", "Who does it fail?")
    groups, gaps = getattr(score, "subgroups", None), getattr(score, "subgroup_gaps", None)
    if groups is None or gaps is None:
        section.notes.append("No subgroup scores: they need the case-level bootstrap (`case_bootstrap = true`) "
                             "and data sets with subgroup attributes (sex, age band, view... see docs/subgroups.md).")
        return section
    section.summary = subgroup_report.summary_line(gaps, groups)
    section.findings = subgroup_report.finding_sentences(gaps)
    section.text = ("Per patient subgroup, at 100 % labels, on the clean test split and on each shifted site. Gaps are "
                    "between the groups the point estimate names (best minus worst AUROC; worst minus best calibration "
                    "error), with intervals from the score's own patient-level replicates, so an interval that covers 0 "
                    "is no evidence of a gap. The pair is picked after looking, so each gap's interval holds for every "
                    "pair of the attribute's groups at once (max-|t| bootstrap): a gap is a finding only when it "
                    "excludes 0, at most about 5 % of attributes under equal signal whatever their number of groups. "
                    "Gaps are reported, never scored.")
    colours = {name: style.colour for name, style in styles.items()}
    level = interval_label(score.bootstrap, SUBGROUP_INTERVALS)
    for path, caption in subgroup_plots(groups, colours, folder, level):
        _add(section, path, caption)
    if not section.figures:
        section.notes.append("No figure: no attribute has two groups large enough to compare.")
    lines = subgroup_report.worst_group_sentences(gaps)
    if lines:
        section.details.append(Details(f"Worst group and gaps, per encoder, task and attribute ({_lines(lines)})",
                                       (subgroup_report.TWO_INTERVALS, *lines)))
    case_level = is_case_level(score.bootstrap)  # the subgroup intervals' measured coverage (decision 0090)
    coverage = coverage_sentence(float(score.bootstrap.alpha), SUBGROUP_INTERVALS) if case_level else None
    table = subgroup_report.group_table(groups, score.settings.subgroup_min_images,
                                        score.settings.subgroup_min_positives, coverage)
    if table.rows:
        section.details.append(Details(f"Per group: AUROC, calibration error and positive rate ({len(table.rows)} "
                                       "scored groups)", tables=(table,)))
    elif coverage:  # no group table to carry it: the intervals of the lines still have this coverage
        section.text += f" {coverage}"
    small = subgroup_report.too_small_lines(groups)
    if small:
        section.details.append(Details(
            f"Groups too small to judge ({score.settings.subgroup_min_images} test images and "
            f"{score.settings.subgroup_min_positives} positives of each label needed), per task and attribute "
            f"({_lines(small)})", tuple(small)))
    return section


def _lines(lines) -> str:
    return f"{len(lines)} line{'s' if len(lines) != 1 else ''}"


def _render_html(**context) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    environment = Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)), autoescape=select_autoescape(["html"]),
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return environment.get_template("report.html").render(**context)


def _run_provenance(run_root: Path) -> dict:
    """The run records' metadata of the run folder at ``run_root`` (empty when it has none here)."""
    try:
        return RunFolder(run_root).provenance()
    except (OSError, ValueError):
        return {}


def _markdown_tables(tables) -> list[str]:
    lines: list[str] = []
    for table in tables:
        lines += [f"### {table.title}", ""] if table.title else []
        lines += [markdown_table(table.frame()), "", f"*{table.caption}*", ""]
    return lines


def _markdown(title, head, text, reversal_note, sections, cards, settings, out_dir: Path,
              provenance: list[tuple[str, str]] | None = None, subgroup_line: str = "") -> str:
    lines = [f"# {title}", "", head, ""] + ([subgroup_line, ""] if subgroup_line else [])
    if provenance:
        lines += ["## Provenance", "", markdown_table(pd.DataFrame(list(provenance), columns=["what", "value"])), ""]
    lines += ["## Leaderboard", "", markdown_table(text), "", reversal_note, ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        if section.summary:
            lines += [f"**{section.summary}**", ""]
        lines += [f"- **{finding}**" for finding in section.findings] + ([""] if section.findings else [])
        if section.text:
            lines += [section.text, ""]
        lines += _markdown_tables(section.tables)
        for figure in section.figures:
            lines += [f"![{figure.caption}]({figure.path.relative_to(out_dir).as_posix()})", "", f"*{figure.caption}*", ""]
        lines += [f"> {note}" for note in section.notes] + ([""] if section.notes else [])
        for part in section.details:
            lines += [f"### {part.summary}", ""] + [f"- {line}" for line in part.lines] + ([""] if part.lines else [])
            lines += _markdown_tables(part.tables)
    lines += ["## Reliability cards", ""]
    for card in cards:
        p = card.provenance
        lines += [
            f"### {f'{card.rank}. ' if card.rank else ''}{card.encoder}{f', {card.scope}' if card.scope else ''} ({card.tier})", "",
            f"CRS {card.crs}, P(rank 1) {percent(card.p_rank1)}.", "",
            f"**Weakest: {card.worst_axis}.** {card.encoder} {card.worst_sentence}.", "",
            markdown_table(pd.DataFrame([(label, f"{value} {interval}".strip(), f"{u:.2f}" if np.isfinite(u) else "n/a")
                                         for label, value, interval, u in card.axes],
                                        columns=["axis", "value [CI]", "u"])),
            "",
            f"- source: {p.source or 'unknown'}{f' ({p.family})' if p.family else ''}",
            f"- weights: {p.weights}" + (f" (`{p.weights_digest}`)" if p.weights_digest else ""),
            f"- preprocessing: {p.preprocessing}",
            f"- licence: {p.license or 'unknown'}",
            f"- pretraining data: {'; '.join(p.pretraining_data) or 'none'}",
            f"- exposure: {'; '.join(f.text() for f in card.flags) or 'none found'}",
            *(f"- subgroup: {line}" for line in card.subgroups),
            *(["  (worst-group intervals allow for the worst group being picked after looking, so they differ "
               "from the group's own interval in \"Who does it fail?\")"] if card.subgroups else []),
            "",
        ]
    lines += ["## Settings", "", markdown_table(pd.DataFrame(settings, columns=["setting", "value"])), ""]
    return html.unescape("\n".join(lines))
