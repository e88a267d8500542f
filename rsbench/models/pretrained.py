"""Certify the classifiers the frontier uses: ``model=timm``, ``model=hf`` and ``model=clip`` (zero-shot).

Each builder returns a :class:`~rsbench.certify.pipeline.certification.Subject` whose base classifier is
``Sequential(InputLayer, network)``: the certifier adds the noise to the dataset's [0,1] pixels at the dataset's own
resolution, and the input layer then resizes (``model.input_layer.resize``, interpolation stated), repeats a grey
channel (``model.input_layer.channels``) and normalizes with what the network declares (timm's ``pretrained_cfg``,
the folder's ``preprocessor_config.json``, open_clip's ``preprocess_cfg``). A stated value that differs from the
declaration, a resolution or channel count that does not fit, is refused in one line naming the value
(:func:`rsbench.archs.pretrained.pretrained_input_layer`); ``model.convention`` checks a frontier codebase's
convention on top (:mod:`rsbench.models.conventions`). ``metrics.json["model"]`` records the network, what it
declared and the input layer used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.pretrained import (
    DEFAULT_TEMPLATES,
    Declared,
    clip_network,
    hf_network,
    pretrained_input_layer,
    timm_network,
)
from rsbench.certify.pipeline.certification import Subject
from rsbench.checkpoint import refuse_as_plain_weights
from rsbench.errors import ConfigError
from rsbench.loading import file_digest, load_strict, load_weights_only
from rsbench.models.conventions import check_convention


def timm(
    name: str,
    sigma: float,
    num_classes: int,
    image_shape: Sequence[int],
    input_layer: Mapping[str, Any] | None = None,
    in_chans: int | None = None,
    options: Mapping[str, Any] | None = None,
    pretrained: bool | str | None = None,
    weights: str | None = None,
    state_dict_key: str | None = None,
    download: bool = False,
    convention: str | None = None,
) -> Subject:
    """A timm network (``timm.create_model(name, ...)``) as the base classifier.

    Args:
        name: any timm model name (with an optional pretrained tag).
        sigma: the noise level it was trained at (the one certified unless ``certify.sigma`` names another).
        num_classes: the dataset's class count.
        image_shape: the dataset's ``[C, H, W]``.
        input_layer: what is stated of the input layer (``None`` values: the network's own).
        in_chans: the network's input channels (``None``: the dataset's).
        options: more ``timm.create_model`` arguments (``img_size``, ``patch_size``, ...).
        pretrained: ``False``, ``True`` (timm's weights from the local Hugging Face cache) or a weights file in
            timm's format (adapted by timm to ``num_classes`` and ``in_chans``).
        weights: a state dict of exactly this network (loaded strictly by name), e.g. your fine-tuned weights.
        state_dict_key: the entry of ``weights`` that holds the state dict, when it wraps one.
        download: let timm download ``pretrained=true`` weights that are not cached.
        convention: a frontier codebase's convention to check (``dds``, ``rrcm``, ``multiscale``).
    """
    channels = int(image_shape[0]) if in_chans is None else int(in_chans)
    network, declared, spec = timm_network(name, num_classes, channels, options, pretrained, download)
    record: dict[str, Any] = {"kind": "timm", "network": spec}
    if weights is not None:
        load_strict(network, _state_dict(load_weights_only(weights, "weights file"), state_dict_key, weights), weights)
        record.update(weights=str(weights), sha256=file_digest(weights))
    return _subject(f"timm.{name}", network, declared, input_layer, image_shape, sigma, num_classes, record, convention)


def hf(
    path: str,
    sigma: float,
    num_classes: int,
    image_shape: Sequence[int],
    input_layer: Mapping[str, Any] | None = None,
    convention: str | None = None,
) -> Subject:
    """A transformers image-classification model saved in a local folder (``save_pretrained``).

    Args:
        path: the folder (``config.json``, the weights, ``preprocessor_config.json``); nothing is downloaded.
        sigma: the noise level it was trained at.
        num_classes: the dataset's class count (the model's ``num_labels`` must equal it).
        image_shape: the dataset's ``[C, H, W]``.
        input_layer: what is stated of the input layer (``None`` values: the folder's preprocessor config).
        convention: a frontier codebase's convention to check.
    """
    network, declared, spec = hf_network(path, num_classes)
    record = {"kind": "hf", "network": {k: v for k, v in spec.items() if k != "config"}}
    arch = f"hf.{spec['config'].get('model_type', 'model')}"
    return _subject(arch, network, declared, input_layer, image_shape, sigma, num_classes, record, convention)


def clip(
    name: str,
    classnames: Sequence[str],
    sigma: float,
    num_classes: int,
    image_shape: Sequence[int],
    pretrained: str | None = None,
    templates: Sequence[str] = DEFAULT_TEMPLATES,
    cache: str | None = None,
    input_layer: Mapping[str, Any] | None = None,
    convention: str | None = None,
) -> Subject:
    """An open_clip model as a zero-shot classifier: one text embedding per class, from prompts, computed once.

    Args:
        name: the open_clip model name.
        classnames: the class names, in the dataset's label order (as many as it has classes).
        sigma: the noise level to certify at (a zero-shot model was not trained under noise: smoothing it directly
            is the weak baseline; put it behind a denoiser, ``model=diffusion model.classifier._target_=...``).
        num_classes: the dataset's class count.
        image_shape: the dataset's ``[C, H, W]``.
        pretrained: a local open_clip weights file (``None``: random weights, for tests).
        templates: prompt templates with ``{}`` for the class name (their embeddings are averaged per class).
        cache: a file that keeps the class embeddings between runs.
        input_layer: what is stated of the input layer (``None`` values: the model's preprocess config).
        convention: a frontier codebase's convention to check (``multiscale``: Jeong and Shin 2023's CLIP).
    """
    if len(classnames) != num_classes:
        raise ConfigError(
            f"model.classnames lists {len(classnames)} names but the dataset has {num_classes} classes: one per class"
        )
    network, declared, spec = clip_network(name, list(classnames), pretrained, list(templates), cache)
    record = {"kind": "clip", "network": spec}
    return _subject(f"clip.{name}", network, declared, input_layer, image_shape, sigma, num_classes, record, convention)


def _subject(
    arch: str,
    network: nn.Module,
    declared: Declared,
    input_layer: Mapping[str, Any] | None,
    image_shape: Sequence[int],
    sigma: float,
    num_classes: int,
    record: dict[str, Any],
    convention: str | None,
) -> Subject:
    """The base classifier behind its checked input layer, with what it was built from."""
    layer = pretrained_input_layer(declared, input_layer, image_shape, "model.input_layer")
    check_convention(convention, layer.spec(), float(sigma))
    classifier = Classifier(arch, network.eval(), layer)
    record.update(declared=declared.record(), input_layer=layer.spec(), convention=convention)
    return Subject(classifier, num_classes, float(sigma), {"method": "external", "arch": arch}, record)


def _state_dict(loaded: Any, key: str | None, source: str) -> Mapping[str, Any]:
    """The state dict in a loaded weights file: the file itself, or its entry ``key`` (never an rsbench checkpoint)."""
    if key is None:
        refuse_as_plain_weights(loaded, source)
    if key is not None:
        if not isinstance(loaded, Mapping) or key not in loaded:
            raise ConfigError(f"{source} has no entry {key!r}")
        loaded = loaded[key]
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{source} is not a state dict (it holds {type(loaded).__name__})")
    return loaded
