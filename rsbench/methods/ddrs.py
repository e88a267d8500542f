"""Training with data-dependent smoothing, DS^2 (Alfarra, Bibi, Torr and Ghanem; the paper's Algorithm 2).

Every training example keeps its own sigma in a memory (initialised to sigma_0 and warm-started from the previous
epoch). For each batch, K steps of the per-input sigma search
(:func:`rsbench.certify.algorithm.sigma_search.optimize_sigma`, Algorithm 1) move the batch's sigmas, the memory is
updated, and the base method's loss is computed with those per-example sigmas (``batch.sigma``): ``method=ddrs
method.base=gaussian|smoothadv|macer``.

As in the authors' code, the search runs with the network in its training mode (BatchNorm batch statistics, and the
search's forward passes update the running statistics), with parameters receiving no gradient, scores clamped to
[0.02, 0.98], and K = 0 for the first ``sigma_search_from_epoch`` epochs (the paper: 50 of 200 on CIFAR-10, then
K = 1). ``conf/method/ddrs.yaml`` sets n and the objective to the paper's for the base (n = 8 for MACER, else 1;
DS-SmoothAdv ascends relu(R), as ``CIFAR10/train_smooth_adv.py``), and certifies with the same search by default
(its ``certify_defaults``). ``init_ckpt`` starts from a trained model's weights, as the paper's SmoothAdv-DS^2
fine-tunes a trained SmoothAdv model (and its ImageNet runs the authors' released models); optimizer, epochs and
sigma memory start fresh.

Differences, documented: the search takes the softmax of the network's logits (the authors' networks end in a
softmax), keeps sigma >= ``min_sigma``, and wraps rsbench's own base methods, so DS-MACER uses MACER's beta-tempered
hinge on xi rather than the DDRS repository's hinge on the radius, and DS-SmoothAdv has no double softmax.

The sigmas (the search and the memory) are kept in the images' noise dtype, float64 for float64 images; they were
always float32 until the golden test of the search in train mode (``tests/methods/test_golden.py``) showed a float64 run
drifting 7e-8 from the authors' numbers.

Validation, test and fixed-sigma certification use the module's ``sigma``: a model trained this way is certified
soundly with ``certify.sigma_mode=fixed`` (the default), and its per-input-sigma certificates are labelled unsound.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch
from hydra.utils import get_class
from torch import Tensor

from rsbench.certify.algorithm.sigma_search import OBJECTIVES, optimize_sigma
from rsbench.errors import CheckpointMismatchError
from rsbench.methods.base import SmoothingModule
from rsbench.methods.card import cards
from rsbench.methods.teacher import load_teacher
from rsbench.noise import SigmaLike, check_sigma, noise_dtype

log = logging.getLogger(__name__)


def base_methods() -> dict[str, str]:
    """The methods DS^2 can wrap (``method.base``): name -> class, from the cards that say ``ddrs_base``."""
    return {card.name: card.target for card in cards() if card.ddrs_base}


MEMORY_KEY = "ddrs_sigma_memory"


class DataDependentSigma(SmoothingModule):
    """The DS^2 behaviour, mixed in front of a base method's class by :func:`data_dependent`.

    It only overrides the per-example sigma hook (and saves the memory in checkpoints); the base method's loss,
    optimizer steps and logging are untouched.
    """

    gaussian_only = "its per-example sigma search ascends the Gaussian radius sigma/2 (Phi^-1(E_A) - Phi^-1(E_B))"
    sigma_iters: int
    sigma_lr: float
    sigma_samples: int
    sigma_init: float
    sigma_search_from_epoch: int
    min_sigma: float
    sigma_objective: str
    sigma_memory: Tensor

    def configure_data_dependent(
        self,
        sigma_iters: int,
        sigma_lr: float,
        sigma_samples: int,
        sigma_init: float,
        sigma_search_from_epoch: int,
        min_sigma: float,
        sigma_objective: str = "radius",
    ) -> None:
        """Store and check the sigma-search settings (called once, right after the base constructor)."""
        if sigma_iters < 0:
            raise ValueError(f"method.sigma_iters (K) must be >= 0, got {sigma_iters}")
        if sigma_samples < 1:
            raise ValueError(f"method.sigma_samples (n) must be >= 1, got {sigma_samples}")
        if sigma_lr < 0:
            raise ValueError(f"method.sigma_lr (alpha) must be >= 0, got {sigma_lr}")
        check_sigma(sigma_init, "method.sigma_init")
        if sigma_search_from_epoch < 0:
            raise ValueError(f"method.sigma_search_from_epoch must be >= 0, got {sigma_search_from_epoch}")
        if sigma_objective not in OBJECTIVES:
            raise ValueError(f"method.sigma_objective must be one of {list(OBJECTIVES)}, got {sigma_objective!r}")
        self.sigma_iters, self.sigma_lr, self.sigma_samples = sigma_iters, sigma_lr, sigma_samples
        self.sigma_init, self.sigma_search_from_epoch, self.min_sigma = sigma_init, sigma_search_from_epoch, min_sigma
        self.sigma_objective = sigma_objective
        self.register_buffer("sigma_memory", torch.empty(0), persistent=False)

    def initialize_from(self, path: str) -> None:
        """Start from the weights of the rsbench checkpoint at ``path`` (fine-tuning a trained model).

        The checkpoint must be of the same network and, unless ``allow_sigma_mismatch``, the same sigma. Only the
        weights are taken: the optimizer, epoch count and sigma memory start fresh, as the authors' CIFAR-10
        ``--checkpoint`` loads ``state_dict`` alone.
        """
        trained, trained_sigma = load_teacher(path, self.net, option="method.init_ckpt")
        if trained_sigma != self.sigma and not self.allow_sigma_mismatch:
            raise CheckpointMismatchError(
                f"method.init_ckpt={path!r} was trained at sigma={trained_sigma}, this run trains at "
                f"sigma={self.sigma}; set allow_sigma_mismatch=true to fine-tune it at another sigma"
            )
        self.net.load_state_dict(trained.state_dict())
        log.info("DS^2 starts from the weights of %s (trained at sigma=%s)", path, trained_sigma)

    def iterations_at(self, epoch: int) -> int:
        """K in (0-indexed) ``epoch``: 0 before ``sigma_search_from_epoch``, ``sigma_iters`` from then on."""
        return self.sigma_iters if epoch >= self.sigma_search_from_epoch else 0

    def example_sigma(self, x: Tensor, y: Tensor, indices: Tensor) -> SigmaLike | None:
        """Algorithm 2: warm-start each example's sigma from the memory, run K search steps, store it back."""
        self._grow_memory(int(indices.max()) + 1, x)
        start = self.sigma_memory[indices]
        iterations = self.iterations_at(self.current_epoch)
        if iterations == 0:
            return start
        sigma = optimize_sigma(
            self.net,
            x,
            start,
            iterations=iterations,
            lr=self.sigma_lr,
            samples=self.sigma_samples,
            min_sigma=self.min_sigma,
            objective=self.sigma_objective,
        )
        self.sigma_memory[indices] = sigma
        self.log("train/sigma_mean", sigma.mean(), on_step=False, on_epoch=True)
        return sigma

    def _grow_memory(self, size: int, like: Tensor) -> None:
        """Extend the memory (new entries at sigma_0) so that it covers example index ``size - 1``.

        The memory lives on the device of the images ``like`` and in their noise dtype (float64 for float64 images,
        so that a float64 run keeps its searched sigmas exactly, as the golden DDRS test checks).
        """
        if self.sigma_memory.numel() >= size:
            return
        grown = torch.full((size,), self.sigma_init, device=like.device, dtype=noise_dtype(like.dtype))
        grown[: self.sigma_memory.numel()] = self.sigma_memory.to(like.device)
        self.sigma_memory = grown

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Save the sigma memory, so that resumed training warm-starts from it."""
        super().on_save_checkpoint(checkpoint)
        checkpoint[MEMORY_KEY] = self.sigma_memory.detach().cpu()

    def on_load_checkpoint(self, checkpoint: Mapping[str, Any]) -> None:
        """Restore the sigma memory (a checkpoint of a fixed-sigma model starts a fresh one)."""
        super().on_load_checkpoint(checkpoint)
        if MEMORY_KEY in checkpoint:
            self.sigma_memory = checkpoint[MEMORY_KEY].to(self.device)


def data_dependent(
    base: str,
    *,
    sigma_iters: int,
    sigma_lr: float,
    sigma_samples: int = 1,
    sigma_init: float | None = None,
    sigma_search_from_epoch: int = 0,
    min_sigma: float = 1e-3,
    sigma_objective: str = "radius",
    init_ckpt: str | None = None,
    base_recipes: Mapping[str, Mapping[str, Any]] | None = None,
    base_args: Mapping[str, Any] | None = None,
    **common: Any,
) -> SmoothingModule:
    """Build ``base`` (gaussian, smoothadv or macer: :func:`base_methods`) trained with data-dependent sigma (DS^2).

    Args:
        base: the base method's name.
        sigma_iters: K, search steps per batch (after ``sigma_search_from_epoch``).
        sigma_lr: alpha, the search's step size.
        sigma_samples: n, noise draws per example and search step (the paper's per base: ``conf/method/ddrs.yaml``).
        sigma_init: sigma_0, the memory's initial value; ``None``: the training sigma.
        sigma_search_from_epoch: K = 0 before this (0-indexed) epoch.
        min_sigma: sigma never goes below this.
        sigma_objective: ``radius`` or ``relu_radius`` (the authors' per base: ``conf/method/ddrs.yaml``).
        init_ckpt: an rsbench checkpoint whose weights training starts from (fine-tuning); ``None``: from scratch.
        base_recipes: each base method's hyperparameters (the DDRS paper's); the chosen one is used.
        base_args: changes to the chosen base method's hyperparameters.
        **common: the arguments every method takes (net, sigma, optimizer, scheduler, ...).
    """
    bases = base_methods()
    if base not in bases:
        raise ValueError(f"method.base must be one of {sorted(bases)}, got {base!r}")
    base_class = get_class(bases[base])
    module_class = type(
        f"DataDependent{base_class.__name__}",
        (DataDependentSigma, base_class),
        {"method_name": f"ddrs_{base}", "__module__": __name__},
    )
    arguments = {**dict((base_recipes or {}).get(base, {})), **dict(base_args or {})}
    module = module_class(**common, **arguments)
    module.configure_data_dependent(
        sigma_iters,
        sigma_lr,
        sigma_samples,
        module.sigma if sigma_init is None else sigma_init,
        sigma_search_from_epoch,
        min_sigma,
        sigma_objective,
    )
    if init_ckpt is not None:
        module.initialize_from(init_ckpt)
    return module
