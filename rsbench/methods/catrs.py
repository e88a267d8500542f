"""CAT-RS: confidence-aware training of smoothed classifiers (Jeong, Kim and Shin, AAAI 2023)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rsbench.data.splits import dataset_labels
from rsbench.errors import ConfigError
from rsbench.methods.attacks import copies, frozen, noise_kl_pgd, smoothed_probs
from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.catrs_card import CARD
from rsbench.methods.hparams import check_choice, check_float, check_int
from rsbench.methods.prerequisites import Prerequisite
from rsbench.methods.teacher import load_teacher, teacher_key, teacher_soft_labels

SOFT_LABELS = ("teacher", "self")
TEACHER_SIGMA = 0.25  # the authors' teacher for every student sigma (smooth_prediction.py on the sigma 0.25 model)


def bottom_k_loss(losses: Tensor, accept: Tensor) -> Tensor:
    """L_low (eq. (6)) per image: the sum of the ``accept`` smallest of the M losses, divided by M (not by K).

    Args:
        losses: ``[B, M]`` cross-entropies of the M noisy copies of each image.
        accept: ``[B]`` K+ = max(K, 1), the number of smallest losses kept.
    """
    num_noise = losses.shape[1]
    ordered = losses.sort(dim=1).values
    keep = torch.arange(num_noise, device=losses.device) < accept.view(-1, 1)
    return (ordered * keep).sum(dim=1) / num_noise


def worst_case_kl(log_probs: Tensor, targets: Tensor, num_noise: int) -> Tensor:
    """L_high (eq. (7)) per image: max over the M adversarial copies of KL(y_hat || softmax).

    Args:
        log_probs: ``[B * M, C]`` log-softmax at the adversarial noise, grouped by image.
        targets: ``[B, C]`` soft labels y_hat.
        num_noise: M.
    """
    rows = F.kl_div(log_probs, copies(targets, num_noise), reduction="none").sum(dim=1)
    return rows.view(-1, num_noise).max(dim=1).values


class CATRS(SmoothingModule):
    """CAT-RS (Jeong, Kim and Shin 2023): L = L_low + lambda * 1[K = M] * L_high (eq. (9)), per chunk.

    Per chunk of images (``steps_per_batch = num_noise``, one optimizer step per chunk, as ``train_catrs.py``):

    1. M noise samples; a train-mode forward of x + delta_i; p_hat = the fraction of the M hard predictions that
       are y (with ``confidence_mask=true``: the teacher's y_hat_y instead, the authors' ImageNet cold-start fix).
    2. In eval mode with frozen parameters, each delta_i is moved by T PGD steps within an l2 ball of radius
       epsilon to maximise KL(y_hat || F(x + delta_i)), re-standardised to delta_i's mean and uncentred RMS
       after each step (:func:`~rsbench.methods.attacks.noise_kl_pgd`).
    3. A second train-mode forward of x + delta_i* (BatchNorm sees both forwards, as in the code).
    4. K ~ Bin(M, p_hat), K+ = max(K, 1); L_low = the sum of the K+ smallest CE(F(x + delta_i), y) divided by M
       (:func:`bottom_k_loss`); L_high = max_i KL(y_hat || F(x + delta_i*)) (:func:`worst_case_kl`), applied only
       where K+ = M, weight ``lbd``. The loss is the mean over the images.

    The soft label y_hat (``soft_label``):

    * ``teacher`` (the paper's default): the smoothed vote histogram (hard votes / N, N = ``teacher_num_samples``)
      of a pretrained Gaussian model on each training image (:mod:`rsbench.methods.teacher`), computed when
      training starts, cached on disk and looked up by ``Batch.indices``. The authors use a sigma = 0.25 teacher
      for every training sigma; its votes are taken at the sigma it was trained at unless ``teacher_sigma`` says
      otherwise. **Deviation:** votes on the evaluation view of each image, not on one random training crop.
    * ``self`` (the paper's Appendix G.1 ablation, not in the released code): the mean of F(x + delta_i) over the
      clean-noise copies, detached (a constant target, as the teacher's is).

    Code, not paper: the full-accept mask tests the clamped K+ = M (the paper writes K = M; they differ only
    for M = 1, where the code always applies L_high); ``double_epsilon_epoch`` is the authors' ``--warmup``
    (epsilon doubles from that epoch on; ImageNet used 80), not described in the paper.

    Args:
        num_noise: M (>= 1).
        epsilon: the l2 radius of the noise search, raw units (>= 0; the authors' ``--eps 256`` is 1.0).
        num_steps: T (>= 1).
        lbd: lambda, the weight of L_high (>= 0).
        soft_label: ``teacher`` or ``self``.
        teacher_ckpt: the Gaussian teacher's rsbench checkpoint (same architecture and dataset).
        teacher_num_samples: N, votes per training image (>= 1; the authors use 10,000).
        teacher_sigma: the sigma of the teacher's votes (``None``: the sigma it was trained at).
        teacher_seed: the seed of the vote noise.
        teacher_batch_size: noisy copies per teacher forward pass.
        teacher_cache_dir: where the soft labels are cached (``None``: ``soft_labels/`` beside the checkpoint).
        confidence_mask: draw K from the teacher's y_hat_y instead of the model's own vote accuracy.
        double_epsilon_epoch: from this epoch on the search radius is 2 * epsilon (``None``: never).
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments (net, sigma, optimizer, ...).
    """

    method_name = "catrs"
    gaussian_only = (
        "its teacher is a Gaussian model and its worst-case noise search re-standardises "
        "Gaussian noise (Jeong, Kim and Shin 2023, eq. (7))"
    )

    @classmethod
    def prerequisites(cls, method: Mapping[str, Any]) -> tuple[Prerequisite, ...]:
        """With ``soft_label=teacher``, the authors' teacher: ``method=gaussian sigma=0.25`` with this run's recipe.

        The authors train it with the student's schedule (CAT-RS on MNIST: 150 epochs, drops at 51 and 101, and so
        its teacher: ``train_cohen.py mnist lenet --lr_step_size 50 --epochs 150``), which ``method=gaussian`` alone
        would not give (90 epochs), so the schedule is kept. ``method.teacher_ckpt`` names a teacher of your own.
        """
        if method.get("soft_label", "teacher") != "teacher":
            return ()
        teacher = Prerequisite(
            argument="teacher_ckpt",
            overrides=("method=gaussian", f"sigma={TEACHER_SIGMA}"),
            keep=("trainer.max_epochs", "scheduler.milestones"),
            checkpoint="best",  # the epoch of best validation noisy accuracy, as the authors' teachers
            folder=CARD.prerequisite_folder,
            name="CAT-RS teacher",
            description=f"the sigma={TEACHER_SIGMA} Gaussian model",
        )
        return (teacher,)

    def __init__(
        self,
        *,
        num_noise: int = 4,
        epsilon: float = 1.0,
        num_steps: int = 4,
        lbd: float = 1.0,
        soft_label: str = "teacher",
        teacher_ckpt: str | None = None,
        teacher_num_samples: int = 10_000,
        teacher_sigma: float | None = None,
        teacher_seed: int = 0,
        teacher_batch_size: int = 1000,
        teacher_cache_dir: str | None = None,
        confidence_mask: bool = False,
        double_epsilon_epoch: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_noise = check_int("method.num_noise", num_noise, 1)
        self.epsilon = check_float("method.epsilon", epsilon)
        self.num_steps = check_int("method.num_steps", num_steps, 1)
        self.lbd = check_float("method.lbd", lbd)
        self.soft_label = check_choice("method.soft_label", soft_label, SOFT_LABELS)
        self.teacher_num_samples = check_int("method.teacher_num_samples", teacher_num_samples, 1)
        self.teacher_sigma = (
            None if teacher_sigma is None else check_float("method.teacher_sigma", teacher_sigma, 0.0, strict=True)
        )
        self.teacher_seed = check_int("method.teacher_seed", teacher_seed, 0)
        self.teacher_batch_size = check_int("method.teacher_batch_size", teacher_batch_size, 1)
        self.confidence_mask = bool(confidence_mask)
        self.double_epsilon_epoch = (
            None if double_epsilon_epoch is None else check_int("method.double_epsilon_epoch", double_epsilon_epoch, 0)
        )
        # Read when fit starts (load_teacher names a missing file); `python -m rsbench` checks it before any work, or
        # trains the teacher into this path first (prerequisites(), resolved by rsbench/runs/prerequisites.py).
        self.teacher_ckpt = None if teacher_ckpt is None else Path(teacher_ckpt).expanduser()
        if self.soft_label == "self" and self.confidence_mask:
            raise ValueError(
                "method.confidence_mask=true draws K from the teacher's labels: it needs soft_label=teacher"
            )
        self.teacher_cache_dir = None if teacher_cache_dir is None else Path(teacher_cache_dir).expanduser()
        self.soft_labels: Tensor | None = None
        """The teacher's soft labels of the full training set ``[N_train, C]`` on the CPU (set when fit starts)."""

    def current_epsilon(self) -> float:
        """The search radius of the current epoch (doubled from ``double_epsilon_epoch`` on)."""
        doubled = self.double_epsilon_epoch is not None and self.current_epoch >= self.double_epsilon_epoch
        return 2 * self.epsilon if doubled else self.epsilon

    def on_fit_start(self) -> None:
        """With ``soft_label=teacher``, label the training set with the teacher (or read its cache) before training."""
        if self.soft_label == "teacher" and self.soft_labels is None:
            self.soft_labels = self._teacher_labels()

    def _teacher_labels(self) -> Tensor:
        datamodule = getattr(self.trainer, "datamodule", None)
        if self.teacher_ckpt is None:
            dataset = getattr(datamodule, "name", "<dataset>")
            raise ConfigError(
                "CAT-RS (method.soft_label=teacher) needs a pretrained Gaussian teacher (the authors use sigma=0.25). "
                "Train one with\n"
                f"  python -m rsbench method=gaussian dataset={dataset} arch={self.net.arch} sigma=0.25\n"
                "and pass method.teacher_ckpt=<that run's directory>/checkpoints/best.ckpt "
                "(or use method.soft_label=self: the model's own mean prediction, no teacher)"
            )
        if not self.teacher_ckpt.is_file():
            raise ConfigError(f"method.teacher_ckpt={str(self.teacher_ckpt)!r} is not a file")
        if datamodule is None or not hasattr(datamodule, "source"):
            raise ConfigError(
                "CAT-RS teacher labels are computed on the training set of an rsbench ImageDataModule; fit with "
                "datamodule=..., or set module.soft_labels to a [num_train_images, num_classes] table yourself"
            )
        images = datamodule.source(datamodule.data_dir, True, datamodule.eval_transform, False)
        teacher, trained_sigma = load_teacher(self.teacher_ckpt, self.net)
        teacher.to(self.device)
        sigma = trained_sigma if self.teacher_sigma is None else self.teacher_sigma
        key = teacher_key(
            teacher, datamodule.name, dataset_labels(images), self.teacher_num_samples, sigma, self.teacher_seed
        )
        cache_dir = self.teacher_cache_dir or self.teacher_ckpt.parent / "soft_labels"
        return teacher_soft_labels(teacher, images, key, cache_dir, self.teacher_batch_size)

    def sample_accept(self, p_hat: Tensor) -> Tensor:
        """K ~ Binomial(M, p_hat), one per image (long)."""
        probs = p_hat.detach().float().clamp(0, 1)
        return torch.distributions.Binomial(total_count=self.num_noise, probs=probs).sample().long()

    def targets(self, batch: Batch, clean_logits: Tensor) -> Tensor:
        """y_hat ``[B, C]``: the teacher's row for each image, or the detached mean prediction (``self``).

        Always float32 or wider, whatever the logits' dtype: under bf16 autocast (``trainer=gpu``) the vote
        histograms (multiples of 1/N, N = 10,000) would otherwise be rounded to 8 significant bits.
        """
        dtype = torch.promote_types(clean_logits.dtype, torch.float32)
        if self.soft_label == "self":
            return smoothed_probs(clean_logits.to(dtype), self.num_noise).detach()
        if self.soft_labels is None:
            raise RuntimeError("CAT-RS teacher soft labels are not loaded: they are computed when fit starts")
        rows = self.soft_labels[batch.indices.long().cpu()]
        return rows.to(device=clean_logits.device, dtype=dtype)

    def adversarial_noise(self, x: Tensor, targets: Tensor, noise: Tensor) -> Tensor:
        """The worst-case noise ``[B * M, ...]`` of images ``x`` from ``noise``, in eval mode, parameters frozen."""
        with frozen(self.net):
            return noise_kl_pgd(self.net, x, targets, noise, self.current_epsilon(), self.num_steps)

    def training_loss(self, batch: Batch) -> StepOutput:
        """mean(L_low + lbd * 1[K = M] * L_high) over the chunk's images (see the class docstring)."""
        m = self.num_noise
        labels = copies(batch.y, m)
        noise = self.noise_copies(batch.x, m, batch.sigma)
        clean_logits = self(copies(batch.x, m) + noise)
        targets = self.targets(batch, clean_logits)
        votes = F.one_hot(clean_logits.detach().argmax(dim=1), clean_logits.shape[1]).float()
        vote_share = votes.view(-1, m, votes.shape[1]).mean(dim=1)
        confidence = targets if self.confidence_mask else vote_share
        p_hat = confidence.gather(1, batch.y.view(-1, 1)).squeeze(1)
        adv_noise = self.adversarial_noise(batch.x, targets, noise)
        adv_log_probs = F.log_softmax(self(copies(batch.x, m) + adv_noise).to(targets.dtype), dim=1)  # KL in fp32+
        accept = self.sample_accept(p_hat).clamp(min=1)
        full = (accept == m).to(clean_logits.dtype)
        loss_low = bottom_k_loss(F.cross_entropy(clean_logits, labels, reduction="none").view(-1, m), accept)
        loss_high = worst_case_kl(adv_log_probs, targets, m)
        loss = (loss_low + self.lbd * loss_high * full).mean()
        terms = {"loss_low": loss_low.mean(), "loss_high": (loss_high * full).mean(), "full_accept": full.mean()}
        return StepOutput(loss=loss, logits=clean_logits, labels=labels, terms=terms)
