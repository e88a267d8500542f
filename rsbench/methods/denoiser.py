"""Denoised smoothing (Salman, Sun, Yang, Kapoor and Kolter, NeurIPS 2020): train a denoiser for a frozen classifier.

The base classifier certified is ``f(D(x + delta))``: a DnCNN ``D`` (:class:`rsbench.archs.denoiser.DnCNN`) in front
of a classifier ``f`` trained elsewhere (typically without noise), which stays frozen. Only ``D`` is trained, with one
of the objectives of the authors' ``code/train_denoiser.py`` (``--objective``):

* ``mse`` ("denoising"): ``MSELoss(reduction='mean')(D(x + delta), x)``, the mean over every pixel of every image;
* ``stability`` (the paper's "Stab"): ``CrossEntropyLoss()(f(D(x + delta)), argmax f(x))``, the cross-entropy of
  the composition against the frozen classifier's **hard** prediction on the clean image (its argmax, computed
  without gradient, as the code does: no soft target, no temperature);
* ``classification`` ("CLF"): ``CrossEntropyLoss()(f(D(x + delta)), y)`` against the true labels.

``delta ~ N(0, sigma^2 I)``, one fresh draw per image and batch, never clamped. The combination the paper recommends,
MSE-pretrained then Stab-fine-tuned ("MSE+Stab"), is ``objective=mse`` and then ``objective=stability`` with
``init_ckpt`` the MSE run's checkpoint (only its denoiser weights are taken, as ``--pretrained-denoiser`` does).

Deviation: rsbench selects the checkpoint to certify by the composition's noisy validation accuracy for every
objective (the authors keep the lowest test MSE for ``mse`` and the best test accuracy otherwise, on the test set).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.denoiser import DenoisedClassifier, DnCNN
from rsbench.checkpoint import check_signature, read_classifier, read_denoiser
from rsbench.methods.base import Batch, OptimizerFactory, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_choice

log = logging.getLogger(__name__)

OBJECTIVES = ("mse", "stability", "classification")


class DenoiserTraining(SmoothingModule):
    """Train a DnCNN in front of a frozen rsbench classifier; the certified base classifier is ``f(D(x + delta))``.

    Args:
        net: a classifier of the frozen classifier's architecture (the run's ``arch``, as for every method); the
            weights of ``classifier_ckpt`` are loaded into a copy of it, after checking its signature (architecture,
            class count, input layer). Its training sigma may be anything: it is typically a clean-trained model
            (``method=standard``).
        sigma: the noise level the denoiser is trained for (and certified at).
        optimizer: the optimizer factory; it receives the denoiser's parameters only.
        classifier_ckpt: the rsbench checkpoint of the frozen classifier (imported ones included:
            ``python -m rsbench.importer``).
        objective: ``mse``, ``stability`` or ``classification`` (see the module docstring).
        in_channels: image channels (the denoiser's input and output).
        depth: DnCNN depth (17 in the paper).
        width: DnCNN width (64 in the paper).
        init_ckpt: a denoiser checkpoint of this method whose denoiser weights training starts from (MSE+Stab), of
            the same DnCNN shape and, unless ``allow_sigma_mismatch``, the same sigma; ``None``: a fresh DnCNN
            (the identity).
        **kwargs: the other arguments of :class:`SmoothingModule`.
    """

    method_name = "denoiser"

    def __init__(
        self,
        net: Classifier,
        sigma: float,
        optimizer: OptimizerFactory,
        *,
        classifier_ckpt: str,
        objective: str = "stability",
        in_channels: int = 3,
        depth: int = 17,
        width: int = 64,
        init_ckpt: str | None = None,
        **kwargs: Any,
    ) -> None:
        objective = check_choice("method.objective", objective, OBJECTIVES)
        try:
            denoiser = DnCNN(in_channels, depth, width)
        except ValueError as error:
            raise ValueError(f"method.depth, method.width, method.in_channels: {error}") from None
        classifier, signature = read_classifier(
            classifier_ckpt,
            f"method.classifier_ckpt={str(Path(classifier_ckpt).expanduser())!r}",
            like=net,
            advice="train that model again, or pass another",
        )
        super().__init__(DenoisedClassifier(denoiser, classifier), sigma, optimizer, **kwargs)
        self.objective = objective
        self.classifier_method = str(signature.get("method", "unknown"))
        self.init_objective: str | None = None
        if init_ckpt is not None:
            self.initialize_denoiser(init_ckpt)

    @property
    def composed(self) -> DenoisedClassifier:
        """The base classifier ``f(D(.))``."""
        assert isinstance(self.net, DenoisedClassifier)
        return self.net

    def initialize_denoiser(self, path: str) -> None:
        """Load the denoiser weights of the denoiser checkpoint at ``path`` (fine-tuning, e.g. MSE then Stab)."""
        option = f"method.init_ckpt={path!r}"
        trained, saved, checkpoint = read_denoiser(path, option, "pass a checkpoint written by method=denoiser")
        denoiser = self.composed.denoiser
        assert isinstance(denoiser, DnCNN)
        expected: dict[str, Any] = {"denoiser": denoiser.spec()}
        if not self.allow_sigma_mismatch:
            expected["sigma"] = self.sigma
        check_signature(saved, expected, option)
        denoiser.load_state_dict(trained.state_dict())
        self.init_objective = str(checkpoint.get("hyper_parameters", {}).get("objective", "unknown"))
        log.info("the denoiser starts from the weights of %s (trained at sigma=%s)", path, float(saved["sigma"]))

    def method_hparams(self) -> dict[str, Any]:
        """The hyperparameters, with the two checkpoint paths replaced by what they hold.

        ``classifier_method`` is the frozen classifier's training method and ``init_objective`` the objective of
        the denoiser training started from (``None``: a fresh DnCNN; ``mse`` with ``objective=stability`` is the
        paper's MSE+Stab), so that ``rsbench.report`` groups the seeds of one setting although each seed's run
        points at its own files.
        """
        hparams = super().method_hparams()
        for path in ("classifier_ckpt", "init_ckpt"):
            hparams.pop(path, None)
        return {**hparams, "classifier_method": self.classifier_method, "init_objective": self.init_objective}

    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        """The denoiser's parameters: the classifier's never reach the optimizer."""
        return self.composed.denoiser.parameters()

    def training_loss(self, batch: Batch) -> StepOutput:
        """The objective on ``D(x + delta)`` (see the module docstring); training accuracy of ``f(D(x + delta))``."""
        denoised = self.composed.denoiser(self.add_noise(batch.x, sigma=batch.sigma))
        classifier = self.composed.classifier
        if self.objective == "mse":
            loss = F.mse_loss(denoised, batch.x)
            with torch.no_grad():
                logits = classifier(denoised)
            return StepOutput(loss=loss, logits=logits, labels=batch.y, terms={"mse": loss})
        logits = classifier(denoised)
        if self.objective == "stability":
            with torch.no_grad():
                target = classifier(batch.x).argmax(dim=1)
        else:
            target = batch.y
        loss = F.cross_entropy(logits, target)
        return StepOutput(loss=loss, logits=logits, labels=batch.y, terms={self.objective: loss})
