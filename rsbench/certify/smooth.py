"""``Smooth``: PREDICT and CERTIFY of Cohen, Rosenfeld and Kolter (ICML 2019), with no Lightning in it.

The smoothed classifier is g(x) = argmax_c P(f(x + eps) = c), eps ~ N(0, sigma^2 I) in [0,1] pixel space.
CERTIFY (the paper's Algorithm 2) picks the class from n0 selection samples, counts that class in n fresh
estimation samples, lower-bounds its probability with a one-sided Clopper-Pearson bound at level alpha and returns
R = sigma * Phi^-1(pA_lower), or abstains when pA_lower < 1/2 (Theorem 1 with pB = 1 - pA). PREDICT (Algorithm 1)
returns the top class when a two-sided binomial test of the top two counts rejects at alpha, and abstains
otherwise. Both guarantees hold with probability >= 1 - alpha over the sampling.

Noise is drawn on the base classifier's device, in fp32, ``batch_size`` samples at a time into one reused buffer,
so memory depends on the batch size and never on n. Votes are counted on the device and read once per call.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from rsbench.certify.bounds import (
    certified_radius,
    check_alpha,
    clopper_pearson_lower,
    min_certify_samples,
    min_predict_samples,
    top_two_p_value,
)
from rsbench.certify.seeding import ESTIMATION, PREDICTION, SELECTION, make_generator
from rsbench.noise import NoiseMixin


@dataclass(frozen=True)
class Certificate:
    """The outcome of CERTIFY on one input, with what is needed to audit or re-derive it.

    Attributes:
        prediction: the certified class, or ``Smooth.ABSTAIN`` (-1).
        radius: the certified l2 radius in [0,1] pixel units (0.0 on abstention).
        p_a_lower: the one-sided Clopper-Pearson lower bound on P(f(x + eps) = prediction).
        count: the votes for the selected class among the n estimation samples.
        selected: the class chosen from the n0 selection samples (kept even when abstaining).
        n0: selection samples.
        n: estimation samples.
        alpha: the failure probability.
        sigma: the noise level.
        seconds: wall-clock time of the call.
    """

    prediction: int
    radius: float
    p_a_lower: float
    count: int
    selected: int
    n0: int
    n: int
    alpha: float
    sigma: float
    seconds: float

    @property
    def abstained(self) -> bool:
        """Whether CERTIFY abstained (pA_lower < 1/2)."""
        return self.prediction == Smooth.ABSTAIN


class Smooth(NoiseMixin):
    """A smoothed classifier around ``base_classifier``, with Cohen et al.'s PREDICT and CERTIFY.

    Args:
        base_classifier: maps a batch ``[B, C, H, W]`` in [0,1] pixel space to logits ``[B, num_classes]``; its
            input layer (normalization) is part of it. An ``nn.Module`` is switched to eval mode for each call
            and restored to its previous modes afterwards.
        num_classes: the number of classes.
        sigma: the noise level in [0,1] pixel units.
    """

    ABSTAIN = -1

    def __init__(self, base_classifier: Callable[[Tensor], Tensor], num_classes: int, sigma: float) -> None:
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.base_classifier = base_classifier
        self.num_classes = num_classes
        self.sigma = sigma

    def certify(
        self, x: Tensor, n0: int, n: int, alpha: float, batch_size: int, *, seed: int | None = None
    ) -> tuple[int, float]:
        """CERTIFY (Algorithm 2): return ``(prediction, radius)``, or ``(Smooth.ABSTAIN, 0.0)``.

        With probability >= 1 - alpha over the sampling, a returned class c satisfies g(x + delta) = c for every
        ||delta||_2 < radius.

        Args:
            x: one image ``[C, H, W]`` in [0,1] pixel space.
            n0: selection samples (the class is their most frequent vote).
            n: estimation samples, drawn independently of the selection samples.
            alpha: the failure probability.
            batch_size: noisy samples per forward pass.
            seed: makes the two sample streams reproducible (they stay independent); fresh noise when ``None``.
        """
        cert = self.certify_with_details(x, n0, n, alpha, batch_size, seed=seed)
        return cert.prediction, cert.radius

    def certify_with_details(
        self, x: Tensor, n0: int, n: int, alpha: float, batch_size: int, *, seed: int | None = None
    ) -> Certificate:
        """CERTIFY as :meth:`certify`, returning the full :class:`Certificate` (bound, votes, timing)."""
        _check_positive(n0=n0, n=n, batch_size=batch_size)
        check_alpha(alpha)
        if n < min_certify_samples(alpha):
            warnings.warn(
                f"CERTIFY with n={n} at alpha={alpha} always abstains: even n of n votes give "
                f"pA_lower = alpha^(1/n) < 0.5; use n >= {min_certify_samples(alpha)} (the papers use 100,000)",
                stacklevel=2,
            )
        start = time.perf_counter()
        device = self._device(x)
        selection = self.sample_counts(x, n0, batch_size, _generator(device, seed, SELECTION))
        selected = int(selection.argmax())
        estimation = self.sample_counts(x, n, batch_size, _generator(device, seed, ESTIMATION))
        count = int(estimation[selected])
        p_a_lower = clopper_pearson_lower(count, n, alpha)
        if p_a_lower < 0.5:
            prediction, radius = self.ABSTAIN, 0.0
        else:
            prediction, radius = selected, certified_radius(p_a_lower, self.sigma)
        return Certificate(
            prediction=prediction,
            radius=radius,
            p_a_lower=p_a_lower,
            count=count,
            selected=selected,
            n0=n0,
            n=n,
            alpha=alpha,
            sigma=self.sigma,
            seconds=time.perf_counter() - start,
        )

    def predict(self, x: Tensor, n: int, alpha: float, batch_size: int, *, seed: int | None = None) -> int:
        """PREDICT (Algorithm 1): the top class if the two-sided binomial test of the top two counts rejects.

        With probability >= 1 - alpha, the returned class (if not ``ABSTAIN``) is g(x).

        Args:
            x: one image ``[C, H, W]`` in [0,1] pixel space.
            n: noisy samples.
            alpha: the failure probability.
            batch_size: noisy samples per forward pass.
            seed: makes the sample stream reproducible; fresh noise when ``None``.
        """
        _check_positive(n=n, batch_size=batch_size)
        check_alpha(alpha)
        if n < min_predict_samples(alpha):
            warnings.warn(
                f"PREDICT with n={n} at alpha={alpha} always abstains: even n of n votes give a p-value of "
                f"2 * 0.5^n > alpha; use n >= {min_predict_samples(alpha)}",
                stacklevel=2,
            )
        counts = self.sample_counts(x, n, batch_size, _generator(self._device(x), seed, PREDICTION))
        top_two = np.argsort(counts)[::-1][:2]
        count_a, count_b = int(counts[top_two[0]]), int(counts[top_two[1]])
        if top_two_p_value(count_a, count_b) > alpha:
            return self.ABSTAIN
        return int(top_two[0])

    def sample_counts(
        self, x: Tensor, num: int, batch_size: int, generator: torch.Generator | None = None
    ) -> np.ndarray:
        """Votes of the base classifier on ``num`` noisy copies of ``x``: an int64 array ``[num_classes]``.

        Args:
            x: one image ``[C, H, W]`` in [0,1] pixel space.
            num: noisy samples to draw.
            batch_size: noisy samples per forward pass (the only thing memory depends on).
            generator: the random stream; the global one when ``None``.
        """
        device = self._device(x)
        x = x.to(device)
        counts = torch.zeros(self.num_classes, dtype=torch.long, device=device)
        buffer = torch.empty((min(batch_size, num), *x.shape), dtype=torch.float32, device=device)
        with _eval_mode(self.base_classifier), torch.inference_mode():
            for start in range(0, num, batch_size):
                batch = self.fill_noisy(buffer[: min(batch_size, num - start)], x, generator)
                counts += self._votes(self.base_classifier(batch))
        return counts.cpu().numpy()

    def _votes(self, logits: Tensor) -> Tensor:
        if logits.dim() != 2 or logits.shape[1] != self.num_classes:
            raise ValueError(
                f"base classifier returned logits of shape {tuple(logits.shape)}, expected [batch, {self.num_classes}]"
            )
        return torch.bincount(logits.argmax(dim=1), minlength=self.num_classes)

    def _device(self, x: Tensor) -> torch.device:
        """The base classifier's device (of its first parameter or buffer), else the input's."""
        if isinstance(self.base_classifier, nn.Module):
            for tensor in (*self.base_classifier.parameters(), *self.base_classifier.buffers()):
                return tensor.device
        return x.device


@contextlib.contextmanager
def _eval_mode(classifier: Callable[[Tensor], Tensor]) -> Iterator[None]:
    """Put every submodule in eval mode, then restore each one's previous mode (not blanket ``train()``)."""
    if not isinstance(classifier, nn.Module):
        yield
        return
    modes = [(module, module.training) for module in classifier.modules()]
    classifier.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def _generator(device: torch.device, seed: int | None, phase: int) -> torch.Generator | None:
    return None if seed is None else make_generator(device, seed, phase)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
