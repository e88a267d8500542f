"""What ``python -m rsbench.certify`` certifies: an rsbench checkpoint, your own model, or an ensemble of checkpoints.

Any of them may sit behind a denoiser (a trained DnCNN or a pretrained diffusion model: denoised smoothing). Your
own model comes as a ``torch.nn.Module`` class with constructor arguments and a state-dict file, a
``torch.export`` or TorchScript archive, or a torchvision architecture name with a state-dict file.

Each builder returns a :class:`~rsbench.certify.pipeline.certification.Subject`: the base classifier (input layer
included, so noise is added in [0,1] pixel space before it), its class count and training sigma, what identifies it in
the records, and what it was built from (``metrics.json["model"]``: the kind, files with their SHA-256, the stated
input layer). Models rsbench did not train must state their input layer (``normalize`` with its mean and std,
``center`` with its mean, or ``identity`` when the model normalises inside itself), because nothing in their weights
says what it was. rsbench checkpoints are read by :mod:`rsbench.checkpoint`, state dicts with
``torch.load(weights_only=True)`` (:func:`rsbench.loading.load_weights_only`), archives with ``torch.export.load``
and ``torch.jit.load`` (TorchScript, deprecated by PyTorch; it runs the TorchScript code in the archive): load only
archives you trust.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torchvision
from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.denoiser import DenoisedClassifier
from rsbench.archs.diffusion import load_diffusion
from rsbench.archs.input_layer import InputLayer
from rsbench.certify.pipeline.certification import Subject
from rsbench.checkpoint import check_signature, read_classifier, read_denoiser, refuse_as_plain_weights
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.loading import file_digest, load_strict, load_weights_only
from rsbench.models.ensemble import Aggregation, Ensemble
from rsbench.models.files import check_model_file

UNREADABLE = (
    "import a released checkpoint with python -m rsbench.importer, or certify your own model with model=module, "
    "exported, torchscript, ..."
)


def checkpoint(path: str, num_classes: int, in_channels: int) -> Subject:
    """An rsbench checkpoint (trained by rsbench, or written by ``python -m rsbench.importer``).

    The architecture, input layer and training sigma come from the checkpoint's signature.

    Args:
        path: the ``.ckpt`` file.
        num_classes: the dataset's class count (the checkpoint's must equal it).
        in_channels: the dataset's image channels.
    """
    check_model_file(f"{__name__}.checkpoint", path)
    classifier, signature = read_classifier(
        path, f"checkpoint {path}", num_classes=num_classes, in_channels=in_channels, advice=UNREADABLE
    )
    description = {"method": signature.get("method", "unknown"), "arch": signature["arch"]}
    provenance = {"kind": "checkpoint", "path": str(path), "sha256": file_digest(path), "signature": dict(signature)}
    noise = str(signature.get("noise", "gaussian"))  # written only by modules trained with another noise
    return Subject(classifier, num_classes, float(signature["sigma"]), description, provenance, noise=noise)


def module(
    network: nn.Module,
    input_layer: Mapping[str, Any],
    sigma: float,
    num_classes: int,
    weights: str | None = None,
    state_dict_key: str | None = None,
    name: str | None = None,
) -> Subject:
    """Your own ``torch.nn.Module``, built by Hydra from ``model.network`` (``_target_`` plus constructor arguments).

    Args:
        network: the network (maps the input layer's output to logits).
        input_layer: what maps [0,1] pixels to the network's input: ``kind`` (normalize, center, identity) and
            its ``mean``/``std``.
        sigma: the noise level it was trained at.
        num_classes: the dataset's class count.
        weights: a state-dict file for ``network`` (loaded strictly, by name); ``None`` keeps its own weights.
        state_dict_key: the entry of ``weights`` that holds the state dict (e.g. ``state_dict``, ``net``), when
            the file is a dictionary around it.
        name: how to name the architecture in the records (default: the network's class).
    """
    arch = name or f"{type(network).__module__}.{type(network).__qualname__}"
    provenance: dict[str, Any] = {"kind": "module", "class": arch}
    if weights is not None:
        load_strict(network, _state_dict(load_weights_only(weights, "weights file"), state_dict_key, weights), weights)
        provenance.update(weights=str(weights), sha256=file_digest(weights))
    return _foreign(arch, network, input_layer, sigma, num_classes, provenance)


def torchscript(path: str, input_layer: Mapping[str, Any], sigma: float, num_classes: int) -> Subject:
    """A TorchScript archive (``torch.jit.save``); its weights are in the archive.

    Args:
        path: the archive.
        input_layer: what maps [0,1] pixels to the archive's input (``identity`` when it normalises itself).
        sigma: the noise level it was trained at.
        num_classes: the dataset's class count.
    """
    check_model_file(f"{__name__}.torchscript", path)
    network = torch.jit.load(str(Path(path).expanduser()), map_location="cpu")
    provenance = {"kind": "torchscript", "path": str(path), "sha256": file_digest(path)}
    return _foreign("torchscript", network, input_layer, sigma, num_classes, provenance)


def exported(path: str, input_layer: Mapping[str, Any], sigma: float, num_classes: int) -> Subject:
    """A ``torch.export`` archive (``torch.export.save``, the successor of TorchScript); its weights are inside.

    The exported graph is fixed in the mode it was exported in (export it in eval mode, with a dynamic batch
    dimension: ``dynamic_shapes=({0: torch.export.Dim("batch")},)``).

    Args:
        path: the ``.pt2`` archive.
        input_layer: what maps [0,1] pixels to the archive's input (``identity`` when it normalises itself).
        sigma: the noise level it was trained at.
        num_classes: the dataset's class count.
    """
    check_model_file(f"{__name__}.exported", path)
    program = torch.export.load(str(Path(path).expanduser()))
    _check_dynamic_batch(program, path)
    network = _FixedMode(program.module())
    provenance = {"kind": "exported", "path": str(path), "sha256": file_digest(path)}
    return _foreign("exported", network, input_layer, sigma, num_classes, provenance)


def _check_dynamic_batch(program: torch.export.ExportedProgram, path: str) -> None:
    """Refuse an archive exported with a fixed batch size: certification feeds batches of every size.

    Raises:
        ConfigError: naming the fixed input shape and how to export the batch dimension as dynamic.
    """
    inputs = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" and node.name in inputs else None
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0 and isinstance(shape[0], int):
            raise ConfigError(
                f"model.path={path} was exported with a fixed batch size of {shape[0]} (input {list(shape)}), but "
                "certification feeds batches of every size (n0, n and certify.batch_size samples): export it with a "
                "dynamic batch dimension, torch.export.export(net, (x,), dynamic_shapes=({0: "
                'torch.export.Dim("batch")},))'
            )


class _FixedMode(nn.Module):
    """An exported graph, which cannot switch between train and eval mode: ``train()`` leaves it as it is."""

    def __init__(self, program: nn.Module) -> None:
        super().__init__()
        self.program = program

    def train(self, mode: bool = True) -> _FixedMode:
        """Record the mode without passing it on (the graph runs as it was exported)."""
        self.training = mode
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The exported graph's output."""
        return self.program(x)


def torchvision_model(
    name: str,
    weights: str,
    input_layer: Mapping[str, Any],
    sigma: float,
    num_classes: int,
    state_dict_key: str | None = None,
) -> Subject:
    """A torchvision architecture by name (``torchvision.models.get_model``) with your weights file.

    Args:
        name: the torchvision model name (``resnet50``, ``wide_resnet50_2``, ...).
        weights: its state-dict file (loaded strictly, by name).
        input_layer: what maps [0,1] pixels to the network's input.
        sigma: the noise level it was trained at.
        num_classes: the dataset's class count.
        state_dict_key: the entry of ``weights`` that holds the state dict, when the file wraps it.
    """
    try:
        network = torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    except ValueError as error:
        raise ConfigError(f"model.name={name!r} is not a torchvision model: {error}") from None
    load_strict(network, _state_dict(load_weights_only(weights, "weights file"), state_dict_key, weights), weights)
    provenance = {
        "kind": "torchvision",
        "name": name,
        "weights": str(weights),
        "sha256": file_digest(weights),
    }
    return _foreign(f"torchvision.{name}", network, input_layer, sigma, num_classes, provenance)


def ensemble(
    members: Sequence[str],
    num_classes: int,
    in_channels: int,
    aggregation: Aggregation = "logits",
    sigma: float | None = None,
    allow_sigma_mismatch: bool = False,
    allow_mixed_input_layers: bool = False,
) -> Subject:
    """An ensemble of rsbench checkpoints as one base classifier (:class:`~rsbench.models.ensemble.Ensemble`).

    Every member must agree with the first on the class count, the input layer (unless
    ``allow_mixed_input_layers``) and the training sigma (unless ``allow_sigma_mismatch``).

    Args:
        members: the checkpoint files (at least 2).
        num_classes: the dataset's class count.
        in_channels: the dataset's image channels.
        aggregation: ``logits`` (mean logit, the paper's soft voting), ``softmax`` or ``vote``.
        sigma: the certification sigma, needed only when the members' training sigmas differ.
        allow_sigma_mismatch: accept members trained at different sigmas.
        allow_mixed_input_layers: accept members with different input layers.
    """
    if len(members) < 2:
        raise ConfigError(f"model.members must list at least 2 checkpoints, got {list(members)}")
    subjects = [checkpoint(path, num_classes, in_channels) for path in members]
    first = subjects[0].provenance["signature"]
    for path, subject in zip(members[1:], subjects[1:], strict=True):
        expected = {"num_classes": first["num_classes"], "input_layer": first["input_layer"], "sigma": first["sigma"]}
        if allow_mixed_input_layers:
            expected.pop("input_layer")
        if allow_sigma_mismatch:
            expected.pop("sigma")
        try:
            check_signature(subject.provenance["signature"], expected, f"ensemble member {path}")
        except CheckpointMismatchError as error:
            raise CheckpointMismatchError(
                f"{error}\n(compared with the first member, {members[0]}; model.allow_sigma_mismatch=true or "
                "model.allow_mixed_input_layers=true accept such members on purpose)"
            ) from None
    sigmas = sorted({s.sigma for s in subjects})
    if len(sigmas) > 1 and sigma is None:
        raise ConfigError(f"the members were trained at sigmas {sigmas}: set certify.sigma=<s> to certify them at one")
    methods = sorted({str(s.description["method"]) for s in subjects})
    description = {
        "method": f"ensemble({','.join(methods)})",
        "arch": "+".join(str(s.description["arch"]) for s in subjects),
    }
    provenance = {"kind": "ensemble", "aggregation": aggregation, "members": [dict(s.provenance) for s in subjects]}
    model = Ensemble([s.classifier for s in subjects], aggregation)
    return Subject(model, num_classes, sigma if sigma is not None else sigmas[0], description, provenance)


def denoised(classifier: Subject, denoiser_ckpt: str) -> Subject:
    """Any classifier behind the denoiser of a ``method=denoiser`` checkpoint (Salman et al. 2020).

    Only the checkpoint's denoiser is taken (its own frozen classifier is left out); the composition is certified
    at the denoiser's training sigma unless ``certify.sigma`` names another.

    Args:
        classifier: the classifier, built by any other ``model`` option (``model.classifier``).
        denoiser_ckpt: a checkpoint written by ``python -m rsbench method=denoiser``.
    """
    check_model_file(f"{__name__}.denoised", denoiser_ckpt)
    denoiser, signature, _ = read_denoiser(
        denoiser_ckpt, str(denoiser_ckpt), "pass a checkpoint written by python -m rsbench method=denoiser"
    )
    record = {"kind": "dncnn", "path": str(denoiser_ckpt), "sha256": file_digest(denoiser_ckpt), "signature": signature}
    return _compose(denoiser, classifier, float(signature["sigma"]), record)


def diffusion(classifier: Subject, path: str, sigma: float, clip: bool = True) -> Subject:
    """Any classifier behind a pretrained ``diffusers`` DDPM as a one-shot denoiser (Carlini et al., ICLR 2023).

    The timestep is chosen for ``sigma`` (:func:`rsbench.archs.diffusion.diffusion_timestep`); the classifier must
    take images of the diffusion model's size.

    Args:
        classifier: the classifier, built by any other ``model`` option (``model.classifier``).
        path: a local directory with a saved ``UNet2DModel`` and ``DDPMScheduler`` (nothing is downloaded).
        sigma: the noise level to denoise (and certify) at, in [0,1] pixel units.
        clip: clip the denoised image to the model's range (the authors' ``clip_denoised=True``).
    """
    denoiser = load_diffusion(path, sigma, clip)
    return _compose(denoiser, classifier, float(sigma), {**denoiser.record(), "path": str(path)})


def _compose(denoiser: nn.Module, classifier: Subject, sigma: float, record: dict[str, Any]) -> Subject:
    """``classifier(denoiser(.))`` as the base classifier, recorded with both parts."""
    model = DenoisedClassifier(denoiser, classifier.classifier, classifier.num_classes)
    description = {
        "method": f"denoised({classifier.description.get('method', 'unknown')})",
        "arch": f"{record['kind']}+{classifier.description.get('arch', 'unknown')}",
    }
    provenance = {"kind": "denoised", "denoiser": record, "classifier": dict(classifier.provenance)}
    return Subject(model, classifier.num_classes, sigma, description, provenance)


def _state_dict(loaded: Any, key: str | None, source: str) -> Mapping[str, torch.Tensor]:
    """The state dict in a loaded weights file: the file itself, or its entry ``key`` (never an rsbench checkpoint)."""
    if key is None:
        refuse_as_plain_weights(loaded, source)
    if key is not None:
        if not isinstance(loaded, Mapping) or key not in loaded:
            found = sorted(loaded) if isinstance(loaded, Mapping) else type(loaded).__name__
            raise ConfigError(f"{source} has no entry {key!r} (it holds {found})")
        loaded = loaded[key]
    if not isinstance(loaded, Mapping) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        found = sorted(loaded) if isinstance(loaded, Mapping) else type(loaded).__name__
        raise ConfigError(
            f"{source} is not a state dict of tensors (it holds {found}); name the entry that is with "
            "model.state_dict_key=<key>"
        )
    return loaded


def _foreign(
    arch: str,
    network: nn.Module,
    input_layer: Mapping[str, Any],
    sigma: float,
    num_classes: int,
    provenance: dict[str, Any],
) -> Subject:
    """A model rsbench did not train: behind its stated input layer, recorded as such."""
    classifier = Classifier(arch, network, InputLayer(**dict(input_layer)))
    provenance["input_layer"] = classifier.input_layer.spec()
    return Subject(classifier, num_classes, float(sigma), {"method": "external", "arch": arch}, provenance)
