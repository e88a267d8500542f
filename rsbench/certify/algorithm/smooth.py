"""``Smooth``: PREDICT and CERTIFY of Cohen, Rosenfeld and Kolter (ICML 2019), with no Lightning in it.

The smoothed classifier is g(x) = argmax_c P(f(x + eps) = c), eps ~ N(0, sigma^2 I) in [0,1] pixel space.
CERTIFY (the paper's Algorithm 2) picks the class from n0 selection samples, counts that class in n fresh
estimation samples, lower-bounds its probability with a one-sided Clopper-Pearson bound at level alpha and returns
R = sigma * Phi^-1(pA_lower), or abstains when pA_lower < 1/2 (Theorem 1 with pB = 1 - pA). PREDICT (Algorithm 1)
returns the top class when a two-sided binomial test of the top two counts rejects at alpha, and abstains
otherwise. Both guarantees hold with probability >= 1 - alpha over the sampling. With ``noise=`` another smoothing
distribution (Laplace, uniform) and ``norm=`` another norm, the radius is that threat model's closed form
(:mod:`rsbench.certify.algorithm.threat`); Gaussian noise and l2 are the default.

Noise is drawn on the base classifier's device, in fp32, ``batch_size`` samples at a time into one reused buffer,
so memory depends on the batch size and never on n. Votes are counted on the device and read once per call.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn

from rsbench.certify.algorithm.bounds import (
    check_alpha,
    clopper_pearson_lower,
    min_certify_samples,
    min_predict_samples,
    top_two_p_value,
)
from rsbench.certify.algorithm.seeding import ESTIMATION, PREDICTION, SELECTION, make_generator
from rsbench.certify.algorithm.threat import DEFAULT_NOISE, DEFAULT_NORM, ThreatModel
from rsbench.noise import NoiseMixin
from rsbench.noise_distributions import noise_distribution


@dataclass(frozen=True)
class Certificate:
    """The outcome of CERTIFY on one input, with what is needed to audit or re-derive it.

    Attributes:
        prediction: the certified class, or ``Smooth.ABSTAIN`` (-1).
        radius: the certified radius in [0,1] pixel units (0.0 on abstention), in ``norm``.
        p_a_lower: the one-sided Clopper-Pearson lower bound on P(f(x + eps) = prediction).
        count: the votes for the selected class among the n estimation samples.
        selected: the class chosen from the n0 selection samples (kept even when abstaining).
        n0: selection samples.
        n: estimation samples.
        alpha: the failure probability.
        sigma: the noise level.
        seconds: wall-clock time of the call.
        norm: the norm the radius is measured in.
        noise: the smoothing noise.
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
    norm: str = DEFAULT_NORM
    noise: str = DEFAULT_NOISE

    @property
    def abstained(self) -> bool:
        """Whether CERTIFY abstained (pA_lower < 1/2)."""
        return self.prediction == Smooth.ABSTAIN


Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class Smooth(NoiseMixin):
    """A smoothed classifier around ``base_classifier``, with Cohen et al.'s PREDICT and CERTIFY.

    Args:
        base_classifier: maps a batch ``[B, C, H, W]`` in [0,1] pixel space to logits ``[B, num_classes]``; its
            input layer (normalization) is part of it. An ``nn.Module`` is switched to eval mode for each call
            and restored to its previous modes afterwards.
        num_classes: the number of classes.
        sigma: the noise level in [0,1] pixel units.
        precision: ``fp32`` (default), or ``bf16``/``fp16`` autocast of the base classifier's forward pass. The
            noise is always drawn and added in fp32; the certificate then holds for the classifier as evaluated
            (the network under autocast), so deploy it with the same setting.
        channels_last: draw the noisy batches in channels-last memory format (faster convolutions on CPUs and
            tensor-core GPUs when the model is in channels-last format too). The noise has the same distribution,
            but a seed then places its samples differently than in the default layout.
        noise: the smoothing noise, ``gaussian`` (default), ``laplace`` or ``uniform``, at per-coordinate standard
            deviation ``sigma`` (:mod:`rsbench.noise_distributions`).
        norm: the norm of the certified radius, ``l1``, ``l2`` or ``linf``; ``None``: the one the noise certifies
            directly (l2 for Gaussian, l1 for Laplace and uniform noise).
    """

    ABSTAIN = -1

    def __init__(
        self,
        base_classifier: Callable[[Tensor], Tensor],
        num_classes: int,
        sigma: float,
        *,
        precision: Precision = "fp32",
        channels_last: bool = False,
        noise: str = DEFAULT_NOISE,
        norm: str | None = None,
    ) -> None:
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
        self.base_classifier = base_classifier
        self.num_classes = num_classes
        self.sigma = sigma
        self.precision = precision
        self.channels_last = channels_last
        self.threat = ThreatModel(noise, norm)
        self.noise = noise_distribution(noise)

    def certify(
        self, x: Tensor, n0: int, n: int, alpha: float, batch_size: int, *, seed: int | None = None
    ) -> tuple[int, float]:
        """CERTIFY (Algorithm 2): return ``(prediction, radius)``, or ``(Smooth.ABSTAIN, 0.0)``.

        With probability >= 1 - alpha over the sampling, a returned class c satisfies g(x + delta) = c for every
        ||delta|| < radius in the certified norm (l2 by default).

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
        return self.certify_batch(x.unsqueeze(0), n0, n, alpha, batch_size, seeds=[seed])[0]

    def certify_batch(
        self, xs: Tensor, n0: int, n: int, alpha: float, batch_size: int, *, seeds: Sequence[int | None] | None = None
    ) -> list[Certificate]:
        """CERTIFY each image of ``xs`` independently: :meth:`certify_each`'s certificates, in the images' order."""
        return [cert for _, cert in self.certify_each(xs, n0, n, alpha, batch_size, seeds=seeds)]

    def certify_each(
        self, xs: Tensor, n0: int, n: int, alpha: float, batch_size: int, *, seeds: Sequence[int | None] | None = None
    ) -> Iterator[tuple[int, Certificate]]:
        """CERTIFY each image of ``xs``; yield ``(position in xs, certificate)`` as each one is decided.

        Fixed-n CERTIFY of a group: the n0 selection samples of all K images are drawn into whole batches first
        (:meth:`select`), then each image's n estimation samples (:meth:`estimate`), several images per batch only
        when n < batch_size, so that an image's samples never straddle two forward passes it does not fill. Every
        image has its own selection and estimation streams (seeded from its own seed), so each certificate is
        exactly Cohen et al.'s and the one the image gets alone, and failures stay independent across images.

        Args:
            xs: images ``[K, C, H, W]`` in [0,1] pixel space.
            n0: selection samples per image.
            n: estimation samples per image.
            alpha: the failure probability of each certificate.
            batch_size: noisy samples per forward pass.
            seeds: one seed per image (``None`` entries, or no list: fresh noise).
        """
        _check_positive(n0=n0, n=n, batch_size=batch_size)
        check_alpha(alpha)
        seeds = _seeds(seeds, len(xs))
        start = time.perf_counter()
        selected = self.select(xs, n0, batch_size, seeds=seeds)
        selection_seconds = (time.perf_counter() - start) / len(xs)
        together = max(1, batch_size // n)
        for first in range(0, len(xs), together):
            part = slice(first, first + together)
            certificates = self.estimate(
                xs[part], selected[part], n0, n, alpha, batch_size, seeds=seeds[part], extra_seconds=selection_seconds
            )
            yield from enumerate(certificates, start=first)

    def select(self, xs: Tensor, n0: int, batch_size: int, *, seeds: Sequence[int | None] | None = None) -> list[int]:
        """CERTIFY's selection step: each image's most frequent class among its n0 selection samples.

        Args:
            xs: images ``[K, C, H, W]`` in [0,1] pixel space.
            n0: selection samples per image (drawn from each image's selection stream).
            batch_size: noisy samples per forward pass.
            seeds: one seed per image (``None`` entries, or no list: fresh noise).
        """
        return self.select_votes(xs, n0, batch_size, seeds=seeds).argmax(axis=1).tolist()

    def select_votes(
        self, xs: Tensor, n0: int, batch_size: int, *, seeds: Sequence[int | None] | None = None
    ) -> np.ndarray:
        """The votes of each image's n0 selection samples, ``[K, num_classes]``; :meth:`select` takes their argmax.

        Sequential CERTIFY's ``informed`` design also reads the selected class's count (its prior; no evidence).
        """
        _check_positive(n0=n0, batch_size=batch_size)
        device = self.device_for(xs)
        streams = [_generator(device, seed, SELECTION) for seed in _seeds(seeds, len(xs))]
        return self.sample_counts_batch(xs, n0, batch_size, streams)

    def estimate(
        self,
        xs: Tensor,
        selected: Sequence[int],
        n0: int,
        n: int,
        alpha: float,
        batch_size: int,
        *,
        seeds: Sequence[int | None] | None = None,
        extra_seconds: float = 0.0,
    ) -> list[Certificate]:
        """CERTIFY's estimation step: lower-bound each image's selected class on n fresh samples; certify or abstain.

        Args:
            xs: images ``[K, C, H, W]`` in [0,1] pixel space.
            selected: each image's class from :meth:`select` (with its own, independent samples).
            n0: the selection samples that chose it (recorded in the certificate).
            n: estimation samples per image (drawn from each image's estimation stream).
            alpha: the failure probability of each certificate.
            batch_size: noisy samples per forward pass.
            seeds: one seed per image, as given to :meth:`select`.
            extra_seconds: time already spent per image (its share of the selection), added to ``seconds``.
        """
        minimum, because = min_certify_samples(alpha), "pA_lower = alpha^(1/n) < 0.5"
        _check_request("CERTIFY", n, alpha, minimum, because, " (the papers use 100,000)", n0=n0, batch_size=batch_size)
        start = time.perf_counter()
        device = self.device_for(xs)
        streams = [_generator(device, seed, ESTIMATION) for seed in _seeds(seeds, len(xs))]
        estimation = self.sample_counts_batch(xs, n, batch_size, streams)
        seconds = (time.perf_counter() - start) / len(xs) + extra_seconds
        certificates = []
        threat, dim = self.threat, xs[0].numel()
        for choice, votes in zip(selected, estimation, strict=True):
            count = int(votes[choice])
            p_a_lower = clopper_pearson_lower(count, n, alpha)
            abstain = p_a_lower < 0.5
            certificates.append(
                Certificate(
                    prediction=self.ABSTAIN if abstain else int(choice),
                    radius=0.0 if abstain else threat.radius(p_a_lower, self.sigma, dim),
                    p_a_lower=p_a_lower,
                    count=count,
                    selected=int(choice),
                    n0=n0,
                    n=n,
                    alpha=alpha,
                    sigma=self.sigma,
                    seconds=seconds,
                    norm=threat.resolved_norm,
                    noise=threat.noise,
                )
            )
        return certificates

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
        minimum, because = min_predict_samples(alpha), "a p-value of 2 * 0.5^n > alpha"
        _check_request("PREDICT", n, alpha, minimum, because, batch_size=batch_size)
        counts = self.sample_counts(x, n, batch_size, _generator(self.device_for(x), seed, PREDICTION))
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
        return self.sample_counts_batch(x.unsqueeze(0), num, batch_size, [generator])[0]

    def sample_counts_batch(
        self,
        xs: Tensor,
        num: int,
        batch_size: int,
        generators: Sequence[torch.Generator | None] | None = None,
    ) -> np.ndarray:
        """Votes on ``num`` noisy copies of each image of ``xs``: an int64 array ``[K, num_classes]``.

        The K * num samples are drawn ``batch_size`` at a time into one reused fp32 buffer; image i's noise always
        comes from ``generators[i]``, and votes are counted per image on the device.

        Args:
            xs: images ``[K, C, H, W]`` in [0,1] pixel space.
            num: noisy samples per image.
            batch_size: noisy samples per forward pass (the only thing memory depends on).
            generators: one random stream per image; the global one when ``None``.
        """
        device = self.device_for(xs)
        xs = xs.to(device)
        images = len(xs)
        generators = list(generators) if generators is not None else [None] * images
        total = images * num
        memory_format = torch.channels_last if self.channels_last and xs.dim() == 4 else torch.contiguous_format
        buffer = torch.empty(
            (min(batch_size, total), *xs.shape[1:]), dtype=torch.float32, device=device, memory_format=memory_format
        )
        counts = torch.zeros(images * self.num_classes, dtype=torch.long, device=device)
        with eval_mode(self.base_classifier), torch.inference_mode():
            for start in range(0, total, batch_size):
                stop = min(start + batch_size, total)
                batch = buffer[: stop - start]
                for image in range(start // num, (stop - 1) // num + 1):
                    rows = slice(max(start, image * num) - start, min(stop, (image + 1) * num) - start)
                    self.fill_noisy(batch[rows], xs[image], generators[image])
                votes = self._predictions(batch)
                if images > 1:
                    votes = votes + torch.arange(start, stop, device=device) // num * self.num_classes
                counts += torch.bincount(votes, minlength=images * self.num_classes)
        return counts.view(images, self.num_classes).cpu().numpy()

    def _predictions(self, batch: Tensor) -> Tensor:
        """The base classifier's top class per row (under autocast when ``precision`` asks for it)."""
        dtype = PRECISIONS[self.precision]
        with torch.autocast(batch.device.type, dtype=dtype, enabled=dtype is not None):
            logits = self.base_classifier(batch)
        if logits.dim() != 2 or logits.shape[1] != self.num_classes:
            raise ValueError(
                f"base classifier returned logits of shape {tuple(logits.shape)}, expected [batch, {self.num_classes}]"
            )
        return logits.argmax(dim=1)

    def device_for(self, x: Tensor) -> torch.device:
        """The base classifier's device (of its first parameter or buffer), else the input's."""
        if isinstance(self.base_classifier, nn.Module):
            return module_device(self.base_classifier) or x.device
        return x.device


def module_device(module: nn.Module) -> torch.device | None:
    """The device of the module's first parameter or buffer; None for a module that holds no tensor."""
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return None


@contextlib.contextmanager
def eval_mode(classifier: Callable[[Tensor], Tensor]) -> Iterator[None]:
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


def _seeds(seeds: Sequence[int | None] | None, count: int) -> list[int | None]:
    seeds = list(seeds) if seeds is not None else [None] * count
    if len(seeds) != count:
        raise ValueError(f"got {len(seeds)} seeds for {count} images")
    return seeds


def _check_request(step: str, n: int, alpha: float, minimum: int, because: str, note: str = "", **counts: int) -> None:
    """Refuse a count below 1 or an alpha outside (0, 1); warn when ``step`` with ``n`` samples can only abstain.

    ``minimum`` is the fewest samples with which n of n votes can decide at ``alpha``, ``because`` what n of n votes
    give below it.
    """
    _check_positive(n=n, **counts)
    check_alpha(alpha)
    if n < minimum:
        warnings.warn(
            f"{step} with n={n} at alpha={alpha} always abstains: even n of n votes give {because}; use n >= "
            f"{minimum}{note}",
            stacklevel=4,
        )


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
