"""Pretrained classifiers: the resize inside the model, declared inputs checked, timm / transformers / CLIP, LoRA.

Every model is built in the test itself with random weights (no download): a tiny timm ViT, a tiny transformers ViT
saved with ``save_pretrained``, a tiny open_clip model registered with ``open_clip.add_model_config``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.input_layer import InputLayer
from rsbench.archs.pretrained import Declared, pretrained_input_layer
from rsbench.archs.registry import build_classifier
from rsbench.certify.algorithm.smooth import Smooth
from rsbench.checkpoint import make_checkpoint, read_classifier, write_checkpoint
from rsbench.errors import ConfigError
from rsbench.models.conventions import check_convention, pixel_sigma
from tests.helpers import certify, rows

TINY_VIT = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 1, "num_heads": 2}
VIT_DECLARED = Declared("timm model vit", (32, 32), 1, (0.5,), (0.5,), "bicubic")


class MeanIntensity(nn.Module):
    """Logits ``[0, 8 * (mean pixel - 0.5)]``: any resolution, and unchanged by a nearest 2x upsampling."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=(1, 2, 3))
        return torch.stack([torch.zeros_like(mean), 8 * (mean - 0.5)], dim=1)


def test_a_plain_input_layer_spec_is_unchanged_so_old_checkpoints_still_load(smoke_checkpoint: Path) -> None:
    assert InputLayer("identity").spec() == {"kind": "identity", "mean": [], "std": []}
    classifier, saved = read_classifier(smoke_checkpoint, "smoke", num_classes=10, in_channels=1)
    assert "network" not in saved
    assert "resize" not in saved["input_layer"]
    assert classifier.signature() == {k: saved[k] for k in ("arch", "num_classes", "input_layer")}


def test_the_input_layer_resizes_repeats_then_normalizes() -> None:
    layer = InputLayer("normalize", [0.5] * 3, [0.25] * 3, resize=4, interpolation="nearest", channels=3)
    out = layer(torch.full((2, 1, 2, 2), 0.75))
    assert out.shape == (2, 3, 4, 4)
    torch.testing.assert_close(out, torch.ones(2, 3, 4, 4))  # (0.75 - 0.5) / 0.25, exact in binary
    assert layer.spec()["resize"] == [4, 4]
    assert layer.spec()["channels"] == 3
    assert InputLayer(**layer.spec()).spec() == layer.spec()  # a checkpoint's spec rebuilds the same layer
    with pytest.raises(ValueError, match="interpolation"):
        InputLayer(resize=4, interpolation="lanczos")


@pytest.mark.parametrize("factor", [1, 2, 8])
def test_a_radius_is_the_same_whatever_the_model_resolution(factor: int) -> None:
    """The noise is drawn at 28x28 and resized inside the model: a nearest upsampling by any factor keeps each
    noisy sample's mean pixel exactly up to float rounding, so the counts and the certificate are the same."""
    x = torch.full((1, 28, 28), 0.53)
    base = Classifier("mean", MeanIntensity(), InputLayer("identity"))
    resized = Classifier("mean", MeanIntensity(), InputLayer("identity", resize=28 * factor, interpolation="nearest"))
    smooth = [Smooth(model, 2, 0.25).certify(x, 100, 2000, 0.001, 500, seed=3) for model in (base, resized)]
    assert smooth[0][0] == smooth[1][0] == 1
    # The radius depends only on the count of class-1 votes: equal counts give equal radii (up to float rounding).
    assert smooth[0][1] == pytest.approx(smooth[1][1], rel=1e-9)


def test_a_dataset_of_another_resolution_needs_the_resize_stated_with_the_number() -> None:
    with pytest.raises(ConfigError, match=r"images are 28x28 but timm model vit takes 32x32.*resize=32"):
        pretrained_input_layer(VIT_DECLARED, {}, [1, 28, 28])
    with pytest.raises(ConfigError, match=r"model.input_layer.resize=224 but timm model vit takes 32x32"):
        pretrained_input_layer(VIT_DECLARED, {"resize": 224}, [1, 28, 28])
    layer = pretrained_input_layer(VIT_DECLARED, {"resize": 32, "interpolation": "bilinear"}, [1, 28, 28])
    assert layer.spec() == {
        "kind": "normalize",
        "mean": [0.5],
        "std": [0.5],
        "resize": [32, 32],
        "interpolation": "bilinear",
        "antialias": False,
    }


def test_a_mismatched_normalization_or_channel_count_is_refused_naming_the_value() -> None:
    with pytest.raises(
        ConfigError, match=r"mean=\[0.485\] gives mean \[0.485\], but timm model vit declares mean=\[0.5\]"
    ):
        pretrained_input_layer(VIT_DECLARED, {"resize": 32, "mean": [0.485]}, [1, 28, 28])
    with pytest.raises(ConfigError, match=r"kind=identity gives mean \[0\], but .* declares mean=\[0.5\]"):
        pretrained_input_layer(VIT_DECLARED, {"resize": 32, "kind": "identity"}, [1, 28, 28])
    rgb = Declared("open_clip model x", (32, 32), 3, (0.48,) * 3, (0.27,) * 3)
    with pytest.raises(ConfigError, match=r"1 channel\(s\) but open_clip model x takes 3: .*channels=3"):
        pretrained_input_layer(rgb, {"resize": 32}, [1, 28, 28])
    assert pretrained_input_layer(rgb, {"resize": 32, "channels": 3}, [1, 28, 28]).spec()["channels"] == 3


def test_conventions_refuse_the_number_that_is_wrong() -> None:
    imagenet = {"kind": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    with pytest.raises(ConfigError, match=r"rrcm.*mean=0.5 .* the input layer's mean is \[0.485, 0.456, 0.406\]"):
        check_convention("rrcm", imagenet, 0.25)
    check_convention("rrcm", {"kind": "normalize", "mean": [0.5] * 3, "std": [0.5] * 3}, 0.25)
    with pytest.raises(ConfigError, match=r"model.sigma=0.3 is not a noise level of model.convention=multiscale"):
        check_convention("multiscale", imagenet, 0.3)
    with pytest.raises(
        ConfigError, match=r"sigma=2 looks like a level in the model's \[-1, 1\] range: in pixels it is 1"
    ):
        check_convention("dds", imagenet, 2.0)
    assert pixel_sigma(0.5, "dds") == 0.25
    with pytest.raises(ConfigError, match="not one of"):
        check_convention("cohen", imagenet, 0.25)


# ------------------------------------------------------------------------------------------------------ timm


@pytest.fixture(scope="module")
def timm_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny 1-channel ViT's random weights, saved as someone's fine-tuned state dict."""
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    network = timm.create_model("vit_tiny_patch16_224", num_classes=10, in_chans=1, **TINY_VIT)
    path = tmp_path_factory.mktemp("timm") / "vit.pt"
    torch.save(network.state_dict(), path)
    return path


def timm_overrides(weights: Path) -> list[str]:
    return [
        "model=timm",
        "model.name=vit_tiny_patch16_224",
        f"model.weights={weights}",
        "model.sigma=0.25",
        "+model.options={img_size:32,patch_size:8,embed_dim:32,depth:1,num_heads:2}",
    ]


def test_model_timm_certifies_embedded_mnist_resized_inside_the_model(timm_weights: Path, tmp_path: Path) -> None:
    metrics = certify(tmp_path, *timm_overrides(timm_weights), "model.input_layer.resize=32")
    assert metrics["num_images"] == 8
    model = metrics["model"]
    assert model["input_layer"]["resize"] == [32, 32]
    assert model["input_layer"]["interpolation"] == "bicubic"
    assert model["declared"]["size"] == [32, 32]
    assert model["declared"]["mean"] == [0.5]
    assert model["network"]["options"]["patch_size"] == 8


def test_model_timm_without_the_resize_is_refused_before_anything_is_written(
    timm_weights: Path, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match=r"28x28 but timm model vit_tiny_patch16_224 takes 32x32"):  # Hydra wraps it
        certify(tmp_path, *timm_overrides(timm_weights))
    assert not (tmp_path / "certify.tsv").exists()


def test_pretrained_true_never_downloads_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("timm")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *args, **kwargs: None)
    with pytest.raises(ConfigError, match=r"not in the local Hugging Face cache, and rsbench downloads nothing"):
        build_classifier(
            "timm",
            10,
            None,
            1,
            network={"kind": "timm", "name": "vit_tiny_patch16_224", "pretrained": True},
            image_shape=[1, 224, 224],
        )


def test_timm_weights_from_a_local_file_keep_a_head_of_the_dataset_classes(timm_weights: Path) -> None:
    spec = {"kind": "timm", "name": "vit_tiny_patch16_224", "options": TINY_VIT, "pretrained": str(timm_weights)}
    built = build_classifier("timm", 10, {"resize": 32}, 1, network=spec, image_shape=[1, 28, 28])
    saved = torch.load(timm_weights, weights_only=True)
    for key in ("head.weight", "patch_embed.proj.weight", "blocks.0.attn.qkv.weight"):
        torch.testing.assert_close(built[1].state_dict()[key], saved[key])
    assert built.network_spec is not None
    assert len(built.network_spec["pretrained"]["sha256"]) == 64


def test_lora_trains_only_adapters_and_head_and_a_checkpoint_rebuilds_it(timm_weights: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from rsbench.methods.lora import apply_lora

    spec = {"kind": "timm", "name": "vit_tiny_patch16_224", "options": TINY_VIT, "pretrained": str(timm_weights)}
    net = build_classifier("timm", 10, {"resize": 32}, 1, network=spec, image_shape=[1, 28, 28])
    x = torch.rand(4, 1, 28, 28)
    before = net.eval()(x)
    apply_lora("gaussian", net, {"r": 4, "alpha": 8, "targets": ["qkv"]})
    torch.testing.assert_close(net(x), before)  # B = 0: a fresh adapter changes nothing
    trainable = {name for name, p in net.named_parameters() if p.requires_grad}
    assert trainable == {
        "1.blocks.0.attn.qkv.lora_A.default.weight",
        "1.blocks.0.attn.qkv.lora_B.default.weight",
        "1.head.weight",
        "1.head.bias",
    }
    with torch.no_grad():
        for _name, parameter in net.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.1)
    path = write_checkpoint(make_checkpoint(net, 0.25, "gaussian"), tmp_path / "lora.ckpt")
    rebuilt, saved = read_classifier(path, "lora.ckpt", num_classes=10, in_channels=1)
    assert saved["network"]["lora"]["targets"] == ["blocks.0.attn.qkv"]
    torch.testing.assert_close(rebuilt.eval()(x), net(x))
    metrics = certify(tmp_path / "certify", f"model.path={path}")
    assert metrics["model"]["signature"]["network"]["lora"]["r"] == 4


def test_lora_is_refused_where_the_loss_or_the_network_does_not_allow_it(timm_weights: Path) -> None:
    pytest.importorskip("peft")
    from rsbench.archs.lenet import LeNet
    from rsbench.methods.lora import apply_lora

    spec = {"kind": "timm", "name": "vit_tiny_patch16_224", "options": TINY_VIT}
    net = build_classifier("timm", 10, {"resize": 32}, 1, network=spec, image_shape=[1, 28, 28])
    with pytest.raises(ConfigError, match="method=denoiser cannot fine-tune with LoRA"):
        apply_lora("denoiser", net, {})
    with pytest.raises(ConfigError, match=r"method.lora.targets=\['query'\] match no linear layer"):
        apply_lora("gaussian", net, {"targets": ["query"]})
    with pytest.raises(ConfigError, match="arch=lenet is trained in full"):
        apply_lora("gaussian", Classifier("lenet", LeNet(10, 1), InputLayer()), {})


def test_lora_fine_tuning_runs_through_python_m_rsbench(timm_weights: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from rsbench.runs.run import run
    from tests.helpers import SMOKE, compose_config

    cfg = compose_config(
        *SMOKE,
        "arch=timm",
        "arch.network.name=vit_tiny_patch16_224",
        "+arch.network.options={img_size:32,patch_size:8,embed_dim:32,depth:1,num_heads:2}",
        f"arch.network.pretrained={timm_weights}",
        "arch.input_layer.resize=32",
        "+lora=default",
        "method.lora.r=2",
        output_dir=tmp_path,
    )
    run(cfg)
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    signature = checkpoint["rsbench"]
    assert signature["network"]["lora"]["r"] == 2
    assert signature["network"]["pretrained"]["file"] == str(timm_weights)
    start = torch.load(timm_weights, weights_only=True)
    state = checkpoint["state_dict"]
    # the frozen base is the file's, untouched by training; the adapters moved
    torch.testing.assert_close(state["net.1.blocks.0.attn.qkv.base_layer.weight"], start["blocks.0.attn.qkv.weight"])
    assert state["net.1.blocks.0.attn.qkv.lora_B.default.weight"].abs().sum() > 0
    assert rows(tmp_path)


# ------------------------------------------------------------------------------------------ Hugging Face


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny transformers ViT (10 labels, 3 channels, 32x32) and its image processor, saved to a folder."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, num_labels=10,
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("hf") / "vit"
    transformers.ViTForImageClassification(config).save_pretrained(folder)
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def test_model_hf_certifies_with_its_processor_normalization(hf_folder: Path, tmp_path: Path) -> None:
    overrides = ["model=hf", f"model.path={hf_folder}", "model.sigma=0.25", "model.input_layer.resize=32"]
    metrics = certify(tmp_path, *overrides, "model.input_layer.channels=3")
    assert metrics["model"]["input_layer"]["mean"] == [0.5, 0.5, 0.5]  # ViTImageProcessor's image_mean
    assert metrics["model"]["input_layer"]["channels"] == 3
    with pytest.raises(Exception, match=r"1 channel\(s\) but .*preprocessor_config.json takes 3"):
        certify(tmp_path / "grey", *overrides)


def test_a_processor_on_another_input_range_is_refused_naming_it(hf_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    for file in hf_folder.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    processor = json.loads((folder / "preprocessor_config.json").read_text())
    (folder / "preprocessor_config.json").write_text(json.dumps({**processor, "rescale_factor": 1 / 127.5}))
    from rsbench.models.pretrained import hf

    with pytest.raises(ConfigError, match=r"rescale_factor=0.00784"):
        hf(str(folder), 0.25, 10, [3, 32, 32])


def test_an_hf_classifier_round_trips_through_a_checkpoint(hf_folder: Path, tmp_path: Path) -> None:
    spec = {"kind": "hf", "path": str(hf_folder)}
    net = build_classifier("hf", 10, {"resize": 32, "channels": 3}, 1, network=spec, image_shape=[1, 28, 28])
    path = write_checkpoint(make_checkpoint(net, 0.25, "gaussian"), tmp_path / "hf.ckpt")
    rebuilt, _ = read_classifier(path, "hf.ckpt", num_classes=10, in_channels=1)  # from the saved config alone
    x = torch.rand(3, 1, 28, 28)
    torch.testing.assert_close(rebuilt.eval()(x), net.eval()(x))


# ------------------------------------------------------------------------------------------------------ CLIP


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A tiny open_clip model (registered under a new name) and its random weights in a file."""
    open_clip = pytest.importorskip("open_clip")
    folder = tmp_path_factory.mktemp("clip")
    config = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }
    (folder / "rsbench-tiny-clip.json").write_text(json.dumps(config))
    open_clip.add_model_config(folder / "rsbench-tiny-clip.json")
    torch.manual_seed(0)
    model = open_clip.create_model("rsbench-tiny-clip")
    torch.save(model.state_dict(), folder / "weights.pt")
    return "rsbench-tiny-clip", folder / "weights.pt"


def test_a_zero_shot_clip_model_certifies_and_embeds_its_prompts_once(
    tiny_clip: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, weights = tiny_clip
    names = "[zero,one,two,three,four,five,six,seven,eight,nine]"
    overrides = [
        "model=clip",
        f"model.name={name}",
        f"model.pretrained={weights}",
        f"model.classnames={names}",
        "model.sigma=0.25",
        "model.input_layer.resize=32",
        "model.input_layer.channels=3",
        f"model.cache={tmp_path / 'text.pt'}",
        "+model.templates=['a photo of the digit {}.','a {}.']",
    ]
    metrics = certify(tmp_path / "first", *overrides)
    assert metrics["num_images"] == 8
    assert metrics["model"]["network"]["logit_scale"] == pytest.approx(1 / 0.07)
    assert metrics["model"]["declared"]["interpolation"] == "bicubic"
    import open_clip

    def no_text(*args: object, **kwargs: object) -> None:
        raise AssertionError("the class embeddings were computed again")

    monkeypatch.setattr(open_clip.model.CLIP, "encode_text", no_text)
    certify(tmp_path / "second", *overrides)  # the cache holds them
    assert rows(tmp_path / "second") == rows(tmp_path / "first")
    with pytest.raises(Exception, match="lists 3 names but the dataset has 10 classes"):
        certify(tmp_path / "third", *overrides[:3], "model.classnames=[a,b,c]", *overrides[4:])


# ---------------------------------------------------------------------------------------------------- the docs


def doc_commands() -> list[tuple[str, list[str]]]:
    """``(config, arguments)`` of every ``python -m rsbench[.certify]`` command in docs/pretrained_models.md."""
    import re
    import shlex

    from tests.helpers import ROOT

    text = (ROOT / "docs" / "pretrained_models.md").read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        match = re.match(r"\s*python -m (rsbench(?:\.certify)?) (.*)$", line)
        if match and "..." not in match.group(2) and "<" not in match.group(2):
            found.append(
                ("certify_model" if match.group(1).endswith("certify") else "config", shlex.split(match.group(2)))
            )
    return found


def test_the_docs_commands_are_valid_requests() -> None:
    from rsbench.runs.request import check_request

    commands = doc_commands()
    assert len(commands) >= 4  # timm, hf, clip, LoRA training
    for config, arguments in commands:
        check_request(arguments, config)
