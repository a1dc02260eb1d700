"""``crs plan``: what stage 1 will do before it does it (forward passes, cache bytes, disk, time).

Per (data set, encoder): the images, the clean and corrupted forward passes, how many of them are
already in the cache (read from the chunk-completion flags, never the features), the bytes the
features take and the disk still needed, and an estimated time per device. Planning builds no
encoder, so it cannot hash weights: a cached group is matched on every other fingerprint field
(data set, test split, image size and fit, corruption suite, preprocessing, dimension), and
``crs extract`` reports the exact resumed count when it starts.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from crs.cache.corrupt_rows import array_rows_digest
from crs.cache.store import FeatureStore, child_array, child_group, store_path, test_digest
from crs.cache.writer import DONE_SUFFIX, stored_rows_kept
from crs.corruptions import SUITE_VERSION
from crs.corruptions.variants import resolve_variants
from crs.data import Dataset, load_entry
from crs.data.published import PUBLISHED_SIZES
from crs.data.subsample import corruption_rows as subsample_rows
from crs.encoders import get_spec
from crs.encoders.factory import with_input_size
from crs.encoders.registry import EncoderSpec
from crs.extract.chunking import chunk_rows_for
from crs.extract.cores import usable_cores
from crs.extract.disk import array_bytes, block_size
from crs.extract.throughput import forward_gflops, load_measurements, rate
from crs.spec import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK_ROWS, DatasetEntry, Spec

FEATURE_BYTES = 2  # float16
PLAN_DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class PlanRow:
    """One (data set, encoder): the work stage 1 has to do for it and what the cache already holds."""

    dataset: str
    encoder: str
    images: int
    test_images: int
    variants: int
    clean_passes: int
    corrupted_passes: int
    cached_passes: int
    dim: int
    bytes_total: int
    bytes_to_write: int
    seconds: dict[str, float]
    time_basis: dict[str, str]
    counts_from: str = "data"
    cached_group: str | None = None
    corruption_images: int | None = None  # test images the corrupted variants are made of (None: all)
    passes_saved: int = 0  # by a corruption subsample (``crs plan --corruption-rows``), against the full split
    disk_bytes_to_write: int = 0  # bytes_to_write as the file system counts them (whole blocks, checksums, flags)

    @property
    def passes(self) -> int:
        return self.clean_passes + self.corrupted_passes

    @property
    def corruption_se_factor(self) -> float:
        """How much larger a corrupted AUROC's standard error is on the subsample than on the whole
        test split, at the same prevalence (AUROC's standard error goes as 1 / sqrt(rows))."""
        images = self.test_images if self.corruption_images is None else self.corruption_images
        return float(np.sqrt(self.test_images / images)) if images else 1.0

    @property
    def passes_to_go(self) -> int:
        return self.passes - self.cached_passes


@dataclass(frozen=True)
class ExtractPlan:
    rows: tuple[PlanRow, ...]
    cache: str
    free_bytes: int | None
    cores: int
    notes: tuple[str, ...] = field(default=())
    left_out: tuple[str, ...] = field(default=())  # data sets of the spec the plan could not count

    @property
    def passes(self) -> int:
        return sum(row.passes for row in self.rows)

    @property
    def cached_passes(self) -> int:
        return sum(row.cached_passes for row in self.rows)

    @property
    def bytes_to_write(self) -> int:
        return sum(row.bytes_to_write for row in self.rows)

    @property
    def disk_bytes_to_write(self) -> int:
        """What the features still to write take on disk (:func:`with_disk_bytes`): what a full disk is judged by."""
        return sum(max(row.disk_bytes_to_write, row.bytes_to_write) for row in self.rows)

    def seconds(self, device: str) -> float:
        return sum(row.seconds[device] * row.passes_to_go / row.passes if row.passes else 0.0 for row in self.rows)

    def summary_line(self) -> str:
        images = sum(row.images for row in _first_per_dataset(self.rows))
        corrupted = sum(row.corrupted_passes for row in self.rows)
        return (f"plan: {len({r.dataset for r in self.rows})} data set(s) x {len({r.encoder for r in self.rows})} "
                f"encoder(s), {images:,} images, {self.passes:,} forward passes ({self.passes - corrupted:,} clean, "
                f"{corrupted:,} corrupted); {self.cached_passes:,} already cached, {self.passes - self.cached_passes:,} "
                f"to go; {_gb(self.bytes_to_write)} to write; about {_duration(self.seconds('cpu'))} on cpu, "
                f"{_duration(self.seconds('cuda'))} on one GPU (estimates, see `crs plan`)"
                + (f"; NOT counted: {', '.join(self.left_out)} (no data root here and no published size)"
                   if self.left_out else ""))

    def to_json(self) -> dict[str, Any]:
        return {
            "cache": self.cache, "free_bytes": self.free_bytes, "cores": self.cores, "notes": list(self.notes),
            "left_out": list(self.left_out),
            "totals": {"passes": self.passes, "cached_passes": self.cached_passes,
                       "passes_saved": sum(row.passes_saved for row in self.rows),
                       "passes_to_go": self.passes - self.cached_passes, "bytes_to_write": self.bytes_to_write,
                       "seconds_to_go": {device: self.seconds(device) for device in PLAN_DEVICES}},
            "rows": [{**asdict(row), "passes": row.passes, "passes_to_go": row.passes_to_go,
                      "corruption_se_factor": row.corruption_se_factor} for row in self.rows],
        }

    def format(self) -> str:
        lines = [self.summary_line(), ""]
        # the name columns fit their longest entry (a long data-set name used to push its row out of line)
        names = max([12, *(len(row.dataset) for row in self.rows)])
        encoders = max([16, *(len(row.encoder) for row in self.rows)])
        header = f"{'data set':<{names}} {'encoder':<{encoders}} {'images':>9} {'clean':>9} {'corrupted':>11} " \
                 f"{'cached':>11} {'to write':>10}  {'cpu':>9} {'gpu':>9}"
        lines.append(header)
        for row in self.rows:
            lines.append(
                f"{row.dataset:<{names}} {row.encoder:<{encoders}} {row.images:>9,} {row.clean_passes:>9,} "
                f"{row.corrupted_passes:>11,} "
                f"{row.cached_passes:>11,} {_gb(row.bytes_to_write):>10}  "
                f"{_duration(row.seconds['cpu'] * row.passes_to_go / max(row.passes, 1)):>9} "
                f"{_duration(row.seconds['cuda'] * row.passes_to_go / max(row.passes, 1)):>9}"
            )
        free = "unknown" if self.free_bytes is None else _gb(self.free_bytes)
        lines.append("")
        on_disk = self.disk_bytes_to_write
        lines.append(f"disk: {_gb(self.bytes_to_write)} to write ({_gb(on_disk)} on disk, in whole blocks), {free} free "
                     f"under {self.cache}" + ("  ** NOT ENOUGH **" if self.free_bytes is not None and self.free_bytes < on_disk else ""))
        bases = sorted({f"{device}: {row.time_basis[device]}" for row in self.rows for device in PLAN_DEVICES})
        lines.append("times: " + "; ".join(bases))
        saved = sum(row.passes_saved for row in self.rows)
        if saved:
            lines.append(f"corruption subsample: {saved:,} forward passes saved against the full test split "
                         f"({saved / (self.passes + saved):.0%} of the full-split plan, "
                         f"{(self.passes + saved) / self.passes:.1f}x fewer)")
            for row in _first_per_dataset(self.rows):
                if row.corruption_images is not None and row.corruption_images < row.test_images:
                    lines.append(f"  {row.dataset}: corruptions on {row.corruption_images:,} of {row.test_images:,} "
                                 f"test images: a corrupted AUROC's standard error about "
                                 f"{row.corruption_se_factor:.2f}x the whole split's (1/sqrt(rows)); the robustness "
                                 "axis's measured standard error is in the report (`crs report`)")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _first_per_dataset(rows: Sequence[PlanRow]) -> list[PlanRow]:
    seen: dict[str, PlanRow] = {}
    for row in rows:
        seen.setdefault(row.dataset, row)
    return list(seen.values())


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def free_bytes(folder: Path) -> int | None:
    """Free bytes on the disk that holds ``folder`` (its nearest existing parent)."""
    folder = Path(folder).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def cached_rows(store: FeatureStore, spec: EncoderSpec, dataset_fields: dict[str, Any],
                arrays: Sequence[tuple[str, int]], rows_digest: str | None = None, precision: str = "auto",
                ) -> tuple[dict[str, int], str | None]:
    """Rows a resumed run keeps (complete chunks, and rows journaled for unfinished ones, decision 0101)
    per planned array of the best matching group of ``spec.name`` (weights not compared).

    A group matches when every fingerprint field the plan can know without building the encoder
    agrees; among matches, the encoder's ``current`` group wins, then the one with most rows done.
    ``precision`` (``[extract] precision``): a float64 run matches float64 groups only, and "auto" any
    other (float32 on the CPU, bf16 autocast on a GPU: the plan cannot know where `crs extract` will run).
    A corrupted array counts only when it holds the planned rows (``rows_digest``: the sha256 of
    their ids; extraction rewrites arrays made for another corruption subsample).
    """
    if spec.name not in store.encoder_names():
        return {}, None
    node = child_group(store.root, f"encoders/{spec.name}")
    current = node.attrs.get("current")
    best: tuple[tuple[bool, int], dict[str, int], str] | None = None
    whole_split = dataset_fields["test_ids_sha256"]
    for fingerprint in store.fingerprints(spec.name):
        group = child_group(node, fingerprint)
        fields = cast(dict[str, Any], group.attrs.get("fields", {}))
        wanted = {**dataset_fields, "preprocessing": spec.preprocessing_fields(), "dim": spec.dim,
                  "pooling": spec.pooling}
        if any(fields.get(key) != value for key, value in wanted.items()):
            continue
        if (fields.get("dtype") == "float64") != (precision == "float64"):  # another fingerprint: extracted anew
            continue
        done = {name: min(stored_rows_kept(group, name), rows) for name, rows in arrays
                if name == "clean" or array_rows_digest(group, name, whole_split) in (None, rows_digest or whole_split)}
        key = (fingerprint == current, sum(done.values()))
        if best is None or key > best[0]:
            best = (key, done, fingerprint)
    return (best[1], best[2]) if best else ({}, None)


def plan_dataset(dataset: Dataset, specs: Sequence[EncoderSpec], cache_root: Path,
                 variants: Sequence[tuple[str, int]], cores: int, measurements: list[dict[str, Any]] | None = None,
                 corruption_rows: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 chunk_cap: int = DEFAULT_CHUNK_ROWS, precision: str = "auto") -> list[PlanRow]:
    """Plan rows for one loaded data set (its corrupted variants are made for its test split only).

    ``corruption_rows``: the variants are made for a patient-level subsample of about that many
    test images (:func:`crs.data.subsample.corruption_rows`, as ``crs extract`` draws it).
    ``batch_size`` and ``chunk_cap`` (``[extract]``) size the chunks whose whole blocks the disk count uses;
    ``precision`` (``[extract]``) which cached groups count (:func:`cached_rows`).
    """
    n_images, test = len(dataset), dataset.indices("test")
    n_test = len(test)
    rows = subsample_rows(np.asarray(dataset.ids)[test], np.asarray(dataset.labels)[test],
                          np.asarray(dataset.groups)[test], corruption_rows if variants else None)
    n_corrupt = len(rows.positions)
    arrays = [("clean", n_images), *((f"corrupt/{name}/{severity}", n_corrupt) for name, severity in variants)]
    path = store_path(cache_root, dataset.name)
    store = FeatureStore(path) if (path / "zarr.json").exists() else None
    dataset_fields = {"image_ids_sha256": dataset.id_digest(), "test_ids_sha256": test_digest(dataset),
                      "image_size": dataset.image_size, "image_fit": dataset.fit,
                      "corruption_suite_version": SUITE_VERSION}
    plan_rows = []
    chunks = chunk_rows_for([n for _, n in arrays], batch_size, chunk_cap, len(specs))
    block = block_size(Path(cache_root))
    for spec in specs:
        done, group = cached_rows(store, spec, dataset_fields, arrays, rows.digest, precision) if store else ({}, None)
        row = _row(dataset.name, spec, n_images, n_test, len(variants), sum(done.values()), cores,
                   measurements, "data", group, n_corrupt)
        on_disk = 0
        for (name, n), c in zip(arrays, chunks, strict=True):
            stored = _stored_chunks(store, spec.name, group, name, n) if name in done else None
            on_disk += array_bytes(n, c, spec.dim, range(-(-n // c)), block, exists=False) if stored is None \
                else array_bytes(n, stored[0], spec.dim, stored[1], block, exists=True)
        plan_rows.append(replace(row, disk_bytes_to_write=on_disk))
    return plan_rows


def _stored_chunks(store: FeatureStore | None, encoder: str, group: str | None, name: str,
                   n_rows: int) -> tuple[int, list[int]] | None:
    """(rows per chunk, chunks not yet flagged) of a stored feature array the run resumes, or None when it
    has none of that size (the run makes it)."""
    if store is None or group is None:
        return None
    node = child_group(store.root, f"encoders/{encoder}/{group}")
    if name not in node or f"{name}{DONE_SUFFIX}" not in node:
        return None
    array = child_array(node, name)
    if int(array.shape[0]) != n_rows:
        return None
    chunk_rows = int(cast(int, array.attrs.get("chunk_rows", array.chunks[0])))
    flags = np.asarray(child_array(node, f"{name}{DONE_SUFFIX}")[:])
    return chunk_rows, [int(k) for k in np.flatnonzero(flags == 0)]


def _row(dataset: str, spec: EncoderSpec, n_images: int, n_test: int, n_variants: int, cached: int, cores: int,
         measurements: list[dict[str, Any]] | None, counts_from: str, group: str | None,
         n_corrupt: int | None = None) -> PlanRow:
    n_corrupt = n_test if n_corrupt is None else n_corrupt
    clean, corrupted = n_images, n_corrupt * n_variants
    native = get_spec(spec.name).input_size if spec.name in _known() else spec.input_size
    gflops = forward_gflops(spec.name, spec.input_size, native)
    seconds, basis = {}, {}
    for device in PLAN_DEVICES:
        r = rate(spec.name, gflops, device, cores, measurements)
        seconds[device], basis[device] = r.seconds(clean + corrupted), r.basis
    total_bytes = (clean + corrupted) * spec.dim * FEATURE_BYTES
    return PlanRow(dataset, spec.name, n_images, n_test, n_variants, clean, corrupted, cached, spec.dim, total_bytes,
                   total_bytes - cached * spec.dim * FEATURE_BYTES, seconds, basis, counts_from, group,
                   n_corrupt, (n_test - n_corrupt) * n_variants)


def _known() -> set[str]:
    from crs.encoders import available

    return set(available())


def plan_spec(spec: Spec, encoder_names: Sequence[str] | None = None, corruption_rows: int | None = None,
              ) -> ExtractPlan:
    """The plan of ``crs extract`` for a spec: every data set and shift target, each encoder that runs on
    it (:meth:`Spec.encoders_on`: a specialist on its own data sets only), as :func:`extract_spec` runs them.

    ``corruption_rows`` (default: the spec's ``[extract] corruption_rows``) plans corrupted variants
    for a patient-level subsample of about that many test images per data set, and states the
    forward passes it saves against the whole test split.
    """
    if corruption_rows is None:
        corruption_rows = spec.extract.corruption_rows
    specs = [with_input_size(get_spec(e.name), e.input_size) for e in spec.encoders
             if encoder_names is None or e.name in encoder_names]
    cores = usable_cores()
    measurements = load_measurements()
    rows: list[PlanRow] = []
    notes: list[str] = []
    for entry in spec.datasets:
        declared = spec.encoders_on(entry.name)  # a specialist is extracted on its own data sets only
        on_entry = [s for s in specs if s.name in declared]
        if not on_entry:  # `crs extract` loads nothing for this data set either
            continue
        source = _load_or_none(entry, spec.extract.skip_bad)
        if source is None:
            rows.extend(_published_rows(entry, on_entry, spec, cores, measurements, notes, clean_only=False,
                                        corruption_rows=corruption_rows))
        else:
            variants = resolve_variants(source.modality, spec.extract.corruptions, spec.extract.severities)
            rows.extend(plan_dataset(source, on_entry, spec.cache, variants, cores, measurements, corruption_rows,
                                     spec.extract.batch_size, spec.extract.chunk_rows, spec.extract.precision))
        for target_entry in entry.shift_targets:
            target = _load_or_none(target_entry, spec.extract.skip_bad)
            if target is None or source is None:
                rows.extend(_published_rows(target_entry, on_entry, spec, cores, measurements, notes, clean_only=True))
                continue
            from crs.data.shift import shift_target_dataset

            rows.extend(plan_dataset(shift_target_dataset(target, source), on_entry, spec.cache, (), cores,
                                     measurements, None, spec.extract.batch_size, spec.extract.chunk_rows,
                                     spec.extract.precision))
    if corruption_rows is not None:
        origin = "the spec's [extract] corruption_rows" if corruption_rows == spec.extract.corruption_rows \
            else "a what-if (set [extract] corruption_rows to extract it)"
        notes.append(f"corrupted variants for a patient-level subsample of about {corruption_rows:,} test images per "
                     f"data set ({origin}); stage 2 evaluates corruptions on those rows and the bootstrap "
                     "draws them with the same patients")
    left_out = tuple(dict.fromkeys(note.split(":")[0] for note in notes if note.endswith("; not planned")))
    rows = with_disk_bytes(rows, spec.extract.batch_size, spec.extract.chunk_rows, block_size(Path(spec.cache)))
    return ExtractPlan(tuple(rows), str(spec.cache), free_bytes(spec.cache), cores, tuple(notes), left_out)


def with_disk_bytes(rows: Sequence[PlanRow], batch_size: int, chunk_cap: int, block: int) -> list[PlanRow]:
    """Each row not counted from a store (a data set planned from its published size) with
    ``disk_bytes_to_write``: its arrays' chunks as stage 1 sizes them
    (:func:`crs.extract.chunking.chunk_rows_for`, every encoder of the data set together) counted in
    whole file-system blocks with their checksum and flag files (:func:`crs.extract.disk.array_bytes`),
    in proportion to the passes still to go. A pre-run check judged on raw feature bytes passes a disk
    that fills during the run where chunks are small (issue 41)."""
    encoders: dict[str, int] = {}
    for row in rows:
        encoders[row.dataset] = encoders.get(row.dataset, 0) + 1
    out = []
    for row in rows:
        if row.disk_bytes_to_write or not row.passes_to_go:  # counted from the store's own chunks already
            out.append(row)
            continue
        n_corrupt = row.corrupted_passes // row.variants if row.variants else 0
        arrays = [row.images, *([n_corrupt] * row.variants)]
        chunks = chunk_rows_for(arrays, batch_size, chunk_cap, encoders[row.dataset])
        total = sum(array_bytes(n, c, row.dim, range(-(-n // c)), block, exists=False)
                    for n, c in zip(arrays, chunks, strict=True) if n)
        share = row.passes_to_go / row.passes if row.passes else 0.0
        out.append(replace(row, disk_bytes_to_write=int(np.ceil(total * share))))
    return out


def _load_or_none(entry: DatasetEntry, skip_bad: bool) -> Dataset | None:
    """The data set as ``crs extract`` loads it, or None when its root is not on this machine."""
    if not Path(entry.root).exists() and entry.loader != "synthetic":
        return None
    return load_entry(entry, **({"skip_bad": True} if skip_bad else {}))


def _published_rows(entry: DatasetEntry, specs: Sequence[EncoderSpec], spec: Spec, cores: int,
                    measurements: list[dict[str, Any]], notes: list[str], clean_only: bool,
                    corruption_rows: int | None = None) -> list[PlanRow]:
    size = PUBLISHED_SIZES.get(entry.loader)
    if size is None:
        notes.append(f"{entry.name}: data root {entry.root} not found and no published size for loader "
                     f"{entry.loader!r}; not planned")
        return []
    images, test_images, source = _published_counts(entry, size)
    notes.append(f"{entry.name}: data root {entry.root} not found; counts from the published size ({source})")
    variants = [] if clean_only else resolve_variants(size.modality, spec.extract.corruptions, spec.extract.severities)
    n_test = 0 if clean_only else test_images
    n_corrupt = n_test if corruption_rows is None or not variants else min(n_test, corruption_rows)
    return [_row(entry.name, s, images, n_test, len(variants), 0, cores, measurements, "published", None,
                 n_corrupt) for s in specs]


def _published_counts(entry: DatasetEntry, size: Any) -> tuple[int, int, str]:
    """Images and test images of a data set from its published size, honouring the entry's
    ``image_lists`` (official list files) and ``proportions`` (its test share) where they are given."""
    lists = [str(name) for name in entry.options.get("image_lists", ()) or ()]
    images, test, source = size.images, size.test_images, size.source
    if lists and all(name in size.lists for name in lists):
        images = sum(size.lists[name] for name in lists)
        source = f"{' + '.join(f'{name} {size.lists[name]:,}' for name in lists)} (image_lists)"
        test = min(test, images)
    proportions = entry.options.get("proportions")
    if proportions:
        test = round(images * float(proportions[-1]) / sum(float(p) for p in proportions))
    return images, test, source
