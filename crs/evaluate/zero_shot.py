"""Zero-shot: the probe family without training, on the features already in the cache (docs/zero_shot.md).

Its "weights" are text prototypes (``crs.cache.prototypes``), made once per encoder fingerprint and
prompt set by the encoder's text tower (``crs.encoders.text``) and never by a new image pass. Each
(encoder, task, prompt set) is evaluated on the clean test split, every corruption x severity and
each shift target, with the probes' metrics:

- ``calibration = "shipped"``: the model's own scale and bias, ``label_fraction = 0`` (zero labels);
- ``calibration = "fitted"``: one temperature (and, for a multilabel task, one bias) fitted by
  log-loss on the validation rows the probes of that label fraction and seed may see; on corrupted
  and shifted data at the full fraction only, as the probes.

Records go to ``<output>/zero_shot/records.parquet`` (own file, so the probes' records, the CRS
and the golden tables are untouched; docs/decisions/0056), the per-variant clean AUROCs behind the
prompt sensitivity to ``prompts.parquet``, and per-case predictions for the bootstrap to
``predictions/<encoder>__<task>__<prompt digest>.npz``, with the shipped calibration's float32 rank
keys beside its probabilities (what the AUROCs rank, records and score alike: decision 0115).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from crs.cache.prototypes import Prototypes, ensemble, read_prototypes, stored_digests, write_prototypes
from crs.cache.store import FeatureStore, SampleTable, store_path
from crs.data.prompts import PromptSet, builtin_prompt_set, load_prompt_set
from crs.evaluate import artifacts
from crs.evaluate.records import KEY_COLUMNS
from crs.evaluate.temperature import fit_temperatures
from crs.evaluate.units import (
    Condition,
    ProbeSettings,
    ProbeUnit,
    evaluation_conditions,
    one_thread,
    probe_settings,
    probe_units,
    read_rows,
    validation_subsets,
)
from crs.probes import predict_kernel
from crs.probes.base import PredictedScores, rank_scores
from crs.probes.metrics import METRICS, evaluation_metrics, rank_metrics
from crs.spec import Spec

log = logging.getLogger("crs.zero_shot")

ZERO_SHOT_DIR = "zero_shot"
RECORDS_FILE = "records.parquet"
PROMPTS_FILE = "prompts.parquet"
SHIPPED, FITTED = "shipped", "fitted"


class ZeroShotError(ValueError):
    """Zero-shot asked of an encoder or task that cannot give it; the message names it and the fix."""


# --- prototypes ----------------------------------------------------------------------------------


def make_prototypes(text, prompt_set: PromptSet, kind: str) -> Prototypes:
    """Prototypes of one prompt set from a text tower (``crs.encoders.text.TextTower``).

    Every prompt is embedded once, to a unit vector; a class's prototype is the mean of its prompts'
    unit vectors, renormalised. Variant j (the sensitivity spread) takes each class's j-th prompt.
    A multilabel task keeps its negatives for the softmax family and drops them for the sigmoid family
    (SigLIP scores each positive prompt with its own bias).
    """
    use_negative = kind == "multilabel" and text.link == "softmax"
    if kind == "multilabel" and use_negative and not prompt_set.negative:
        raise ZeroShotError(f"prompt set {prompt_set.name!r} ({prompt_set.source}) has no [negative] prompts; "
                            f"encoder {text.spec.name!r} (softmax family) scores a finding as a positive/negative pair")
    sides = [prompt_set.positive] + ([prompt_set.negative] if use_negative else [])
    flat = [p for side in sides for prompts in side for p in prompts]
    unique = list(dict.fromkeys(flat))
    embedded = dict(zip(unique, text.encode(unique), strict=True))
    n_variants = prompt_set.n_variants

    def build(side):
        protos = np.stack([ensemble(np.stack([embedded[p] for p in prompts])) for prompts in side])
        variants = np.stack([
            np.stack([embedded[prompts[j % len(prompts)]] for prompts in side]) for j in range(n_variants)
        ])
        return protos, variants

    positive, variants_positive = build(prompt_set.positive)
    negative, variants_negative = build(prompt_set.negative) if use_negative else (None, None)
    return Prototypes(positive, float(text.logit_scale), float(text.logit_bias) if text.link == "sigmoid" else 0.0,
                      text.link, prompt_set.name, prompt_set.digest, prompt_set.class_names, negative,
                      variants_positive, variants_negative)


def spec_prompt_sets(spec: Spec, task_name: str, table: SampleTable) -> list[PromptSet]:
    """The spec's prompt files for a data set (``[score] prompts``), or the built-in set for its task."""
    files = (spec.score.prompts or {}).get(task_name)
    if files:
        return [load_prompt_set(path, table.task) for path in files]
    return [builtin_prompt_set(table.task)]


def unit_prototypes(spec: Spec, encoder: str, task_name: str, store: FeatureStore) -> list[Prototypes]:
    """Every prototype set of one (encoder, task): cached ones read, missing ones encoded (text only).

    An encoder that is not in the registry (features brought with ``crs import-features``) uses the
    prototypes imported beside its features.
    """
    from crs.encoders.factory import create_text
    from crs.encoders.registry import EncoderError, get_spec
    from crs.encoders.text import TextTowerError, zero_shot_support

    table = store.read_table()
    try:
        encoder_spec = get_spec(encoder)
    except EncoderError:
        digests = stored_digests(store, encoder)
        if not digests:
            raise ZeroShotError(f"encoder {encoder!r} is not in the registry and has no imported prototypes for "
                                f"{task_name!r}; import them beside its features, or turn zero-shot off") from None
        return [p for p in (read_prototypes(store, encoder, d) for d in digests) if p is not None]
    support = zero_shot_support(encoder_spec)
    if not support.available:
        raise TextTowerError(f"encoder {encoder!r} cannot be scored zero-shot: {support.reason}")
    entry = next(e for e in spec.encoders if e.name == encoder)
    found: list[Prototypes] = []
    text = None
    for prompt_set in spec_prompt_sets(spec, task_name, table):
        cached = read_prototypes(store, encoder, prompt_set.digest)
        if cached is None:
            if text is None:
                text = create_text(encoder_spec, entry.weights)
            cached = make_prototypes(text, prompt_set, table.task.kind)
            write_prototypes(FeatureStore(store.path, mode="r+"), encoder, cached)
            log.info("zero-shot: encoded prompt set %s for %s x %s", prompt_set.name, encoder, task_name)
        found.append(cached)
    return found


def zero_shot_encoders(spec: Spec, cache_root: Path | None = None) -> list[str]:
    """The spec's encoders that zero-shot scores (:func:`zero_shot_choice`)."""
    return zero_shot_choice(spec, cache_root)[0]


def zero_shot_choice(spec: Spec, cache_root: Path | None = None) -> tuple[list[str], list[str]]:
    """(the spec's encoders that zero-shot scores, one line per encoder it leaves out and why).

    Scored: a registry entry with a text tower, or an encoder that is not in the registry (features
    brought with ``import_features``) with prototypes imported beside its features on one of its
    tasks. An imported encoder without prototypes is image-only: probed, never scored zero-shot.
    Registry entries without a text tower (image-only models) are left out without a line, as before.
    """
    from crs.encoders.registry import EncoderError, get_spec
    from crs.encoders.text import zero_shot_support

    cache_root = Path(cache_root or spec.cache)
    tasks: dict[str, list[str]] = {}
    for unit in probe_units(spec):
        tasks.setdefault(unit.encoder, []).append(unit.task)
    chosen, notes = [], []
    for name in spec.encoder_names:
        try:
            if zero_shot_support(get_spec(name)).available:
                chosen.append(name)
            continue
        except EncoderError:
            pass
        if any(_has_prototypes(cache_root, task, name) for task in tasks.get(name, [])):
            chosen.append(name)
        else:
            notes.append(f"zero-shot: {name} is image-only (imported features, no imported prototypes on "
                         f"{', '.join(tasks.get(name, [])) or 'any task'}): probed, not scored zero-shot; import "
                         "its text prototypes beside its features to score it (docs/zero_shot.md)")
    return chosen, notes


def _has_prototypes(cache_root: Path, task: str, encoder: str) -> bool:
    """Whether the task's store holds finished prototypes for the encoder's current features."""
    path = store_path(cache_root, task)
    if not path.exists():
        return False
    try:
        return bool(stored_digests(FeatureStore(path), encoder))
    except Exception:  # noqa: BLE001 - an unreadable store is reported by the unit that reads it
        return False


# --- logits, probabilities, the fitted temperature --------------------------------------------------


SIMILARITY_ROWS = 4096
"""Rows per block when :func:`similarities` reads an in-memory matrix (the cache's chunk height)."""


def row_norms(x: np.ndarray) -> np.ndarray:
    """Euclidean norm of each float64 row, floored at 1e-12 (a zero row stays finite)."""
    return np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x)), 1e-12)


def unit_rows(features: np.ndarray) -> np.ndarray:
    """Feature rows as float64 unit vectors (row-wise, so the float16 cache is fine)."""
    x = np.asarray(features, np.float64)
    return x / row_norms(x)[:, None]


def _prototype_rows(prototypes: Prototypes, variant: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    if variant is None:
        return prototypes.positive, prototypes.negative
    assert prototypes.variants_positive is not None
    negative = None if prototypes.variants_negative is None else prototypes.variants_negative[variant]
    return prototypes.variants_positive[variant], negative


def similarities(features: np.ndarray, prototypes: Prototypes, variant: int | None = None,
                 normalised: bool = False) -> np.ndarray:
    """(N, K) logits before scale: cosine to the positive prototypes, minus the negatives' for a pair.
    ``normalised``: ``features`` are already :func:`unit_rows`. Otherwise the dot products of the raw
    rows are divided by the rows' norms (no normalised copy of the (N, D) rows; the same cosines to
    a few units in the last place)."""
    positive, negative = _prototype_rows(prototypes, variant)
    if not normalised:  # by row blocks: float64 copies of one block at a time
        one = replace(prototypes, positive=positive, negative=negative, variants_positive=None, variants_negative=None)
        step = SIMILARITY_ROWS
        blocks = ((start, features[start:start + step]) for start in range(0, len(features), step))
        return condition_similarities(blocks, one, len(features))[0]
    x = np.asarray(features, np.float64)
    cosine = x @ np.asarray(positive, np.float64).T
    if negative is not None:
        cosine = cosine - x @ np.asarray(negative, np.float64).T
    return cosine


def _pair_columns(positive: np.ndarray, negative: np.ndarray | None) -> np.ndarray:
    """float64 prototype rows, each positive minus its negative for a pair (softmax over the pair)."""
    columns = np.asarray(positive, np.float64)
    return columns if negative is None else columns - np.asarray(negative, np.float64)


class ConditionSimilarities:
    """One condition's cosines, fed block by block as the cache stores them (:meth:`add`), then
    :meth:`result`. One product per block with every prototype column side by side (a positive/negative pair
    as one difference column; with ``variants``, each prompt variant's too), divided by the rows' norms at the end: no float64 copy of
    the condition's (N, D) rows. float16 blocks go through the compiled kernel
    (:func:`crs.probes.predict_kernel.dots_and_squares_half`: the rows read as their bits, float64 sums,
    no converted copy of a block either); other dtypes, or ``CRS_NO_NUMBA=1``, through numpy."""

    def __init__(self, prototypes: Prototypes, n_rows: int, variants: bool = False) -> None:
        # A positive/negative pair is one column, the difference of the two prototypes (exact in float64
        # for float32 prototypes): x . (p - n) is the pair's x . p - x . n, to a float64 sum's rounding.
        sides = [_pair_columns(prototypes.positive, prototypes.negative)]
        self.n_variants = 0
        if variants and prototypes.variants_positive is not None:
            self.n_variants = len(prototypes.variants_positive)
            sides.append(_pair_columns(prototypes.variants_positive, prototypes.variants_negative).reshape(
                -1, sides[0].shape[1]))
        self.columns_t = np.ascontiguousarray(np.concatenate(sides))  # (M, D)
        self.stacked = self.columns_t.T  # (D, M), for the numpy path
        self.k = sides[0].shape[0]
        self.n_rows = n_rows
        self.dots = np.empty((n_rows, self.columns_t.shape[0]))
        self.norms = np.empty(n_rows)
        self.compiled = predict_kernel.available()

    def add(self, start: int, rows: np.ndarray) -> None:
        """The dot products and norms of the condition's rows ``start`` .. ``start + len(rows)``."""
        stop = start + len(rows)
        if self.compiled and rows.dtype == np.float16 and len(rows):
            predict_kernel.dots_and_squares_half(rows, self.columns_t, self.dots[start:stop], self.norms[start:stop])
            np.maximum(np.sqrt(self.norms[start:stop]), 1e-12, out=self.norms[start:stop])
            return
        x = np.asarray(rows, np.float64)
        self.dots[start:stop] = x @ self.stacked
        self.norms[start:stop] = row_norms(x)

    def add_dots(self, start: int, dots: np.ndarray, squares: np.ndarray) -> None:
        """The rows ``start`` .. ``start + len(dots)`` from their dot products with :attr:`columns_t`
        (n, M) and sums of squares (n,), computed elsewhere by the compiled kernel (the probes' pass,
        decision 0116): what :meth:`add` stores for float16 rows."""
        stop = start + len(dots)
        self.dots[start:stop] = dots
        np.maximum(np.sqrt(squares), 1e-12, out=self.norms[start:stop])

    def result(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(N, K) cosines (positive minus negative for a pair) and, with variants, (V, N, K)."""
        dots, norms, k, n_rows = self.dots, self.norms, self.k, self.n_rows
        cosine = dots[:, :k] / norms[:, None]
        if not self.n_variants:
            return cosine, None
        per_variant = dots[:, k:].reshape(n_rows, self.n_variants, k)
        return cosine, np.moveaxis(per_variant / norms[:, None, None], 1, 0)


def condition_similarities(blocks, prototypes: Prototypes, n_rows: int,
                           variants: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`similarities` of one condition's rows, block by block as the cache stores them: (N, K), and
    with ``variants`` every prompt variant's too (V, N, K) (:class:`ConditionSimilarities`)."""
    found = ConditionSimilarities(prototypes, n_rows, variants)
    for start, rows in blocks:
        found.add(start, rows)
    return found.result()


def probabilities(cosine: np.ndarray, kind: str, scale: float, bias: float) -> np.ndarray:
    """softmax(scale * cosine) across classes (multiclass, ordinal); per finding sigmoid(scale * cosine + bias)."""
    z = scale * cosine
    if kind == "multilabel":
        return 1.0 / (1.0 + np.exp(-(z + bias)))
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def fit_temperature(cosine: np.ndarray, labels: np.ndarray, kind: str, scale: float, bias: float) -> tuple[float, float]:
    """(temperature, bias) minimising log-loss on the given rows: probabilities become
    softmax(scale * cosine / T), or per finding sigmoid(scale * cosine / T + b) with b fitted too.
    One set of :func:`crs.evaluate.temperature.fit_temperatures`, which fits many at once."""
    temperatures, biases = fit_temperatures(cosine, labels, kind, scale, bias, [np.arange(len(labels))])
    return float(temperatures[0]), float(biases[0])


# --- one unit ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZeroShotUnitResult:
    records: pd.DataFrame
    prompts: pd.DataFrame


def predictions_path(folder: Path, encoder: str, task: str, digest: str) -> Path:
    return Path(folder) / ZERO_SHOT_DIR / "predictions" / f"{encoder}__{task}__{digest}.npz"


METRIC_BATCH = 1 << 22
"""Probability entries (probabilities x rows x classes) scored in one batched metrics call at most."""


@dataclass
class _Scored:
    """One condition's probabilities to score: the shipped ones first, then one per distinct fit, with
    their float32 rank keys (:func:`condition_scores`)."""

    condition: Condition
    base: dict
    fits: list[tuple[float, float]]  # (temperature, bias) of probabilities 1..
    probs: np.ndarray  # (1 + len(fits), N, K)
    keys: np.ndarray  # (1, N, K) shared by every calibration (multilabel), else (1 + len(fits), N, K)
    exceed: np.ndarray | None = None  # ordinal: P(grade >= t)'s keys (1 + len(fits), N, K - 1)


RANKED = ("auroc", "auroc_se")
"""The metrics that are functions of each column's ranking alone (ties included)."""
CALIBRATION = tuple(name for name in METRICS if name not in RANKED)


def cosine_keys(cosine: np.ndarray) -> np.ndarray:
    """float32 rank keys of cosines (..., N, K): each column minus its value at the first row.

    A multilabel calibration, sigmoid(scale * cos / T + b) with T > 0, is a strictly increasing map
    of each column's cosine, so every calibration ranks the cases as the cosine does: one key serves
    the shipped and every fitted calibration. The probabilities themselves do not: with CLIP's scale
    100 the shipped sigmoid rounds to exactly 1.0 for cosines that differ, and ranking them counted
    those cases as ties. Relative to the condition's first row (the reference, as the probes take it:
    :meth:`crs.probes.base.LinearProbeSet.predict_scores`), float32 holds the rows' differences with
    their own exponent instead of a shared cosine of ~0.2 whose last bit is 1.5e-8; a float64
    subtraction and a float32 rounding are both monotone, so the order is the cosine's (ties only
    where two cosines agree to float32 precision of their difference)."""
    return (cosine - cosine[..., :1, :]).astype(np.float32)


def softmax_scores(cosine: np.ndarray, scales: np.ndarray, ordinal: bool) -> PredictedScores:
    """Probabilities softmax(scale * cosine) across classes at each of ``scales`` (P,), with the probes'
    rank keys (:func:`crs.probes.base.rank_scores`): decision ``scale * (cos - cos_ref)`` and bias
    ``scale * cos_ref`` (cos_ref the first row's cosines), so the logits are ``scale * cos`` and
    p_j is proportional to e^(scale cos_j). A temperature changes the ranking of a softmax column,
    so each scale has keys of its own."""
    reference = cosine[:1] if len(cosine) else np.zeros((1, cosine.shape[1]))
    scales = np.asarray(scales, np.float64)
    decision = scales[:, None, None] * (cosine - reference)[None]
    return rank_scores(decision, scales[:, None] * reference, "softmax", ordinal)


def condition_scores(cosine: np.ndarray, kind: str, scale: float, bias: float,
                     fits: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One condition's probabilities (1 + len(fits), N, K), shipped first, then each (temperature, bias)
    of ``fits``; their float32 rank keys ((1, N, K) shared for multilabel: :func:`cosine_keys`) and,
    for an ordinal task, P(grade >= t)'s keys."""
    if kind == "multilabel":
        probs = np.stack([probabilities(cosine, kind, scale, bias)] + [
            probabilities(cosine, kind, scale / temperature, fitted) for temperature, fitted in fits])
        return probs, cosine_keys(cosine)[None], None
    scores = softmax_scores(cosine, np.array([scale] + [scale / temperature for temperature, _ in fits]),
                            kind == "ordinal")
    return scores.probs, scores.ovr_keys, scores.exceed_keys


def variant_aurocs(labels: np.ndarray, variant_cosines: np.ndarray, kind: str, scale: float) -> np.ndarray:
    """Macro AUROC (V,) of each prompt variant's cosines (V, N, K) as shipped, from rank keys as the
    condition's own (:func:`condition_scores`)."""
    if kind == "multilabel":
        keys = cosine_keys(variant_cosines)
    else:
        keys = np.concatenate([softmax_scores(c, np.array([scale]), False).ovr_keys for c in variant_cosines])
    return rank_metrics(labels, keys, kind, influence=False)["auroc"]


def _score_batch(batch: list[_Scored], kind: str) -> list[list[dict[str, float]]]:
    """Every metric of every condition of ``batch`` (same labels and groups) in one batched call.

    AUROC and its standard error rank the float32 keys (the probes' fast path). Multilabel: one key
    per condition, shared by its calibrations (:func:`cosine_keys`), so they are ranked once per
    condition and only the calibration columns are computed per calibration."""
    first = batch[0].condition
    stack = np.concatenate([item.probs for item in batch]) if len(batch) > 1 else batch[0].probs
    keys = np.concatenate([item.keys for item in batch]) if len(batch) > 1 else batch[0].keys
    rows: list[dict[str, float]]
    if kind == "multilabel":
        values = evaluation_metrics(first.labels, stack, kind, groups=first.groups, metrics=CALIBRATION)
        ranked = rank_metrics(first.labels, keys, kind, groups=first.groups)
        condition_of = np.repeat(np.arange(len(batch)), [len(item.probs) for item in batch])
        rows = [{name: float(values[name][p]) if name in values else float(ranked[name][condition_of[p]])
                 for name in METRICS} for p in range(len(stack))]
    else:
        exceed = None
        if batch[0].exceed is not None:
            exceed = np.concatenate([item.exceed for item in batch if item.exceed is not None])
        values = evaluation_metrics(first.labels, stack, kind, groups=first.groups, ovr_keys=keys, exceed_keys=exceed)
        rows = [{name: float(values[name][p]) for name in METRICS} for p in range(len(stack))]
    out, start = [], 0
    for item in batch:
        out.append(rows[start:start + len(item.probs)])
        start += len(item.probs)
    return out


def _record_rows(batch: list[_Scored], kind: str, fits: list[tuple[float, int, int, float, float]],
                 shipped_bias: float, seeds: tuple[int, ...], full: float) -> list[dict]:
    """The record rows of a batch of conditions: the shipped calibration once per seed (label fraction 0),
    the fitted one per (label fraction, seed) on clean data and at the full fraction elsewhere."""
    rows = []
    for item, metrics in zip(batch, _score_batch(batch, kind), strict=True):
        by_fit = dict(zip(item.fits, metrics[1:], strict=True))
        for seed in seeds:
            rows.append({**item.base, "label_fraction": 0.0, "seed": int(seed), "calibration": SHIPPED,
                         "temperature": 1.0, "bias": shipped_bias, "n_train": 0, **metrics[0]})
        for fraction, seed, n_val, temperature, bias in fits:
            if item.condition.condition != "clean" and fraction != full:
                continue
            rows.append({**item.base, "label_fraction": fraction, "seed": seed, "calibration": FITTED,
                         "temperature": temperature, "bias": bias, "n_train": n_val,
                         **by_fit[(temperature, bias)]})
    return rows


def _same_cases(a: Condition, b: Condition) -> bool:
    if a.labels.shape != b.labels.shape or not np.array_equal(a.labels, b.labels, equal_nan=True):
        return False
    if a.groups is None or b.groups is None:
        return a.groups is None and b.groups is None
    return np.array_equal(a.groups, b.groups)


@dataclass
class _PromptSetState:
    """What one prototype set of a :class:`ZeroShotPass` carries between conditions."""

    prototypes: Prototypes
    fits: list[tuple[float, int, int, float, float]]  # (label fraction, seed, validation rows, T, b)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # the predictions file
    pending: list[_Scored] = field(default_factory=list)  # conditions waiting for one batched metrics call
    frames: list[dict] = field(default_factory=list)  # record rows
    similarities: ConditionSimilarities | None = None  # the current condition's


class ZeroShotPass:
    """Zero-shot of one (encoder, task), fed each evaluation condition's row blocks as they are read.

    :meth:`start`, then :meth:`add_block` for each (start, rows) block of the condition, then
    :meth:`finish_condition`; after the last condition :meth:`finish` gives the records and prompt
    AUROCs and writes the predictions file (with ``output``). The temperatures are fitted on the
    validation rows when the pass is made. :func:`run_zero_shot_unit` drives it over a unit's conditions
    read here; the probe unit (:func:`crs.evaluate.units.run_unit` with a :class:`ZeroShotJob`) drives it
    with the blocks its own reader delivered (decision 0112): the same object, the same blocks, so the
    same records bit for bit. It only reads the blocks.

    Batched like the probes: the temperatures of every (label fraction, seed) are fitted at once
    (:func:`crs.evaluate.temperature.fit_temperatures`, once per distinct validation row set), and the
    metrics of the shipped and every fitted calibration, over consecutive conditions that share their
    cases (the corruptions), come from one :func:`crs.probes.metrics.evaluation_metrics` call.
    """

    def __init__(self, unit: ProbeUnit, store: FeatureStore, table: SampleTable, settings: ProbeSettings,
                 prototype_sets: list[Prototypes], X_val: np.ndarray, output: Path | None = None) -> None:
        self.unit, self.store, self.output = unit, store, output
        self.kind = kind = table.task.kind
        self.n_test = len(table.indices("test"))
        self.seeds = settings.seeds
        y_val = table.labels[table.indices("val")]
        # (label fraction, seed) in the probes' order (crs.evaluate.units.training_subsets); the training rows are not needed
        subsets = [(float(fraction), int(seed)) for seed in settings.seeds for fraction in sorted(settings.label_fractions)]
        val_subsets = validation_subsets(table, settings)
        self.full = max(settings.label_fractions)
        self.sets: list[_PromptSetState] = []
        for proto in prototype_sets:
            cos_val = similarities(X_val, proto)
            distinct: dict[bytes, int] = {}  # seeds of the full fraction share their rows: fit once
            row_sets: list[np.ndarray] = []
            which: list[int] = []
            for s in range(len(subsets)):
                rows = np.arange(len(y_val)) if val_subsets is None else val_subsets[s]
                which.append(distinct.setdefault(rows.tobytes(), len(distinct)))
                if which[-1] == len(row_sets):
                    row_sets.append(rows)
            temperatures, biases = fit_temperatures(cos_val, y_val, kind, proto.scale, proto.bias, row_sets)
            fits = [(float(fraction), int(seed), len(row_sets[w]), float(temperatures[w]), float(biases[w]))
                    for (fraction, seed), w in zip(subsets, which, strict=True)]
            self.sets.append(_PromptSetState(proto, fits))
        self.prompt_rows: list[dict] = []
        self.condition: Condition | None = None
        self.corrupt_rows: int | None = None  # rows of the first corrupted condition
        self.columns_t = np.empty((0, 0))  # the current condition's prototype columns, every set's (M, D)
        self.column_ends = np.zeros(0, dtype=np.int64)  # where each set's columns end in them

    def start(self, condition: Condition) -> None:
        """Begin ``condition``: its blocks follow through :meth:`add_block` (or their dot products
        with :attr:`columns_t` through :meth:`add_dots`)."""
        self.condition = condition
        for state in self.sets:
            with_variants = condition.condition == "clean" and state.prototypes.variants_positive is not None
            state.similarities = ConditionSimilarities(state.prototypes, len(condition.labels), with_variants)
        # every prototype set's columns side by side (M, D): one kernel call per block widens its rows once
        sides = [state.similarities.columns_t for state in self.sets if state.similarities is not None]
        self.columns_t = np.ascontiguousarray(np.concatenate(sides))
        self.column_ends = np.cumsum([len(side) for side in sides])

    def add_block(self, start: int, rows: np.ndarray) -> None:
        """The current condition's rows ``start`` .. ``start + len(rows)``, in the stored dtype.
        float16 rows go through the compiled kernel once for every prototype set's columns
        (:func:`crs.probes.predict_kernel.dots_and_squares_half`, the arithmetic of the probes' pass
        when the cosines ride along with its logits, decision 0116); others through numpy per set."""
        if rows.dtype == np.float16 and len(rows) and predict_kernel.available():
            dots, squares = np.empty((len(rows), len(self.columns_t))), np.empty(len(rows))
            predict_kernel.dots_and_squares_half(rows, self.columns_t, dots, squares)
            self.add_dots(start, dots, squares)
            return
        for state in self.sets:
            assert state.similarities is not None
            state.similarities.add(start, rows)

    def add_dots(self, start: int, dots: np.ndarray, squares: np.ndarray) -> None:
        """The current condition's rows ``start`` .. ``start + len(dots)`` from their dot products
        with :attr:`columns_t` (n, M) and sums of squares (n,), float64, computed by the compiled
        kernel (here, or in the probes' prediction of the same rows: decision 0116)."""
        lo = 0
        for state, hi in zip(self.sets, self.column_ends, strict=True):
            assert state.similarities is not None
            state.similarities.add_dots(start, dots[:, lo:hi], squares)
            lo = int(hi)

    def finish_condition(self) -> None:
        """Probabilities, metrics (batched with the next conditions that share the cases) and
        predictions of the current condition."""
        condition, kind, full = self.condition, self.kind, self.full
        assert condition is not None
        if condition.condition == "corrupt" and self.corrupt_rows is None:
            self.corrupt_rows = len(condition.labels)
        for state in self.sets:
            proto, fits, arrays = state.prototypes, state.fits, state.arrays
            assert state.similarities is not None
            cosine, variant_cosines = state.similarities.result()
            state.similarities = None
            base = {"encoder": self.unit.encoder, "task": self.unit.task, "task_kind": kind,
                    "condition": condition.condition, "corruption": condition.corruption,
                    "severity": int(condition.severity), "target": condition.target,
                    "prompt_set": proto.prompt_set, "prompt_digest": proto.digest}
            used = fits if condition.condition == "clean" else [f for f in fits if f[0] == full]
            pairs = list(dict.fromkeys((temperature, bias) for _, _, _, temperature, bias in used))
            probs, keys, exceed = condition_scores(cosine, kind, proto.scale, proto.bias, pairs)
            if state.pending and (not _same_cases(state.pending[0].condition, condition)
                                  or sum(item.probs.size for item in state.pending) + probs.size > METRIC_BATCH):
                state.frames += _record_rows(state.pending, kind, fits, proto.bias, self.seeds, full)
                state.pending = []
            state.pending.append(_Scored(condition, base, pairs, probs, keys, exceed))
            arrays[artifacts.probs_key(condition.key)] = probs[0].astype(np.float32)
            arrays[artifacts.keys_key(condition.key)] = keys[0]  # what the score ranks (the shipped keys)
            arrays[artifacts.labels_key(condition.key)] = condition.labels
            at_full = next(((t, b) for fraction, _, _, t, b in fits if fraction == full), None)
            if at_full is not None:
                arrays[artifacts.probs_key(condition.key) + "_fitted"] = probs[1 + pairs.index(at_full)].astype(np.float32)
            if condition.groups is not None:
                arrays[condition.groups_key] = condition.groups.astype(str)
            if condition.design is not None:  # the bootstrap follows how the rows were drawn (decision 0085)
                arrays[condition.design_key] = np.array(condition.design, dtype=str)
            if variant_cosines is not None:
                aurocs = variant_aurocs(condition.labels, variant_cosines, kind, proto.scale)
                self.prompt_rows += [{"encoder": self.unit.encoder, "task": self.unit.task,
                                      "prompt_set": proto.prompt_set, "prompt_digest": proto.digest,
                                      "variant": variant, "auroc": float(auroc)}
                                     for variant, auroc in enumerate(aurocs)]
        self.condition = None

    def finish(self) -> ZeroShotUnitResult:
        """The unit's records (sorted as :data:`KEY_COLUMNS`, prompt set, calibration) and prompt AUROCs;
        each prototype set's predictions file written under ``output``."""
        frames: list[dict] = []
        positions = None
        if self.corrupt_rows is not None and self.corrupt_rows != self.n_test:
            from crs.evaluate.units import corrupt_positions

            names = [name for name in self.store.feature_array_names(self.unit.encoder) if name.startswith("corrupt/")]
            positions = corrupt_positions(self.store, self.unit.encoder, names)
        for state in self.sets:
            if state.pending:
                state.frames += _record_rows(state.pending, self.kind, state.fits, state.prototypes.bias, self.seeds,
                                             self.full)
                state.pending = []
            frames += state.frames
            if positions is not None:
                state.arrays[artifacts.CORRUPT_ROWS] = positions
            if self.output is not None:
                path = predictions_path(self.output, self.unit.encoder, self.unit.task, state.prototypes.digest)
                path.parent.mkdir(parents=True, exist_ok=True)
                np.savez(path, **state.arrays)  # type: ignore[arg-type]
        records = pd.DataFrame(frames)
        order = [*KEY_COLUMNS, "prompt_set", "calibration"]
        records = records.sort_values(order, kind="stable").reset_index(drop=True)
        return ZeroShotUnitResult(records, pd.DataFrame(self.prompt_rows))


@dataclass(frozen=True)
class ZeroShotJob:
    """What a probe unit needs to run its (encoder, task)'s zero-shot in its own pass over the
    conditions: the prototype sets (made or read in the stage process before any unit runs) and the
    run folder the predictions files go to (decision 0112)."""

    prototype_sets: tuple[Prototypes, ...]
    output: Path | None = None

    def start(self, unit: ProbeUnit, store: FeatureStore, table: SampleTable, settings: ProbeSettings,
              X_val: np.ndarray) -> ZeroShotPass:
        return ZeroShotPass(unit, store, table, settings, list(self.prototype_sets), X_val, self.output)


def run_zero_shot_unit(
    unit: ProbeUnit, cache_root: Path, settings: ProbeSettings, prototype_sets: list[Prototypes],
    output: Path | None = None,
) -> ZeroShotUnitResult:
    """Zero-shot records of one (encoder, task) for every prototype set, from the cache alone: a
    :class:`ZeroShotPass` over the unit's conditions, read here (the probe unit's fused pass drives the
    same object with its own blocks)."""
    store = FeatureStore(store_path(cache_root, unit.task))
    table = store.read_table()
    val, test = table.indices("val"), table.indices("test")
    X_val, X_test = read_rows(store.feature_array(unit.encoder, "clean"), [val, test])
    found = ZeroShotPass(unit, store, table, settings, prototype_sets, X_val, output)
    del X_val
    for condition in evaluation_conditions(unit, cache_root, store, table, X_test):
        found.start(condition)
        for start, rows in condition.blocks():
            found.add_block(start, rows)
        found.finish_condition()
    return found.finish()


def zero_shot_jobs(spec: Spec, cache_root: Path | None = None, output: Path | None = None,
                   encoders: list[str] | None = None, notes: list[str] | None = None) -> dict[ProbeUnit, ZeroShotJob]:
    """Per probe unit of a zero-shot encoder (the spec's, or ``encoders``), its prototypes (cached
    ones read, missing ones encoded: text only) and the run folder. Made before any unit runs, so bad
    input (a prompt file, an encoder without a text tower) is refused in one line with the cache as it
    was and no probe fitted. ``notes`` gets a line per imported encoder left out as image-only."""
    cache_root = Path(cache_root or spec.cache)
    output = Path(output or spec.output)
    found, left_out = zero_shot_choice(spec, cache_root) if encoders is None else (list(encoders), [])
    if notes is not None:
        notes.extend(left_out)
    chosen = set(found)
    jobs = {}
    for unit in probe_units(spec):
        if unit.encoder in chosen:
            store = FeatureStore(store_path(cache_root, unit.task))
            jobs[unit] = ZeroShotJob(tuple(unit_prototypes(spec, unit.encoder, unit.task, store)), output)
    if not jobs:
        raise ZeroShotError(f"zero-shot is on but none of the encoders {spec.encoder_names} has a text tower or "
                            "imported prototypes; add a vision-language encoder, import prototypes beside an "
                            "imported encoder's features, or turn zero_shot off")
    return jobs


def write_zero_shot(output: Path, results: list[ZeroShotUnitResult]) -> ZeroShotUnitResult:
    """The units' results (in unit order) combined and written to ``<output>/zero_shot``."""
    combined = ZeroShotUnitResult(pd.concat([r.records for r in results], ignore_index=True),
                                  pd.concat([r.prompts for r in results], ignore_index=True))
    folder = Path(output) / ZERO_SHOT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    combined.records.to_parquet(folder / RECORDS_FILE, index=False)
    combined.prompts.to_parquet(folder / PROMPTS_FILE, index=False)
    return combined


def zero_shot_spec(spec: Spec, cache_root: Path | None = None, output: Path | None = None,
                   encoders: list[str] | None = None, costs: list[dict] | None = None) -> ZeroShotUnitResult:
    """Zero-shot records of every (vision-language encoder, task) of the spec (or of ``encoders``) in
    a pass of their own over the cache; written under ``<output>/zero_shot``. Each unit runs on one
    thread, as a probe unit does; ``costs`` gets its CPU and wall seconds (prototypes included).
    ``crs probe`` runs zero-shot inside the probe units' pass instead (:func:`crs.evaluate.stage.probe_spec`)."""
    cache_root = Path(cache_root or spec.cache)
    output = Path(output or spec.output)
    settings = probe_settings(spec)
    chosen = set(zero_shot_encoders(spec, cache_root) if encoders is None else encoders)
    results = []
    for unit in probe_units(spec):
        if unit.encoder not in chosen:
            continue
        started, cpu_started = time.perf_counter(), time.process_time()
        store = FeatureStore(store_path(cache_root, unit.task))
        prototype_sets = unit_prototypes(spec, unit.encoder, unit.task, store)
        with one_thread():
            result = run_zero_shot_unit(unit, cache_root, settings, prototype_sets, output)
        if costs is not None:
            costs.append({"encoder": unit.encoder, "task": unit.task, "cpu_s": time.process_time() - cpu_started,
                          "wall_s": time.perf_counter() - started})
        results.append(result)
    if not results:
        raise ZeroShotError(f"zero-shot is on but none of the encoders {spec.encoder_names} has a text tower or "
                            "imported prototypes; add a vision-language encoder, import prototypes beside an "
                            "imported encoder's features, or turn zero_shot off")
    return write_zero_shot(output, results)
