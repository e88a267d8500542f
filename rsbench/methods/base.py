"""``SmoothingModule``: what every training method shares (optimizer, schedule, metrics, checkpoint signature).

A method subclasses it and overrides one hook, :meth:`SmoothingModule.training_loss`; a method that needs another
run's model before it can train (CAT-RS's teacher) also declares it in :meth:`SmoothingModule.prerequisites`, which
the run layer resolves. Validation and test report
clean accuracy and accuracy under one draw of noise; the noise of each validation/test batch is seeded by the batch
index, so the noisy accuracy that selects checkpoints compares epochs on the same noise.

``steps_per_batch = m > 1`` reproduces the multi-noise training loop of Salman et al. and the Jeong lineage: each
loader batch of B images is cut into m consecutive chunks of B // m images (the remainder is dropped, as their
``_chunk_minibatch`` does) and the optimizer steps once per chunk, so an epoch takes m * len(loader) steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torchmetrics.classification import MulticlassAccuracy

from rsbench.archs.classifier import Classifier
from rsbench.certify.algorithm.seeding import make_generator
from rsbench.checkpoint import SIGNATURE_KEY, check_signature, make_signature, signature_of
from rsbench.errors import CheckpointMismatchError
from rsbench.methods.prerequisites import Prerequisite
from rsbench.noise import NoiseMixin, SigmaLike
from rsbench.noise_distributions import GAUSSIAN, NoiseDistribution

OptimizerFactory = Callable[[Iterable[torch.nn.Parameter]], Optimizer]
SchedulerFactory = Callable[[Optimizer], LRScheduler]


class Batch(NamedTuple):
    """A training batch: images in [0,1], labels, indices into the training set, optional per-example sigma."""

    x: Tensor
    y: Tensor
    indices: Tensor
    sigma: SigmaLike | None = None


@dataclass
class StepOutput:
    """What a method's loss hook returns.

    Attributes:
        loss: the scalar to minimise.
        logits: noisy logits to report training accuracy on (rows may be several noisy copies per image).
        labels: the label of each row of ``logits``.
        terms: named loss components, logged as ``train/<name>``.
    """

    loss: Tensor
    logits: Tensor
    labels: Tensor
    terms: dict[str, Tensor] = field(default_factory=dict)


class SmoothingModule(NoiseMixin, pl.LightningModule):
    """Base LightningModule of every randomized-smoothing training method.

    Args:
        net: the base classifier ``Sequential(InputLayer, network)``.
        sigma: the training noise level in [0,1] pixel units.
        optimizer: a factory ``params -> Optimizer`` (a Hydra ``_partial_``).
        scheduler: a factory ``optimizer -> LRScheduler`` stepped once per epoch, or ``None``.
        allow_sigma_mismatch: load checkpoints trained at another sigma (fine-tuning, or certifying at a sigma
            other than the training one on purpose) instead of refusing them.
        eval_noise_seed: the seed of the fixed validation/test noise.
        steps_per_batch: optimizer steps per loader batch, one per chunk of B // steps_per_batch images.
        certify_defaults: certification settings this method's models are certified with where ``certify.*`` leaves
            them unset (null), e.g. the DDRS paper's sigma-search ``sigma_samples`` for MACER models; the method's
            config states them. Not a training hyperparameter (not saved with them).
        lora: train only LoRA adapters (and the head) of a pretrained ``net`` (``+lora=default``;
            :mod:`rsbench.methods.lora`); ``None`` trains every parameter.
    """

    method_name: ClassVar[str] = "base"
    gaussian_only: ClassVar[str | None] = None
    """Why the method's loss needs Gaussian noise, when it does: it then refuses another ``noise`` with this reason."""

    def __init__(
        self,
        net: Classifier,
        sigma: float,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        allow_sigma_mismatch: bool = False,
        eval_noise_seed: int = 0,
        steps_per_batch: int = 1,
        certify_defaults: Mapping[str, Any] | None = None,
        lora: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if lora:  # LoRA fine-tuning: adapters injected (and the rest frozen) before anything reads the network
            from rsbench.methods.lora import apply_lora

            lora = apply_lora(self.method_name, net, lora)  # plain values: checkpoints are read weights-only
        if isinstance(steps_per_batch, bool) or not isinstance(steps_per_batch, int) or steps_per_batch < 1:
            raise ValueError(f"method.steps_per_batch must be an integer >= 1, got {steps_per_batch!r}")
        self.sigma = sigma
        self.net = net
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.allow_sigma_mismatch = allow_sigma_mismatch
        self.eval_noise_seed = eval_noise_seed
        self.steps_per_batch = steps_per_batch
        self.automatic_optimization = steps_per_batch == 1
        self.certify_defaults = {str(key): value for key, value in (certify_defaults or {}).items()}
        # The (0-indexed) training epoch whose end the weights are from: the last one trained, or the loaded
        # checkpoint's (None: neither, e.g. a checkpoint that records no epoch); metrics.json["certified_epoch"].
        self.weights_epoch: int | None = None
        self.save_hyperparameters(ignore=["net", "optimizer", "scheduler", "certify_defaults"])
        num_classes = net.num_classes
        self.train_acc = MulticlassAccuracy(num_classes, average="micro")
        self.val_acc_clean = MulticlassAccuracy(num_classes, average="micro")
        self.val_acc_noisy = MulticlassAccuracy(num_classes, average="micro")
        self.test_acc_clean = MulticlassAccuracy(num_classes, average="micro")
        self.test_acc_noisy = MulticlassAccuracy(num_classes, average="micro")

    @classmethod
    def prerequisites(cls, method: Mapping[str, Any]) -> tuple[Prerequisite, ...]:
        """The runs this method needs before it can train, given its config node ``method`` (none by default).

        Called by the run layer before anything is built; each :class:`Prerequisite` names the argument its
        checkpoint fills. A method overrides it to declare, e.g., a teacher it labels with.
        """
        return ()

    def forward(self, x: Tensor) -> Tensor:
        """The base classifier's logits for images in [0,1] pixel space."""
        return self.net(x)

    def training_loss(self, batch: Batch) -> StepOutput:
        """The method's loss on one training batch: the one hook a method overrides."""
        raise NotImplementedError(f"{type(self).__name__} must implement training_loss(batch)")

    def training_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> Tensor | None:
        """Compute the method's loss (one optimizer step per chunk when ``steps_per_batch > 1``) and log it."""
        x, y, indices = batch[:3]
        sigma = self.example_sigma(x, y, indices)
        if self.automatic_optimization:
            out = self.training_loss(Batch(x, y, indices, sigma))
            self._log_training(out)
            return out.loss
        size = len(x) // self.steps_per_batch
        if size == 0:
            raise ValueError(
                f"a training batch of {len(x)} images cannot be cut into method.steps_per_batch="
                f"{self.steps_per_batch} chunks; raise dataset.batch_size"
            )
        optimizer = self.optimizers()
        for chunk in range(self.steps_per_batch):
            part = slice(chunk * size, (chunk + 1) * size)
            part_sigma = sigma[part] if isinstance(sigma, Tensor) and sigma.dim() > 0 else sigma
            out = self.training_loss(Batch(x[part], y[part], indices[part], part_sigma))
            optimizer.zero_grad()  # type: ignore[union-attr]
            self.manual_backward(out.loss)
            optimizer.step()  # type: ignore[union-attr]
            self._log_training(out)
        return None

    def noise_refusal(self) -> str | None:
        """Why this method cannot train with a noise other than Gaussian (``gaussian_only``), or ``None``."""
        return self.gaussian_only

    def check_noise(self, noise: NoiseDistribution) -> None:
        """Refuse a non-Gaussian ``noise`` when the method's math is Gaussian (:meth:`noise_refusal`), in one line."""
        reason = self.noise_refusal()
        if noise is not GAUSSIAN and reason is not None:
            raise ValueError(f"noise={noise.name} cannot train method={self.method_name}: {reason}")

    def example_sigma(self, x: Tensor, y: Tensor, indices: Tensor) -> SigmaLike | None:
        """The noise level of each training example of a batch: ``None`` (the module's ``sigma``) by default.

        Data-dependent smoothing overrides it to return a per-example sigma ``[B]``; every method's loss then
        draws its noise at that sigma (``batch.sigma``).
        """
        return None

    def on_train_epoch_end(self) -> None:
        """Log the epoch's accuracy and learning rate, note the weights' epoch, step a manual optimization's scheduler.

        With ``steps_per_batch > 1`` (manual optimization) the epoch-wise scheduler steps here, after the rate of
        the epoch that ended was logged.
        """
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)
        self.log("train/lr", float(self.trainer.optimizers[0].param_groups[0]["lr"]), on_step=False, on_epoch=True)
        self.weights_epoch = self.current_epoch
        if not self.automatic_optimization and self.scheduler_factory is not None:
            self.lr_schedulers().step()  # type: ignore[union-attr]

    def _log_training(self, out: StepOutput) -> None:
        """Log a step's loss and terms, and count its predictions into the epoch's accuracy.

        The accuracy (a torchmetrics object) and the learning rate are logged once per epoch, in
        :meth:`on_train_epoch_end`: logged at every step, Lightning walked the metric's state to move it to the
        batch's device each time, about 7% of a LeNet Gaussian step on a CPU thread
        (``python -m rsbench.bench.training_throughput``); the epoch's values are the same.
        """
        self.train_acc.update(out.logits.detach(), out.labels)
        self.log("train/loss", out.loss.detach(), on_step=True, on_epoch=True, prog_bar=True)
        for name, value in out.terms.items():
            self.log(f"train/{name}", value.detach(), on_step=False, on_epoch=True)

    def validation_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        """Log ``val/acc_clean``, ``val/acc_noisy`` (the checkpoint criterion) and ``val/loss`` (noisy)."""
        self._evaluate(batch, batch_idx, "val", self.val_acc_clean, self.val_acc_noisy)

    def test_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        """Log ``test/acc_clean`` and ``test/acc_noisy`` (reported only; never used to select a model)."""
        self._evaluate(batch, batch_idx, "test", self.test_acc_clean, self.test_acc_noisy)

    def _evaluate(
        self,
        batch: tuple[Tensor, ...],
        batch_idx: int,
        stage: str,
        acc_clean: MulticlassAccuracy,
        acc_noisy: MulticlassAccuracy,
    ) -> None:
        x, y = batch[0], batch[1]
        generator = make_generator(x.device, self.eval_noise_seed, batch_idx)
        noisy_logits = self(self.add_noise(x, generator=generator))
        acc_clean(self(x), y)
        acc_noisy(noisy_logits, y)
        self.log(f"{stage}/loss", F.cross_entropy(noisy_logits, y), on_epoch=True)
        self.log(f"{stage}/acc_clean", acc_clean, on_epoch=True)
        self.log(f"{stage}/acc_noisy", acc_noisy, on_epoch=True, prog_bar=stage == "val")

    def configure_optimizers(self) -> Any:
        """The configured optimizer, with the scheduler stepped per epoch."""
        optimizer = self.optimizer_factory(self.trainable_parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}

    def trainable_parameters(self) -> Iterator[torch.nn.Parameter]:
        """The parameters the optimizer updates: all that are not frozen (LoRA freezes all but its adapters)."""
        return (parameter for parameter in self.parameters() if parameter.requires_grad)

    def method_hparams(self) -> dict[str, Any]:
        """The method's hyperparameters as constructed (``self.hparams``), JSON-safe: recorded in ``metrics.json``."""
        plain = (bool, int, float, str, type(None))
        return {key: value if isinstance(value, plain) else str(value) for key, value in self.hparams.items()}

    def signature(self) -> dict[str, Any]:
        """What a checkpoint of this module must match to be loaded: architecture, classes, input layer, sigma.

        A module trained with another noise than Gaussian adds its ``noise``; a checkpoint without it is Gaussian.
        """
        noise = {} if self.noise is GAUSSIAN else {"noise": self.noise.name}
        return {**self.net.signature(), "sigma": self.sigma, **noise}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store the signature (the method, and the dataset trained on) (:func:`rsbench.checkpoint.make_signature`)."""
        try:
            dataset = getattr(getattr(self.trainer, "datamodule", None), "name", None)
        except RuntimeError:  # not attached to a Trainer (a checkpoint saved by hand)
            dataset = None
        checkpoint[SIGNATURE_KEY] = make_signature(
            self.net, self.sigma, self.method_name, self.noise.name, dataset if isinstance(dataset, str) else None
        )

    def on_load_checkpoint(self, checkpoint: Mapping[str, Any]) -> None:
        """Refuse a checkpoint made for another architecture, class count, input layer or (by default) sigma.

        The weights are then the checkpoint's: :attr:`weights_epoch` becomes its ``epoch``.
        """
        self.check_checkpoint(checkpoint)
        self.weights_epoch = checkpoint_epoch(checkpoint)

    def check_checkpoint(self, checkpoint: Mapping[str, Any], source: str = "the checkpoint") -> None:
        """Raise :class:`CheckpointMismatchError` unless ``checkpoint`` was saved by a module of this signature.

        Args:
            checkpoint: a loaded Lightning checkpoint.
            source: how to name it in the message (its path).
        """
        saved = signature_of(checkpoint, source)
        expected = self.signature()
        expected.pop("noise", None)  # checked below, with its own hint
        if self.allow_sigma_mismatch:
            expected.pop("sigma")
        check_signature(saved, expected, source)
        trained_with = saved.get("noise", GAUSSIAN.name)
        if trained_with != self.noise.name and not self.allow_sigma_mismatch:
            raise CheckpointMismatchError(
                f"{source} was trained with {trained_with} noise, this run uses noise={self.noise.name} (choose "
                f"noise={trained_with}, or allow_sigma_mismatch=true to load it under another noise on purpose)"
            )


def checkpoint_epoch(checkpoint: Mapping[str, Any]) -> int | None:
    """The training epoch (0-indexed) a Lightning checkpoint was saved at the end of; ``None`` when it records none."""
    epoch = checkpoint.get("epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 else None
