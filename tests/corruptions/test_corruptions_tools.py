"""Calibration metrics, the CLI group, the grid picture and the benchmark entry point."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from crs.cli.corruptions import corruptions
from crs.corruptions import suite
from crs.corruptions.calibration import calibration_table, markdown, psnr, ssim
from crs.corruptions.scenes import scenes


def test_psnr_golden():
    # every pixel off by 0.1: MSE 0.01, PSNR = 10 log10(1 / 0.01) = 20 dB
    clean = torch.full((1, 3, 4, 4), 0.5)
    assert float(psnr(clean, clean + 0.1)) == pytest.approx(20.0)


def test_ssim_matches_scikit_image():
    metrics = pytest.importorskip(
        "skimage.metrics", reason="scikit-image (a test reference) is not installed"
    )
    clean = scenes("fundus", 1, 48)
    noisy = (clean.float() + 20 * torch.randn(clean.shape, generator=torch.Generator().manual_seed(0))).clamp(
        0, 255
    )
    noisy = noisy.round().to(torch.uint8)
    reference = metrics.structural_similarity(
        clean[0].permute(1, 2, 0).numpy(),
        noisy[0].permute(1, 2, 0).numpy(),
        channel_axis=2,
        data_range=255,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
    )
    assert float(ssim(clean, noisy)) == pytest.approx(reference, abs=1e-6)
    assert float(ssim(clean, clean)) == pytest.approx(1.0)


def test_calibration_table_covers_the_suite():
    images = scenes("fundus", 2, 32)
    rows = calibration_table(images, "fundus", ["a", "b"])
    assert len(rows) == 5 * len(suite("fundus"))
    assert all(0 < row.ssim <= 1 and row.psnr > 0 for row in rows)
    table = markdown(rows)
    assert "| uneven_illumination |" in table and table.count("\n|") >= len(suite("fundus")) + 1


def test_cli_list_json_names_every_suite():
    result = CliRunner().invoke(corruptions, ["list", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert [entry["name"] for entry in payload["modalities"]["chest_xray"]] == suite("chest_xray")
    assert CliRunner().invoke(corruptions, ["list"]).exit_code == 0


def test_cli_show_writes_a_grid(tmp_path):
    from PIL import Image

    image_path = tmp_path / "film.png"
    Image.fromarray(scenes("chest_xray", 1, 40)[0].permute(1, 2, 0).numpy()).save(image_path)
    out = tmp_path / "grid.png"
    result = CliRunner().invoke(
        corruptions, ["show", "chest_xray", "--image", str(image_path), "--out", str(out), "--size", "40"]
    )
    assert result.exit_code == 0, result.output
    with Image.open(out) as grid:
        assert grid.size[0] > 200 and grid.size[1] > 200
    bad = CliRunner().invoke(
        corruptions, ["show", "ultrasound", "--image", str(image_path), "--out", str(out)]
    )
    assert bad.exit_code != 0 and "chest_xray" in bad.output


def test_benchmark_runs_and_reports_a_ratio(capsys):
    from crs.bench.corruptions import run

    result = run(json_out=True, images=1, size=32)
    assert result.variants == 5 * len(suite("chest_xray")) and result.speedup > 0
    assert json.loads(capsys.readouterr().out)["variants"] == result.variants
