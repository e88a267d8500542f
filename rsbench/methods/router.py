"""Training the two components of dual randomized smoothing (Sun, Mao and Vechev, ICLR 2026): router and experts.

``method=router`` (:class:`RouterTraining`) trains a classifier over the experts' sigmas on the table
``python -m rsbench.dual stage=labels`` writes: for each training image, every expert's certified radius at a small
n. By default as the paper trains its router (as reported; :mod:`rsbench.methods.router_loss`): soft targets
softmax(radii) with soft cross-entropy, the images no expert certifies left out, each expert's share rebalanced,
and Jeong and Shin's consistency term on m noisy copies at the sigma the router will be smoothed at. Its checkpoint
records ``sigmas`` in its signature so that ``router=checkpoint`` knows what its outputs mean. With
``method.denoiser_ckpt`` the router is trained behind a frozen denoiser, on D(x + delta), as the paper's router sees
denoised inputs; the signature then names the denoiser (``router_denoiser``: its SHA-256 and sigma), and
certification refuses that router without the same denoiser in front (:func:`rsbench.models.dual.build_router`).

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
from torch import Tensor, nn
from torch.utils.data import Dataset, Sampler

from rsbench.checkpoint import SIGNATURE_KEY, TRAINED_BEHIND, read_denoiser
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.loading import file_digest
from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.gaussian import GaussianAugmentation
from rsbench.methods.hparams import check_choice, check_float, check_int
from rsbench.methods.router_loss import (
    UNLABELLED,
    describe_targets,
    expert_shares,
    read_label_table,
    rebalance_weights,
    router_loss,
    training_targets,
)
from rsbench.methods.teacher import load_teacher

log = logging.getLogger(__name__)


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


class FrozenDenoiser(nn.Module):
    """A denoiser that never trains: no gradients for its weights, eval mode whatever mode it is put in.

    A registered submodule (it moves with the router to its device and memory layout); its BatchNorm statistics
    never change, as a frozen stage of the authors' ``train_denoiser.py`` (``requires_grad_(clf, False)``,
    ``clf.eval()``) never does.
    """

    def __init__(self, denoiser: nn.Module) -> None:
        super().__init__()
        self.denoiser = denoiser.requires_grad_(False).eval()

    def train(self, mode: bool = True) -> FrozenDenoiser:
        """Record ``mode`` without passing it on: the denoiser stays in eval mode."""
        self.training = mode
        return self

    def forward(self, x: Tensor) -> Tensor:
        """D(x), without a graph (only the router after it is trained)."""
        with torch.no_grad():
            return self.denoiser(x)


def frozen_denoiser(path: str, sigma: float, allow_sigma_mismatch: bool = False) -> tuple[FrozenDenoiser, dict]:
    """The DnCNN of a ``method=denoiser`` checkpoint, frozen, and its record for the router's signature.

    Raises:
        ConfigError: no file at ``path``, or the denoiser was trained at another sigma than the router's.
        CheckpointMismatchError: ``path`` is not a ``method=denoiser`` checkpoint.
    """
    option = f"method.denoiser_ckpt={path!r}"
    dncnn, signature, _ = read_denoiser(path, option, "pass a checkpoint written by python -m rsbench method=denoiser")
    trained = float(signature["sigma"])
    if abs(trained - sigma) > 1e-9 and not allow_sigma_mismatch:
        raise ConfigError(
            f"{option} was trained at sigma={trained}, the router is trained (and smoothed) at sigma={sigma}: give "
            "a denoiser for the router's sigma"
        )
    record = {"kind": "dncnn", "path": str(path), "sha256": file_digest(path), "sigma": trained}
    return FrozenDenoiser(dncnn), record


class RouterTraining(SmoothingModule):
    """A K-output classifier on noisy copies x + eps (eps at the router's sigma), trained on the experts' radii.

    The loss is :func:`~rsbench.methods.router_loss.router_loss` on the targets of
    :func:`~rsbench.methods.router_loss.training_targets`: the paper's recipe as reported by default (soft labels,
    uncertified images dropped, rebalanced, consistency ``strong``), each piece switched by its argument.

    Args:
        labels_file: the table of ``python -m rsbench.dual stage=labels`` (``radii`` [N_train, K], ``sigmas`` [K]).
        labels: ``soft`` (softmax of the radii, soft cross-entropy) or ``hard`` (the argmax expert).
        drop_uncertified: leave out the images no expert certifies.
        rebalance: weight expert k by w_k = 1 / (K' q_k) (:func:`~rsbench.methods.router_loss.rebalance_weights`).
        consistency: ``strong``, ``weak`` or ``none``, the name of the (num_noise, lbd, eta) the YAML fills in.
        num_noise: m, noisy copies per image (>= 1).
        lbd: lambda, the consistency (KL) weight (>= 0).
        eta: eta, the entropy weight (>= 0).
        denoiser_ckpt: a ``method=denoiser`` checkpoint (trained at the router's sigma) whose frozen DnCNN the
            router is trained behind: its inputs are D(x + delta); ``None``: the bare noisy inputs.
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments; ``sigma`` is the router's noise level
            and the network needs K outputs (``arch.num_classes=K``).
    """

    method_name = "router"

    def __init__(
        self,
        *,
        labels_file: str,
        labels: str = "soft",
        drop_uncertified: bool = True,
        rebalance: bool = True,
        consistency: str = "strong",
        num_noise: int = 2,
        lbd: float = 40.0,
        eta: float = 0.5,
        denoiser_ckpt: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.router_denoiser: FrozenDenoiser | None = None
        self.denoiser_record: dict[str, Any] | None = None
        if denoiser_ckpt is not None:
            self.router_denoiser, self.denoiser_record = frozen_denoiser(
                str(denoiser_ckpt), self.sigma, self.allow_sigma_mismatch
            )
            digest = self.denoiser_record["sha256"]
            log.info("the router trains behind the denoiser %s (sha256 %s)", denoiser_ckpt, digest)
        self.label_kind = check_choice("method.labels", labels, ("soft", "hard"))
        check_choice("method.consistency", consistency, ("strong", "weak", "none"))
        self.num_noise = check_int("method.num_noise (m, noisy copies per image)", num_noise, 1)
        self.lbd = check_float("method.lbd (lambda)", lbd)
        self.eta = check_float("method.eta (eta)", eta)
        table = read_label_table(labels_file)
        self.labels_file = str(labels_file)
        self.sigmas = table.sigmas
        if self.net.num_classes != len(self.sigmas):
            raise ConfigError(
                f"the router labels are over {len(self.sigmas)} sigmas {self.sigmas}, but the network has "
                f"{self.net.num_classes} outputs: pass arch.num_classes={len(self.sigmas)}"
            )
        self.targets, self.kept = training_targets(table, self.label_kind, bool(drop_uncertified))
        shares = expert_shares(self.targets, self.kept)
        self.class_weights = rebalance_weights(shares) if rebalance else None
        self.target_summary = describe_targets(
            self.sigmas, shares, self.class_weights, int(self.kept.sum()), int((table.labels != UNLABELLED).sum())
        )
        log.info("router targets (%s labels): %s", self.label_kind, self.target_summary)

    def forward(self, x: Tensor) -> Tensor:
        """The router's logits for images in [0,1] pixel space: router(D(x)) behind a denoiser, else router(x)."""
        return self.net(x if self.router_denoiser is None else self.router_denoiser(x))

    def training_loss(self, batch: Batch) -> StepOutput:
        """:func:`~rsbench.methods.router_loss.router_loss` over the kept images of the batch (0 when none is)."""
        rows = batch.indices.long().cpu()
        keep = self.kept[rows]
        m = self.num_noise
        if not bool(keep.any()):  # a zero loss that still has a graph (every parameter gets a zero gradient)
            logits = self(self.add_noise(batch.x, sigma=batch.sigma))
            return StepOutput(loss=logits.sum() * 0.0, logits=logits[:0], labels=batch.y[:0])
        x = batch.x[keep.to(batch.x.device)]
        sigma = batch.sigma if not isinstance(batch.sigma, Tensor) else batch.sigma[keep.to(batch.sigma.device)]
        targets = self.targets[rows[keep]].to(x.device)
        logits = self(self.noisy_copies(x, m, sigma=sigma))
        loss, terms = router_loss(logits.view(len(x), m, -1), targets, self.class_weights, self.lbd, self.eta)
        labels = targets.argmax(dim=1).repeat_interleave(m)
        return StepOutput(loss=loss, logits=logits, labels=labels, terms={**terms, "kept": keep.float().mean()})

    def train_sampler(self, dataset: Dataset) -> Sampler[int]:
        """Only the kept training images (labelled, and certified by some expert when dropping), shuffled."""
        indices = torch.as_tensor(list(dataset.indices))  # type: ignore[attr-defined]
        positions = self.kept[indices].nonzero().flatten()
        if len(positions) == 0:
            raise ConfigError(f"method.labels_file={self.labels_file!r} keeps none of the training images")
        return RoutedSampler(positions)

    def validation_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        """Noisy accuracy against the kept held-out images' argmax targets, and their soft cross-entropy."""
        datamodule = getattr(self.trainer, "datamodule", None)
        held = getattr(getattr(datamodule, "val_dataset", None), "indices", None)
        if held is None:
            return
        size = datamodule.eval_batch_size  # type: ignore[union-attr]
        indices = torch.as_tensor(list(held[batch_idx * size : batch_idx * size + len(batch[0])]))
        keep = self.kept[indices]
        if bool(keep.any()):
            x = batch[0][keep.to(batch[0].device)]
            targets = self.targets[indices[keep]].to(x.device)
            labels = targets.argmax(dim=1)
            noisy = self(self.add_noise(x))
            self.val_acc_clean(self(x), labels)
            self.val_acc_noisy(noisy, labels)
            self.log("val/loss", -(targets.to(noisy.dtype) * F.log_softmax(noisy, dim=1)).sum(1).mean(), on_epoch=True)
            self.log("val/acc_clean", self.val_acc_clean, on_epoch=True)
            self.log("val/acc_noisy", self.val_acc_noisy, on_epoch=True, prog_bar=True)

    def test_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        """A router has no test labels: the dual tool certifies it (``python -m rsbench.dual``), with ``test=false``."""
        raise ConfigError(
            "method=router trains a router; certify it with python -m rsbench.dual stage=certify (pass test=false here)"
        )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Record in the signature the sigmas the outputs stand for, and the denoiser the router trained behind.

        ``router=checkpoint`` reads ``sigmas``; certification reads :data:`~rsbench.checkpoint.TRAINED_BEHIND`.
        """
        super().on_save_checkpoint(checkpoint)
        checkpoint[SIGNATURE_KEY]["sigmas"] = list(self.sigmas)
        if self.denoiser_record is not None:
            checkpoint[SIGNATURE_KEY][TRAINED_BEHIND] = dict(self.denoiser_record)


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
