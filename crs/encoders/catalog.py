"""The built-in registry entries.

Every preprocessing constant below was checked against the source library's own configuration
where one exists offline (timm ``pretrained_cfg``, open_clip's pretrained preprocess config,
transformers image-processor defaults); ``tests/test_encoders_registry.py`` re-checks them. Facts
that only a model card or a paper states, and that could not be checked offline, say so in ``notes``.
"""

from __future__ import annotations

from crs.encoders.registry import EncoderSpec, register

# the pixel_stats baseline's size (crs.encoders.baseline, which imports torch, builds it):
# 3 channels x 4 x 4 cells x (mean, std) + 3 channels x 8 histogram bins = 96 + 24
PIXEL_STATS_GRID = 4
PIXEL_STATS_BINS = 8
PIXEL_STATS_DIM = 3 * PIXEL_STATS_GRID ** 2 * 2 + 3 * PIXEL_STATS_BINS

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_1K = ("ImageNet-1k",)
OPEN_CLIP_TEXT = (("kind", "open_clip"),)
"""The text side of an open_clip entry: open_clip's own text tower from the same checkpoint."""
CLIP_TEXT_B = {"hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 8,
               "max_position_embeddings": 77, "vocab_size": 49408, "hidden_act": "quick_gelu"}

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

# --- the CRS-Bench families --------------------------------------------------------------------
# General-purpose (constants checked against timm pretrained_cfg / open_clip pretrained cfg).
GENERAL = [
    EncoderSpec(
        name="resnet50", family="ResNet-50", group="general", source="timm:resnet50.a1_in1k",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=0.95,
        pooling="global average of the last stage", dim=2048, license="apache-2.0", pretraining_data=IMAGENET_1K,
        notes="default CRS reference encoder; timm's test-time size is 288 px, crs uses the 224 px train size"),
    EncoderSpec(
        name="vit_base", family="ViT-B/16", group="general", source="timm:vit_base_patch16_224.augreg2_in21k_ft_in1k",
        input_size=224, mean=HALF, std=HALF, interpolation="bicubic", crop_pct=0.9,
        pooling="CLS token after the final norm", dim=768, license="apache-2.0",
        pretraining_data=("ImageNet-21k", "ImageNet-1k")),
    EncoderSpec(
        name="clip_vit_b16", family="CLIP ViT-B/16 (OpenAI)", group="general", source="open_clip:ViT-B-16/openai",
        input_size=224, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD, interpolation="bicubic", crop_pct=1.0,
        pooling="projected image embedding (CLS after ln_post, times proj)", dim=512, license="mit",
        pretraining_data=("OpenAI WIT-400M web image-text pairs",),
        notes="QuickGELU, as open_clip's 'openai' pretrained cfg sets", text_tower=OPEN_CLIP_TEXT),
    EncoderSpec(
        name="dinov2_vit_b14", family="DINOv2 ViT-B/14", group="general", source="timm:vit_base_patch14_dinov2.lvd142m",
        input_size=518, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=1.0,
        pooling="CLS token after the final norm", dim=768, license="apache-2.0", pretraining_data=("LVD-142M",)),
    EncoderSpec(
        name="mae_vit_b16", family="MAE ViT-B/16", group="general", source="timm:vit_base_patch16_224.mae",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=0.9,
        pooling="CLS token after the final norm", dim=768, license="cc-by-nc-4.0",
        pretraining_data=("ImageNet-1k (images only, self-supervised)",)),
    EncoderSpec(
        name="siglip2_vit_b16", family="SigLIP 2 ViT-B/16", group="general", source="open_clip:ViT-B-16-SigLIP2/webli",
        input_size=224, mean=HALF, std=HALF, interpolation="bicubic", crop_pct=1.0, resize_mode="squash",
        pooling="attention-pool (MAP) head output", dim=768, license="apache-2.0", pretraining_data=("WebLI",),
        notes="preprocessing from open_clip's pretrained cfg (squash resize); timm's cfg for the same weights says crop_pct 0.9",
        text_tower=(("kind", "open_clip"), ("link", "sigmoid"))),
]

BIOMEDCLIP_CONFIG = {
    # Copied from open_clip_config.json of microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224
    # (model card); the hub file itself cannot be read offline. Only the vision part is used.
    "model_cfg": {
        "embed_dim": 512,
        "vision_cfg": {"timm_model_name": "vit_base_patch16_224", "timm_model_pretrained": False,
                       "timm_pool": "", "timm_proj": "linear", "image_size": 224},
        "text_cfg": {"hf_model_name": "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract",
                     "proj": "mlp", "pooler_type": "cls_last_hidden_state_pooler", "context_length": 256},
    },
    "preprocess_cfg": {"mean": list(OPENAI_CLIP_MEAN), "std": list(OPENAI_CLIP_STD)},
}
SO400M = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "num_attention_heads": 16,
          "patch_size": 14}
HAI_DEF = "Health AI Developer Foundations terms of use"
BIOMEDBERT_CONFIG = {
    # BERT-base shape of microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract (model card; not verifiable
    # offline): a checkpoint of another shape is refused key by key when it is loaded.
    "model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512,
}
SO400M_TEXT = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "num_attention_heads": 16,
               "vocab_size": 32000, "max_position_embeddings": 64, "projection_size": 1152}

MEDICAL = [
    EncoderSpec(
        name="biomedclip", family="BiomedCLIP", group="medical",
        source="open_clip:hf-hub:microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224",
        input_size=224, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD, interpolation="bicubic", crop_pct=1.0,
        pooling="projected image embedding (CLS token, linear projection)", dim=512, license="mit",
        pretraining_data=("PMC-15M (PubMed Central figure-caption pairs)",),
        build_options=(("open_clip_config", BIOMEDCLIP_CONFIG),),
        notes="open_clip config copied from the hub repository; not verifiable offline",
        text_tower=(("kind", "open_clip"), ("hf_text_config", BIOMEDBERT_CONFIG))),
    EncoderSpec(
        name="medsiglip_448", family="MedSigLIP-448", group="medical", source="hf:google/medsiglip-448",
        input_size=448, mean=HALF, std=HALF, interpolation="bilinear", crop_pct=1.0, resize_mode="squash",
        pooling="pooler_output (attention-pool head)", dim=1152, license=HAI_DEF, gated=True,
        pretraining_data=("WebLI (SigLIP init)", "chest X-ray incl. MIMIC-CXR", "CT and MRI slices",
                          "dermatology", "ophthalmology", "histopathology"),
        build_options=(("hf_class", "SiglipVisionModel"), ("hf_config_class", "SiglipVisionConfig"),
                       ("hf_config", {**SO400M, "image_size": 448}), ("output", "pooler_output")),
        notes="config and processor (448 px squash, bilinear, 0.5/0.5) from the model card; not verifiable "
              "offline; a weights folder's preprocessor_config.json is checked against the spec at load time",
        text_tower=(("kind", "hf"), ("hf_class", "SiglipTextModel"), ("hf_config_class", "SiglipTextConfig"),
                    ("hf_config", SO400M_TEXT), ("output", "pooler_output"), ("link", "sigmoid"),
                    ("padding", "max_length"), ("max_length", 64))),
    EncoderSpec(
        name="medgemma_vision", family="MedGemma vision tower", group="medical", source="hf:google/medgemma-4b-it",
        input_size=896, mean=HALF, std=HALF, interpolation="bilinear", crop_pct=1.0, resize_mode="squash",
        pooling="mean of the final hidden states over patch tokens", dim=1152, license=HAI_DEF, gated=True,
        pretraining_data=("MedSigLIP medical data incl. MIMIC-CXR chest X-rays", "WebLI"),
        build_options=(("hf_class", "SiglipVisionModel"), ("hf_config_class", "SiglipVisionConfig"),
                       ("hf_config", {**SO400M, "image_size": 896, "vision_use_head": False}),
                       ("output", "mean_tokens"),
                       ("state_prefix", ("vision_tower.", "model.vision_tower."))),
        notes="SigLIP so400m tower without a pooling head, read out of the Gemma 3 checkpoint by key prefix; "
              "896 px and 0.5/0.5 from the model card, not verifiable offline",
        text_tower=(("unavailable", "MedGemma pairs this vision tower with a generative language model, not a "
                                    "contrastive text tower: no shared embedding space, so no zero-shot prototypes"),)),
    EncoderSpec(
        name="pubmedclip", family="PubMedCLIP", group="medical", source="hf:flaviagiammarino/pubmed-clip-vit-base-patch32",
        input_size=224, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD, interpolation="bicubic", crop_pct=1.0,
        pooling="image_embeds (projected CLS)", dim=512, license="mit",
        pretraining_data=("OpenAI WIT-400M (CLIP init)", "ROCO (radiology image-caption pairs)"),
        build_options=(("hf_class", "CLIPVisionModelWithProjection"), ("hf_config_class", "CLIPVisionConfig"),
                       ("hf_config", {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                      "num_attention_heads": 12, "patch_size": 32, "image_size": 224,
                                      "projection_dim": 512, "hidden_act": "quick_gelu"}),
                       ("output", "image_embeds")),
        notes="CLIPImageProcessor defaults (checked); licence from the model card, not verifiable offline",
        text_tower=(("kind", "hf"), ("hf_class", "CLIPTextModelWithProjection"), ("hf_config_class", "CLIPTextConfig"),
                    ("hf_config", {**CLIP_TEXT_B, "projection_dim": 512}), ("output", "text_embeds"))),
]

SPECIALTY = [
    EncoderSpec(
        name="panderm", family="PanDerm ViT-L/16", group="specialty", source="checkpoint:vit_large_patch16_224",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=1.0,
        resize_mode="squash", pooling="mean of patch tokens, then the pretrained final norm", dim=1024,
        license="cc-by-nc-nd-4.0 (per repository; not verifiable offline)",
        pretraining_data=("2M+ dermatology images from 11 institutions incl. public ISIC archive (possible ISIC 2019 overlap)",),
        weights_file="panderm_ll_data6_checkpoint-499.pth", weights_url="https://github.com/SiyuanYan1/PanDerm",
        build_options=(("timm_kwargs", {"global_pool": "avg", "init_values": 0.1}),
                       ("strip_prefixes", ("module.", "encoder.", "model.")),
                       ("convert", "beit_to_timm"), ("rename_prefixes", (("norm.", "fc_norm."),)),
                       ("drop_prefixes", ("decoder", "regressor", "teacher", "mask_token", "lm_head", "pos_embed_dec"))),
        notes="CAE/BEiT-style ViT-L/16; checkpoint key layout, pooling and licence follow the repository "
              "and could not be checked offline: any key that does not match is reported, never skipped"),
    EncoderSpec(
        name="monet", family="MONET CLIP ViT-L/14", group="specialty", source="hf:suinleelab/monet",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=1.0,
        pooling="image_embeds (projected CLS)", dim=768, license="see model card (not verifiable offline)",
        pretraining_data=("OpenAI WIT-400M (CLIP init)", "105k dermatology image-text pairs from PubMed and textbooks"),
        build_options=(("hf_class", "CLIPVisionModelWithProjection"), ("hf_config_class", "CLIPVisionConfig"),
                       ("hf_config", {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                                      "num_attention_heads": 16, "patch_size": 14, "image_size": 224,
                                      "projection_dim": 768, "hidden_act": "quick_gelu"}),
                       ("output", "image_embeds")),
        notes="ImageNet mean/std (not CLIP's), as MONET's own preprocessing uses; from the MONET repository",
        text_tower=(("kind", "hf"), ("hf_class", "CLIPTextModelWithProjection"), ("hf_config_class", "CLIPTextConfig"),
                    ("hf_config", {**CLIP_TEXT_B, "hidden_size": 768, "intermediate_size": 3072,
                                   "num_attention_heads": 12, "projection_dim": 768}),
                    ("output", "text_embeds"))),
    EncoderSpec(
        name="retfound", family="RETFound (colour fundus)", group="specialty", source="checkpoint:vit_large_patch16_224",
        input_size=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", crop_pct=0.875,
        pooling="CLS token after the pretrained final norm", dim=1024, license="cc-by-nc-4.0", gated=True,
        pretraining_data=("904k colour fundus photographs (MEH-MIDAS and public sets; APTOS overlap not verifiable offline)",),
        weights_file="RETFound_cfp_weights.pth", weights_url="https://huggingface.co/YukunZhou/RETFound_mae_natureCFP",
        hub_repo="YukunZhou/RETFound_mae_natureCFP",
        build_options=(("wrapper_key", "model"), ("strip_prefixes", ("module.",)),
                       ("drop_prefixes", ("decoder", "mask_token"))),
        notes="MAE checkpoint: decoder and mask token dropped by rule; eval transform 256 -> 224 crop as in the MAE/RETFound code"),
    EncoderSpec(
        name="rad_dino", family="RAD-DINO", group="specialty", source="hf:microsoft/rad-dino",
        input_size=518, mean=(0.5307, 0.5307, 0.5307), std=(0.2583, 0.2583, 0.2583), interpolation="bicubic",
        crop_pct=1.0, pooling="pooler_output (layer-normed CLS)", dim=768, license="msrla",
        pretraining_data=("MIMIC-CXR", "CheXpert", "NIH ChestX-ray14", "PadChest", "BRAX"),
        build_options=(("hf_class", "Dinov2Model"), ("hf_config_class", "Dinov2Config"),
                       ("hf_config", {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                                      "patch_size": 14, "image_size": 518, "mlp_ratio": 4, "layerscale_value": 1.0}),
                       ("output", "pooler_output")),
        notes="processor (518 px, mean 0.5307, std 0.2583, bicubic) from the model card; not verifiable offline"),
    EncoderSpec(
        name="chexzero", family="CheXzero CLIP ViT-B/32", group="specialty", source="open_clip:ViT-B-32-quickgelu",
        input_size=224, mean=(101.48761 / 255,) * 3, std=(83.43944 / 255,) * 3, interpolation="bicubic",
        crop_pct=1.0, resize_mode="squash", grayscale=True, pre_resize=320,
        pooling="projected image embedding", dim=512, license="see repository (not verifiable offline)",
        pretraining_data=("OpenAI WIT-400M (CLIP init)", "MIMIC-CXR images and reports"),
        weights_file="best_64_5e-05_original_22000_0.864.pt", weights_url="https://github.com/rajpurkarlab/CheXzero",
        notes="films stored grayscale at 320 px, normalised with mean 101.48761 and std 83.43944 on the 0-255 "
              "scale (here divided by 255), then resized to 224 bicubic, as in CheXzero's zero_shot.py",
        text_tower=OPEN_CLIP_TEXT),
]

for _spec in GENERAL + MEDICAL + SPECIALTY:
    register(_spec)
