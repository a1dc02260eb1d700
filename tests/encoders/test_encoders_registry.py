"""Every registry entry builds with random weights, and its constants equal the source library's config."""

from __future__ import annotations

import gc
import json

import open_clip
import pytest
import timm
import torch
from click.testing import CliRunner

import crs.encoders as encoders
from crs.cli.encoders import encoders_group
from crs.encoders.catalog import BIOMEDCLIP_CONFIG
from crs.encoders.registry import PUBLIC_KEYS, get_spec

FAMILIES = [
    "resnet50", "vit_base", "clip_vit_b16", "dinov2_vit_b14", "mae_vit_b16", "siglip2_vit_b16",
    "biomedclip", "medsiglip_448", "medgemma_vision", "pubmedclip",
    "panderm", "monet", "retfound", "rad_dino", "chexzero",
]
LARGEST = {"medsiglip_448", "medgemma_vision"}  # so400m towers: ~30 s each to initialise on 2 cores


def small_input_size(spec) -> int | None:
    """A small input the architecture accepts: a multiple of the patch size (14, 16 or 32)."""
    if spec.source_kind == "baseline":
        return None
    patch14 = spec.name in {"dinov2_vit_b14", "medsiglip_448", "medgemma_vision", "rad_dino", "monet"}
    return 56 if patch14 else 64


def test_registry_has_the_fifteen_families_in_three_groups():
    names = set(encoders.available())
    assert set(FAMILIES) <= names
    groups = {get_spec(n).group for n in FAMILIES}
    assert groups == {"general", "medical", "specialty"}
    assert sum(get_spec(n).group == "general" for n in FAMILIES) == 6


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in LARGEST else n
                                  for n in sorted(set(FAMILIES) | {"resnet18", "efficientnet_b0", "vit_tiny", "pixel_stats"})])
def test_entry_builds_with_random_weights_and_embeds_to_declared_dim(name):
    spec = get_spec(name)
    encoder = encoders.create(name, weights="random", input_size=small_input_size(spec))
    x = torch.rand(1, 3, 72, 72, generator=torch.Generator().manual_seed(0))
    out = encoder.embed(x)
    assert out.shape == (1, spec.dim) and out.dtype == torch.float32
    assert torch.isfinite(out).all()
    assert encoder.weights_digest == ("baseline:pixel_stats:v1" if name == "pixel_stats" else "random:0")
    del encoder
    gc.collect()


TIMM_ENTRIES = [n for n in FAMILIES + ["resnet18", "efficientnet_b0", "vit_tiny"] if get_spec(n).source_kind == "timm"]


@pytest.mark.parametrize("name", TIMM_ENTRIES)
def test_timm_entries_match_timm_pretrained_cfg(name):
    spec = get_spec(name)
    cfg = timm.models.get_pretrained_cfg(spec.source_target)
    assert cfg is not None, f"timm does not know {spec.source_target}"
    assert spec.input_size == cfg.input_size[-1]
    assert spec.mean == tuple(cfg.mean) and spec.std == tuple(cfg.std)
    assert spec.interpolation == cfg.interpolation and spec.crop_pct == cfg.crop_pct
    assert spec.license == cfg.license


@pytest.mark.parametrize("name", ["clip_vit_b16", "siglip2_vit_b16"])
def test_open_clip_entries_match_open_clip_pretrained_cfg(name):
    spec = get_spec(name)
    model_name, pretrained = spec.source_target.split("/")
    cfg = open_clip.get_pretrained_cfg(model_name, pretrained)
    assert spec.mean == tuple(cfg["mean"]) and spec.std == tuple(cfg["std"])
    assert spec.interpolation == cfg["interpolation"]
    # open_clip "shortest" = resize shorter side to the input size, then centre crop (crop_pct 1)
    assert spec.resize_mode == cfg["resize_mode"] and spec.crop_pct == 1.0
    assert spec.input_size == open_clip.get_model_config(model_name)["vision_cfg"]["image_size"]


def test_clip_vit_b16_uses_quick_gelu_as_openai_trained_it():
    encoder = encoders.create("clip_vit_b16", weights="random", input_size=32)
    assert any(type(m).__name__ == "QuickGELU" for m in encoder.module.modules())


def test_biomedclip_mean_std_equal_its_open_clip_preprocess_cfg():
    spec = get_spec("biomedclip")
    assert spec.mean == tuple(BIOMEDCLIP_CONFIG["preprocess_cfg"]["mean"])
    assert spec.std == tuple(BIOMEDCLIP_CONFIG["preprocess_cfg"]["std"])
    assert spec.mean == open_clip.OPENAI_DATASET_MEAN and spec.std == open_clip.OPENAI_DATASET_STD


def test_transformers_entries_match_the_image_processor_defaults():
    transformers = pytest.importorskip("transformers")
    clip = transformers.CLIPImageProcessor()
    pubmedclip = get_spec("pubmedclip")
    assert pubmedclip.mean == tuple(clip.image_mean) and pubmedclip.std == tuple(clip.image_std)
    assert pubmedclip.input_size == clip.size["shortest_edge"] == clip.crop_size["height"]
    assert clip.resample == 3 and pubmedclip.interpolation == "bicubic"  # PIL.Image.BICUBIC == 3
    siglip = transformers.SiglipImageProcessor()
    for name in ("medsiglip_448", "medgemma_vision"):
        spec = get_spec(name)
        assert spec.mean == tuple(siglip.image_mean) and spec.std == tuple(siglip.image_std)
        assert spec.resize_mode == "squash"  # SiglipImageProcessor resizes to (size, size), no crop
    assert get_spec("monet").mean == tuple(transformers.image_utils.IMAGENET_DEFAULT_MEAN)
    assert get_spec("monet").std == tuple(transformers.image_utils.IMAGENET_DEFAULT_STD)


def test_specialty_constants_derived_by_hand():
    # RETFound/MAE eval transform: crop_pct = 224 / 256 = 0.875, so resize to int(224 / 0.875) = 256.
    assert get_spec("retfound").crop_pct == 224 / 256
    assert get_spec("retfound").mean == timm.data.IMAGENET_DEFAULT_MEAN
    # CheXzero normalises 0-255 films with mean 101.48761, std 83.43944: dividing both by 255
    # gives the same (x - m) / s on [0, 1] images.
    chexzero = get_spec("chexzero")
    assert chexzero.mean[0] * 255 == pytest.approx(101.48761) and chexzero.std[0] * 255 == pytest.approx(83.43944)
    assert chexzero.grayscale and chexzero.pre_resize == 320


def test_chexzero_preprocessing_on_a_constant_film():
    # A uniform grey film of value 0.5 (127.5 on 0-255) stays uniform through both resizes;
    # normalised: (127.5 - 101.48761) / 83.43944 = 0.31175...
    encoder = encoders.create("chexzero", weights="random")
    out = encoder.preprocess(torch.full((1, 3, 400, 400), 0.5))
    assert out.shape == (1, 3, 224, 224)
    assert out.mean().item() == pytest.approx((127.5 - 101.48761) / 83.43944, abs=1e-4)
    # grayscale: an image whose channels differ maps to identical channels (their mean)
    rgb = torch.stack([torch.full((64, 64), v) for v in (0.2, 0.5, 0.8)]).unsqueeze(0)
    out = encoder.preprocess(rgb)
    assert torch.allclose(out[:, 0], out[:, 2])


def test_every_entry_states_licence_and_pretraining_data():
    for spec in encoders.all_specs():
        assert spec.license, spec.name
        if spec.group not in ("baseline", "custom"):
            assert spec.pretraining_data, f"{spec.name} must list its pretraining data"
    flagged = {s.name for s in encoders.all_specs() if any("MIMIC-CXR" in d for d in s.pretraining_data)}
    assert {"rad_dino", "chexzero", "medsiglip_448"} <= flagged


def test_cli_list_json_carries_the_documented_keys():
    result = CliRunner().invoke(encoders_group, ["list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {row["name"] for row in rows} >= set(FAMILIES)
    for row in rows:
        assert set(PUBLIC_KEYS) <= set(row)


def test_cli_show_json_and_unknown_name():
    result = CliRunner().invoke(encoders_group, ["show", "rad_dino", "--json"])
    assert result.exit_code == 0
    row = json.loads(result.output)
    assert row["name"] == "rad_dino" and row["dim"] == 768 and row["mean"] == [0.5307] * 3
    result = CliRunner().invoke(encoders_group, ["show", "rad-dino"])
    assert result.exit_code != 0 and "did you mean rad_dino" in result.output


def test_docs_table_lists_every_registry_entry():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "encoders.md").read_text()
    for spec in encoders.all_specs():
        if spec.group != "custom":
            assert f"| `{spec.name}` | {spec.group} | `{spec.source}` |" in text, spec.name
