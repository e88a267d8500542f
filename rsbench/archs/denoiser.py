"""Denoised smoothing's base classifier ``classifier(denoiser(x + delta))``, and the DnCNN denoiser of Salman et al.

Salman, Sun, Yang, Kapoor and Kolter (NeurIPS 2020, "Denoised Smoothing") certify a classifier that was not trained
for noise by putting a denoiser in front of it: the base classifier that CERTIFY queries is the composition
``f(D(x + delta))``, so every certificate is a promise about that composition (not about ``f`` alone). The
denoiser works in [0,1] pixel space, as in their code (``architectures.py`` returns denoisers without a
normalization layer); the classifier keeps its own input layer behind it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.input_layer import InputLayer


class DnCNN(nn.Module):
    """DnCNN (Zhang et al. 2017) as Salman et al.'s ``archs/dncnn.py`` builds it: residual, predicts the noise.

    ``D(z) = z - N(z)`` with ``N`` = conv(bias)-ReLU, then ``depth - 2`` x [conv(no bias)-BatchNorm-ReLU], then
    conv(no bias), all 3x3 with padding 1. Convolutions are initialised orthogonally and the last one to zero, so
    a fresh DnCNN is the identity. BatchNorm uses their ``eps=1e-4, momentum=0.95``. Their CIFAR-10 and ImageNet
    denoisers are ``depth=17, width=64`` (``cifar_dncnn``) and ``width=128`` (``cifar_dncnn_wide``).

    Args:
        in_channels: image channels (the output has as many).
        depth: number of convolutions (>= 2).
        width: channels of the hidden convolutions.
    """

    arch = "dncnn"

    def __init__(self, in_channels: int = 3, depth: int = 17, width: int = 64) -> None:
        super().__init__()
        for name, value, least in (("in_channels", in_channels, 1), ("depth", depth, 2), ("width", width, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"DnCNN {name} must be an integer >= {least}, got {value!r}")
        self.in_channels, self.depth, self.width = in_channels, depth, width
        layers: list[nn.Module] = [nn.Conv2d(in_channels, width, 3, padding=1, bias=True), nn.ReLU(inplace=True)]
        for _ in range(depth - 2):
            layers += [
                nn.Conv2d(width, width, 3, padding=1, bias=False),
                nn.BatchNorm2d(width, eps=1e-4, momentum=0.95),
                nn.ReLU(inplace=True),
            ]
        layers.append(nn.Conv2d(width, in_channels, 3, padding=1, bias=False))
        self.dncnn = nn.Sequential(*layers)
        self._initialize()

    def _initialize(self) -> None:
        convolutions = [m for m in self.modules() if isinstance(m, nn.Conv2d)]
        for conv in convolutions:
            nn.init.orthogonal_(conv.weight)
            if conv.bias is not None:
                nn.init.zeros_(conv.bias)
        nn.init.zeros_(convolutions[-1].weight)

    def forward(self, z: Tensor) -> Tensor:
        """The denoised images ``z - N(z)``, ``[B, C, H, W]``, in the pixel space of ``z``."""
        return z - self.dncnn(z)

    def spec(self) -> dict[str, Any]:
        """What rebuilds this denoiser: recorded in checkpoints and compared on load."""
        return {"arch": self.arch, "in_channels": self.in_channels, "depth": self.depth, "width": self.width}


def build_denoiser(spec: Mapping[str, Any]) -> DnCNN:
    """The denoiser a checkpoint's ``spec`` (:meth:`DnCNN.spec`) describes."""
    if spec.get("arch") != DnCNN.arch:
        raise ValueError(f"denoiser arch must be {DnCNN.arch!r}, got {spec.get('arch')!r}")
    return DnCNN(int(spec["in_channels"]), int(spec["depth"]), int(spec["width"]))


class DenoisedClassifier(Classifier):
    """``classifier(denoiser(x))`` for images ``x`` in [0,1] pixel space, with the classifier frozen.

    The classifier is frozen for good: its parameters never require gradients and it stays in eval mode whatever
    mode the composition is put in (BatchNorm statistics and dropout of the classifier never change), as the
    authors' ``train_denoiser.py`` does (``clf.eval()``, ``requires_grad_(clf, False)``). State-dict keys are
    ``denoiser.*`` and ``classifier.*``, so a checkpoint holds both parts.

    Args:
        denoiser: maps noisy images in [0,1] pixel space to denoised ones in the same space.
        classifier: any base classifier of images in [0,1] pixel space (its input layer included).
        num_classes: the classifier's class count; read off its last linear layer when ``None``.
    """

    denoiser: nn.Module  # the trainable first stage (a registered submodule)
    classifier: nn.Module  # the frozen second stage

    def __init__(self, denoiser: nn.Module, classifier: nn.Module, num_classes: int | None = None) -> None:
        # A Classifier whose two stages are the denoiser and the classifier (not InputLayer + network).
        nn.Sequential.__init__(self, OrderedDict(denoiser=denoiser, classifier=classifier))
        classifier.requires_grad_(False)
        classifier.eval()
        self.arch = f"{getattr(denoiser, 'arch', type(denoiser).__name__)}+{getattr(classifier, 'arch', 'external')}"
        self._num_classes = num_classes

    @property
    def input_layer(self) -> InputLayer:
        """The classifier's input layer (the denoiser itself reads [0,1] pixels)."""
        layer = getattr(self.classifier, "input_layer", None)
        if not isinstance(layer, InputLayer):
            raise AttributeError(f"the classifier {self.arch} has no rsbench input layer")
        return layer

    @property
    def num_classes(self) -> int:
        """The classifier's class count."""
        if self._num_classes is not None:
            return self._num_classes
        return Classifier.num_classes.fget(self)  # type: ignore[attr-defined]

    def train(self, mode: bool = True) -> DenoisedClassifier:
        """Put the denoiser in ``mode``; the classifier stays in eval mode."""
        super().train(mode)
        self.classifier.eval()
        return self

    def signature(self) -> dict[str, Any]:
        """The classifier's signature (arch, class count, input layer) with the composition's arch and the denoiser.

        ``arch`` is ``<denoiser>+<classifier arch>``, ``input_layer`` the classifier's, ``denoiser`` the
        denoiser's :meth:`DnCNN.spec` and ``classifier`` the classifier's own signature.
        """
        classifier = self.classifier
        if not isinstance(classifier, Classifier) or not isinstance(self.denoiser, DnCNN):
            raise TypeError("only a DnCNN in front of an rsbench Classifier can be saved as an rsbench checkpoint")
        inner = classifier.signature()
        return {**inner, "arch": self.arch, "denoiser": self.denoiser.spec(), "classifier": inner}
