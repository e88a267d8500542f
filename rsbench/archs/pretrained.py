"""Pretrained classifiers of the frontier as rsbench networks: timm, Hugging Face transformers, zero-shot CLIP.

Each network comes with what its own library declares about its input (:class:`Declared`: resolution, channels,
mean and std, interpolation, and where that was read), and :func:`pretrained_input_layer` builds the input layer from
it: the noise stays in [0,1] pixel space at the dataset's resolution, and the input layer resizes, repeats a grey
channel and normalizes after it. What the user states (``input_layer.*``) must agree with the declaration, and a
dataset whose images do not have the network's resolution needs ``input_layer.resize`` stated: every mismatch is
refused in one line naming the value (:class:`~rsbench.errors.ConfigError`), never certified silently.

A network is described by a plain ``spec`` (kind, name or config, options) that checkpoints keep in their signature
(``signature["network"]``), so :func:`rsbench.checkpoint.read_classifier` can rebuild it without the files it came
from: the weights in the checkpoint replace the initial ones. Nothing is ever downloaded unless ``download=true``.
timm, transformers and open-clip-torch are optional (``pip install 'rsbench[pretrained]'``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.input_layer import InputLayer
from rsbench.errors import ConfigError
from rsbench.loading import file_digest

INSTALL = "pip install 'rsbench[pretrained]'"
PIL_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic", 1: "area", 4: "area", 5: "area"}
"""Hugging Face image processors name PIL's resampling filters by number (4 box, 1 Lanczos, 5 Hamming)."""
TOLERANCE = 1e-4
"""How far a stated mean or std may be from the declared one (configs round them to 3-4 digits)."""


@dataclass(frozen=True)
class Declared:
    """What a pretrained network declares about its input.

    Attributes:
        source: where it was read (e.g. ``timm pretrained_cfg of vit_tiny_patch16_224``), named in refusals.
        size: the resolution ``(H, W)`` it takes, or ``None`` when any size works (a CNN).
        channels: the image channels it takes.
        mean: per-channel mean of its normalization ([0,1] pixels; all 0 when it has none).
        std: per-channel std of its normalization (all 1 when it has none).
        interpolation: the resize its own preprocessing uses (the default of ``input_layer.interpolation``).
    """

    source: str
    size: tuple[int, int] | None
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    interpolation: str = "bilinear"

    def record(self) -> dict[str, Any]:
        """JSON-safe, for ``metrics.json["model"]["declared"]``."""
        return {
            "source": self.source,
            "size": list(self.size) if self.size else None,
            "channels": self.channels,
            "mean": list(self.mean),
            "std": list(self.std),
            "interpolation": self.interpolation,
        }


def require(module: str, what: str) -> Any:
    """Import an optional library, or refuse in one line with the install command."""
    try:
        return __import__(module)
    except ImportError:
        raise ConfigError(f"{what} needs the {module} package: {INSTALL}") from None


def pretrained_input_layer(
    declared: Declared,
    stated: Mapping[str, Any] | None,
    image_shape: Sequence[int | None],
    where: str = "model.input_layer",
) -> InputLayer:
    """The input layer of a pretrained network: its declaration, with every stated value checked against it.

    Args:
        declared: what the network declares.
        stated: what the user stated (``kind``, ``mean``, ``std``, ``resize``, ``interpolation``, ``antialias``,
            ``channels``); ``None`` values take the declared ones. A saved signature's input layer is a full
            statement, so rebuilding a checkpoint checks it too.
        image_shape: the dataset's ``[C, H, W]``: the noise is added at this resolution (``H, W`` ``None`` when
            unknown: a checkpoint's input layer is rebuilt as saved).
        where: the config path named in refusals.

    Raises:
        ConfigError: a stated value differs from the declared one, or the dataset's images do not fit the network
            and no resize (or channel repeat) is stated; the message names the value and the fix.
    """
    given = {key: value for key, value in dict(stated or {}).items() if value is not None}
    channels = int(image_shape[0])  # type: ignore[arg-type]
    known = image_shape[1] is not None and image_shape[2] is not None  # unknown when rebuilt from a signature
    height, width = (int(image_shape[1]), int(image_shape[2])) if known else (0, 0)  # type: ignore[arg-type]
    size = _stated_size(given.get("resize"))
    if declared.size is not None:
        if size is None and known and (height, width) != declared.size:
            raise ConfigError(
                f"the dataset's images are {height}x{width} but {declared.source} takes {_shape(declared.size)}: "
                f"resize them inside the model, after the noise, with {where}.resize={_size_arg(declared.size)} "
                f"(interpolation {declared.interpolation}, the model's)"
            )
        if size is not None and size != declared.size:
            raise ConfigError(
                f"{where}.resize={_size_arg(size)} but {declared.source} takes {_shape(declared.size)}: "
                f"use {where}.resize={_size_arg(declared.size)}"
            )
    repeat = given.get("channels")
    seen = int(repeat) if repeat is not None else channels
    if repeat is not None and channels not in (1, int(repeat)):
        raise ConfigError(f"{where}.channels={repeat} repeats a grey channel, but the dataset's images have {channels}")
    if seen != declared.channels:
        fix = f"repeat the grey channel with {where}.channels={declared.channels}" if channels == 1 else "another model"
        raise ConfigError(
            f"the model input would have {seen} channel(s) but {declared.source} takes {declared.channels}: {fix}"
        )
    mean, std = _checked_normalization(declared, given, where)
    identity = all(abs(m) < 1e-12 for m in mean) and all(abs(s - 1) < 1e-12 for s in std)
    return InputLayer(
        kind="identity" if identity else "normalize",
        mean=None if identity else mean,
        std=None if identity else std,
        resize=None if size is None or (known and size == (height, width)) else size,
        interpolation=str(given.get("interpolation", declared.interpolation)),
        antialias=bool(given.get("antialias", False)),
        channels=int(repeat) if repeat is not None and int(repeat) != channels else None,
    )


def _checked_normalization(declared: Declared, given: Mapping[str, Any], where: str) -> tuple[list[float], list[float]]:
    """The declared mean and std, after checking the stated kind, mean and std against them."""
    mean, std = list(declared.mean), list(declared.std)
    kind = given.get("kind")
    if kind == "identity":
        stated_mean, stated_std = [0.0] * len(mean), [1.0] * len(std)
    elif kind == "center":
        stated_mean, stated_std = given.get("mean", mean), [1.0] * len(std)
    elif kind in (None, "normalize"):
        stated_mean, stated_std = given.get("mean", mean), given.get("std", std)
    else:
        raise ConfigError(f"{where}.kind={kind!r} is not one of normalize, center, identity")
    for name, have, want in (("mean", stated_mean, mean), ("std", stated_std, std)):
        values = [float(v) for v in have]
        if len(values) == 1 and len(want) > 1:
            values = values * len(want)
        if len(values) != len(want) or any(abs(a - b) > TOLERANCE for a, b in zip(values, want, strict=False)):
            shown = f"{where}.kind={kind}" if kind in ("identity", "center") and name not in given else None
            stated = shown or f"{where}.{name}={_numbers(values)}"
            raise ConfigError(
                f"{stated} gives {name} {_numbers(values)}, but {declared.source} declares {name}={_numbers(want)} "
                f"(its inputs are (x - mean) / std of [0,1] pixels): leave {where}.{name} unset to use the model's"
            )
    return mean, std


def _stated_size(resize: Any) -> tuple[int, int] | None:
    if resize is None:
        return None
    values = [int(resize)] if isinstance(resize, int) else [int(v) for v in resize]
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def _shape(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def _size_arg(size: tuple[int, int]) -> str:
    return str(size[0]) if size[0] == size[1] else f"[{size[0]},{size[1]}]"


def _numbers(values: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(v):.6g}" for v in values) + "]"


# ----------------------------------------------------------------------------------------------------------- timm


def timm_network(
    name: str,
    num_classes: int,
    in_chans: int = 3,
    options: Mapping[str, Any] | None = None,
    pretrained: bool | str | None = False,
    download: bool = False,
) -> tuple[nn.Module, Declared, dict[str, Any]]:
    """A ``timm.create_model`` network, what it declares, and its spec.

    Args:
        name: any ``timm.list_models()`` name, with an optional ``.tag`` (``vit_tiny_patch16_224.augreg_in21k``).
        num_classes: the number of logits (timm replaces a pretrained head of another size).
        in_chans: the channels of its input (timm adapts a pretrained first layer to another count).
        options: more ``create_model`` arguments (``img_size``, ``patch_size``, ``depth``, ``drop_path_rate``...).
        pretrained: ``False`` or ``None`` (timm's initialisation), ``True`` (timm's weights for ``name``, from the local
            Hugging Face cache) or a local weights file (``.safetensors``, ``.pth``, ``.bin``, ``.npz``)
            in timm's format.
        download: let timm download ``pretrained=True`` weights that are not in the cache.

    Raises:
        ConfigError: timm is missing, the name is unknown, or pretrained weights are not on this machine.
    """
    timm = require("timm", "arch=timm / model=timm")
    options = dict(options or {})
    if not timm.is_model(name.split(".")[0]):
        close = timm.list_models(f"*{name.split('.')[0].split('_')[0]}*")[:8]
        raise ConfigError(f"name={name!r} is not a timm model (timm {timm.__version__}); some that are: {close}")
    spec: dict[str, Any] = {"kind": "timm", "name": name, "in_chans": int(in_chans), "options": _plain(options)}
    overlay: dict[str, Any] = {}
    if isinstance(pretrained, str) and pretrained.lower() not in ("true", "false"):
        path = Path(pretrained).expanduser()
        if not path.is_file():
            raise ConfigError(f"pretrained={pretrained}: no such weights file")
        overlay = {"file": str(path), "custom_load": path.suffix == ".npz"}
        if _head_classes(timm, name, path) == num_classes:  # a head for these classes (your own weights): keep it
            overlay["num_classes"] = num_classes
        spec["pretrained"] = {"file": str(path), "sha256": file_digest(path)}
    elif pretrained is True or str(pretrained).lower() == "true":
        overlay = _timm_cached_weights(timm, name, download)
        spec["pretrained"] = {"name": name, **({"file": overlay["file"]} if "file" in overlay else {})}
    try:
        network = timm.create_model(
            name,
            pretrained=bool(overlay) or spec.get("pretrained") is not None,
            num_classes=num_classes,
            in_chans=in_chans,
            pretrained_cfg_overlay=overlay or None,
            **options,
        )
    except (TypeError, ValueError, RuntimeError, AssertionError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"timm cannot build {name!r} with options {_plain(options)}: {first}") from None
    return network, timm_declared(network, name, in_chans), spec


def _head_classes(timm: Any, name: str, path: Path) -> int | None:
    """The class count of the head in a timm weights file (``None``: no head found, or an ``.npz``)."""
    from timm.models import get_pretrained_cfg

    config = get_pretrained_cfg(name.split(".")[0])
    head = getattr(config, "classifier", None) or "head"
    if path.suffix == ".npz" or not isinstance(head, str):
        return None
    weights = timm.models.load_state_dict(str(path))
    found = weights.get(f"{head}.weight")
    return int(found.shape[0]) if isinstance(found, Tensor) else None


def _timm_cached_weights(timm: Any, name: str, download: bool) -> dict[str, Any]:
    """timm's pretrained weights for ``name`` from the local Hugging Face cache, as a ``pretrained_cfg`` overlay.

    Raises:
        ConfigError: they are not cached and ``download`` is false (one line: rsbench never downloads unasked).
    """
    from timm.models import get_pretrained_cfg

    config = get_pretrained_cfg(name)
    hub_id = getattr(config, "hf_hub_id", None) if config is not None else None
    if hub_id:
        hub = require("huggingface_hub", "timm pretrained weights")
        for filename in ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin"):
            found = hub.try_to_load_from_cache(hub_id, filename)
            if isinstance(found, str):
                return {"file": found, "custom_load": False}
    if download:
        return {}
    raise ConfigError(
        f"pretrained=true: timm's weights for {name!r} ({hub_id or 'no Hugging Face id'}) are not in the local Hugging "
        "Face cache, and rsbench downloads nothing unless model.download=true: pass a local file with "
        "pretrained=<path>, or download=true on a machine with internet"
    )


def timm_declared(network: nn.Module, name: str, in_chans: int) -> Declared:
    """What a timm network declares: ``pretrained_cfg`` mean/std/interpolation, and the size it takes.

    The size is the patch embedding's ``img_size`` when the network fixes one (ViTs: it follows ``img_size=``), else
    ``pretrained_cfg['input_size']`` when ``fixed_input_size``, else none (a CNN takes any size).
    """
    config = dict(getattr(network, "pretrained_cfg", None) or {})
    mean = tuple(float(v) for v in config.get("mean", (0.0,) * 3))
    std = tuple(float(v) for v in config.get("std", (1.0,) * 3))
    if len(mean) != in_chans:  # timm averages a pretrained first layer to fewer channels: the statistics follow
        mean, std = _channels(mean, in_chans), _channels(std, in_chans)
    size: tuple[int, int] | None = None
    embed = getattr(network, "patch_embed", None)
    fixed = embed is not None and getattr(embed, "strict_img_size", True) and not getattr(embed, "dynamic_img_size", 0)
    if embed is not None and getattr(embed, "img_size", None) is not None and fixed:
        size = (int(embed.img_size[0]), int(embed.img_size[1]))
    elif config.get("fixed_input_size") and config.get("input_size"):
        size = (int(config["input_size"][1]), int(config["input_size"][2]))
    interpolation = str(config.get("interpolation", "bilinear"))
    interpolation = interpolation if interpolation in ("bilinear", "bicubic", "nearest") else "bilinear"
    return Declared(f"timm model {name}", size, in_chans, mean, std, interpolation)


def _channels(values: Sequence[float], count: int) -> tuple[float, ...]:
    average = sum(values) / len(values)
    return tuple(values[:count]) if len(values) > count and count != 1 else (average,) * count


# ----------------------------------------------------------------------------------------------- Hugging Face


class HFLogits(nn.Module):
    """A transformers image-classification model as ``pixel_values -> logits``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        """The model's ``logits`` for a batch of pixel values."""
        return self.model(pixel_values=x).logits


def hf_network(
    path: str | None, num_classes: int, config: Mapping[str, Any] | None = None, new_head: bool = False
) -> tuple[HFLogits, Declared, dict[str, Any]]:
    """A transformers ``AutoModelForImageClassification`` from a local folder (or from a saved config).

    Args:
        path: a folder written by ``save_pretrained`` (``config.json``, weights, ``preprocessor_config.json``);
            nothing is downloaded. ``None`` rebuilds from ``config`` (a checkpoint's signature) with fresh weights.
        num_classes: the number of logits.
        config: a saved spec (its ``config``, the model's ``config.to_dict()``, and ``preprocessor``), to rebuild.
        new_head: give the model a new ``num_classes`` head when its own has another size (fine-tuning);
            otherwise a different class count is refused.

    Raises:
        ConfigError: transformers is missing, the folder is not a saved model, or the class count differs.
    """
    transformers = require("transformers", "model=hf / arch=hf")
    preprocessor: dict[str, Any] = dict((config or {}).get("preprocessor") or {})
    if path is not None:
        root = Path(path).expanduser()
        if not (root / "config.json").is_file():
            raise ConfigError(f"path={path}: not a saved transformers model (no config.json); nothing is downloaded")
        loaded = transformers.AutoConfig.from_pretrained(str(root), local_files_only=True)
        labels = int(getattr(loaded, "num_labels", num_classes))
        if labels != num_classes and not new_head:
            raise ConfigError(
                f"{path} has num_labels={labels} but the dataset has {num_classes} classes: fine-tune it "
                "(arch=hf, which gives it a new head) or certify it on a dataset with its classes"
            )
        model = transformers.AutoModelForImageClassification.from_pretrained(
            str(root), local_files_only=True, num_labels=num_classes, ignore_mismatched_sizes=labels != num_classes
        )
        if (root / "preprocessor_config.json").is_file():
            preprocessor = json.loads((root / "preprocessor_config.json").read_text())
        spec_config = model.config.to_dict()
    else:
        spec_config = dict((config or {}).get("config") or {})
        if "model_type" not in spec_config:
            raise ConfigError(
                "a transformers network is rebuilt from its saved config, and this one names no model_type"
            )
        rest = {k: v for k, v in spec_config.items() if k != "model_type"}
        built = transformers.AutoConfig.for_model(str(spec_config["model_type"]), **rest)
        model = transformers.AutoModelForImageClassification.from_config(built)
    spec = {"kind": "hf", "config": _plain(spec_config), "preprocessor": _plain(preprocessor)}
    if path is not None:
        spec["path"] = str(path)
    return HFLogits(model.eval()), hf_declared(model.config, preprocessor, str(path or "the checkpoint")), spec


def hf_declared(config: Any, preprocessor: Mapping[str, Any], where: str) -> Declared:
    """What a transformers model and its ``preprocessor_config.json`` declare.

    Raises:
        ConfigError: the processor maps pixels in a way an input layer cannot (a rescale other than 1/255, i.e. a
            model that takes another range than [0,1] before normalization), named with its value.
    """
    source = f"{where}/preprocessor_config.json" if preprocessor else f"{where}/config.json"
    channels = int(getattr(config, "num_channels", 3))
    if (
        preprocessor.get("do_rescale", True)
        and abs(float(preprocessor.get("rescale_factor", 1 / 255)) - 1 / 255) > 1e-6
    ):
        raise ConfigError(
            f"{source} has rescale_factor={preprocessor['rescale_factor']}: rsbench maps [0,1] pixels, which is "
            "rescale_factor=1/255 (0.00392157); a model on another input range needs its own input layer"
        )
    if preprocessor.get("do_rescale", True) is False:
        raise ConfigError(f"{source} has do_rescale=false: the model takes [0,255] pixels, which rsbench cannot feed")
    normalize = preprocessor.get("do_normalize", bool(preprocessor))
    mean = tuple(float(v) for v in preprocessor.get("image_mean", [0.0] * channels)) if normalize else (0.0,) * channels
    std = tuple(float(v) for v in preprocessor.get("image_std", [1.0] * channels)) if normalize else (1.0,) * channels
    image = getattr(config, "image_size", None)
    size: tuple[int, int] | None = None
    if image is not None:
        size = (int(image), int(image)) if isinstance(image, int) else (int(image[0]), int(image[1]))
    elif "height" in dict(preprocessor.get("size") or {}):
        size = (int(preprocessor["size"]["height"]), int(preprocessor["size"]["width"]))
    interpolation = PIL_RESAMPLE.get(int(preprocessor.get("resample", 2)), "bilinear")
    return Declared(source, size, channels, mean, std, interpolation)


# ------------------------------------------------------------------------------------------------------- CLIP

DEFAULT_TEMPLATES = ("a photo of a {}.",)


class ZeroShotCLIP(nn.Module):
    """CLIP's zero-shot classifier: ``logit_scale * normalize(image_features) @ normalize(class_embeddings).T``.

    The class embeddings (the mean over prompt templates of each class's normalized text embedding, normalized
    again: Radford et al. 2021's prompt ensembling, as open_clip's ``build_zero_shot_classifier``) are computed once
    when the classifier is built and kept as the weight of a bias-free ``head``; only the image tower stays.

    Args:
        visual: the image tower (``images -> features``).
        embeddings: ``[num_classes, dim]`` class embeddings (normalized).
        logit_scale: the model's temperature ``exp(t)`` (100 for OpenAI's CLIP).
    """

    def __init__(self, visual: nn.Module, embeddings: Tensor, logit_scale: float) -> None:
        super().__init__()
        self.visual = visual
        self.head = nn.Linear(embeddings.shape[1], embeddings.shape[0], bias=False)
        self.head.weight.data.copy_(embeddings)
        self.head.requires_grad_(False)
        self.logit_scale = float(logit_scale)

    def forward(self, x: Tensor) -> Tensor:
        """Zero-shot logits of images (already normalized by the input layer)."""
        features = self.visual(x)
        features = features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return self.logit_scale * self.head(features)


def clip_network(
    name: str,
    classnames: Sequence[str],
    pretrained: str | None = None,
    templates: Sequence[str] = DEFAULT_TEMPLATES,
    cache: str | None = None,
) -> tuple[ZeroShotCLIP, Declared, dict[str, Any]]:
    """An open_clip model as a zero-shot classifier over ``classnames``.

    Args:
        name: an open_clip model name (``ViT-B-32``, ``ViT-B-16``, ``RN50``, or one added with
            ``open_clip.add_model_config``).
        classnames: one name per class, in the dataset's label order.
        pretrained: a local open_clip weights file (``None``: random initialisation, for tests).
        templates: prompt templates with one ``{}`` for the class name.
        cache: a file for the class embeddings: read when it holds the ones for this model, prompts and weights,
            written otherwise (the text tower then runs once per set of prompts).

    Raises:
        ConfigError: open-clip-torch is missing, the name is unknown, the weights file is missing, or a template has
            no ``{}``.
    """
    open_clip = require("open_clip", "model=clip")
    if name not in open_clip.list_models():
        raise ConfigError(f"name={name!r} is not an open_clip model; some that are: {open_clip.list_models()[:8]}")
    if pretrained is not None and not Path(pretrained).expanduser().is_file():
        raise ConfigError(f"pretrained={pretrained}: no such file (open_clip weights; nothing is downloaded)")
    bad = [t for t in templates if "{}" not in t]
    if bad:
        raise ConfigError(f"templates={bad} lack the '{{}}' where the class name goes")
    weights = str(Path(pretrained).expanduser()) if pretrained else None
    model = open_clip.create_model(name, pretrained=weights, load_weights=weights is not None).eval()
    prompts = [template.format(c) for c in classnames for template in templates]
    key = hashlib.sha256(json.dumps([name, file_digest(weights) if weights else "random", prompts]).encode())
    embeddings = _cached(cache, key.hexdigest())
    if embeddings is None:
        embeddings = _class_embeddings(open_clip.get_tokenizer(name), model, prompts, len(classnames), len(templates))
        if cache is not None:
            Path(cache).expanduser().parent.mkdir(parents=True, exist_ok=True)
            torch.save({"key": key.hexdigest(), "embeddings": embeddings}, Path(cache).expanduser())
    scale = float(model.logit_scale.exp()) if hasattr(model, "logit_scale") else 100.0
    network = ZeroShotCLIP(model.visual, embeddings, scale)
    declared = _clip_declared(open_clip, model, name)
    spec = {
        "kind": "clip",
        "name": name,
        "classnames": list(classnames),
        "templates": list(templates),
        "pretrained": {"file": weights, "sha256": file_digest(weights)} if weights else None,
        "logit_scale": scale,
    }
    return network, declared, spec


def _class_embeddings(tokenizer: Any, model: Any, prompts: Sequence[str], classes: int, templates: int) -> Tensor:
    """Per class the unit mean of its prompts' unit text embeddings (the prompts class by class, templates within)."""
    with torch.no_grad():
        text = model.encode_text(tokenizer(list(prompts))).float()
    text = text / text.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    embeddings = text.view(classes, templates, -1).mean(dim=1)
    return embeddings / embeddings.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _clip_declared(open_clip: Any, model: Any, name: str) -> Declared:
    """What the model's visual tower expects: its input size, interpolation, mean and std (OpenAI's by default)."""
    config = dict(getattr(model.visual, "preprocess_cfg", None) or {})
    image = config.get("size", getattr(model.visual, "image_size", 224))
    size = (int(image), int(image)) if isinstance(image, int) else (int(image[0]), int(image[1]))
    interpolation = str(config.get("interpolation", "bicubic"))
    mean = tuple(float(v) for v in config.get("mean", open_clip.OPENAI_DATASET_MEAN))
    std = tuple(float(v) for v in config.get("std", open_clip.OPENAI_DATASET_STD))
    return Declared(f"open_clip model {name}", size, 3, mean, std, interpolation)


def _cached(cache: str | None, key: str) -> Tensor | None:
    """The class embeddings in ``cache`` when they were computed for ``key``, else ``None``."""
    if cache is None or not Path(cache).expanduser().is_file():
        return None
    saved = torch.load(Path(cache).expanduser(), map_location="cpu", weights_only=True)
    if isinstance(saved, Mapping) and saved.get("key") == key and isinstance(saved.get("embeddings"), Tensor):
        return saved["embeddings"]
    return None


# ---------------------------------------------------------------------------------------------- from a spec


def build_pretrained(
    arch: str,
    network: Mapping[str, Any],
    num_classes: int,
    input_layer: Mapping[str, Any] | None,
    image_shape: Sequence[int | None],
    where: str = "arch.input_layer",
) -> Classifier:
    """``Classifier(InputLayer, network)`` for a pretrained-network spec (``arch.network``, or a signature's).

    ``network`` holds ``kind`` (timm or hf) and its builder's arguments; a checkpoint's signature holds the spec
    the builder returned (plus ``lora``, applied by :func:`rsbench.archs.lora.inject`), so the same call rebuilds
    it. The weights a checkpoint holds replace the built ones.

    Raises:
        ConfigError: an unknown kind, or any refusal of the builders and of :func:`pretrained_input_layer`.
    """
    spec = dict(network)
    kind = spec.get("kind")
    channels = int(image_shape[0])  # type: ignore[arg-type]
    net: nn.Module
    if kind == "timm":
        in_chans = channels if spec.get("in_chans") is None else int(spec["in_chans"])
        net, declared, built = timm_network(
            str(spec["name"]),
            num_classes,
            in_chans,
            spec.get("options"),
            _pretrained_argument(spec.get("pretrained")),
            bool(spec.get("download", False)),
        )
    elif kind == "hf":
        rebuild = "config" in spec  # a signature's spec: the saved config, not the folder (the checkpoint has weights)
        path = None if rebuild or spec.get("path") is None else str(spec["path"])
        net, declared, built = hf_network(
            path, num_classes, spec if rebuild else None, bool(spec.get("new_head", True))
        )
        if spec.get("path") is not None:
            built["path"] = str(spec["path"])
    else:
        raise ConfigError(f"network.kind={kind!r} is not one of timm, hf (CLIP certifies with model=clip)")
    layer = pretrained_input_layer(declared, input_layer, image_shape, where)
    if isinstance(spec.get("pretrained"), Mapping):  # rebuilt from a signature: keep its record of the weights
        built["pretrained"] = dict(spec["pretrained"])
    classifier = Classifier(arch, net, layer)
    classifier.network_spec = built
    if spec.get("lora"):
        from rsbench.archs.lora import inject

        inject(classifier, spec["lora"])
    return classifier


def _pretrained_argument(value: Any) -> bool | str:
    """``pretrained`` as the timm builder takes it, from a config value or a signature's record of it."""
    if isinstance(value, Mapping):  # a signature's record: rebuilding never needs the weights (the checkpoint has them)
        return False
    if value is None:
        return False
    return value if isinstance(value, bool | str) else bool(value)


def _plain(value: Any) -> Any:
    """A JSON-safe copy (tuples as lists, everything else that is not plain as its string)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)
