"""The zero-shot leaderboard and "zero-shot or a probe?" comparison (docs/zero_shot.md, decision 0057).

Over the encoders with a text tower, on the axes defined for zero labels: discrimination (1 - clean
AUROC), calibration (the debiased calibration error as shipped: the model's own scale and bias) and
robustness (1 - mean AUROC over corruptions and shift targets, each half where both exist). Label
efficiency has no zero-label value and is left out; the crossover (labels a probe needs to beat
zero-shot) is reported beside the leaderboard, never scored. The CRS formula is the probes' own
(``crs_components``, median reference), its replicates come from the same patient-level bootstrap
(``crs.scoring.resample``), with draws of its own, so the four-axis CRS never moves. Its rank sets and
leading tier are read off the main leaderboard's kind of family (:func:`zero_shot_statements`, decision
0185): one simultaneous max-|t| over the pairwise axis differences and the box, so encoders tied for the
lead stay in the tier at the family's level; the CRS's own rank sets lost one at exact ties (issue 47).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from crs.axes.weighted import ReplicateWeights, prepare_weights, weighted_debiased_ece, weighted_macro_auroc
from crs.evaluate import artifacts
from crs.scoring.coverage import Coverage, normalised
from crs.scoring.draws import task_key
from crs.scoring.formula import MIN_FLOOR, ScoreInputError, crs_components, rank_descending
from crs.scoring.layouts import sampling_design
from crs.scoring.projection import AXIS_SCALES
from crs.scoring.resample import group_bootstrap
from crs.scoring.settings import ScoreSettings, component_weights
from crs.scoring.statements import HEADLINE_OPTIONS, Statements, simultaneous_statements, strict_order

ZERO_SHOT_DIR = "zero_shot"
ZERO_SHOT_AXES = ("discrimination", "calibration", "robustness")
CLEAN = "clean"
NEVER = "never"
"""score.json's crossover when no probe fraction beats zero-shot (inf in comparison.csv)."""
CROSSOVER_PREFIX = "crossover_"


@dataclass(frozen=True)
class ZeroShotScore:
    """``leaderboard`` (per encoder: axis errors, CRS, rank, rank set, tier), ``comparison`` (per encoder x
    task: zero-shot against the probes, with intervals), ``prompts`` (the sensitivity spread) and
    ``statements`` (the family the rank sets and tier are read off; None with fewer than two ranked)."""

    leaderboard: pd.DataFrame
    comparison: pd.DataFrame
    prompts: pd.DataFrame
    not_ranked: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["tasks", "why"], index=pd.Index([], name="encoder")))
    """Encoders scored zero-shot on some tasks only, by the spec's design: in the comparison, not in the
    leaderboard (decision 0038, as the probes' overall CRS)."""
    statements: Statements | None = None

    def summary(self) -> dict:
        def rows(frame: pd.DataFrame) -> list[dict]:
            frame = frame.reset_index()
            # a crossover no probe fraction reaches is inf in comparison.csv; JSON has no inf (to_json
            # writes null, which reads as "missing"), so it is spelled out as NEVER
            for column in [c for c in frame.columns if str(c).startswith(CROSSOVER_PREFIX)]:
                values = pd.to_numeric(frame[column], errors="coerce")
                if np.isinf(values).any():
                    frame = frame.assign(**{column: frame[column].astype(object).where(~np.isinf(values), NEVER)})
            return json.loads(frame.to_json(orient="records"))

        return {"leaderboard": rows(self.leaderboard), "comparison": rows(self.comparison),
                "prompts": rows(self.prompts), "not_ranked": rows(self.not_ranked),
                "headline_family": self.statements.summary() if self.statements is not None else None}


def _load(folder: Path, encoder: str, task: str, digest: str) -> dict[str, np.ndarray]:
    path = folder / ZERO_SHOT_DIR / "predictions" / f"{encoder}__{task}__{digest}.npz"
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _macro(y, scores, kind, weights) -> np.ndarray:
    """Macro AUROC under ``weights`` of stored scores, compared in their own dtype (float32 keys or
    probabilities: a float64 copy would rank them the same)."""
    return weighted_macro_auroc(np.asarray(y), np.asarray(scores), kind, weights)


def _ranked(arrays: dict[str, np.ndarray], stem: str) -> np.ndarray:
    """What the AUROCs of condition ``stem`` rank: the stored rank keys (the records' own ranking: for
    multilabel the cosines, which the shipped sigmoid saturates to ties of 1.0), or the probabilities
    of a folder written before zero-shot stored keys."""
    return artifacts.auroc_scores(arrays, artifacts.probs_key(stem))


def _with_point(counts: np.ndarray) -> np.ndarray:
    """Replicate case counts (B, N) with a row of ones first: row 0 of every metric is the point
    estimate, from the same call (one sort per column) as the replicates, as the probes' score lays
    them out (:func:`crs.scoring.case_bootstrap.replicate_weights`)."""
    return np.vstack([np.ones((1, counts.shape[1]), dtype=counts.dtype), counts])


def _distinct(stack: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct arrays of a stack (P, ...) and, per entry, which one it is: the probes of the full
    fraction train on the same rows for every seed, so their predictions are scored once."""
    seen: dict[bytes, int] = {}
    distinct: list[np.ndarray] = []
    index = np.empty(len(stack), dtype=np.int64)
    for p, entry in enumerate(stack):
        index[p] = seen.setdefault(entry.tobytes(), len(distinct))
        if index[p] == len(distinct):
            distinct.append(entry)
    return distinct, index


def _split(values: np.ndarray) -> tuple[float, np.ndarray]:
    """Row 0 (the point estimate) and the replicates of a metric under :func:`_with_point` weights."""
    return float(values[0]), values[1:]


def _crossover(fractions: np.ndarray, probe: np.ndarray, zero_shot: np.ndarray) -> np.ndarray:
    """Smallest label fraction whose probe AUROC beats zero-shot, per replicate; inf when none does.

    ``probe`` (..., F) by fraction in ``fractions`` order (ascending), ``zero_shot`` (...)."""
    beats = probe > zero_shot[..., None]
    first = np.where(beats.any(axis=-1), beats.argmax(axis=-1), -1)
    return np.where(first >= 0, fractions[np.maximum(first, 0)], np.inf)


def _interval(values: np.ndarray) -> tuple[float, float]:
    finite = np.asarray(values, np.float64)
    return float(np.nanpercentile(finite, 2.5)), float(np.nanpercentile(finite, 97.5))


def score_zero_shot(
    run_folder: Path | str, settings: ScoreSettings, probe_records: pd.DataFrame | None = None,
    probe_predictions=None, coverage: Coverage | None = None,
) -> ZeroShotScore:
    """Score the zero-shot records of a run folder; ``probe_predictions(encoder, task)`` gives a probe
    unit's stored predictions (for the crossover's interval), ``probe_records`` the probes' AUROCs.
    ``coverage`` (task -> encoders, as the spec declares): encoders on some tasks only are left out
    of the leaderboard (``not_ranked``), as the probes' overall CRS leaves them out."""
    folder = Path(run_folder)
    records = pd.read_parquet(folder / ZERO_SHOT_DIR / "records.parquet")
    prompts = pd.read_parquet(folder / ZERO_SHOT_DIR / "prompts.parquet")
    encoders = list(dict.fromkeys(records["encoder"]))
    tasks = list(dict.fromkeys(records["task"]))
    primary = records.groupby(["encoder", "task"], sort=False)["prompt_digest"].first()
    n_boot = int(settings.n_boot)
    replicate = np.full((n_boot, len(encoders), len(tasks), 3), np.nan)
    point = np.full((len(encoders), len(tasks), 3), np.nan)
    comparison_rows = []
    for t, task in enumerate(tasks):
        kind = str(records.loc[records["task"] == task, "task_kind"].iloc[0])
        stream = task_key(str(task))
        clean_counts: np.ndarray | None = None  # per task: the clean rows' draws, shared by every encoder
        boots: dict[str, ReplicateWeights] = {}  # per task, row 0 the point: shared by every encoder and metric
        for e, encoder in enumerate(encoders):
            if (encoder, task) not in primary.index:
                continue
            arrays = _load(folder, encoder, task, str(primary[(encoder, task)]))
            y = arrays["clean_labels"]
            if clean_counts is None:
                groups = arrays.get("clean_groups")
                design = sampling_design(arrays, artifacts.design_key(), f"zero-shot {encoder}/{task}", shift=False)[0]
                stream = task_key(str(task), groups, y)  # the task's name and rows, not its place (decision 0144)
                clean_counts = _with_point(group_bootstrap(groups, y, kind, seed=(int(settings.seed), 29, stream),
                                                           design=design).counts(range(n_boot)))
                boots[CLEAN] = prepare_weights(clean_counts)  # integer counts: laid out as uint16, no rounding check
            weights = boots[CLEAN]
            clean_point, clean = _split(_macro(y, _ranked(arrays, CLEAN), kind, weights))
            ece_point, ece = _split(weighted_debiased_ece(y, arrays["clean_probs"], kind, weights))
            corrupt = sorted(k[: -len("_probs")] for k in arrays if k.startswith("corrupt__") and k.endswith("_probs"))
            shift = sorted(k[: -len("_probs")] for k in arrays if k.startswith("shift__") and k.endswith("_probs"))
            parts, parts_point = [], []
            if corrupt:
                positions = arrays.get("corrupt_rows")
                w = weights if positions is None else prepare_weights(clean_counts, columns=np.asarray(positions))
                values = np.stack([_macro(arrays[f"{c}_labels"], _ranked(arrays, c), kind, w) for c in corrupt])
                parts.append(np.nanmean(values[:, 1:], axis=0))
                parts_point.append(float(np.mean(values[:, 0])))
            if shift:
                shift_values: list[np.ndarray] = []
                values_point: list[float] = []
                for s, stem in enumerate(shift):
                    ys = arrays[f"{stem}_labels"]
                    key = f"{stem}__boot"
                    if key not in boots:
                        target = stem[len("shift__"):]
                        groups = arrays.get(artifacts.shift_groups_key(target))
                        design = sampling_design(arrays, artifacts.design_key(target), f"zero-shot {encoder}/{task}",
                                                 shift=True)[0]
                        boots[key] = prepare_weights(_with_point(group_bootstrap(
                            groups, ys, kind, seed=(int(settings.seed), 29, stream, 1000 + s), design=design,
                        ).counts(range(n_boot))))
                    at_point, replicates = _split(_macro(ys, _ranked(arrays, stem), kind, boots[key]))
                    shift_values.append(replicates)
                    values_point.append(at_point)
                parts.append(np.nanmean(np.stack(shift_values), axis=0))
                parts_point.append(float(np.mean(values_point)))
            robust = np.nanmean(np.stack(parts), axis=0) if parts else np.full(n_boot, np.nan)
            robust_point = float(np.mean(parts_point)) if parts_point else np.nan
            replicate[:, e, t] = np.stack([1 - clean, ece, 1 - robust], axis=-1)
            point[e, t] = (1 - clean_point, ece_point, 1 - robust_point)
            comparison_rows.append(_compare(
                encoder, task, kind, records, prompts, probe_records, probe_predictions, y, weights,
                clean_point, clean, ece_point, ece, robust_point))
    statements = None
    ranked, not_ranked = _ranked_overall(encoders, tasks, set(primary.index), coverage)
    keep = [encoders.index(name) for name in ranked]
    point, replicate = point[keep], replicate[:, keep]
    axes = [a for a in range(3) if not np.isnan(point[..., a]).all()]
    names = [ZERO_SHOT_AXES[a] for a in axes]
    board = pd.DataFrame(index=pd.Index(ranked, name="encoder"), columns=[f"error_{n}" for n in names], dtype=float)
    if ranked:
        with warnings.catch_warnings():  # a task without a condition (no corruption, no shift): NaN there
            warnings.simplefilter("ignore", RuntimeWarning)
            errors_point = np.nanmean(point, axis=1)[:, axes]
            errors_boot = np.nanmean(replicate, axis=2)[:, :, axes]
        axis_weights = np.asarray(settings.weights)
        components = crs_components(errors_point, None, axis_weights, MIN_FLOOR, settings.dominance_tolerance)
        board = pd.DataFrame(errors_point, index=board.index, columns=board.columns)
        board["crs"] = components["crs"]
        board["rank"] = rank_descending(components["crs"])
        if len(ranked) >= 2:
            statements = zero_shot_statements(errors_point, errors_boot, ranked, names, components["crs"], settings)
            sets = statements.rank_sets().reindex(ranked)
            board["rank_low"] = sets["rank_low"].to_numpy()
            board["rank_high"] = sets["rank_high"].to_numpy()
            board["in_leading_tier"] = sets["in_leading_tier"].to_numpy(dtype=bool)
        else:
            board["rank_low"], board["rank_high"], board["in_leading_tier"] = 1, 1, True
    else:
        board = board.assign(crs=np.nan, rank=0, rank_low=0, rank_high=0, in_leading_tier=False)
    board = board.sort_values(["rank", "crs"], ascending=[True, False], kind="stable")
    board.attrs["axes"] = names
    spread = prompts.groupby(["encoder", "task", "prompt_set"], sort=False)["auroc"].agg(
        ["min", "max", "std", "count"]).reset_index() if len(prompts) else pd.DataFrame()
    if len(spread):
        spread["spread"] = spread["max"] - spread["min"]
    return ZeroShotScore(board, pd.DataFrame(comparison_rows).set_index(["encoder", "task"]), spread, not_ranked,
                         statements)


def zero_shot_statements(errors: np.ndarray, replicates: np.ndarray, encoders: list[str], axes: list[str],
                         crs: np.ndarray, settings: ScoreSettings) -> Statements:
    """The family the zero-shot rank sets and tier are read off (decision 0185): the main leaderboard's
    (:func:`crs.scoring.statements.simultaneous_statements`, decision 0166) under the zero-shot CRS's own
    rules: ``errors`` (E, A) and ``replicates`` (B, E, A) the axis errors of ``axes``, the floor
    :data:`MIN_FLOOR`, the median reference, no dominance margin, every encoder competing, best point
    ``crs`` first; the settings' ``headline`` method as the main leaderboard's (decision 0180)."""
    weights = [float(w) for w in component_weights(settings.weights)]
    order = [encoders[j] for j in np.argsort(-np.asarray(crs, dtype=np.float64), kind="stable")]
    return simultaneous_statements(
        errors, replicates, np.full(len(axes), MIN_FLOOR), [AXIS_SCALES[axis] for axis in axes], order,
        alpha=float(settings.alpha), strict=strict_order(weights, 0.0, settings.dominance_tolerance),
        weights=weights, margin=0.0, reference_index=None, encoders=encoders, axes=axes,
        **HEADLINE_OPTIONS[getattr(settings, "headline", "smooth")])


def _ranked_overall(encoders: list[str], tasks: list[str], present: set, coverage: Coverage | None
                    ) -> tuple[list[str], pd.DataFrame]:
    """(the encoders with zero-shot records on every task, the others with their tasks and why).

    As the probes' overall CRS (decision 0038): an encoder the spec runs on some tasks only is not
    ranked overall, never averaged over fewer tasks than the others. A hole the spec does not declare
    (``coverage`` None, or a declared pair without records) is an error, never a silent average.
    """
    declared = normalised(coverage) if coverage is not None else None
    ranked, rows = [], []
    for name in encoders:
        mine = [t for t in tasks if (name, t) in present]
        gone = [t for t in tasks if (name, t) not in present]
        if not gone:
            ranked.append(name)
            continue
        undeclared = gone if declared is None else [t for t in gone if name in declared.get(t, ())]
        if undeclared:
            raise ScoreInputError(
                f"encoder {name!r} has zero-shot records on {mine} but not on {undeclared}, which the spec runs it "
                "on; probe again (its prototypes must be imported or made for every one of its tasks)")
        rows.append({"encoder": name, "tasks": ", ".join(mine),
                     "why": f"{', '.join(mine)} only: in the comparison, not ranked overall (the zero-shot "
                            "leaderboard is over the encoders scored on every task)"})
    table = pd.DataFrame(rows, columns=["encoder", "tasks", "why"]).set_index("encoder")
    return ranked, table


def _compare(encoder, task, kind, records, prompts, probe_records, probe_predictions, y, weights,
             clean_point, clean_boot, ece_point, ece_boot, robust_point) -> dict:
    """One row of "zero-shot or a probe?": zero-shot with intervals, the probes per fraction, the crossover."""
    mine = records[(records["encoder"] == encoder) & (records["task"] == task) & (records["condition"] == CLEAN)]
    primary = mine["prompt_digest"].iloc[0]
    mine = mine[mine["prompt_digest"] == primary]
    fitted = mine[mine["calibration"] == "fitted"]
    full = fitted["label_fraction"].max() if len(fitted) else np.nan
    at_full = fitted[fitted["label_fraction"] == full]
    low, high = _interval(clean_boot)
    row = {
        "encoder": encoder, "task": task, "task_kind": kind, "prompt_set": str(mine["prompt_set"].iloc[0]),
        "zero_shot_auroc": clean_point, "zero_shot_auroc_low": low, "zero_shot_auroc_high": high,
        "ece_shipped": ece_point, "ece_shipped_low": _interval(ece_boot)[0], "ece_shipped_high": _interval(ece_boot)[1],
        "ece_fitted": float(at_full["ece_debiased"].mean()) if len(at_full) else np.nan,
        "temperature_fitted": float(at_full["temperature"].mean()) if len(at_full) else np.nan,
        "robustness_auroc": robust_point,
    }
    sens = prompts[(prompts["encoder"] == encoder) & (prompts["task"] == task)] if len(prompts) else prompts
    if len(sens):  # over the prompt variants of the primary set (each class's j-th prompt)
        by_variant = sens[sens["prompt_digest"] == primary]["auroc"]
        row["prompt_spread"] = float(by_variant.max() - by_variant.min()) if len(by_variant) else np.nan
    shipped = records[(records["encoder"] == encoder) & (records["task"] == task)
                      & (records["condition"] == CLEAN) & (records["calibration"] == "shipped")]
    per_set = shipped.groupby("prompt_digest")["auroc"].mean()
    row["prompt_set_spread"] = float(per_set.max() - per_set.min()) if len(per_set) > 1 else np.nan
    if probe_records is None:
        return row
    probes = probe_records[(probe_records["encoder"] == encoder) & (probe_records["task"] == task)
                           & (probe_records["condition"] == CLEAN)]
    if not len(probes):
        return row
    curve = probes.groupby("label_fraction")["auroc"].mean().sort_index()
    labels = probes.groupby("label_fraction")["n_train"].mean().sort_index()
    for fraction, value in curve.items():
        row[f"probe_auroc_{fraction:g}"] = float(value)
    fractions = curve.index.to_numpy(np.float64)
    # "at most the smallest fraction run": a crossover there says only that fewer labels were not tried
    row["smallest_fraction"] = float(fractions[0])
    row["smallest_fraction_labels"] = float(labels.iloc[0])
    cross = float(_crossover(fractions, curve.to_numpy()[None], np.array([clean_point]))[0])
    row["crossover_fraction"] = cross
    row["crossover_labels"] = float(labels.get(cross, np.nan)) if np.isfinite(cross) else np.inf
    if probe_predictions is not None:
        arrays = probe_predictions(encoder, task)
        if arrays is not None and "clean_all_probs" in arrays:
            # rank keys where stored (order-exact; float16 probabilities tie and move AUROC)
            probs = np.asarray(artifacts.auroc_scores(arrays, artifacts.ALL_CLEAN_PROBS), np.float64)
            subset_fraction = np.asarray(arrays["subset_fraction"], np.float64)
            distinct, which = _distinct(probs)
            per_probe = np.stack([_macro(y, p, kind, weights)[1:] for p in distinct], axis=-1)[:, which]  # (B, P)
            by_fraction = np.stack([per_probe[:, subset_fraction == f].mean(axis=1) for f in fractions], axis=-1)
            crossing = _crossover(fractions, by_fraction, clean_boot)
            ranked = np.sort(crossing)
            row["crossover_low"] = float(ranked[int(np.floor(0.025 * (len(ranked) - 1)))])
            row["crossover_high"] = float(ranked[int(np.ceil(0.975 * (len(ranked) - 1)))])
    return row


def read_zero_shot_summary(run_folder: Path | str) -> dict | None:
    """``<run folder>/zero_shot/score.json`` as written by :func:`write_zero_shot_score`, or None."""
    path = Path(run_folder) / ZERO_SHOT_DIR / "score.json"
    return json.loads(path.read_text()) if path.is_file() else None


def write_zero_shot_score(run_folder: Path | str, score: ZeroShotScore) -> Path:
    folder = Path(run_folder) / ZERO_SHOT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    score.leaderboard.to_csv(folder / "leaderboard.csv")
    score.comparison.to_csv(folder / "comparison.csv")
    path = folder / "score.json"
    path.write_text(json.dumps(score.summary(), indent=2, default=str))
    return path
