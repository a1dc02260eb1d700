"""Run records (one row per encoder x task x label fraction x seed x condition) and seed aggregates.

Records are written to parquet with the spec and package versions embedded in the file's metadata,
so a table found later still says how it was made.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

KEY_COLUMNS = ["encoder", "task", "task_kind", "label_fraction", "seed", "condition", "corruption", "severity", "target"]
METRIC_COLUMNS = [
    "auroc", "ece", "ece_debiased", "brier", "nll", "kappa", "ordinal_auroc", "selected_C", "val_score", "n_train",
]  # fmt: skip


def crs_version() -> str:
    """The installed crs version (from the package metadata, so this module need not import crs)."""
    try:
        return metadata.version("crs")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def torch_version() -> str:
    """``torch.__version__`` (with its local part, e.g. ``+cu130``, which the package metadata lacks), read
    from ``torch/version.py`` without importing torch (about 2 CPU s, which the probe stage's own process
    does not otherwise pay: its units run in workers)."""
    import ast
    import importlib.util
    import sys

    if "torch" in sys.modules:
        return str(sys.modules["torch"].__version__)
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        try:
            tree = ast.parse((Path(spec.origin).parent / "version.py").read_text())
        except (OSError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)):
                return str(node.value.value)
    return metadata.version("torch")


def crs_commit() -> str:
    """The git commit of the crs source that runs (``+ local changes`` when its tracked files differ), or
    "" where crs is not a git checkout (an installed wheel). Deterministic: identical code, identical text."""
    import subprocess

    here = Path(__file__).resolve().parents[2]
    if not (here / ".git").exists():
        return ""
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        changed = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "crs"],
                                 capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    if commit.returncode:
        return ""
    return commit.stdout.strip() + (" + local changes" if changed.stdout.strip() else "")


def versions() -> dict[str, str]:
    import numpy

    return {
        "crs": crs_version(), "crs_commit": crs_commit(), "python": platform.python_version(),
        "numpy": numpy.__version__, "scikit-learn": metadata.version("scikit-learn"), "torch": torch_version(),
        "pandas": pd.__version__,
    }


def machine() -> dict[str, Any]:
    """Where stage 2 ran: architecture, system, cores and the BLAS library and kernel numbers went
    through (``OPENBLAS_CORETYPE`` picks the kernel; docs/reproducibility.md)."""
    import os

    from threadpoolctl import threadpool_info

    blas = [
        " ".join(str(part) for part in (info.get("internal_api"), info.get("version"), info.get("architecture")) if part)
        for info in threadpool_info() if info.get("user_api") == "blas"
    ]
    return {
        "architecture": platform.machine(), "system": f"{platform.system()} {platform.release()}",
        "cores": os.cpu_count(), "blas": "; ".join(sorted(set(blas))) or "unknown",  # sorted: not load order
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
    }


def combine(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate unit records in a stable order."""
    records = pd.concat(list(frames), ignore_index=True)
    return records.sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)


def seed_aggregate(records: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and n over seeds for every other key."""
    keys = [c for c in KEY_COLUMNS if c != "seed"]
    metrics = [c for c in METRIC_COLUMNS if c in records]
    grouped = records.groupby(keys, dropna=False, sort=True)[metrics]
    table = grouped.agg(["mean", "std", "count"])
    table.columns = [f"{metric}_{stat}" if stat != "count" else f"{metric}_n" for metric, stat in table.columns]
    return table.reset_index()


def write_parquet(frame: pd.DataFrame, path: Path, provenance: dict[str, Any]) -> None:
    """Write ``frame`` with ``provenance`` (spec, versions) in the parquet schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    metadata = dict(table.schema.metadata or {})
    metadata[b"crs"] = json.dumps(provenance, default=str).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table.replace_schema_metadata(metadata), tmp)
    tmp.replace(path)


def read_provenance(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata.get(b"crs", b"{}"))
