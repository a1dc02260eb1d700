"""BiomedCLIP's and SigLIP 2's text towers built from local folders of random weights (tiny configs).

- BiomedCLIP: open_clip's hf-hub layout (``open_clip_config.json`` + ``open_clip_pytorch_model.bin``)
  with a BERT text encoder and its WordPiece ``vocab.txt`` beside the weights;
- SigLIP 2: a Hugging Face ``Siglip2Model`` folder (``save_pretrained``) with its tokenizer.

Each checks: the tokenizer is read from the folder (none there: refused in one line), logit scale and
bias come from the checkpoint (set to values no default has), and crs's text embedding equals the
library model's own forward (open_clip's ``encode_text``, transformers' ``get_text_features``).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from crs.encoders.factory import create_text
from crs.encoders.registry import EncoderSpec
from crs.encoders.text import TextTowerError

PROMPTS = ["a chest x-ray showing edema", "no effusion", "photo of a lesion"]
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "chest", "x", "-", "ray", "showing", "edema", "no",
         "effusion", "photo", "of", "lesion"]
EMBED = 16
BERT = {"model_type": "bert", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "vocab_size": len(WORDS), "max_position_embeddings": 64}


def _biomedclip_config(bert_path: str) -> dict:
    return {"model_cfg": {
        "embed_dim": EMBED,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
        "text_cfg": {"hf_model_name": bert_path, "hf_tokenizer_name": bert_path, "hf_model_pretrained": False,
                     "proj": "mlp", "pooler_type": "cls_last_hidden_state_pooler", "context_length": 24},
    }, "preprocess_cfg": {"mean": [0.5] * 3, "std": [0.5] * 3}}


def _biomedclip_spec(config: dict) -> EncoderSpec:
    return EncoderSpec(
        name="tiny_biomedclip", family="tiny", group="custom", source="open_clip:hf-hub:none/tiny-biomedclip",
        input_size=32, mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic", crop_pct=1.0,
        pooling="projected image embedding", dim=EMBED, license="n/a", build_options=(("open_clip_config", config),),
        text_tower=(("kind", "open_clip"), ("hf_text_config", BERT)))


def _bert_folder(folder):
    """A BERT config and a WordPiece vocabulary (BiomedBERT's layout: ``vocab.txt``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(BERT))
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    return folder


def test_biomedclip_text_tower_from_an_open_clip_hub_folder(tmp_path):
    import open_clip

    bert = _bert_folder(tmp_path / "bert")
    config = _biomedclip_config(str(bert))
    # the hub file spells the HF text options as older open_clip did (proj, pooler_type): crs reads both
    model_cfg = json.loads(json.dumps(config["model_cfg"]))
    text_cfg = model_cfg["text_cfg"]
    text_cfg["hf_proj_type"], text_cfg["hf_pooler_type"] = text_cfg.pop("proj"), text_cfg.pop("pooler_type")
    torch.manual_seed(0)
    model = open_clip.model.CustomTextCLIP(**model_cfg).eval()
    with torch.no_grad():
        model.logit_scale.fill_(math.log(42.0))
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "open_clip_config.json").write_text(json.dumps(config))
    torch.save(model.state_dict(), weights / "open_clip_pytorch_model.bin")
    spec = _biomedclip_spec(config)
    with pytest.raises(TextTowerError, match="tokenizer missing"):
        create_text(spec, weights / "open_clip_pytorch_model.bin")
    for name in ("vocab.txt", "tokenizer_config.json"):
        (weights / name).write_bytes((bert / name).read_bytes())

    text = create_text(spec, weights / "open_clip_pytorch_model.bin")
    assert text.link == "softmax" and text.logit_scale == pytest.approx(42.0, rel=1e-6) and text.logit_bias == 0.0
    assert "HF tokenizer" in text.load_summary and str(weights) in text.load_summary
    tokenizer = open_clip.tokenizer.HFTokenizer(str(weights), context_length=24)
    with torch.inference_mode():
        expected = model.encode_text(tokenizer(PROMPTS), normalize=True).numpy()
    np.testing.assert_allclose(text.encode(PROMPTS), expected, atol=1e-5)


def test_siglip2_text_tower_from_a_transformers_folder(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import Siglip2Config, Siglip2Model

    small = {"hidden_size": EMBED, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = Siglip2Config(text_config={**small, "vocab_size": len(WORDS), "max_position_embeddings": 16,
                                        "projection_size": EMBED},
                           vision_config={**small, "num_patches": 4, "patch_size": 16})
    torch.manual_seed(0)
    model = Siglip2Model(config).eval()
    with torch.no_grad():
        model.logit_scale.fill_(math.log(7.5))
        model.logit_bias.fill_(-3.25)
    folder = tmp_path / "siglip2"
    model.save_pretrained(folder)
    spec = EncoderSpec(
        name="tiny_siglip2", family="tiny", group="custom", source="hf:none/tiny-siglip2", input_size=32,
        mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bilinear", crop_pct=1.0, pooling="pooler_output", dim=EMBED,
        license="n/a", text_tower=(("kind", "hf"), ("hf_class", "Siglip2TextModel"), ("hf_config_class", "Siglip2TextConfig"),
                                   ("output", "pooler_output"), ("link", "sigmoid"), ("padding", "max_length"),
                                   ("max_length", 16)))
    with pytest.raises(TextTowerError, match="tokenizer missing"):
        create_text(spec, folder)
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "[PAD]", "unk_token": "[UNK]"}))

    text = create_text(spec, folder)
    assert text.link == "sigmoid"
    assert text.logit_scale == pytest.approx(7.5, rel=1e-6) and text.logit_bias == pytest.approx(-3.25, abs=1e-6)
    from transformers import AutoTokenizer

    batch = AutoTokenizer.from_pretrained(folder)(PROMPTS, padding="max_length", max_length=16, return_tensors="pt")
    with torch.inference_mode():
        expected = model.get_text_features(input_ids=batch["input_ids"])
        expected = getattr(expected, "pooler_output", expected)
    expected = torch.nn.functional.normalize(expected, dim=-1).numpy()
    np.testing.assert_allclose(text.encode(PROMPTS), expected, atol=1e-5)
