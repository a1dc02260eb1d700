"""Core encoder contract: create(), determinism, preprocessing, weights resolution, fingerprints."""

from __future__ import annotations

import math

import pytest
import timm
import torch
from safetensors.torch import save_file

import crs.encoders as encoders
from crs.encoders.baseline import PIXEL_STATS_DIM, PixelStats
from crs.encoders.preprocess import center_crop, preprocess, resize_size
from crs.encoders.registry import EncoderSpec, get_spec

DEMO = ["resnet18", "efficientnet_b0", "vit_tiny", "pixel_stats"]


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return torch.rand(2, 3, 72, 72, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", DEMO)
def test_demo_entries_embed_to_declared_dim_deterministically(name, images):
    size = None if name == "pixel_stats" else 64
    first = encoders.create(name, weights="random", input_size=size)
    second = encoders.create(name, weights="random", input_size=size)
    out = first.embed(images)
    assert out.dtype == torch.float32 and out.shape == (2, first.spec.dim)
    assert torch.isfinite(out).all()
    assert torch.equal(out, second.embed(images)), "random weights must be identical across builds"
    assert first.weights_digest == second.weights_digest


def test_available_lists_demo_entries_and_unknown_name_suggests_close_ones():
    assert set(DEMO) <= set(encoders.available())
    with pytest.raises(ValueError, match="did you mean resnet18"):
        encoders.create("resnet_18", weights="random")


def test_missing_weights_error_names_file_and_source(monkeypatch, tmp_path):
    monkeypatch.setenv("CRS_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(encoders.WeightsNotFoundError) as info:
        encoders.create("resnet18")
    message = str(info.value)
    assert "resnet18/model.safetensors" in message and "huggingface.co/timm/resnet18.a1_in1k" in message


def test_local_weights_from_weights_dir_load_and_change_the_digest(monkeypatch, tmp_path):
    # A timm-format checkpoint with its classifier, as on the hub; the headless net drops fc.* by rule.
    with torch.random.fork_rng():
        torch.manual_seed(123)
        reference = timm.create_model("resnet18", pretrained=False).eval()
    (tmp_path / "resnet18").mkdir()
    save_file(reference.state_dict(), str(tmp_path / "resnet18" / "model.safetensors"))
    monkeypatch.setenv("CRS_WEIGHTS_DIR", str(tmp_path))
    encoder = encoders.create("resnet18", input_size=64)
    assert len(encoder.weights_digest) == 64 and encoder.weights_digest != "random:0"
    x = torch.rand(1, 3, 64, 64)
    with torch.inference_mode():
        expected = reference.forward_head(reference.forward_features(encoder.preprocess(x)), pre_logits=True)
    torch.testing.assert_close(encoder.embed(x), expected)


def test_fingerprint_changes_with_input_size_and_weights():
    small = encoders.create("vit_tiny", weights="random", input_size=32).fingerprint_fields()
    large = encoders.create("vit_tiny", weights="random", input_size=64).fingerprint_fields()
    assert small["preprocessing"]["input_size"] == 32 and large["preprocessing"]["input_size"] == 64
    assert small != large
    assert {"source", "weights", "preprocessing", "pooling", "dtype"} <= set(small)


def test_preprocess_resize_crop_normalise_matches_hand_computation():
    # A constant image stays constant through any resize; crop keeps input_size; then (v - mean) / std.
    spec = get_spec("resnet18")  # 224 px, crop_pct 0.95 -> shorter side int(224 / 0.95) = 235
    assert resize_size(spec) == 235
    x = torch.full((1, 3, 100, 100), 0.6)
    out = preprocess(x, spec)
    assert out.shape == (1, 3, 224, 224)
    for channel in range(3):
        expected = (0.6 - spec.mean[channel]) / spec.std[channel]
        assert math.isclose(out[0, channel, 0, 0].item(), expected, rel_tol=1e-5)


def test_center_crop_offsets_follow_torchvision_rounding():
    x = torch.arange(25.0).view(1, 1, 5, 5)
    # (5 - 3) / 2 = 1 -> rows and columns 1..3
    assert torch.equal(center_crop(x, 3)[0, 0], x[0, 0, 1:4, 1:4])


def test_preprocess_equals_torchvision_eval_transform_on_random_images():
    from torchvision.transforms import v2

    spec = get_spec("vit_tiny")
    x = torch.rand(2, 3, 300, 260, generator=torch.Generator().manual_seed(0))
    reference = v2.Compose([
        v2.Resize(resize_size(spec), interpolation=v2.InterpolationMode.BICUBIC, antialias=True),
        v2.CenterCrop(spec.input_size), v2.Normalize(spec.mean, spec.std)])
    torch.testing.assert_close(preprocess(x, spec), reference(x), atol=1e-4, rtol=1e-4)


def test_pixel_stats_golden_values():
    # Left half 0.0, right half 1.0 on an 8x8 image with a 4x4 grid of 2x2 cells: each cell is
    # uniform, so cell means are 0 or 1 and stds 0; the histogram puts half the pixels in bin 0 and
    # half in the last bin (value 1.0 is clamped into bin 7).
    x = torch.zeros(1, 3, 8, 8)
    x[..., 4:] = 1.0
    features = PixelStats()(x)
    assert features.shape == (1, PIXEL_STATS_DIM) == (1, 120)
    means = features[0, :48].view(3, 4, 4)
    assert torch.equal(means[0], torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 4))
    assert torch.equal(features[0, 48:96], torch.zeros(48))
    histogram = features[0, 96:].view(3, 8)
    assert torch.equal(histogram[:, 0], torch.full((3,), 0.5)) and torch.equal(histogram[:, 7], torch.full((3,), 0.5))


def test_spec_validation_names_the_bad_field():
    good = get_spec("resnet18")
    with pytest.raises(ValueError, match="crop_pct"):
        EncoderSpec(**{**good.__dict__, "crop_pct": 1.5})
    with pytest.raises(ValueError, match="source"):
        EncoderSpec(**{**good.__dict__, "source": "nowhere:thing"})


def test_add_encoder_example_runs_end_to_end():
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "add_encoder.py"
    result = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=120,
                            env={"OMP_NUM_THREADS": "1", "PATH": "", "PYTHONPATH": str(example.parents[1])})
    assert result.returncode == 0, result.stderr
    assert "features (4, 32) torch.float32" in result.stdout and "'input_size': 96" in result.stdout
