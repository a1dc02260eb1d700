"""The stages that never touch an image start without the libraries only extraction needs.

torchvision costs about 2 s to import (it loads ``torch._dynamo``), torch about 1.5 s, timm and
open_clip more: paid by every ``crs score`` and ``crs report`` process and by every stage of the
paper-scale bench, they were 3 x 7-15 s of its 15-encoder total. Each check runs in a fresh
interpreter, so what an earlier test imported does not count.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

EXTRACTION_ONLY = ("torchvision", "timm", "open_clip", "transformers")


@pytest.mark.parametrize("module, absent", [
    # Benchmark: each stage imports its own modules when run; scipy.stats (0.5 s) only where ranks are taken
    ("crs.benchmark", ("torch", "scipy.stats") + EXTRACTION_ONLY),
    # torch (about 2 CPU s a process) only where a corruption is applied or a unit is fitted: the probe
    # stage's own process (its units run in workers), the score and report stages never load it
    ("crs.evaluate.stage", ("torch",) + EXTRACTION_ONLY),
    ("crs.report", ("torch",) + EXTRACTION_ONLY),
    ("crs.report.grids", ("torch",) + EXTRACTION_ONLY),  # the report stage loads it to try the grids
    ("crs.data", ("torch",) + EXTRACTION_ONLY),  # listing and screening images; torch loads with load_image
    ("crs.data.images", ("torch",) + EXTRACTION_ONLY),
    ("crs.scoring.result", ("torch",) + EXTRACTION_ONLY),
    ("crs.scoring.case_bootstrap", ("torch",) + EXTRACTION_ONLY),
    ("crs.scoring.zero_shot", ("torch",) + EXTRACTION_ONLY),
    ("crs.cli.main", ("torch",) + EXTRACTION_ONLY),  # bench, corruptions, encoders, init: loaded when run
    ("crs.cli", ("torch",) + EXTRACTION_ONLY),
    ("crs.corruptions", ("torch",) + EXTRACTION_ONLY),  # the suites' definitions; torch loads with `apply`
    ("crs.corruptions.variants", ("torch",) + EXTRACTION_ONLY),
    ("crs.encoders", ("torch",) + EXTRACTION_ONLY),  # the registry; torch loads with `create`
    # what a stage-2 worker imports to run a torch-backend unit: scikit-learn, scipy.stats and scipy.signal
    # (about 2 CPU s per process, paid by each worker) only load where a backend or axis uses them
    ("crs.evaluate.units", ("sklearn", "scipy.stats", "scipy.signal") + EXTRACTION_ONLY),
])
def test_importing_leaves_the_extraction_libraries_unloaded(module, absent):
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]", f"importing {module} loaded {result.stdout.strip()}"


def test_a_corruption_still_loads_torchvision_when_it_runs():
    code = ("import sys, torch; from crs.corruptions import apply; "
            "apply(torch.rand(1, 3, 16, 16), 'dermoscopy', 'brightness_up', 3, ['a']); print('torchvision' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_reading_the_suites_and_the_registry_leaves_torch_unloaded():
    """What reports and the probe stage ask of the suites and the encoder registry, run, not just imported."""
    code = ("import sys; from crs.corruptions import MODALITIES, SUITE_VERSION, corruption, suite; "
            "from crs.corruptions.variants import resolve_variants; from crs.encoders import available, get_spec; "
            "from crs.evaluate.records import versions; "
            "[corruption(m, n).family for m in MODALITIES for n in suite(m)]; resolve_variants('dermoscopy', 'all', [1]); "
            "[get_spec(n).dim for n in available()]; v = versions(); "
            "print(sorted(m for m in ('torch', 'sklearn') if m in sys.modules)); import torch, sklearn; "
            "print(v['torch'] == torch.__version__, v['scikit-learn'] == sklearn.__version__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "True True"]


def test_the_lazy_names_are_the_real_ones():
    """``crs.corruptions.apply`` and ``crs.encoders.create`` (loaded on first access) are the functions
    themselves, every suite entry's operator is a function of ``crs.corruptions.ops``, and a typo fails."""
    import crs.corruptions as corruptions
    import crs.encoders as encoders
    from crs.corruptions import api, grid, ops
    from crs.encoders import factory

    assert corruptions.apply is api.apply and corruptions.apply_severities is api.apply_severities
    assert corruptions.apply_all is api.apply_all and corruptions.corruption_grid is grid.corruption_grid
    assert encoders.create is factory.create and encoders.create_text is factory.create_text
    assert set(corruptions.__all__) <= set(dir(corruptions)) and set(encoders.__all__) <= set(dir(encoders))
    for modality in corruptions.MODALITIES:
        for name in corruptions.suite(modality):
            spec = corruptions.corruption(modality, name)
            assert spec.operator is getattr(ops, spec.operator_name) and callable(spec.operator)
    with pytest.raises(AttributeError):
        corruptions.aply  # noqa: B018
    with pytest.raises(AttributeError):
        encoders.craete  # noqa: B018


def test_crs_help_lists_the_lazy_commands_without_importing_them():
    """``crs --help`` shows the same text as when every command is imported, and leaves torch unloaded."""
    code = ("import sys; from click.testing import CliRunner; from crs.cli.main import LAZY_COMMANDS, cli; "
            "light = CliRunner().invoke(cli, ['--help'], terminal_width=100).output; "
            "print(sorted(m for m in ('torch', 'crs.cli.bench') if m in sys.modules)); "
            "[cli.get_command(None, name) for name in LAZY_COMMANDS]; "
            "full = CliRunner().invoke(cli, ['--help'], terminal_width=100).output; "
            "print(light == full, 'bench' in light and 'status' in light)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "True True"]
