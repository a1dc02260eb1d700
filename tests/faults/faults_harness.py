"""Shared pieces of the fault-injection suite: a tiny spec with many chunks, killable runs, store comparison.

Runs are forked from the test process (torch, timm and zarr are imported once; zarr resets its
I/O thread after a fork) and die by SIGKILL at a chosen file write: the n-th file zarr's
LocalStore puts, either after it lands ("after") or torn half-way through its temporary file
("torn", what a kill during ``write()`` leaves). Every write the extraction makes goes through
that one function: chunk data, checksums, flags, array and group metadata.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import traceback
from pathlib import Path

import numpy as np
import zarr

FAULT_SPEC = """
name = "faults"
cache = "{cache}"
output = "{output}"
encoders = ["pixel_stats", "resnet18"]

[encoder_defaults]
weights = "random"
input_size = 32

[extract]
batch_size = 16
chunk_rows = 8
corruptions = ["gaussian_noise", "jpeg"]
severities = [2]

[probe]
label_fractions = [1.0]
seeds = [0]
Cs = [1.0]

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "{data}"
options = {{ modality = "chest_xray", n_images = {n_images}, image_size = 32 }}
"""


def write_fault_spec(folder: Path, data: Path, cache: Path | None = None, n_images: int = 60) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.toml"
    path.write_text(FAULT_SPEC.format(cache=cache or folder / "cache", output=folder / "out", data=data,
                                      n_images=n_images))
    return path


def _install_kill_hook(kill_at: int | None, mode: str, count_file: Path | None) -> None:
    """Wrap zarr's LocalStore file write so the ``kill_at``-th write SIGKILLs this process."""
    import zarr.storage._local as local

    original = local._put
    calls = {"n": 0}
    counting = threading.Lock()  # zarr puts files from several threads at once

    def put(path: Path, value, exclusive: bool = False) -> int:
        with counting:
            calls["n"] += 1
            number = calls["n"]
            if count_file is not None:
                count_file.write_text(str(number))
        if number == kill_at:
            if mode == "torn":
                path.parent.mkdir(parents=True, exist_ok=True)
                data = bytes(value.as_buffer_like())
                with open(path.with_suffix(".torn0000.partial"), "wb") as handle:
                    handle.write(data[: len(data) // 2])
                    handle.flush()
            else:
                try:
                    original(path, value, exclusive)  # an exclusive put may refuse an existing file
                finally:
                    os.kill(os.getpid(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        return original(path, value, exclusive)

    local._put = put


def run_forked(spec_path: Path, kill_at: int | None = None, mode: str = "after",
               report: Path | None = None, shard: tuple[int, int] | None = None) -> int:
    """Run stage 1 of ``spec_path`` in a forked child; return its raw wait status.

    The child writes its ExtractStats (and, without a kill, the number of file writes) to ``report``.
    """
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            count_file = report.with_suffix(".writes") if report is not None else None
            _install_kill_hook(kill_at, mode, count_file)
            from crs.spec import load_spec

            spec = load_spec(spec_path)
            stats = extract_spec(spec, shard)
            if report is not None:
                report.write_text(json.dumps({
                    "forward": stats.forward_images, "chunks_written": stats.chunks_written,
                    "decoded": stats.images_decoded,
                }))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def extract_spec(spec, shard: tuple[int, int] | None = None):
    """Stage 1 of a one-data-set spec, with ``shard`` (what ``crs extract --shard`` does)."""
    from crs.corruptions.variants import resolve_variants
    from crs.data import load_entry
    from crs.extract.runner import ExtractStats, extract_dataset
    from crs.extract.stage import create_encoders

    stats = ExtractStats()
    encoders = create_encoders(spec)
    for entry in spec.datasets:
        dataset = load_entry(entry)
        variants = resolve_variants(dataset.modality, spec.extract.corruptions, spec.extract.severities)
        stats.merge(extract_dataset(dataset, encoders, spec.cache, variants, spec.extract.batch_size,
                                    spec.extract.chunk_rows, spec.extract.device, progress=False, shard=shard,
                                    corruption_rows_wanted=spec.extract.corruption_rows))
    return stats


def store_arrays(store: Path) -> dict[str, np.ndarray]:
    """Every array in a store (features, flags, checksums, table) by path, for bit-for-bit comparison."""
    root = zarr.open_group(str(store), mode="r")
    arrays = {}
    for name, node in root.members(max_depth=None):
        if isinstance(node, zarr.Array):
            arrays[name] = np.asarray(node[...])
    return arrays


def current_pointers(store: Path) -> dict[str, str | None]:
    root = zarr.open_group(str(store), mode="r")
    if "encoders" not in root:
        return {}
    return {name: group.attrs.get("current") for name, group in root["encoders"].groups()}


def assert_stores_identical(actual: Path, expected: Path) -> None:
    """Same arrays, same bytes (float16 compared as raw bits), same current fingerprints."""
    got, want = store_arrays(actual), store_arrays(expected)
    assert sorted(got) == sorted(want)
    for name, values in want.items():
        other = got[name]
        assert other.dtype == values.dtype and other.shape == values.shape, name
        if values.dtype == np.float16:
            assert np.array_equal(other.view(np.uint16), values.view(np.uint16)), f"{name} differs"
        else:
            assert np.array_equal(other, values), f"{name} differs"
    assert current_pointers(actual) == current_pointers(expected)
