"""The built-in registry entries.

Every preprocessing constant below was checked against the source library's own configuration
where one exists offline (timm ``pretrained_cfg``, open_clip's pretrained preprocess config,
transformers image-processor defaults); ``tests/test_encoders_registry.py`` re-checks them. Facts
that only a model card or a paper states, and that could not be checked offline, say so in ``notes``.
"""

from __future__ import annotations

from crs.encoders.baseline import PIXEL_STATS_DIM
from crs.encoders.registry import EncoderSpec, register

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_1K = ("ImageNet-1k",)

# --- small entries for CPU demos and tests (random weights are fine) ---------------------------
DEMO = [
    EncoderSpec(
        name="resnet18", family="ResNet-18", group="general", source="timm:resnet18.a1_in1k",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=0.95,
        pooling="global average of the last stage", dim=512, license="apache-2.0",
        pretraining_data=IMAGENET_1K, notes="small demo entry; constants from timm pretrained_cfg"),
    EncoderSpec(
        name="efficientnet_b0", family="EfficientNet-B0", group="general", source="timm:efficientnet_b0.ra_in1k",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=0.875,
        pooling="global average of the last stage", dim=1280, license="apache-2.0",
        pretraining_data=IMAGENET_1K, notes="small demo entry; constants from timm pretrained_cfg"),
    EncoderSpec(
        name="vit_tiny", family="ViT-Ti/16", group="general",
        source="timm:vit_tiny_patch16_224.augreg_in21k_ft_in1k",
        input_size=224, mean=HALF, std=HALF, interpolation="bicubic", crop_pct=0.9,
        pooling="CLS token after the final norm", dim=192, license="apache-2.0",
        pretraining_data=("ImageNet-21k", "ImageNet-1k"), notes="small demo entry; constants from timm pretrained_cfg"),
    EncoderSpec(
        name="pixel_stats", family="pixel statistics", group="baseline", source="baseline:pixel_stats",
        input_size=64, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), interpolation="bilinear", crop_pct=1.0,
        resize_mode="squash", pooling="per-channel 4x4-grid mean and std + 8-bin histogram",
        dim=PIXEL_STATS_DIM, license="n/a", pretraining_data=(),
        notes="non-neural floor: no weights, no pretraining"),
]

for _spec in DEMO:
    register(_spec)
