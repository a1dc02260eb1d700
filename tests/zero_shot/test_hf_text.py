"""The Hugging Face text towers (CLIP, SigLIP) with a tiny tokenizer made by the `tokenizers` library."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from crs.encoders.factory import create_text
from crs.encoders.registry import EncoderSpec
from crs.encoders.text import TextTowerError

WORDS = ["[PAD]", "[UNK]", "a", "chest", "x-ray", "showing", "no", "edema", "effusion", "photo", "of", "[EOS]"]
DIM = 16
TEXT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "vocab_size": len(WORDS), "max_position_embeddings": 16}


def tokenizer_folder(folder):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A [EOS]", special_tokens=[("[EOS]", len(WORDS) - 1)])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "[PAD]", "unk_token": "[UNK]", "eos_token": "[EOS]"}))
    return folder


def clip_spec() -> EncoderSpec:
    return EncoderSpec(
        name="tiny_hf_clip", family="tiny", group="custom", source="hf:none/tiny-clip", input_size=32,
        mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bilinear", crop_pct=1.0, pooling="image_embeds", dim=DIM,
        license="n/a", text_tower=(("kind", "hf"), ("hf_class", "CLIPTextModelWithProjection"),
                                   ("hf_config_class", "CLIPTextConfig"),
                                   ("hf_config", {**TEXT, "projection_dim": DIM, "eos_token_id": len(WORDS) - 1}),
                                   ("output", "text_embeds")))


def siglip_spec() -> EncoderSpec:
    return EncoderSpec(
        name="tiny_hf_siglip", family="tiny", group="custom", source="hf:none/tiny-siglip", input_size=32,
        mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bilinear", crop_pct=1.0, pooling="pooler_output", dim=DIM,
        license="n/a", text_tower=(("kind", "hf"), ("hf_class", "SiglipTextModel"), ("hf_config_class", "SiglipTextConfig"),
                                   ("hf_config", {**TEXT, "hidden_size": DIM, "projection_size": DIM}),
                                   ("output", "pooler_output"), ("link", "sigmoid"), ("padding", "max_length"),
                                   ("max_length", 16)))


def test_hf_clip_random_weights_with_a_generated_tokenizer(tmp_path):
    text = create_text(clip_spec(), "random", tokenizer=tokenizer_folder(tmp_path / "tok"))
    assert text.link == "softmax" and text.logit_bias == 0.0 and abs(text.logit_scale - 1 / 0.07) < 1e-6
    embedded = text.encode(["a chest x-ray showing edema", "a chest x-ray showing no edema", "photo of effusion"])
    assert embedded.shape == (3, DIM)
    np.testing.assert_allclose(np.linalg.norm(embedded, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(embedded[0], embedded[1])
    np.testing.assert_array_equal(embedded, text.encode(["a chest x-ray showing edema", "a chest x-ray showing no edema",
                                                         "photo of effusion"]))  # deterministic
    # padding to the longest prompt does not change a prompt's embedding (the attention mask holds)
    np.testing.assert_allclose(text.encode(["a chest x-ray showing edema"])[0], embedded[0], atol=1e-5)


def test_hf_siglip_random_weights_carry_the_sigmoid_scale_and_bias(tmp_path):
    text = create_text(siglip_spec(), "random", tokenizer=tokenizer_folder(tmp_path / "tok"))
    assert text.link == "sigmoid" and abs(text.logit_scale - 10.0) < 1e-9 and text.logit_bias == -10.0
    assert text.encode(["no edema"]).shape == (1, DIM)


def test_hf_clip_scale_comes_from_the_checkpoint_and_the_tokenizer_from_its_folder(tmp_path):
    from transformers import CLIPConfig, CLIPModel

    folder = tmp_path / "weights"
    config = CLIPConfig(text_config={**TEXT, "eos_token_id": len(WORDS) - 1},
                        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                       "num_attention_heads": 2, "image_size": 32, "patch_size": 16},
                        projection_dim=DIM)
    model = CLIPModel(config)
    with torch.no_grad():
        model.logit_scale.fill_(math.log(50.0))
    model.save_pretrained(folder)
    with pytest.raises(TextTowerError, match="tokenizer missing"):
        create_text(clip_spec(), folder)
    tokenizer_folder(folder)
    text = create_text(clip_spec(), folder)
    assert abs(text.logit_scale - 50.0) < 1e-3
    with torch.no_grad():
        ids = torch.tensor([[WORDS.index("no"), WORDS.index("edema"), len(WORDS) - 1]])
        expected = model.get_text_features(input_ids=ids)
        expected = getattr(expected, "pooler_output", expected)
    got = text.encode(["no edema"])[0]
    np.testing.assert_allclose(got, (expected / expected.norm(dim=-1, keepdim=True))[0].numpy(), atol=1e-5)
