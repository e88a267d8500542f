"""Sun, Mao, Müller and Vechev (ICML 2025), "Average Certified Radius is a Poor Metric for Randomized Smoothing".

The paper shows that ACR can be raised by favouring easy inputs, and trains that way on purpose to make the point:
Gaussian training with m noise copies per image, plus three changes (the authors' ``code/train.py`` in
eth-sri/acr-weakness, whose flags name the options here):

* **Discard hard samples** (``--ds_hard --ds_epoch E --ds_threshold t``): at epoch E, every training image's
  p_A is estimated from ``ds_num_samples`` (100) noisy copies, and the images with p_A < t are dropped for the rest
  of training.
* **Reweight the data** (``--dataset_weight --dataset_weight_epoch k``): from epoch E on, every k epochs, p_A is
  re-estimated from 16 noisy copies of each kept image and the images are drawn with replacement with weight
  Phi^-1(CP_lower(max(16 p_A, 12), 16)), the one-sided 90% Clopper-Pearson bound: easy images (a larger certified
  radius) are drawn more often.
* **Adaptive attack on the noise** (``--adv --attacker pgd_radius_l2 --epsilon s --attack_steps T``): from epoch E
  on, each noise sample is pushed towards misclassification at its own norm (:func:`radius_pgd_noise`) before the
  training step.

Follows the code where it is more specific than the paper (each checked against it: ``tests/golden/sun2025.json``):

* p_A is the fraction of the N noisy copies whose top class is the label, in eval mode, on the training images as
  the training loader serves them (a random crop/flip on CIFAR-10), in float32 as the reference's ``.float().mean``;
  ``p_A >= t`` keeps an image, compared in float32 as numpy compares the reference's float32 array with its float
  threshold (so an exact tie such as 7 / 10 at t = 0.7 is kept). The estimate of epoch
  e uses the model at the end of epoch e - 1.
* From epoch E on, every epoch draws as many images as the full training set, with replacement (the reference's
  ``WeightedRandomSampler(weight, len(train set))``, or a uniform ``RandomSampler`` without ``--dataset_weight``);
  before E, the loader shuffles. Without ``--ds_hard``, E = 0: training draws with replacement and attacks from the
  first epoch.
* The weight of an image is computed from ``int(clip(p_A, 0.75, 1) * 16)`` votes, the reference's float32
  truncation; the weights keep their value between updates.
* Each loader batch is cut into m chunks with one optimizer step each (``_chunk_minibatch``, ``steps_per_batch =
  num_noise``); the m noise samples of a chunk are attacked in eval mode with frozen parameters, then the loss is the
  cross-entropy over the m copies of each image in train mode.

The per-image estimates are part of training: computed when an epoch's images are drawn (the sampler asks for them),
saved every minute to ``<run dir>/sun2025/`` while they are computed (:class:`rsbench.files.ImageTable`: an
interrupted estimate resumes; a file of another seed, epoch, N or image set is refused by name), and kept in
every checkpoint, so a run resumed after epoch E draws from the same kept images with the same weights. Their noise
is seeded like the rest of training, by the training seed and the epoch: the N copies of training image p in epoch e
come from their own stream (:data:`P_CORRECT_STREAM`, seed, e, N, p), so the counts depend neither on
``estimate_batch_size`` (how many copies go through the network at once) nor on which other images are estimated.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import norm
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from rsbench.certify.algorithm.bounds import clopper_pearson_lower
from rsbench.certify.algorithm.seeding import make_generator
from rsbench.certify.pipeline.progress import progress
from rsbench.certify.pipeline.subset import indices_digest
from rsbench.files import ImageTable
from rsbench.methods.attacks import RADIUS_PGD_NORMS, copies, frozen, radius_pgd_noise
from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_choice, check_float, check_int

log = logging.getLogger(__name__)

P_CORRECT_STREAM = 3
"""The first key of the p_A estimates' noise streams, ``make_generator(device, P_CORRECT_STREAM, seed, epoch, N, p)``,
setting them apart from the training epochs' seeds (``derive_seed(2, seed, epoch)``, rsbench.runs.epoch_seed)."""
WEIGHT_FLOOR = 0.75
"""The reference clips p_A to [0.75, 1] before counting votes for the data weight."""
WEIGHT_ALPHA = 0.1
"""The reference's ``proportion_confint(..., alpha=2 * 0.1, method="beta")[0]``: a one-sided bound at 0.1."""


def p_correct(counts: Tensor, num_samples: int) -> Tensor:
    """p_A as the reference computes it: ``counts / N`` in float32 (its ``(pred == y).float().mean()``)."""
    return counts.to(torch.float32) / num_samples


def hard_sample_mask(p_a: Tensor, threshold: float) -> Tensor:
    """The images kept by ``--ds_hard``: p_A >= threshold, compared in float32.

    float32 as numpy compares the reference's float32 array with a Python float (value-based casting in numpy 1,
    NEP 50 in numpy 2).

    Args:
        p_a: float32 estimates from :func:`p_correct`.
        threshold: the authors' ``--ds_threshold``.
    """
    return torch.from_numpy(p_a.numpy() >= threshold)


def dataset_weights(p_a: Tensor, num_samples: int) -> Tensor:
    """``--dataset_weight``: Phi^-1 of the one-sided 90% Clopper-Pearson lower bound of int(clip(p_A, 0.75, 1) * N).

    Returns float64 weights, one per image (``WeightedRandomSampler`` normalises them). The vote count is truncated
    in float32 as the reference's ``(np.clip(p, 0.75, 1.0) * N).astype(int)``.

    Args:
        p_a: float32 estimates from :func:`p_correct` with N = ``num_samples``.
        num_samples: N, the noisy copies per image (the authors' 16).
    """
    votes = (p_a.to(torch.float32).clamp(WEIGHT_FLOOR, 1.0) * num_samples).to(torch.int64).tolist()
    lower = [clopper_pearson_lower(k, num_samples, WEIGHT_ALPHA) for k in votes]
    return torch.tensor(norm.ppf(lower), dtype=torch.float64)


@dataclass
class SamplingState:
    """What Sun et al.'s training has decided about the training images so far (kept in every checkpoint).

    Attributes:
        kept: ``[N_train]`` bool, the images not discarded as hard (``None``: none discarded yet).
        kept_epoch: the epoch whose estimate decided ``kept``.
        weights: ``[N_train]`` float64 draw weights, 0 for discarded images (``None``: not computed yet).
        weights_epoch: the epoch whose estimate gave ``weights``.
    """

    kept: Tensor | None = None
    kept_epoch: int | None = None
    weights: Tensor | None = None
    weights_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The state as a checkpoint entry."""
        return {key: getattr(self, key) for key in ("kept", "kept_epoch", "weights", "weights_epoch")}

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> SamplingState:
        """The state from a checkpoint entry written by :meth:`to_dict`."""
        return cls(**{key: entry.get(key) for key in ("kept", "kept_epoch", "weights", "weights_epoch")})


@dataclass(frozen=True)
class EpochPlan:
    """How an epoch draws its training images.

    Attributes:
        replacement: draw with replacement (from the stage epoch E on) or shuffle (before E).
        weights: the draw weight of each training position (``None``: uniform over all images).
    """

    replacement: bool
    weights: Tensor | None


class PlanSampler(Sampler[int]):
    """The training order of one epoch, asked from the module when the epoch's images are first drawn.

    ``len`` is the size of the training set in every epoch (the reference draws ``len(train set)`` images with
    replacement after the stage epoch), so Lightning's batch count never changes. The plan is read when iteration
    starts, which Lightning does when it creates the epoch's iterator (after the previous epoch ended).
    """

    def __init__(self, module: Sun2025, size: int) -> None:
        self.module = module
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        plan = self.module.epoch_plan(self.module.trainer.current_epoch)
        generator = torch.Generator()
        generator.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))  # as RandomSampler does
        if not plan.replacement:
            yield from torch.randperm(self.size, generator=generator).tolist()
            return
        weights = plan.weights if plan.weights is not None else torch.ones(self.size, dtype=torch.float64)
        yield from torch.multinomial(weights, self.size, replacement=True, generator=generator).tolist()


class Sun2025(SmoothingModule):
    """Sun et al. (ICML 2025): Gaussian training with hard samples discarded, data reweighted and noise attacked.

    See the module docstring for what each option does and how the code is followed.

    Args:
        num_noise: m, noise copies per image and chunks per loader batch (``--num-noise-vec``, 4).
        ds_hard: discard the images with p_A < ``ds_threshold`` at epoch ``ds_epoch`` (``--ds_hard``).
        ds_epoch: E (``--ds_epoch``); also when the attack and the with-replacement draws start.
        ds_threshold: t (``--ds_threshold``).
        ds_num_samples: noisy copies per image of that estimate (the reference's N0 = 100).
        p_correct_file: a table of per-training-image p_A (``.npy`` or ``.pt``, training-set order) to decide the
            hard samples from instead of an estimate (``--p_corr_file``; the authors' ImageNet runs).
        dataset_weight: draw images with the weights of :func:`dataset_weights` (``--dataset_weight``).
        dataset_weight_epoch: k, epochs between weight updates (``--dataset_weight_epoch``).
        dataset_weight_samples: noisy copies per image of the weight estimate (``--num_noise_dataset_weight``, 16).
        adv: attack the noise (``--adv``).
        attacker: ``pgd_radius_l2`` or ``pgd_radius_linf`` (``--attacker``).
        epsilon: the attack's step size (``--epsilon``; raw l2 units of [0,1] pixels, as the reference's).
        attack_steps: T (``--attack_steps``).
        estimate_batch_size: noisy copies per forward pass of the p_A estimates (memory only: the same draws).
        estimate_seed: the seed of the estimates' noise, the training seed in the YAML (``${seed}``): the N copies of
            training image p in epoch e draw from (:data:`P_CORRECT_STREAM`, seed, e, N, p).
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments (net, sigma, optimizer, ...).
    """

    method_name = "sun2025"
    gaussian_only = (
        "its data weights are Gaussian radii Phi^-1(p_A) and its attack keeps each Gaussian noise sample's norm "
        "(Sun et al. 2025)"
    )

    def __init__(
        self,
        *,
        num_noise: int = 4,
        ds_hard: bool = True,
        ds_epoch: int = 60,
        ds_threshold: float = 0.5,
        ds_num_samples: int = 100,
        p_correct_file: str | None = None,
        dataset_weight: bool = True,
        dataset_weight_epoch: int = 10,
        dataset_weight_samples: int = 16,
        adv: bool = True,
        attacker: str = "pgd_radius_l2",
        epsilon: float = 0.25,
        attack_steps: int = 3,
        estimate_batch_size: int = 8192,
        estimate_seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_noise = check_int("method.num_noise", num_noise, 1)
        self.ds_hard = bool(ds_hard)
        self.ds_epoch = check_int("method.ds_epoch", ds_epoch, 0)
        self.ds_threshold = check_float("method.ds_threshold", ds_threshold)
        if self.ds_threshold > 1:
            raise ValueError(f"method.ds_threshold must be in [0, 1], got {ds_threshold!r}")
        self.ds_num_samples = check_int("method.ds_num_samples", ds_num_samples, 1)
        self.p_correct_file = None if p_correct_file is None else Path(p_correct_file).expanduser()
        self.dataset_weight = bool(dataset_weight)
        self.dataset_weight_epoch = check_int("method.dataset_weight_epoch", dataset_weight_epoch, 1)
        self.dataset_weight_samples = check_int("method.dataset_weight_samples", dataset_weight_samples, 1)
        self.adv = bool(adv)
        self.attacker = check_choice("method.attacker", attacker, tuple(f"pgd_radius_{n}" for n in RADIUS_PGD_NORMS))
        self.epsilon = check_float("method.epsilon", epsilon)
        self.attack_steps = check_int("method.attack_steps", attack_steps, 1)
        self.estimate_batch_size = check_int("method.estimate_batch_size", estimate_batch_size, 1)
        self.estimate_seed = check_int("method.estimate_seed", estimate_seed, 0)
        if self.p_correct_file is not None and not self.ds_hard:
            raise ValueError("method.p_correct_file decides the hard samples: it needs method.ds_hard=true")
        self.state = SamplingState()

    # ------------------------------------------------------------------------------------------- the schedule

    @property
    def stage_epoch(self) -> int:
        """E: the epoch from which images are drawn with replacement and the noise is attacked (0 without ds_hard)."""
        return self.ds_epoch if self.ds_hard else 0

    def adv_active(self, epoch: int) -> bool:
        """Whether the noise is attacked in ``epoch`` (the reference's ``args.adv_active``)."""
        return self.adv and epoch >= self.stage_epoch

    def weight_epochs(self, max_epochs: int) -> list[int]:
        """The epochs at which the weights are re-estimated: E, E + k, ... below ``max_epochs``."""
        if not self.dataset_weight:
            return []
        return list(range(self.stage_epoch, max_epochs, self.dataset_weight_epoch))

    # -------------------------------------------------------------------------------------------- the training

    def training_loss(self, batch: Batch) -> StepOutput:
        """Cross-entropy over the m (attacked, from the stage epoch on) noisy copies of each image of the chunk."""
        m = self.num_noise
        noise = self.noise_copies(batch.x, m, batch.sigma)
        attacked = self.adv_active(self.current_epoch)
        if attacked:
            with frozen(self.net):
                noise = radius_pgd_noise(
                    self.net, batch.x, batch.y, noise, self.epsilon, self.attack_steps, self.attacker.split("_")[-1]
                )
        logits = self(copies(batch.x, m) + noise)
        labels = copies(batch.y, m)
        loss = F.cross_entropy(logits, labels)
        kept = self.state.kept
        terms = {
            "adv_active": torch.tensor(float(attacked)),
            "kept_fraction": torch.tensor(1.0 if kept is None else float(kept.float().mean())),
        }
        return StepOutput(loss=loss, logits=logits, labels=labels, terms=terms)

    def train_sampler(self, dataset: Dataset) -> Sampler[int]:
        """The training order (read by :class:`rsbench.data.ImageDataModule`): :class:`PlanSampler`."""
        return PlanSampler(self, len(dataset))  # type: ignore[arg-type]

    def epoch_plan(self, epoch: int) -> EpochPlan:
        """How ``epoch`` draws its images, estimating p_A first when this epoch is one that decides."""
        if epoch < self.stage_epoch:
            return EpochPlan(replacement=False, weights=None)
        dataset = self._training_images()
        size = len(dataset)  # type: ignore[arg-type]
        if self.ds_hard and (self.state.kept is None or self.state.kept_epoch is None):
            if epoch != self.stage_epoch:
                log.warning("sun2025: the hard-sample decision of epoch %d is missing; deciding now", self.stage_epoch)
            self.state.kept = self._hard_sample_decision(dataset, epoch)
            self.state.kept_epoch = epoch
        kept = self.state.kept if self.state.kept is not None else torch.ones(size, dtype=torch.bool)
        if not self.dataset_weight:
            return EpochPlan(replacement=True, weights=kept.to(torch.float64))
        due = max(e for e in self.weight_epochs(epoch + 1))
        if self.state.weights_epoch != due:
            if self.state.weights_epoch is not None and self.state.weights_epoch > due:
                raise RuntimeError(f"data weights of epoch {self.state.weights_epoch} found at epoch {epoch}")
            if due != epoch:
                log.warning(
                    "sun2025: the data weights of epoch %d are missing; estimating them now (epoch %d)", due, epoch
                )
            self.state.weights = self._weights(dataset, kept, epoch)
            self.state.weights_epoch = due
        assert self.state.weights is not None
        return EpochPlan(replacement=True, weights=self.state.weights)

    def _hard_sample_decision(self, dataset: Dataset, epoch: int) -> Tensor:
        if self.p_correct_file is not None:
            p_a = _read_table(self.p_correct_file, len(dataset))  # type: ignore[arg-type]
            source = f"{self.p_correct_file}"
        else:
            counts = self._estimate(dataset, torch.arange(len(dataset)), self.ds_num_samples, epoch)  # type: ignore[arg-type]
            p_a = p_correct(counts, self.ds_num_samples)
            source = f"{self.ds_num_samples} noisy copies each, the model after epoch {epoch - 1}"
        kept = hard_sample_mask(p_a, self.ds_threshold)
        if not bool(kept.any()):
            raise RuntimeError(f"sun2025: every training image has p_A < method.ds_threshold={self.ds_threshold}")
        log.info(
            "sun2025: epoch %d keeps %d of %d training images (p_A >= %g; %s)",
            epoch,
            int(kept.sum()),
            len(kept),
            self.ds_threshold,
            source,
        )
        return kept

    def _weights(self, dataset: Dataset, kept: Tensor, epoch: int) -> Tensor:
        positions = kept.nonzero().flatten()
        counts = self._estimate(dataset, positions, self.dataset_weight_samples, epoch)
        weights = torch.zeros(len(kept), dtype=torch.float64)
        weights[positions] = dataset_weights(
            p_correct(counts, self.dataset_weight_samples), self.dataset_weight_samples
        )
        log.info(
            "sun2025: epoch %d data weights from %d noisy copies of %d images: %s",
            epoch,
            self.dataset_weight_samples,
            len(positions),
            _describe(weights[positions]),
        )
        return weights

    # ------------------------------------------------------------------------------------------- the estimate

    def count_correct(
        self, x: Tensor, y: Tensor, num_samples: int, generators: Sequence[torch.Generator] | None = None
    ) -> Tensor:
        """How many of ``num_samples`` noisy copies of each image the base classifier labels ``y`` (eval mode).

        Args:
            x: images ``[B, C, H, W]`` in [0,1].
            y: labels ``[B]``.
            num_samples: N, noisy copies per image (drawn by :meth:`noise_copies`, grouped by image).
            generators: one noise stream per image (image i's N copies come from ``generators[i]`` alone); ``None``:
                one draw for the whole batch from the global stream.

        Returns:
            ``[B]`` int64 counts.
        """
        with frozen(self.net), torch.no_grad():
            if generators is None:
                noise = self.noise_copies(x, num_samples)
            else:
                if len(generators) != len(x):
                    raise ValueError(f"{len(generators)} noise streams for {len(x)} images")
                noise = torch.cat(
                    [self.noise_copies(x[i : i + 1], num_samples, generator=g) for i, g in enumerate(generators)]
                )
            hits = self(copies(x, num_samples) + noise).argmax(dim=1) == copies(y, num_samples)
        return hits.view(len(x), num_samples).sum(dim=1).cpu()

    def estimate_generators(self, positions: Tensor, num_samples: int, epoch: int) -> list[torch.Generator]:
        """The noise stream of each training image at ``positions`` in the estimate of ``epoch`` with N copies."""
        keys = (P_CORRECT_STREAM, self.estimate_seed, epoch, num_samples)
        return [make_generator(self.device, *keys, int(p)) for p in positions]

    def _estimate(self, dataset: Dataset, positions: Tensor, num_samples: int, epoch: int) -> Tensor:
        """Counts of correct noisy copies for the images at ``positions``, resumable through a partial file.

        Image p's copies come from :meth:`estimate_generators`, so the counts are the same for every
        ``estimate_batch_size`` and however often the estimate was interrupted.
        """
        together = max(1, self.estimate_batch_size // num_samples)
        table = self._estimate_table(epoch, num_samples, positions)
        if table.resumed:
            log.info("sun2025: resuming the p_A estimate of epoch %d from %s", epoch, table.path)
        todo = torch.as_tensor(table.missing(), dtype=torch.long)
        counter = progress(
            len(positions),
            f"sun2025 p_A estimate (epoch {epoch}, N={num_samples})",
            "images",
            len(positions) - len(todo),
        )
        for first in range(0, len(todo), together):
            rows = todo[first : first + together]
            items = [dataset[int(p)] for p in positions[rows]]
            x = torch.stack([item[0] for item in items]).to(self.device)
            y = torch.as_tensor([int(item[1]) for item in items], device=self.device)
            generators = self.estimate_generators(positions[rows], num_samples, epoch)
            table.put(rows, self.count_correct(x, y, num_samples, generators))
            counter.update(len(items))
            table.checkpoint()  # saved every minute and on a stop request, which stops here (rsbench.stop)
        counter.close()
        return table.finish()

    def _estimate_table(self, epoch: int, num_samples: int, positions: Tensor) -> ImageTable:
        """The counts of the estimate of ``epoch`` with N copies at ``positions`` (-1: not counted yet), on disk.

        Its key: the epoch, N, the noise stream, the seed and the images (a digest of ``positions``); a file of
        before, ``{positions, counts}`` without a key, is read as the key its name and positions imply.
        """
        key = {
            "epoch": epoch,
            "num_samples": num_samples,
            "stream": P_CORRECT_STREAM,
            "seed": self.estimate_seed,
            "positions": indices_digest(positions.tolist()),
        }

        def legacy_key(stored: Mapping[str, Any]) -> dict[str, Any]:
            return (
                {**key, "positions": indices_digest(torch.as_tensor(stored["positions"]).tolist())}
                if "positions" in stored
                else {}
            )

        return ImageTable(
            self._estimate_path(epoch, num_samples, len(positions)),
            key,
            (len(positions),),
            torch.int64,
            f"the sun2025 p_A counts of epoch {epoch}",
            values_name="counts",
            fixed={"positions": positions},
            legacy_key=legacy_key,
        )

    def _estimate_path(self, epoch: int, num_samples: int, images: int) -> Path | None:
        trainer = self._trainer
        root = getattr(trainer, "default_root_dir", None) if trainer is not None else None
        if root is None:
            return None
        # (files of the earlier per-chunk streams were named ..._chunk<k>_seed<s>.pt: never read as these)
        name = (
            f"p_correct_epoch{epoch}_n{num_samples}_images{images}_stream{P_CORRECT_STREAM}_seed{self.estimate_seed}.pt"
        )
        return Path(root) / "sun2025" / name

    def _training_images(self) -> Dataset:
        datamodule = getattr(self.trainer, "datamodule", None)
        dataset = getattr(datamodule, "train_dataset", None)
        if dataset is None:
            raise RuntimeError(
                "sun2025 estimates p_A on the training images of an rsbench ImageDataModule; fit with one"
            )
        return dataset

    # ------------------------------------------------------------------------------------------- checkpoints

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Also store the kept images and the data weights (:class:`SamplingState`)."""
        super().on_save_checkpoint(checkpoint)
        checkpoint["sun2025"] = self.state.to_dict()

    def on_load_checkpoint(self, checkpoint: Mapping[str, Any]) -> None:
        """Restore the kept images and data weights, so a resumed run draws as the stopped one would have."""
        super().on_load_checkpoint(checkpoint)
        if "sun2025" in checkpoint:
            self.state = SamplingState.from_dict(checkpoint["sun2025"])


def _read_table(path: Path, size: int) -> Tensor:
    """A per-training-image p_A table (``.npy`` or a tensor in ``.pt``) as float32, checked against ``size``."""
    if not path.is_file():
        raise FileNotFoundError(f"method.p_correct_file={str(path)!r} is not a file")
    if path.suffix == ".npy":
        table = torch.from_numpy(np.load(path)).flatten()
    else:
        table = torch.as_tensor(torch.load(path, map_location="cpu", weights_only=True)).flatten()
    if len(table) != size:
        raise ValueError(f"method.p_correct_file={str(path)!r} holds {len(table)} values for {size} training images")
    return table.to(torch.float32)


def _describe(values: Tensor) -> str:
    if len(values) == 0:
        return "none"
    return f"min {float(values.min()):.3f}, mean {float(values.mean()):.3f}, max {float(values.max()):.3f}"


__all__ = [
    "P_CORRECT_STREAM",
    "EpochPlan",
    "PlanSampler",
    "SamplingState",
    "Sun2025",
    "dataset_weights",
    "hard_sample_mask",
    "p_correct",
]
