"""``score_records``: run records -> measurements -> point estimate, once -> bootstrap, reversals, stability."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crs.axes import effective_robustness, seed_axes
from crs.evaluate.artifacts import PREDICTIONS_DIR, RunFolder
from crs.evaluate.contest import contest_of_score
from crs.scoring.baseline import competing, contest_columns, reference_as_baseline
from crs.scoring.bootstrap import BootstrapResult, bootstrap_result, interval_method, zero_width
from crs.scoring.comparisons import Comparisons, comparisons_from_table
from crs.scoring.coverage import Coverage, declared_records, every_task_encoders, is_complete, placement
from crs.scoring.equity import equity_stability, with_equity
from crs.scoring.formula import AXES, EQUITY, PointEstimate, ScoreInputError, point_estimate, rank_descending
from crs.scoring.intervals import coverage_sentence, measured_coverage
from crs.scoring.layouts import task_kinds, task_layouts
from crs.scoring.measurements import Measurements, measure
from crs.scoring.rankings import RankReversals, rank_reversals
from crs.scoring.replicates import case_replicates, seed_replicates
from crs.scoring.resample import design_line
from crs.scoring.reversals import Reversals, bootstrap_reversals, contest_reversal_line, contest_reversals_of
from crs.scoring.settings import ScoreSettings
from crs.scoring.stability import Stability, WeightSensitivity, stability
from crs.scoring.statements import Statements, headline_statements, with_statements_tier
from crs.scoring.subgroups import subgroup_scores
from crs.scoring.verdict import opening_sentences

REPORTED_COLUMNS = (
    "ece", "brier", "nll", "kappa", "ordinal_auroc", "label_retention", "corruption_retention",
    "shift_retention", "retention", "corrupt_ece", "shift_ece",
)  # fmt: skip
"""Seed-axes columns reported beside the CRS per encoder (mean over seeds per task, then over the tasks
that have them), never scored."""


@dataclass(frozen=True)
class ScoreResult:
    """Everything ``crs score`` prints and stores, as DataFrames plus a JSON-ready summary.

    ``point``: the point estimate (axis errors, their standard errors, floor, CRS table), made once;
    ``crs``: its table with AUROC rank, interval, P(rank 1), rank confidence set and tier beside;
    ``reported``: measures reported beside the axes, never scored (raw ECE, Brier, NLL, retention
    ratios, effective robustness); ``reversal_uncertainty``: the bootstrap's AUROC-vs-CRS reversals
    (:class:`crs.scoring.reversals.Reversals`: per-pair probabilities, robust reversals, interval of
    the count, noise baseline), None when the bootstrap could not give them (the report then says
    it has only the point count).

    When the spec declares encoders that run on some tasks only (docs/decisions/0038), everything
    above is the **overall** leaderboard, over the encoders that run on every task;
    ``leaderboards[task]`` is that task's own full result (CRS, tiers, reversals, stability) over the
    encoders declared on it, and ``placement`` says per encoder where it is ranked and why
    (:func:`crs.scoring.coverage.placement`). Both are empty when every encoder runs on every task.

    ``subgroups`` (one row per encoder, task, condition, attribute and group) and ``subgroup_gaps``
    (one row per encoder, task, condition and attribute: worst group, gaps, groups too small) come
    from the per-case predictions under the score's replicates (:mod:`crs.scoring.subgroups`);
    None when the score has no case level or the data sets no subgroups. Reported, never scored.
    With the ``equity`` axis on, ``equity_stability`` holds per encoder its worst-group AUROC, CRS and
    rank with equity and without it (the four-axis point estimate), so the axis's effect is in view.
    """

    settings: ScoreSettings
    seed_axes: pd.DataFrame
    point: PointEstimate
    crs: pd.DataFrame
    reported: pd.DataFrame
    bootstrap: BootstrapResult
    reversals: RankReversals
    stability: Stability
    reversal_uncertainty: Reversals | None = None
    leaderboards: Mapping[str, ScoreResult] = field(default_factory=dict)
    placement: pd.DataFrame | None = None
    subgroups: pd.DataFrame | None = None
    subgroup_gaps: pd.DataFrame | None = None
    equity_stability: pd.DataFrame | None = None
    comparisons: Comparisons | None = None
    """Simultaneous intervals on every pairwise difference of axis errors (:mod:`crs.scoring.comparisons`):
    who is better than whom on which axis with confidence, sure and possible dominance, the confident
    Pareto set; None when the bootstrap kept no axis replicates (a score stored by an older crs). Since
    decision 0166 the comparisons of ``statements``."""
    statements: Statements | None = None
    """The headline's one simultaneous family (:mod:`crs.scoring.statements`): the axis comparisons, the
    floors, the tier and rank sets read off them, the candidates surely above a named reference; what
    :meth:`headline_sentences` words. None for a score read back from disk (its tier and comparisons are
    stored as made)."""
    stored_headline_family: Mapping[str, Any] | None = None
    """A score read back from disk: the stored summary of ``statements`` (``summary()["headline_family"]``)."""

    @property
    def reference(self) -> str:
        """The reference encoder's name, or "median" for the virtual cohort-median encoder."""
        return self.settings.reference

    @property
    def axis_errors(self) -> pd.DataFrame:
        return self.point.errors

    @property
    def sensitivity(self) -> WeightSensitivity:
        return self.stability.weights

    def _indexed_tables(self) -> dict[str, pd.DataFrame]:
        """Every stored table with its index (tables() flattens them; the summary records the index names)."""
        errors = self.point.errors.add_suffix("_error")
        if self.point.standard_errors is not None:
            errors = errors.join(self.point.standard_errors.add_suffix("_se"))
        out = {
            "seed_axes": self.seed_axes.set_index(pd.RangeIndex(len(self.seed_axes))),
            "axis_errors": errors,
            "point": self.point.table,
            "crs": self.crs,
            "reported": self.reported,
            "bootstrap": self.bootstrap.table,
            "bootstrap_replicates": self.bootstrap.replicates,
            "bootstrap_seed_draws": self.bootstrap.seed_draws,
            "rank_pairs": self.reversals.table,
            "stability_references": self.stability.references,
            "stability_reference_ranks": self.stability.reference_ranks,
            "stability_leave_one_out": self.stability.leave_one_out,
            "weight_sensitivity": self.stability.weights.table,
            "weight_kendall_taus": pd.DataFrame({"kendall_tau": self.stability.weights.kendall_taus}),
        }
        for axis, frame in (self.bootstrap.axis_error_replicates or {}).items():
            out[f"bootstrap_axis_{axis}"] = frame
        if self.reversal_uncertainty is not None:
            found = self.reversal_uncertainty
            out["reversal_pairs"] = found.pairs
            out["reversal_counts"] = pd.DataFrame({"reversed_pairs": found.replicate_counts})
            out["reversal_noise"] = found.noise
        if self.placement is not None:
            out["placement"] = self.placement
        if self.subgroups is not None and self.subgroup_gaps is not None:
            out["subgroups"] = self.subgroups
            out["subgroup_gaps"] = self.subgroup_gaps
        if self.equity_stability is not None:
            out["equity_stability"] = self.equity_stability
        if self.comparisons is not None:
            out["comparisons"] = self.comparisons.table()
        return out

    def tables(self) -> dict[str, pd.DataFrame]:
        """Named flat tables, ready for ``to_parquet`` / ``to_csv`` / ``to_markdown``
        (:meth:`from_stored` rebuilds the result from them and :meth:`summary`). A per-task
        leaderboard's tables follow, named ``task<i>_<table>`` (i: its place in ``summary()["leaderboards"]``)."""
        out = {name: _flat(table) for name, table in self._indexed_tables().items()}
        for i, board in enumerate(self.leaderboards.values()):
            out.update({f"{_board_prefix(i)}{name}": table for name, table in board.tables().items()})
        return out

    def leaderboard_of(self, task: str) -> ScoreResult:
        """The leaderboard of ``task`` (its encoders' CRS on that task alone); the overall result itself
        when every encoder runs on every task and there are no per-task leaderboards."""
        if not self.leaderboards:
            return self
        if task not in self.leaderboards:
            raise KeyError(f"no leaderboard for task {task!r}; tasks: {sorted(self.leaderboards)}")
        return self.leaderboards[task]

    def summary(self) -> dict:
        """JSON-serialisable headline: leader, tier, reversals, stability."""
        return {
            "reference": self.reference,
            "settings": self.settings.as_dict(),
            "error_floor": {axis: float(value) for axis, value in self.point.floor.items()},
            "interval": self.interval_summary(),
            "leader": self.bootstrap.leader,
            "leading_tier": list(self.bootstrap.leading_tier),
            "ranking": [
                {key: _plain(value) for key, value in row.items()}
                for row in self.crs.reset_index()[
                    ["encoder", "crs", "crs_low", "crs_high", "rank", "auroc", "auroc_rank", "p_rank1", "rank_low", "rank_high", "in_leading_tier",
                     *[column for column in ("competes", "contest_rank", "confident_pareto") if column in self.crs]]
                ].to_dict(orient="records")
            ],
            "rank_reversals": self.reversals.summary(),
            "reversal_uncertainty": _plain_tree(self.reversal_uncertainty),
            "placement": _placement_records(self.placement),
            "subgroups": self.subgroup_summary(),
            "equity_stability": None if self.equity_stability is None else _records(self.equity_stability.reset_index()),
            "leaderboards": [
                {"task": task, "encoders": [str(e) for e in board.crs.index], **{
                    key: value for key, value in board.summary().items() if key not in ("settings", "leaderboards", "placement")}}
                for task, board in self.leaderboards.items()
            ],
            "stability": _plain_tree(self.stability.summary()),
            "weight_sensitivity": self.stability.weights.summary(),
            "comparisons": None if self.comparisons is None else self.comparisons.summary(),
            "headline_family": (self.statements.summary() if self.statements is not None
                                else None if self.stored_headline_family is None else dict(self.stored_headline_family)),
            "headline": self.headline_sentences(),
            "stored": {
                "bootstrap": {"n_boot": self.bootstrap.n_boot, "alpha": self.bootstrap.alpha,
                              "seed": self.bootstrap.seed, "level": self.bootstrap.level},
                "point_axes": list(self.point.axes),
                "reference_index": None if self.point.reference_index is None else int(self.point.reference_index),
                "weight_concentration": self.stability.weights.concentration,
                "rank_reversals": {**self.reversals.summary(), "n_concordant": self.reversals.n_concordant},
                "table_index": {name: [None if n is None else str(n) for n in table.index.names]
                                for name, table in self._indexed_tables().items()},
            },
        }

    @classmethod
    def from_stored(cls, tables: dict[str, pd.DataFrame], summary: dict) -> ScoreResult:
        """Rebuild a result from :meth:`tables` (indexes restored) and :meth:`summary`; see :func:`read_score`."""
        return _from_stored(cls, tables, summary)

    def subgroup_summary(self) -> dict | None:
        """Per encoder, task, condition and attribute: the worst group, gaps with intervals, groups too small
        (the same numbers as the ``subgroup_gaps`` table), and the per-group rows."""
        if self.subgroups is None or self.subgroup_gaps is None:
            return None
        return {
            "min_images": self.settings.subgroup_min_images,
            "min_positives": self.settings.subgroup_min_positives,
            "gaps": _records(self.subgroup_gaps),
            "groups": _records(self.subgroups),
        }

    def interval_summary(self) -> dict:
        """What the CRS intervals cover: the bootstrap level, whether the test set is resampled, and the
        encoders whose (seed-only) interval has zero width, which are no intervals at all."""
        level = getattr(self.bootstrap, "level", "seed")
        case_level = level == "seed+case"
        return {
            "level": level,
            "covers_test_set": case_level,
            "zero_width": zero_width(self.bootstrap.table),
            "nominal_level": 1.0 - float(self.bootstrap.alpha),
            # what the case-level intervals cover by simulation (docs/crs.md 7b, decision 0063)
            "measured_coverage": measured_coverage(float(self.bootstrap.alpha), interval_method(self.bootstrap))
            if case_level else None,
            "method": interval_method(self.bootstrap),  # "adaptive" (default, 0181), "box" (0128) or "percentile"
            # how each test set was drawn and so resampled (decision 0085); None: seed level only
            "sampling_design": ([dict(row) for row in self.bootstrap.sampling_designs]
                                if case_level and self.bootstrap.sampling_designs is not None else None),
        }

    def headline_sentences(self, level: str | None = None) -> list[str]:
        """The answer first (crs.scoring.verdict): whom to build on (the leading tier of the competing
        encoders) and, per tier member, the axes on which it is better or worse than another with
        confidence; then how a named reference takes part. ``level``: the confidence level as printed."""
        return opening_sentences(self, level)

    def format(self) -> str:
        """Plain-text report for the terminal: the headline's answer, then the leaderboard (a named
        reference that does not compete is the row without a rank)."""
        columns = ["crs", "crs_low", "crs_high", "rank", "rank_low", "rank_high", "auroc", "auroc_rank", "p_rank1",
                   "in_leading_tier", "dominance", "balance", "worst_axis", "worst_axis_name"]  # fmt: skip
        table = self.crs.sort_values(["rank", "auroc_rank"])[columns]
        if "contest_rank" in self.crs:  # the rank among the competing encoders; the baseline row has none
            table = table.assign(rank=self.crs["contest_rank"].reindex(table.index))
        for column in ("rank", "rank_low", "rank_high"):
            table[column] = [("-" if pd.isna(value) else str(int(value))) for value in table[column]]
        contest = contest_of_score(self)  # ranks among the contestants; "1–k" for a shared lead (crs.evaluate.contest)
        table["rank"] = [("-" if str(name) == contest.baseline else contest.rank_label(str(name))) for name in table.index]
        table["auroc_rank"] = [str(contest.auroc_rank.get(str(name), "-")) for name in table.index]
        if "confident_pareto" in self.crs:
            table = table.assign(confident_pareto=self.crs["confident_pareto"].reindex(table.index))
        stable = self.stability.summary()
        weights = stable["weights"]
        reference = "cohort median (per-axis median error)" if self.settings.median_reference else self.reference
        floor = ", ".join(f"{axis} {value:.4f}" for axis, value in self.point.floor.items())
        lines = [
            *self.headline_sentences(),
            "",
            f"Clinical Reliability Score (reference: {reference}; {self.bootstrap.n_boot} {_bootstrap_name(self.bootstrap)} replicates)",
            table.to_string(float_format=lambda v: f"{v:.3f}", na_rep="-"),
            "",
            f"error floors (noise level of the reference's errors): {floor}",
            *self._interval_lines(),
            (f"leading tier (no other contestant surely above them: one {1 - self.bootstrap.alpha:.0%} simultaneous "
             "family, decision 0166): " if self.statements is not None or self.stored_headline_family else
             f"leading tier (encoders whose {1 - self.bootstrap.alpha:.0%} simultaneous rank confidence set contains 1): ")
            + ", ".join(self.bootstrap.leading_tier),
            contest_reversal_line(contest_reversals_of(self), contest_of_score(self).baseline),
            *self._reversal_lines(),
            f"stability: the leader stays first under {stable['leader_unchanged_under_references']} of "
            f"{stable['n_references']} reference choices (each encoder and the median); leaving one encoder out "
            f"changes the leader {stable['leave_one_out_leader_changes']} times and reverses at most "
            f"{stable['leave_one_out_max_pairs_reversed']} pairs of the others",
            f"weight sensitivity ({weights['n_samples']} Dirichlet draws of the CRS weights; data and reference fixed, "
            f"point estimates): the point leader {weights['top']} stays first in {weights['share_top_stays_first']:.1%}, "
            f"mean Kendall tau to default {weights['mean_kendall_tau']:.3f}",
            *self._leaderboard_lines(),
            *self._subgroup_lines(),
        ]
        return "\n".join(lines)

    def _subgroup_lines(self) -> list[str]:
        """Subgroup gaps whose interval excludes 0 (docs/subgroups.md); the full tables are stored beside."""
        gaps = self.subgroup_gaps
        if gaps is None:
            return []
        found = gaps[gaps["auroc_gap_low"].fillna(0) > 0]
        if found.empty:
            return [f"subgroups: no AUROC gap's {1 - self.settings.alpha:.0%} interval (one box over every group, "
                    "decision 0136) excludes 0 "
                    f"({len(gaps)} encoder x task x condition x attribute rows; score/subgroup_gaps.parquet)"]
        return ["subgroups (AUROC gaps whose interval, from one box over every group, excludes 0; "
                "reported, never scored):"] + [
            f"  {row['encoder']} on {row['task']} ({row['condition']}), by {row['attribute']}: worst {row['worst_group']} "
            f"{row['worst_auroc']:.3f}, gap to {row['best_group']} {row['auroc_gap']:.3f} "
            f"[{row['auroc_gap_low']:.3f}, {row['auroc_gap_high']:.3f}]"
            for _, row in found.iterrows()
        ]

    def _leaderboard_lines(self) -> list[str]:
        """Per-task leaderboards and who is ranked where (only when some encoder runs on some tasks only)."""
        if not self.leaderboards or self.placement is None:
            return []
        lines = ["", "The table above is the overall leaderboard: the encoders that run on every task "
                 f"({', '.join(map(str, self.crs.index))}). Per task:"]
        for task, board in self.leaderboards.items():
            order = board.crs.sort_values(["rank", "auroc_rank"])
            ranked = ", ".join(f"{int(row['rank'])}. {name} {row['crs']:.3f}" for name, row in order.iterrows())
            lines.append(f"  {task}: {ranked}; leading tier {', '.join(board.bootstrap.leading_tier)}")
        lines.append("who is ranked where:")
        lines += [f"  {name}: {row['why']}" for name, row in self.placement.iterrows()]
        return lines

    def _interval_lines(self) -> list[str]:
        interval = self.interval_summary()
        if interval["covers_test_set"]:
            method = interval_method(self.bootstrap)
            sentence = coverage_sentence(float(self.bootstrap.alpha), method=method)
            if method == "box":
                sentence = (f"CRS and axis intervals: the CRS at the extreme corners of a simultaneous box over every "
                            f"axis error (critical value {float(self.bootstrap.table['box_critical'].iloc[0]):.2f}; "
                            f"decision 0128); percentile bounds in crs_percentile_low / _high. {sentence or ''}").strip()
            elif method == "adaptive":  # decisions 0180, 0181
                sentence = (f"CRS intervals: the smooth part's interval plus the dominance range, each holding per "
                            f"encoder at the measured level (decision 0180); axis intervals: a simultaneous box over "
                            f"every axis error, holding at once (critical value "
                            f"{float(self.bootstrap.table['box_critical'].iloc[0]):.2f}; decision 0128); the box's "
                            f"CRS bounds, which the reversals with confidence read, in crs_box_low / _high. "
                            f"{sentence or ''}").strip()
            designs = [f"  {design_line(row)}" for row in interval["sampling_design"] or []]
            return ([sentence] if sentence else []) + (["test sets resampled as they were drawn:", *designs] if designs else [])
        lines = ["intervals are seed-only: the test set is not resampled (set case_bootstrap = true for intervals "
                 "that include test-set sampling)"]  # fmt: skip
        if interval["zero_width"]:
            lines.append(f"no interval for {', '.join(interval['zero_width'])}: every seed gave the same measurements "
                         "(zero width is not a confidence interval)")  # fmt: skip
        return lines

    def _reversal_lines(self) -> list[str]:
        found = self.reversal_uncertainty
        if found is None:
            return ["reversal uncertainty: not computed (no bootstrap replicates of AUROC and CRS)"]
        noise = found.noise.loc["crs"]
        baseline = contest_of_score(self).baseline  # its pairs never count (crs.evaluate.contest)
        robust = [pair for pair in found.pairs.loc[found.pairs["robust"], ["first", "second"]].to_numpy().tolist()
                  if baseline not in pair]
        return [
            f"robust reversals among the contestants (each order held in >= {found.level:.0%} of "
            f"{len(found.replicate_counts)} replicates; a description of the bootstrap, the confident pairs above "
            f"are the confidence statement): {len(robust)} {robust}",
            f"noise baseline: two independent replicates of the CRS reorder {noise['mean']:.1f} pairs on average "
            f"(5-95 %: {noise['low']:.0f} to {noise['high']:.0f})",
        ]


def _flat(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its index as leading columns (an unnamed one as ``index``)."""
    return table.reset_index()


def _restore(table: pd.DataFrame, names: list) -> pd.DataFrame:
    columns = ["index" if name is None else name for name in names]
    restored = table.set_index(columns)
    restored.index.names = names
    return restored


def read_score(folder: RunFolder) -> ScoreResult:
    """The score stored in a run folder's ``score/`` (:meth:`RunFolder.write_score`), rebuilt as a ScoreResult.

    Everything the report and ``format()`` use comes back; the case draws (re-drawable from the
    settings and the predictions) are not stored.
    """
    summary = folder.read_score_summary()
    if summary.get("stored") is None:
        raise ScoreInputError(f"{folder.score_dir} was written by an older crs; run `crs score` to rewrite it")
    return _read_stored(folder, summary, summary, "")


def _read_stored(folder: RunFolder, summary: dict, top: dict, prefix: str) -> ScoreResult:
    """One stored result (the overall one, or a per-task leaderboard under ``prefix``) and its leaderboards."""
    tables = {name: _restore(folder.read_score_table(prefix + name), names)
              for name, names in summary["stored"]["table_index"].items()}
    result = ScoreResult.from_stored(tables, {**summary, "settings": top["settings"]})
    boards = {
        str(entry["task"]): _read_stored(folder, entry, top, _board_prefix(i))
        for i, entry in enumerate(summary.get("leaderboards") or [])
    }
    if boards:
        result = dataclasses.replace(result, leaderboards=boards)
    return result


def _board_prefix(i: int) -> str:
    return f"task{i}_"


def _records(table: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (NaN as None)."""
    return [{key: (None if isinstance(value, float) and not np.isfinite(value) else _plain(value))
             for key, value in row.items()} for row in table.to_dict(orient="records")]


def _placement_records(table: pd.DataFrame | None) -> list[dict] | None:
    if table is None:
        return None
    return [{key: (None if isinstance(value, float) and not np.isfinite(value) else _plain(value))
             for key, value in row.items()} for row in table.reset_index().to_dict(orient="records")]


def _from_stored(cls, tables: dict[str, pd.DataFrame], summary: dict) -> ScoreResult:
    stored = summary["stored"]
    settings = ScoreSettings(**summary["settings"])
    axis_errors = tables["axis_errors"]
    stored_axes = [*AXES, *([EQUITY] if f"{EQUITY}_error" in axis_errors else [])]
    errors = axis_errors[[f"{axis}_error" for axis in stored_axes]].set_axis(stored_axes, axis=1)
    se_columns = [f"{axis}_se" for axis in stored_axes]
    standard_errors = (
        axis_errors[se_columns].set_axis(stored_axes, axis=1) if all(c in axis_errors for c in se_columns) else None
    )
    point = PointEstimate(
        settings=settings, errors=errors, standard_errors=standard_errors, axes=tuple(stored["point_axes"]),
        floor=pd.Series(summary["error_floor"], dtype=np.float64), reference_index=stored["reference_index"],
        table=tables["point"],
    )  # fmt: skip
    boot_meta = stored["bootstrap"]
    kept = {axis: tables[f"bootstrap_axis_{axis}"] for axis in AXES if f"bootstrap_axis_{axis}" in tables}
    boot = BootstrapResult(
        table=tables["bootstrap"], replicates=tables["bootstrap_replicates"], seed_draws=tables["bootstrap_seed_draws"],
        leader=summary["leader"], leading_tier=tuple(summary["leading_tier"]), n_boot=int(boot_meta["n_boot"]),
        alpha=float(boot_meta["alpha"]), seed=int(boot_meta["seed"]), level=str(boot_meta["level"]),
        axis_error_replicates=kept or None, sampling_designs=summary.get("interval", {}).get("sampling_design"),
    )  # fmt: skip
    rr = stored["rank_reversals"]
    reversals = RankReversals(
        table=tables["rank_pairs"], reversed_pairs=tuple(tuple(pair) for pair in rr["reversed_pairs"]),
        n_pairs=int(rr["n_pairs"]), n_reversed=int(rr["n_reversed"]), n_tied=int(rr["n_tied"]),
        n_concordant=int(rr["n_concordant"]), kendall_tau=float(rr["kendall_tau"]),
        mean_abs_displacement=float(rr["mean_abs_displacement"]),
    )  # fmt: skip
    weights = summary["weight_sensitivity"]
    sensitivity = WeightSensitivity(
        table=tables["weight_sensitivity"], top=str(weights["top"]),
        share_top_stays_first=float(weights["share_top_stays_first"]),
        kendall_taus=tables["weight_kendall_taus"]["kendall_tau"].to_numpy(dtype=np.float64),
        n_samples=int(weights["n_samples"]), concentration=float(stored["weight_concentration"]),
    )  # fmt: skip
    uncertainty = None
    found = summary.get("reversal_uncertainty")
    if found is not None and "reversal_pairs" in tables:
        uncertainty = Reversals(
            pairs=tables["reversal_pairs"].reset_index(drop=True), n_pairs=int(found["n_pairs"]),
            n_reversed=int(found["n_reversed"]), n_robust=int(found["n_robust"]),
            kendall_tau=float(found["kendall_tau"]), mean_abs_displacement=float(found["mean_abs_displacement"]),
            replicate_counts=tables["reversal_counts"]["reversed_pairs"].to_numpy(),
            count_low=float(found["count_low"]), count_high=float(found["count_high"]),
            noise=tables["reversal_noise"], level=float(found["level"]), alpha=float(found["alpha"]),
        )  # fmt: skip
    return cls(
        settings=settings, seed_axes=tables["seed_axes"].reset_index(drop=True), point=point, crs=tables["crs"],
        reported=tables["reported"], bootstrap=boot, reversals=reversals,
        stability=Stability(tables["stability_references"], tables["stability_reference_ranks"],
                            tables["stability_leave_one_out"], sensitivity),
        reversal_uncertainty=uncertainty, placement=tables.get("placement"),
        subgroups=_unindexed(tables.get("subgroups")), subgroup_gaps=_unindexed(tables.get("subgroup_gaps")),
        equity_stability=tables.get("equity_stability"),
        comparisons=(comparisons_from_table(tables["comparisons"], summary["comparisons"])
                     if "comparisons" in tables and summary.get("comparisons") else None),
        stored_headline_family=summary.get("headline_family"),
    )  # fmt: skip


def _unindexed(table: pd.DataFrame | None) -> pd.DataFrame | None:
    return None if table is None else table.reset_index(drop=True)


def _bootstrap_name(bootstrap) -> str:
    if getattr(bootstrap, "level", "seed") == "seed+case":
        return "paired seed x test-case bootstrap"
    return "seed-only paired-seed bootstrap"


def _plain(value):
    if value is pd.NA:
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _plain_tree(value):
    if isinstance(value, dict):
        return {str(key): _plain_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_tree(item) for item in value]
    if hasattr(value, "summary"):
        return _plain_tree(value.summary())
    return _plain(value)


def reported_measures(per_seed: pd.DataFrame, point: PointEstimate) -> pd.DataFrame:
    """Per encoder, what is reported beside the axes: mean over seeds per task, then over tasks.

    Also the scored values in their own units (auroc, ece_debiased, label_efficiency = mean AUROC
    below the full fraction, robust_auroc) and effective robustness, the robust AUROC above the
    cohort's clean-robust line (:func:`crs.axes.effective_robustness`).
    """
    columns = [column for column in REPORTED_COLUMNS if column in per_seed.columns]
    per_task = per_seed.groupby(["encoder", "task"])[columns].mean()
    table = per_task.groupby("encoder").mean()
    table.index = table.index.astype(str)
    errors = point.errors
    values = pd.DataFrame(
        {
            "auroc": 1.0 - errors["discrimination"],
            "ece_debiased": errors["calibration"],
            "label_efficiency": 1.0 - errors["label_efficiency"],
            "robust_auroc": 1.0 - errors["robustness"],
        },
        index=errors.index,
    )
    values["effective_robustness"] = effective_robustness(
        values["auroc"].to_numpy(), values["robust_auroc"].to_numpy()
    )
    return values.join(table).rename_axis("encoder")


def score_records(
    records: pd.DataFrame,
    settings: ScoreSettings | str | None = None,
    *,
    predictions_dir: str | Path | None = None,
    run_folder: RunFolder | str | Path | None = None,
    workers: int | None = None,
    coverage: Coverage | None = None,
    **changes: Any,
) -> ScoreResult:
    """Run records -> measurements -> CRS point estimate -> bootstrap tier, reversals, stability.

    ``settings``: a :class:`ScoreSettings`, or a reference encoder's name, or None (defaults:
    median reference, noise floors); keyword ``changes`` override its fields
    (``score_records(records, "resnet50", n_boot=200)``). ``settings.case_level`` adds the second
    bootstrap level (patients or lesions resampled within strata, :mod:`crs.scoring.case_bootstrap`);
    it reads the per-case predictions stage 2 wrote into ``run_folder`` (or ``predictions_dir``, its
    ``predictions`` folder). ``workers``: threads of the weighted AUROC (default 2, at most the cores; see ``case_bootstrap.DEFAULT_WORKERS``).
    The point estimate is made once, from the run records, and handed to every later step.

    ``coverage`` (task -> encoders declared on it, ``Spec.coverage``): when some encoder runs on some
    tasks only, the result is the overall leaderboard over the encoders declared on every task, with
    one full leaderboard per task in ``leaderboards`` (docs/decisions/0038). A declared pair without
    records is an error; without ``coverage`` every encoder must have every task, as before.
    """
    if isinstance(settings, str):
        settings = ScoreSettings(reference=settings, **changes)
    elif settings is None:
        settings = ScoreSettings(**changes)
    elif changes:
        settings = settings.replace(**changes)
    folder = None
    if settings.case_level:
        folder = _run_folder(run_folder, predictions_dir)
        pairs = records[["encoder", "task"]].drop_duplicates().itertuples(index=False, name=None)
        missing = folder.missing_predictions((str(encoder), str(task)) for encoder, task in pairs)
        if missing:  # said before any work, in one line (a run folder copied without predictions/)
            raise folder.missing_predictions_error(missing)
    if coverage is None or is_complete(coverage):
        return _score_cohort(records, settings, folder, workers)
    records = declared_records(records, coverage)
    overall = every_task_encoders(coverage)
    if not settings.median_reference and settings.reference not in overall:
        raise ScoreInputError(
            f"reference {settings.reference!r} does not run on every task; name one of {overall} or 'median'"
        )
    task_column = records["task"].astype(str)
    encoder_column = records["encoder"].astype(str)
    leaderboards = {
        task: _score_cohort(records[(task_column == task) & encoder_column.isin(list(encoders))], settings, folder,
                            workers)
        for task, encoders in coverage.items()
    }
    result = _score_cohort(records[encoder_column.isin(overall)], settings, folder, workers)
    where = placement(
        coverage, {str(name): int(rank) for name, rank in result.crs["rank"].items()},
        {task: {str(name): int(rank) for name, rank in board.crs["rank"].items()} for task, board in leaderboards.items()},
    )
    return dataclasses.replace(result, leaderboards=leaderboards, placement=where)


def _score_cohort(
    records: pd.DataFrame, settings: ScoreSettings, folder: RunFolder | None, workers: int | None
) -> ScoreResult:
    """One leaderboard: every encoder in ``records`` must have every task in them.

    The way through crs/scoring in order (docs/crs.md, "The way through crs/scoring"): measurements; the
    draws (each task's rows and resamples, made once and shared by the subgroup tables and the CRS); the
    subgroup tables and the equity axis; the point estimate; the replicates and what the bootstrap makes
    of them (box and projection, percentile, rank sets, tier); comparisons; reversals; stability; then
    the tables are put together here."""
    measurements: Measurements = measure(records, settings)
    errors, standard_errors = measurements.axis_errors(), measurements.axis_standard_errors()
    kinds = task_kinds(records)
    found = extra = layouts = groups = gaps = None
    if folder is not None:
        encoders = sorted(str(e) for e in errors.index)  # the point estimate's order
        layouts = task_layouts(folder, measurements, kinds, encoders[0], settings.seed, settings.full_fraction)
        found = subgroup_scores(
            folder, encoders, kinds, {task: list(layout.targets) for task, layout in measurements.layouts.items()},
            settings.n_boot, settings.seed, settings.alpha, settings.full_fraction, settings.subgroup_min_images,
            settings.subgroup_min_positives, workers, layouts=layouts,
        )  # fmt: skip
        if not found.empty:
            groups, gaps = found.groups, found.gaps
        if settings.equity:  # the fifth axis: same draws as the CRS, appended after the four
            errors, standard_errors, extra = with_equity(found, errors, standard_errors, encoders)
    point = point_estimate(errors, standard_errors, settings)
    auroc = 1.0 - point.errors["discrimination"].reindex(point.table.index)
    auroc_rank = rank_descending(auroc.to_numpy())
    if folder is not None:
        replicates = case_replicates(measurements, folder, point, kinds, workers, extra, layouts)
    else:
        replicates = seed_replicates(measurements, point)
    boot = bootstrap_result(point, replicates)
    if not settings.median_reference and not settings.reference_competes:
        boot = reference_as_baseline(boot, settings.reference)  # the yardstick, not a contestant (issue 40)
    names = [str(name) for name in point.table.index]
    contest = contest_columns(point.table["crs"].set_axis(names),
                              competing(names, settings.reference, settings.reference_competes))
    # the headline's one family: axis comparisons, floors, and the tier and rank sets read off them (0166)
    contestants = [name for name in point.table["crs"].set_axis(names).sort_values(ascending=False, kind="stable").index
                   if bool(contest.loc[name, "competes"])]
    statements = headline_statements(point, replicates.drawn, contestants)
    boot = with_statements_tier(boot, statements)
    comparisons = statements.comparisons
    dominance = None if comparisons is None else comparisons.encoder_table().reindex(names)

    table = point.table.copy()
    table["auroc"], table["auroc_rank"] = auroc, auroc_rank
    for column in ("crs_low", "crs_high", "p_rank1", "rank_low", "rank_high", "in_leading_tier"):
        table[column] = boot.table[column].reindex(table.index)
    for column in ("competes", "contest_rank"):
        table[column] = contest[column].set_axis(table.index)
    if dominance is not None:
        for column in dominance.columns:
            table[column] = dominance[column].to_numpy()

    reversals = rank_reversals(table["auroc"], table["crs"])
    uncertainty = bootstrap_reversals(table, boot, settings)
    with_or_without = equity_stability(point, table, gaps) if settings.equity else None
    stable = stability(point)
    per_seed = seed_axes(records, full_fraction=settings.full_fraction, retention_floor=settings.retention_floor)
    return ScoreResult(
        equity_stability=with_or_without,
        settings=settings,
        seed_axes=per_seed,
        point=point,
        crs=table,
        reported=reported_measures(per_seed, point),
        bootstrap=boot,
        reversals=reversals,
        stability=stable,
        reversal_uncertainty=uncertainty,
        subgroups=groups,
        subgroup_gaps=gaps,
        comparisons=comparisons,
        statements=statements,
    )


def _run_folder(run_folder: RunFolder | str | Path | None, predictions_dir: str | Path | None) -> RunFolder:
    if run_folder is not None:
        return run_folder if isinstance(run_folder, RunFolder) else RunFolder(run_folder)
    if predictions_dir is None:
        raise ScoreInputError(
            "case_level needs run_folder (the run's output folder) or predictions_dir (its predictions folder)"
        )
    predictions_dir = Path(predictions_dir)
    if predictions_dir.name != PREDICTIONS_DIR:
        raise ScoreInputError(
            f"predictions_dir must be a run folder's {PREDICTIONS_DIR!r} folder, got {predictions_dir}; pass run_folder"
        )
    return RunFolder(predictions_dir.parent)
