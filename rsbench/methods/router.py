"""Training the two components of dual randomized smoothing (Sun, Mao and Vechev, ICLR 2026): router and experts.

``method=router`` (:class:`RouterTraining`) trains a classifier over the experts' sigmas on the labels
``python -m rsbench.dual stage=labels`` writes: for each training image, the expert whose certificate (CERTIFY at a
small n) has the largest radius (:func:`rsbench.certify.dual.router_labels`). The router is trained with Gaussian
noise at the sigma it will be smoothed at, cross-entropy on those labels (unlabelled images, -1, are skipped), and
its checkpoint records ``sigmas`` in its signature so that ``router=checkpoint`` knows what its outputs mean.

``method=routed_expert`` (:class:`RoutedExpert`) is the other half of the iterative training: it fine-tunes one
expert (Gaussian augmentation at its sigma, from its checkpoint) on the training images the smoothed router sends
to it (``python -m rsbench.dual stage=route``), so that each expert specialises on its inputs; relabelling and
retraining the router then closes the loop (``python -m rsbench.dual stage=iterate`` runs the rounds).

Both read tables indexed like ``Batch.indices`` (positions in the full training set), written by the dual tool.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from rsbench.checkpoint import SIGNATURE_KEY
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.gaussian import GaussianAugmentation
from rsbench.methods.hparams import check_int
from rsbench.methods.teacher import load_teacher

log = logging.getLogger(__name__)

UNLABELLED = -1


def read_table(path: str | Path, key: str, option: str) -> dict[str, Any]:
    """A table the dual tool wrote (``labels`` or ``routes``: int64 per training image, -1 for none, and ``sigmas``)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{option}={str(path)!r} is not a file (write it with python -m rsbench.dual)")
    table = torch.load(path, map_location="cpu", weights_only=True)
    if key not in table or "sigmas" not in table:
        raise ConfigError(f"{option}={str(path)!r} holds no {key!r} table (write it with python -m rsbench.dual)")
    return dict(table)


class RoutedSampler(Sampler[int]):
    """Some positions of the training set (labelled, or routed to one expert), shuffled every epoch."""

    def __init__(self, positions: Tensor) -> None:
        self.positions = positions

    def __len__(self) -> int:
        return len(self.positions)

    def __iter__(self) -> Iterator[int]:
        order = torch.randperm(len(self.positions))
        yield from self.positions[order].tolist()


class RouterTraining(SmoothingModule):
    """Cross-entropy of a K-output classifier on x + eps (eps at the router's sigma) against the router labels.

    Args:
        labels_file: the table of ``python -m rsbench.dual stage=labels`` (``labels`` [N_train], ``sigmas`` [K]).
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments; ``sigma`` is the router's noise level
            and the network needs K outputs (``arch.num_classes=K``).
    """

    method_name = "router"

    def __init__(self, *, labels_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        table = read_table(labels_file, "labels", "method.labels_file")
        self.labels_file = str(labels_file)
        self.sigmas = [float(s) for s in table["sigmas"]]
        self.labels: Tensor = table["labels"].long()
        if self.net.num_classes != len(self.sigmas):
            raise ConfigError(
                f"the router labels are over {len(self.sigmas)} sigmas {self.sigmas}, but the network has "
                f"{self.net.num_classes} outputs: pass arch.num_classes={len(self.sigmas)}"
            )

    def training_loss(self, batch: Batch) -> StepOutput:
        """CE(h(x + eps), label) over the labelled images of the batch (0 with no gradient when none is)."""
        labels = self.labels[batch.indices.long().cpu()].to(batch.x.device)
        logits = self(self.add_noise(batch.x, sigma=batch.sigma))
        known = labels != UNLABELLED
        if not bool(known.any()):
            return StepOutput(loss=logits.sum() * 0.0, logits=logits[:0], labels=labels[:0])
        loss = F.cross_entropy(logits[known], labels[known])
        return StepOutput(
            loss=loss, logits=logits[known], labels=labels[known], terms={"labelled": known.float().mean()}
        )

    def train_sampler(self, dataset: Dataset) -> Sampler[int]:
        """Only the labelled training images (``stage=labels`` may label a subset), shuffled every epoch."""
        indices = torch.as_tensor(list(dataset.indices))  # type: ignore[attr-defined]
        positions = (self.labels[indices] != UNLABELLED).nonzero().flatten()
        if len(positions) == 0:
            raise ConfigError(f"method.labels_file={self.labels_file!r} labels none of the training images")
        return RoutedSampler(positions)

    def validation_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        """Noisy router accuracy on the held-out images' router labels (looked up by the validation split)."""
        datamodule = getattr(self.trainer, "datamodule", None)
        held = getattr(getattr(datamodule, "val_dataset", None), "indices", None)
        if held is None:
            return
        size = datamodule.eval_batch_size  # type: ignore[union-attr]
        indices = torch.as_tensor(list(held[batch_idx * size : batch_idx * size + len(batch[0])]))
        labels = self.labels[indices].to(batch[0].device)
        known = labels != UNLABELLED
        if bool(known.any()):
            x = batch[0][known]
            noisy = self(self.add_noise(x))
            self.val_acc_clean(self(x), labels[known])
            self.val_acc_noisy(noisy, labels[known])
            self.log("val/loss", F.cross_entropy(noisy, labels[known]), on_epoch=True)
            self.log("val/acc_clean", self.val_acc_clean, on_epoch=True)
            self.log("val/acc_noisy", self.val_acc_noisy, on_epoch=True, prog_bar=True)

    def test_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        """A router has no test labels: the dual tool certifies it (``python -m rsbench.dual``), with ``test=false``."""
        raise ConfigError(
            "method=router trains a router; certify it with python -m rsbench.dual stage=certify (pass test=false here)"
        )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Also record the sigmas the outputs stand for in the signature (read by ``router=checkpoint``)."""
        super().on_save_checkpoint(checkpoint)
        checkpoint[SIGNATURE_KEY]["sigmas"] = list(self.sigmas)


class RoutedExpert(GaussianAugmentation):
    """Gaussian augmentation of one expert on the training images the router sends to it (fine-tuning).

    Args:
        routes_file: the table of ``python -m rsbench.dual stage=route`` (``routes`` [N_train]: the smoothed router's
            choice for each training image, -1 where it abstained; ``sigmas`` [K]).
        expert: k, this expert's output of the router (its ``sigmas[k]`` must be this run's sigma).
        init_ckpt: the expert's checkpoint to start from (``None``: from scratch).
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments.
    """

    method_name = "routed_expert"

    def __init__(self, *, routes_file: str, expert: int, init_ckpt: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        table = read_table(routes_file, "routes", "method.routes_file")
        self.routes_file = str(routes_file)
        self.sigmas = [float(s) for s in table["sigmas"]]
        self.expert = check_int("method.expert", expert, 0, len(self.sigmas) - 1)
        if abs(self.sigmas[self.expert] - self.sigma) > 1e-9:
            raise ConfigError(
                f"method.expert={expert} is the sigma={self.sigmas[self.expert]} expert, this run trains at "
                f"sigma={self.sigma}"
            )
        self.routes: Tensor = table["routes"].long()
        if init_ckpt is not None:
            trained, trained_sigma = load_teacher(init_ckpt, self.net, option="method.init_ckpt")
            if abs(trained_sigma - self.sigma) > 1e-9 and not self.allow_sigma_mismatch:
                raise CheckpointMismatchError(
                    f"method.init_ckpt={init_ckpt!r} was trained at sigma={trained_sigma}, not {self.sigma}"
                )
            self.net.load_state_dict(trained.state_dict())

    def train_sampler(self, dataset: Dataset) -> Sampler[int]:
        """Only the positions of ``dataset`` (an ``IndexedDataset``) whose images are routed to this expert."""
        indices = torch.as_tensor(list(dataset.indices))  # type: ignore[attr-defined]
        positions = (self.routes[indices] == self.expert).nonzero().flatten()
        if len(positions) == 0:
            raise ConfigError(f"the router sends no training image to expert {self.expert} (sigma={self.sigma})")
        log.info("routed expert %d (sigma=%s): %d training images", self.expert, self.sigma, len(positions))
        return RoutedSampler(positions)
