"""Zero-shot inputs: prompt files, text towers and tokenisation; bad input is one line and the cache is untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crs.data.base import Task
from crs.data.prompts import PromptSetError, builtin_prompt_set, load_prompt_set
from crs.encoders import get_spec
from crs.encoders.factory import create_text
from crs.encoders.text import TextTowerError, zero_shot_support

TASK = Task("t", "multiclass", ("cat", "dog"))


def write(tmp_path, text):
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_prompt_file_expands_templates_and_hash_follows_content(tmp_path):
    a = load_prompt_set(write(tmp_path, 'templates = ["a {}.", "{}"]\n[classes]\ncat = ["cat"]\ndog = ["dog", "puppy"]\n'), TASK)
    assert a.positive == (("a cat.", "cat"), ("a dog.", "dog", "a puppy.", "puppy"))
    b = load_prompt_set(write(tmp_path, '# a comment\ntemplates = ["a {}.", "{}"]\n[classes]\ncat = ["cat"]\ndog = ["dog", "puppy"]\n'), TASK)
    assert a.digest == b.digest  # layout and comments do not move the key
    c = load_prompt_set(write(tmp_path, 'templates = ["a {}."]\n[classes]\ncat = ["cat"]\ndog = ["dog"]\n'), TASK)
    assert c.digest != a.digest


@pytest.mark.parametrize("text, words", [
    ('[classes]\ncat = ["cat"]\n', "no prompts for classes ['dog']"),
    ('[classes]\ncat = ["cat"]\ndog = ["dog"]\nbird = ["bird"]\n', "names classes ['bird']"),
    ('templates = [""]\n[classes]\ncat = ["cat"]\ndog = ["dog"]\n', "empty"),
    ('templates = ["no slot"]\n[classes]\ncat = ["cat"]\ndog = ["dog"]\n', "exactly once"),
    ('[classes]\ncat = [" "]\ndog = ["dog"]\n', "empty"),
])
def test_bad_prompt_files_are_one_line(tmp_path, text, words):
    with pytest.raises(PromptSetError) as error:
        load_prompt_set(write(tmp_path, text), TASK)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_missing_prompt_file_is_one_line(tmp_path):
    with pytest.raises(PromptSetError, match="not found"):
        load_prompt_set(tmp_path / "nope.toml", TASK)


def test_multilabel_builtin_has_pairs_and_never_mixes_findings():
    task = Task("cxr", "multilabel", ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion"))
    prompts = builtin_prompt_set(task)
    assert len(prompts.positive) == len(prompts.negative) == 5


def test_image_only_and_medgemma_say_why_in_one_line():
    for name in ("resnet18", "medgemma_vision"):
        support = zero_shot_support(get_spec(name))
        assert not support.available and "\n" not in support.reason
        with pytest.raises(TextTowerError, match="cannot be scored zero-shot"):
            create_text(name, "random")
    assert "generative language model" in zero_shot_support(get_spec("medgemma_vision")).reason


def test_hf_entry_without_tokenizer_folder_is_refused(tmp_path):
    with pytest.raises(TextTowerError, match="tokenizer missing"):
        create_text("pubmedclip", "random")
    with pytest.raises(TextTowerError, match="does not exist"):
        create_text("pubmedclip", "random", tokenizer=tmp_path / "absent")


@pytest.mark.slow
def test_open_clip_real_tokenisation_and_the_exact_short_forward():
    """open_clip's BPE tokenizer from its wheel, random weights; cutting the padding is exact (causal mask)."""
    text = create_text("chexzero", "random")
    assert text.link == "softmax" and abs(text.logit_scale - 1 / 0.07) < 1e-6
    prompts = ["pleural effusion", "a chest x-ray showing no pulmonary edema."]
    embedded = text.encode(prompts)
    assert embedded.shape == (2, 512)
    np.testing.assert_allclose(np.linalg.norm(embedded, axis=1), 1.0, atol=1e-5)
    import open_clip

    from crs.encoders.open_clip_ import truncated_forward

    tokens = open_clip.tokenizer.SimpleTokenizer(context_length=77)(prompts)
    tower = text.embed_tokens.__closure__  # the module the tower wraps
    module = next(c.cell_contents for c in tower if isinstance(c.cell_contents, torch.nn.Module))
    with torch.inference_mode():
        np.testing.assert_allclose(truncated_forward(module, tokens).numpy(), module(tokens).numpy(), atol=2e-5)
    assert not np.allclose(embedded[0], embedded[1])
    # length buckets (a prompt set is cut into buckets of similar length) give each prompt its own embedding
    from crs.encoders.open_clip_ import BUCKET_PROMPTS, bucketed_forward

    many = [f"x-ray {'with ' * (i % 5)}{i}" for i in range(BUCKET_PROMPTS + 2)]
    tokens = open_clip.tokenizer.SimpleTokenizer(context_length=77)(many)
    with torch.inference_mode():  # against one forward of them all, itself exact against the full one above
        np.testing.assert_allclose(bucketed_forward(module, tokens).numpy(), truncated_forward(module, tokens).numpy(),
                                   atol=2e-5)
