"""Loaders on tiny generated checkpoints in the real formats: prefixes, drops, missing and unexpected keys."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from importlib.metadata import EntryPoint

import pytest
import timm
import torch
from safetensors.torch import save_file

import crs.encoders as encoders
from crs.encoders import plugins, registry
from crs.encoders.checkpoint import CheckpointError, read_state_dict
from crs.encoders.registry import EncoderSpec, get_spec
from crs.encoders.timm_ import beit_to_timm

TINY_VIT = "vit_tiny_patch16_224"


def tiny_checkpoint_spec(**options) -> EncoderSpec:
    return EncoderSpec(
        name="tiny_ckpt", family="test", group="custom", source=f"checkpoint:{TINY_VIT}", input_size=32,
        mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic", crop_pct=1.0, pooling="CLS", dim=192,
        license="test", build_options=tuple(options.items()))


@pytest.fixture(scope="module")
def reference_vit() -> torch.nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(7)
        return timm.create_model(TINY_VIT, pretrained=False, num_classes=0, img_size=32).eval()


def mae_style(state: dict) -> dict:
    """Wrap like an MAE/RETFound checkpoint: {"model": {"module." + key: ...}} plus decoder weights."""
    wrapped = {f"module.{k}": v.clone() for k, v in state.items()}
    wrapped["module.decoder_embed.weight"] = torch.zeros(4, 4)
    wrapped["module.mask_token"] = torch.zeros(1, 1, 4)
    return {"model": wrapped, "epoch": 3}


RETFOUND_RULES = dict(wrapper_key="model", strip_prefixes=("module.",), drop_prefixes=("decoder", "mask_token"))


def test_prefixed_wrapped_checkpoint_loads_and_reproduces_the_reference(tmp_path, reference_vit):
    path = tmp_path / "ckpt.pth"
    torch.save(mae_style(reference_vit.state_dict()), path)
    encoder = encoders.create(tiny_checkpoint_spec(**RETFOUND_RULES), weights=path)
    assert "2 dropped" in encoder.load_summary
    x = torch.rand(2, 3, 32, 32)
    with torch.inference_mode():
        expected = reference_vit(encoder.preprocess(x))
    torch.testing.assert_close(encoder.embed(x), expected)
    assert encoder.weights_digest != "random:0" and len(encoder.weights_digest) == 64


def test_missing_key_is_an_error_naming_it(tmp_path, reference_vit):
    state = dict(reference_vit.state_dict())
    del state["blocks.0.attn.qkv.weight"]
    path = tmp_path / "missing.pth"
    torch.save(mae_style(state), path)
    with pytest.raises(CheckpointError, match=r"1 missing keys \[blocks.0.attn.qkv.weight\]"):
        encoders.create(tiny_checkpoint_spec(**RETFOUND_RULES), weights=path)


def test_unexpected_key_is_an_error_unless_a_rule_drops_it(tmp_path, reference_vit):
    path = tmp_path / "extra.safetensors"
    save_file({**reference_vit.state_dict(), "projector.weight": torch.zeros(3, 3)}, str(path))
    with pytest.raises(CheckpointError, match=r"1 unexpected keys \[projector.weight\]"):
        encoders.create(tiny_checkpoint_spec(), weights=path)
    encoder = encoders.create(tiny_checkpoint_spec(drop_prefixes=("projector",)), weights=path)
    assert "1 dropped" in encoder.load_summary


def test_unprefixed_keys_without_strip_rule_fail_loudly(tmp_path, reference_vit):
    path = tmp_path / "prefixed.pth"
    torch.save(mae_style(reference_vit.state_dict()), path)
    with pytest.raises(CheckpointError, match="missing keys"):
        encoders.create(tiny_checkpoint_spec(wrapper_key="model", drop_prefixes=("module.decoder", "module.mask")), weights=path)


def test_pickled_module_is_refused_by_weights_only_loading(tmp_path, reference_vit):
    path = tmp_path / "pickled.pth"
    torch.save(reference_vit, path)  # a whole pickled module: arbitrary code on load
    with pytest.raises(CheckpointError, match="weights_only=True"):
        read_state_dict(path)


def test_position_embeddings_are_resampled_for_another_input_size(tmp_path, reference_vit):
    path = tmp_path / "ckpt.pth"
    torch.save(mae_style(reference_vit.state_dict()), path)  # trained at 32 px: 2x2 patches + CLS
    encoder = encoders.create(tiny_checkpoint_spec(**RETFOUND_RULES), weights=path, input_size=64)
    assert encoder.module.pos_embed.shape == (1, 1 + 4 * 4, 192)
    assert encoder.embed(torch.rand(1, 3, 64, 64)).shape == (1, 192)


def test_beit_style_keys_convert_to_timm_layout():
    with torch.random.fork_rng():
        torch.manual_seed(3)
        vit = timm.create_model(TINY_VIT, pretrained=False, num_classes=0, img_size=32, init_values=0.1)
    state = vit.state_dict()
    for key in list(state):  # timm -> BEiT: split qkv bias into q and v biases (k bias is zero in BEiT)
        if key.endswith("attn.qkv.bias"):
            state[key] = state[key].clone()
            state[key][192:384] = 0
    beit = {}
    for key, value in state.items():
        if key.endswith("attn.qkv.bias"):
            beit[key.replace("qkv.bias", "q_bias")] = value[:192]
            beit[key.replace("qkv.bias", "v_bias")] = value[384:]
        else:
            beit[key.replace("ls1.gamma", "gamma_1").replace("ls2.gamma", "gamma_2")] = value
    back = beit_to_timm(beit)
    assert back.keys() == state.keys()
    assert all(torch.equal(back[k], state[k]) for k in state)


def test_open_clip_checkpoint_loads_visual_keys_and_drops_text_keys(tmp_path):
    reference = encoders.create("chexzero", weights="random", input_size=64)
    state = {f"visual.{k}": v + 0.01 for k, v in reference.module.state_dict().items()}
    state.update({"token_embedding.weight": torch.zeros(8, 4), "logit_scale": torch.tensor(1.0)})
    path = tmp_path / "best_64_5e-05_original_22000_0.864.pt"
    torch.save(state, path)
    loaded = encoders.create("chexzero", weights=path, input_size=64)
    assert "2 text-tower keys dropped" in loaded.load_summary
    for key, value in loaded.module.state_dict().items():
        assert torch.equal(value, state[f"visual.{key}"]), key


def tiny_hf_spec(base: str, config: dict, **extra) -> EncoderSpec:
    spec = get_spec(base)
    options = {**spec.options, "hf_config": config, **extra}
    dim = config.get("projection_dim", config["hidden_size"])
    return dataclasses.replace(spec, name=f"tiny_{base}", input_size=config["image_size"], dim=dim,
                               build_options=tuple(options.items()))


TINY_CLIP = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "patch_size": 8, "image_size": 32, "projection_dim": 16, "hidden_act": "quick_gelu"}


def test_transformers_folder_loads_and_mismatched_processor_config_is_refused(tmp_path):
    transformers = pytest.importorskip("transformers")
    spec = tiny_hf_spec("pubmedclip", TINY_CLIP)
    with torch.random.fork_rng():
        torch.manual_seed(11)
        model = transformers.CLIPVisionModelWithProjection(transformers.CLIPVisionConfig(**TINY_CLIP)).eval()
    model.save_pretrained(tmp_path / "folder")
    encoder = encoders.create(spec, weights=tmp_path / "folder")
    x = torch.rand(1, 3, 32, 32)
    with torch.inference_mode():
        expected = model(pixel_values=encoder.preprocess(x)).image_embeds
    torch.testing.assert_close(encoder.embed(x), expected)
    (tmp_path / "folder" / "preprocessor_config.json").write_text(json.dumps({"image_mean": [0.5, 0.5, 0.5]}))
    with pytest.raises(encoders.EncoderError, match="image_mean"):
        encoders.create(spec, weights=tmp_path / "folder")


def test_transformers_missing_weights_are_an_error(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = {k: v for k, v in TINY_CLIP.items() if k != "projection_dim"}
    transformers.CLIPVisionModel(transformers.CLIPVisionConfig(**config)).save_pretrained(tmp_path / "noproj")
    with pytest.raises(encoders.EncoderError, match="missing"):
        encoders.create(tiny_hf_spec("pubmedclip", TINY_CLIP), weights=tmp_path / "noproj")


def test_vision_tower_inside_a_larger_checkpoint_loads_by_prefix(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "patch_size": 8, "image_size": 32, "vision_use_head": False}
    spec = tiny_hf_spec("medgemma_vision", config)
    tower = transformers.SiglipVisionModel(transformers.SiglipVisionConfig(**config)).eval()
    folder = tmp_path / "medgemma"
    folder.mkdir()
    state = {f"vision_tower.{k}": v.contiguous() for k, v in tower.state_dict().items()}
    state["language_model.embed_tokens.weight"] = torch.zeros(4, 4)
    save_file(state, str(folder / "model-00001-of-00001.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma3", "vision_config": {**config, "model_type": "siglip_vision_model"}}))
    encoder = encoders.create(spec, weights=folder)
    assert "1 non-vision keys dropped" in encoder.load_summary
    x = torch.rand(1, 3, 32, 32)
    with torch.inference_mode():
        expected = tower(pixel_values=encoder.preprocess(x)).last_hidden_state.mean(dim=1)
    torch.testing.assert_close(encoder.embed(x), expected)


PLUGIN_SOURCE = textwrap.dedent('''
    import torch
    from crs.encoders import EncoderSpec

    class Moments(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x.mean(dim=(2, 3)), x.std(dim=(2, 3))], dim=1)

    def build(weights):
        return Moments(), {"input_size": 16, "mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0),
                           "resize_mode": "squash"}

    def specs():
        return [EncoderSpec(name="plugin_moments", family="moments", group="custom",
                            source="python:crs_test_plugin:build", input_size=224, mean=(0.5,) * 3,
                            std=(0.5,) * 3, interpolation="bilinear", crop_pct=1.0,
                            pooling="channel mean and std", dim=6, license="test")]
''')


def test_entry_point_plugin_with_python_source(tmp_path, monkeypatch):
    (tmp_path / "crs_test_plugin.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # leave no test entry behind
    point = EntryPoint(name="moments", value="crs_test_plugin:specs", group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [point] if group == plugins.ENTRY_POINT_GROUP else [])
    assert plugins.load_entry_points(force=True) == ["plugin_moments"]
    assert "plugin_moments" in encoders.available()
    encoder = encoders.create("plugin_moments")
    # The function's own preprocessing replaces the registered one, so it enters the fingerprint.
    assert encoder.spec.input_size == 16 and encoder.spec.mean == (0.0, 0.0, 0.0)
    assert encoder.fingerprint_fields()["preprocessing"]["input_size"] == 16
    assert encoder.weights_digest.startswith("state:")
    x = torch.full((2, 3, 40, 40), 0.25)
    torch.testing.assert_close(encoder.embed(x), torch.tensor([[0.25] * 3 + [0.0] * 3] * 2))
    sys.modules.pop("crs_test_plugin", None)
