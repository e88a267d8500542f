"""``Classifier = Sequential(InputLayer, net)``: the base classifier f that every method trains and CERTIFY queries."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from rsbench.archs.input_layer import InputLayer


class Classifier(nn.Sequential):
    """The base classifier: an :class:`InputLayer` (index 0) followed by a network (index 1).

    It maps images in [0,1] pixel space to logits, so noise is always added before normalization. The
    state-dict keys are ``1.<net keys>``, Cohen et al.'s layout. :meth:`signature` names what a checkpoint must
    agree on to be loaded into this model (:func:`rsbench.checkpoint.check_signature` compares them). A network
    that is not one of :data:`rsbench.archs.registry.NETWORKS` (timm, Hugging Face) keeps how to rebuild it in
    ``network_spec`` (:mod:`rsbench.archs.pretrained`), which the signature then holds as ``network``.

    Args:
        arch: the architecture's name, recorded in checkpoints (e.g. ``cifar_resnet110``).
        net: the network mapping normalized inputs to logits.
        input_layer: an :class:`InputLayer`, or the keyword arguments of one (``kind``, ``mean``, ``std``).
    """

    def __init__(self, arch: str, net: nn.Module, input_layer: InputLayer | Mapping[str, Any]) -> None:
        if not isinstance(input_layer, InputLayer):
            input_layer = InputLayer(**dict(input_layer))
        super().__init__(input_layer, net)
        self.arch = arch
        self.network_spec: dict[str, Any] | None = None

    @property
    def input_layer(self) -> InputLayer:
        """The first layer, mapping [0,1] pixels to the network's input space."""
        layer = self[0]
        assert isinstance(layer, InputLayer)
        return layer

    @property
    def num_classes(self) -> int:
        """The number of logits, read off a forward-free probe of the last linear layer."""
        linear = [m for m in self.modules() if isinstance(m, nn.Linear)]
        if not linear:
            raise AttributeError(f"cannot tell the number of classes of {self.arch}: it has no nn.Linear layer")
        return int(linear[-1].out_features)

    def signature(self) -> dict[str, Any]:
        """What identifies this model in a checkpoint: architecture, class count and input layer."""
        network = {} if self.network_spec is None else {"network": self.network_spec}
        return {"arch": self.arch, "num_classes": self.num_classes, "input_layer": self.input_layer.spec(), **network}


def weights_fingerprint(model: nn.Module) -> str:
    """A short SHA-256 of the model's state dict, so certification records can refuse to mix two models."""
    digest = hashlib.sha256()
    for key, tensor in sorted(model.state_dict().items()):
        digest.update(key.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]
