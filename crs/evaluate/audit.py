"""The run's audit: skipped images, each task's shift targets and the drawn label-fraction ids
(training rows, and the validation rows that chose each probe's C), for checking and repeating a run."""

from __future__ import annotations

from typing import cast

from crs.cache.store import FeatureStore, store_path
from crs.evaluate.units import probe_settings, training_subsets, validation_subsets
from crs.spec import Spec


def audit_tables(spec: Spec) -> dict[str, object]:
    """Skipped images per data set and shift target, each task's shift targets (and, for a target
    relabelled by a label map, the classes scored on it: ``shift_label_maps``), and the drawn
    label-fraction ids per task and seed, for auditing and repeating a run.

    ``validation_fraction_ids`` (same layout as ``label_fraction_ids``) holds the validation rows that
    chose each probe's C when ``validation = "fraction"``; with ``"full"`` it is empty (every validation row).
    """
    settings = probe_settings(spec)
    skipped_images: dict[str, list[str]] = {}
    label_maps: dict[str, object] = {}
    overlaps: dict[str, object] = {}
    label_fraction_ids: dict[str, dict[str, dict[str, list[str]]]] = {}
    validation_fraction_ids: dict[str, dict[str, dict[str, list[str]]]] = {}
    shift_targets = {entry.name: list(entry.shift_target_names) for entry in spec.datasets}
    names = [entry.name for entry in spec.datasets]
    names += [target for entry in spec.datasets for target in entry.shift_target_names]
    for name in names:
        store = FeatureStore(store_path(spec.cache, name))
        skipped_images[name] = list(cast(list[str], store.root.attrs.get("skipped_images", [])))
        if "label_map" in store.root.attrs:  # a target relabelled by a label map: the classes scored on it
            label_maps[name] = store.root.attrs["label_map"]
        if "overlap" in store.root.attrs:  # images a target shares with its source: dropped, or kept and marked
            overlaps[name] = store.root.attrs["overlap"]
    for entry in spec.datasets:
        table = FeatureStore(store_path(spec.cache, entry.name)).read_table()
        train_ids = table.ids[table.indices("train")]
        val_ids = table.ids[table.indices("val")]
        subsets = training_subsets(table, settings)
        val_subsets = validation_subsets(table, settings)
        drawn: dict[str, dict[str, list[str]]] = {}
        drawn_val: dict[str, dict[str, list[str]]] = {}
        for number, (fraction, seed, rows) in enumerate(subsets):
            drawn.setdefault(str(seed), {})[str(fraction)] = train_ids[rows].tolist()
            if val_subsets is not None:
                drawn_val.setdefault(str(seed), {})[str(fraction)] = val_ids[val_subsets[number]].tolist()
        label_fraction_ids[entry.name] = drawn
        validation_fraction_ids[entry.name] = drawn_val
    return {
        "skipped_images": skipped_images,
        "shift_targets": shift_targets,
        "shift_label_maps": label_maps,
        "shift_overlaps": overlaps,
        "overlap_allowed": any(bool(o.get("allowed")) and o.get("n_overlapping") for o in overlaps.values()
                               if isinstance(o, dict)),
        "label_fraction_ids": label_fraction_ids,
        "validation_fraction_ids": validation_fraction_ids,
    }


