"""`crs weights fetch SPEC` (issue 39, item 17) against a real HTTP server on 127.0.0.1 standing in for the
Hugging Face Hub (``HF_ENDPOINT``; tests/hub_server.py serves the URLs huggingface_hub requests).

The fetched ResNet-18 checkpoint is a real one (timm's architecture, random initialisation, saved as
safetensors): after the fetch, ``crs.encoders.create("resnet18")`` builds from it with no path given,
and its weights digest is the sha256 the fetch recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import FakeHub, FakeRepo, HangUp, closed_port_url

from crs.encoders.hub import hub_source, needs_weights
from crs.encoders.registry import all_specs, get_spec

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "feedc0de" * 5

SPEC = """
name = "fetch"
cache = "{root}/cache"
output = "{root}/out"
encoders = ["resnet18", "clip_vit_b16", "rad_dino", "pixel_stats", "chexzero", {{ name = "vit_tiny", weights = "random" }}]

[[datasets]]
name = "derm"
loader = "synthetic"
root = "{root}/data"
options = {{ modality = "dermoscopy", n_images = 40, image_size = 32 }}
"""


def _resnet18_checkpoint() -> bytes:
    import timm
    import torch
    from safetensors.torch import save

    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False, num_classes=0)
    return save({k: v.contiguous() for k, v in model.state_dict().items()})


def _crs(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crs", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


@pytest.fixture(scope="module")
def hub():
    checkpoint = _resnet18_checkpoint()
    repos = {
        "timm/resnet18.a1_in1k": FakeRepo({"model.safetensors": checkpoint, "pytorch_model.bin": b"not wanted"},
                                          commit=COMMIT),
        "timm/vit_base_patch16_clip_224.openai": FakeRepo({"open_clip_model.safetensors": b"clip bytes"}),
        "microsoft/rad-dino": FakeRepo({"config.json": b'{"model_type": "dinov2"}', "model.safetensors": b"dino",
                                        "pytorch_model.bin": b"the same weights again", "README.md": b"card"}),
        "YukunZhou/RETFound_mae_natureCFP": FakeRepo({"RETFound_cfp_weights.pth": b"x"}, gated=True),
    }
    with FakeHub(repos) as server:
        yield server


@pytest.fixture
def env(tmp_path, hub):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "CRS_WEIGHTS"))}
    environment.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1",
                       HF_HUB_DISABLE_PROGRESS_BARS="1", CRS_WEIGHTS_DIR=str(tmp_path / "weights"),
                       PYTHONPATH=str(ROOT))
    return environment


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(root=tmp_path))
    return path


def test_fetch_puts_each_encoders_weights_where_crs_reads_them_with_digests(tmp_path, hub, env, spec, monkeypatch):
    result = _crs(["weights", "fetch", str(spec)], env)
    assert result.returncode == 0, result.stdout + result.stderr
    weights = tmp_path / "weights"
    record = json.loads((weights / "resnet18" / "crs-weights.json").read_text())
    served = hub.repos["timm/resnet18.a1_in1k"].files["model.safetensors"]
    assert record["repo"] == "timm/resnet18.a1_in1k" and record["revision"] == "main" and record["commit"] == COMMIT
    assert record["files"] == {"model.safetensors": {"sha256": hashlib.sha256(served).hexdigest(), "bytes": len(served)}}
    assert not (weights / "resnet18" / "pytorch_model.bin").exists()  # safetensors first, the pickle not fetched
    assert (weights / "clip_vit_b16" / "open_clip_model.safetensors").read_bytes() == b"clip bytes"
    dino = json.loads((weights / "rad_dino" / "crs-weights.json").read_text())
    assert sorted(dino["files"]) == ["config.json", "model.safetensors"]  # a model folder, no duplicate weights
    assert "chexzero: skipped: not on the Hugging Face Hub" in result.stdout
    assert "github.com/rajpurkarlab/CheXzero" in result.stdout
    assert "vit_tiny: skipped: weights = 'random'" in result.stdout
    assert "pixel_stats: skipped" in result.stdout
    assert "3 fetched" in result.stdout

    # crs reads them with no path given: the encoder builds from the fetched file, digest as recorded
    monkeypatch.setenv("CRS_WEIGHTS_DIR", str(weights))
    from crs.encoders import create
    from crs.encoders.locate import locate_weights

    assert locate_weights(get_spec("clip_vit_b16"), None) == weights / "clip_vit_b16" / "open_clip_model.safetensors"
    assert locate_weights(get_spec("rad_dino"), None) == weights / "rad_dino"
    encoder = create("resnet18")
    assert encoder.weights_digest == record["files"]["model.safetensors"]["sha256"]

    # a second fetch downloads nothing again and records the same digests
    asked = len([r for r in hub.requests if r[0] == "GET" and r[1].endswith("model.safetensors")])
    again = _crs(["weights", "fetch", str(spec), "--encoders", "resnet18"], env)
    assert again.returncode == 0, again.stderr
    assert len([r for r in hub.requests if r[0] == "GET" and r[1].endswith("model.safetensors")]) == asked
    assert json.loads((weights / "resnet18" / "crs-weights.json").read_text())["files"] == record["files"]


def test_a_gated_model_names_its_licence_and_the_page_to_accept_it(tmp_path, env):
    path = tmp_path / "gated.toml"
    path.write_text(SPEC.replace('"resnet18", "clip_vit_b16", "rad_dino", "pixel_stats", "chexzero", '
                                 '{{ name = "vit_tiny", weights = "random" }}', '"retfound"').format(root=tmp_path))
    result = _crs(["weights", "fetch", str(path)], env)
    assert result.returncode == 1
    assert "retfound" in result.stderr and "gated" in result.stderr
    assert "cc-by-nc-4.0" in result.stderr and "https://huggingface.co/YukunZhou/RETFound_mae_natureCFP" in result.stderr
    assert "HF_TOKEN" in result.stderr


@pytest.mark.parametrize("where", ["closed port", "hangs up"])
def test_an_unreachable_hub_is_one_line_after_one_try(tmp_path, env, spec, where):
    """No network: one connection, one line naming the endpoint, no download tried (issue 46, item 12).
    Before, huggingface_hub retried five times per file (about 100 s here) and then said each repository
    "holds none of" its files."""
    with HangUp() as hang_up:
        env["HF_ENDPOINT"] = closed_port_url() if where == "closed port" else hang_up.url
        result = _crs(["weights", "fetch", str(spec)], env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"crs: error: cannot reach the Hugging Face Hub at {env['HF_ENDPOINT']}")
    assert "a login node" in lines[0] and "HF_ENDPOINT" in lines[0]
    assert "holds none of" not in result.stdout + result.stderr
    assert not (tmp_path / "weights" / "resnet18").exists()  # no encoder's download was started
    if where == "hangs up":
        assert hang_up.connections == 1


def test_without_a_weights_folder_it_says_which_to_set(env, spec):
    del env["CRS_WEIGHTS_DIR"]
    result = _crs(["weights", "fetch", str(spec)], env)
    assert result.returncode == 2 and "CRS_WEIGHTS_DIR" in result.stderr and "--to" in result.stderr


def test_every_registry_entry_with_weights_says_where_they_come_from():
    for spec in all_specs():
        if not needs_weights(spec):
            continue
        source = hub_source(spec)
        if source is None:  # by hand: the registry names where
            assert spec.weights_url and spec.weights_file, spec.name
        else:
            assert source.repo.count("/") == 1 and source.revision, (spec.name, source)
            assert source.folder == (spec.source_kind == "hf")


def test_the_spec_crs_init_writes_and_the_docs_say_how_weights_arrive(tmp_path):
    from click.testing import CliRunner

    from crs.cli.main import cli

    from data_trees import build_folder

    build_folder(tmp_path / "site")
    written = tmp_path / "spec.toml"
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "site"), "--spec", str(written), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    text = written.read_text()
    assert "download once" not in text and "by themselves" not in text
    assert "crs weights fetch THIS_FILE" in text and "local files" in text
    docs = (ROOT / "docs" / "datasets.md").read_text()
    assert "by themselves" not in docs and "crs weights fetch" in docs
