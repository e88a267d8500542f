"""Noise in [0,1] pixel space: the one sampler shared by training methods and certification.

Cohen et al. (2019) define the smoothed classifier g(x) = argmax_c P(f(x + eps) = c) with eps ~ N(0, sigma^2 I),
and every certified radius is measured in the units of the space the noise is added in. rsbench adds noise to images
in [0,1] pixel space, before the model's input layer (normalization is the model's first layer), never clamps the
noisy input, and always draws the noise in float32 or wider: a bf16 grid is too coarse to be Gaussian (Voráček and
Hein 2023). The noise is Gaussian unless a module is given another distribution of
:mod:`rsbench.noise_distributions` (``noise``, at the same per-coordinate standard deviation sigma).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rsbench.noise_distributions import GAUSSIAN, NoiseDistribution

SigmaLike = float | Tensor
RandomStream = torch.Generator | None  # where noise is drawn from: a seeded generator, or the global stream
"""A scalar noise level, or one per example (shape ``[B]``) for data-dependent smoothing."""


def check_sigma(sigma: SigmaLike, name: str = "sigma") -> None:
    """Raise ``ValueError`` unless every noise level is a finite number > 0.

    Args:
        sigma: a float or a tensor of per-example noise levels.
        name: the config key to name in the message.
    """
    if isinstance(sigma, Tensor):
        bad = ~torch.isfinite(sigma) | (sigma <= 0)
        if bool(bad.any()):
            value = sigma[bad].flatten()[0].item()
            raise ValueError(f"{name} must be > 0 and finite for every example, got {value!r}")
        return
    if isinstance(sigma, bool) or not isinstance(sigma, int | float):
        raise ValueError(f"{name} must be a number > 0 (e.g. 0.25, 0.5, 1.0), got {sigma!r}")
    if not math.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"{name} must be > 0 (e.g. 0.25, 0.5, 1.0), got {sigma!r}")


def noise_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype noise is drawn in for inputs of ``dtype``: float32, or float64 for float64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class NoiseMixin:
    """Noise sampling (Gaussian by default) shared by every training method and by :class:`rsbench.Smooth`.

    The mixin owns ``sigma`` (validated > 0) and draws noise on the input's device, in fp32 (fp64 for fp64 inputs),
    optionally from an explicit ``torch.Generator`` so certification can seed selection and estimation streams
    independently. ``sigma`` may be overridden per call by a per-example tensor (data-dependent smoothing).
    """

    _sigma: float
    _noise: NoiseDistribution = GAUSSIAN

    @property
    def noise(self) -> NoiseDistribution:
        """The smoothing distribution (Gaussian unless set), drawn at per-coordinate standard deviation sigma."""
        return self._noise

    @noise.setter
    def noise(self, value: NoiseDistribution) -> None:
        self.check_noise(value)
        self._noise = value

    def check_noise(self, noise: NoiseDistribution) -> None:
        """Raise ``ValueError`` naming why this module cannot use ``noise`` (it can use any, by default)."""

    @property
    def sigma(self) -> float:
        """The noise standard deviation in [0,1] pixel units."""
        return self._sigma

    @sigma.setter
    def sigma(self, value: float) -> None:
        check_sigma(value)
        self._sigma = float(value)

    def sample_noise(self, like: Tensor, sigma: SigmaLike | None = None, generator: RandomStream = None) -> Tensor:
        """Return ``sigma`` times a unit-variance draw of the noise, with the shape and device of ``like`` (fp32+).

        Args:
            like: a batch ``[B, ...]`` whose shape and device the noise takes.
            sigma: a float, or a tensor ``[B]`` of per-example noise levels; defaults to ``self.sigma``.
            generator: the random stream to draw from; the global one when ``None``.
        """
        sigma = self.sigma if sigma is None else sigma
        noise = self.standard_normal(like, generator) if self.noise is GAUSSIAN else self.noise.unit(like, generator)
        return noise.mul_(_broadcastable(sigma, noise))

    def standard_normal(self, like: Tensor, generator: RandomStream = None) -> Tensor:
        """Return a fresh ``N(0, I)`` draw with the shape and device of ``like``, in :func:`noise_dtype` of its dtype.

        The one source of every training method's noise: :meth:`sample_noise` (and through it :meth:`add_noise`,
        :meth:`noise_copies` and :meth:`noisy_copies`) scales this draw by sigma. The golden tests override it to
        feed in the draws the authors' code used, so sigma, per-example sigma and the copy layout stay under test.

        Args:
            like: the tensor whose shape and device the draw takes (its values are not read).
            generator: the random stream to draw from; the global one when ``None``.
        """
        return torch.randn(like.shape, dtype=noise_dtype(like.dtype), device=like.device, generator=generator)

    def add_noise(self, x: Tensor, sigma: SigmaLike | None = None, generator: RandomStream = None) -> Tensor:
        """Return ``x + eps`` with eps drawn fresh from the noise at sigma; the result is never clamped.

        Args:
            x: images ``[B, C, H, W]`` in [0,1] pixel space.
            sigma: a float, or a tensor ``[B]`` of per-example noise levels; defaults to ``self.sigma``.
            generator: the random stream to draw from; the global one when ``None``.
        """
        return x + self.sample_noise(x, sigma, generator)

    def noisy_copies(
        self, x: Tensor, num_copies: int, sigma: SigmaLike | None = None, generator: RandomStream = None
    ) -> Tensor:
        """Return ``num_copies`` independent noisy copies of every image, grouped by image.

        The result has shape ``[B * num_copies, C, H, W]``; rows ``i*m .. i*m + m-1`` are the copies of image ``i``,
        so ``out.view(B, m, ...)`` and ``logits.view(B, m, C)`` group them per image.

        Args:
            x: images ``[B, C, H, W]`` in [0,1] pixel space.
            num_copies: m >= 1.
            sigma: a float, or a tensor ``[B]`` of per-example noise levels (each image's copies share it).
            generator: the random stream to draw from; the global one when ``None``.
        """
        return x.repeat_interleave(num_copies, dim=0) + self.noise_copies(x, num_copies, sigma, generator)

    def noise_copies(
        self, x: Tensor, num_copies: int, sigma: SigmaLike | None = None, generator: RandomStream = None
    ) -> Tensor:
        """Return the noise alone of :meth:`noisy_copies`: ``[B * num_copies, ...]``, grouped by image.

        Methods that hold the same m noise samples fixed across an attack and reuse them in the loss draw them here.

        Args:
            x: images ``[B, C, H, W]`` (only their shape and device are used).
            num_copies: m >= 1.
            sigma: a float, or a tensor ``[B]`` of per-example noise levels (each image's copies share it).
            generator: the random stream to draw from; the global one when ``None``.
        """
        if num_copies < 1:
            raise ValueError(f"num_copies must be >= 1, got {num_copies}")
        if isinstance(sigma, Tensor) and sigma.dim() > 0:
            sigma = sigma.repeat_interleave(num_copies, dim=0)
        like = x.new_empty((x.shape[0] * num_copies, *x.shape[1:]))  # shape, dtype and device only
        return self.sample_noise(like, sigma, generator)

    def fill_noisy(self, out: Tensor, x: Tensor, generator: RandomStream = None) -> Tensor:
        """Overwrite ``out`` with ``x + eps`` (eps: the noise at sigma) without allocating (CERTIFY's hot loop).

        Args:
            out: a float32/float64 buffer ``[k, C, H, W]`` on the device the noise should be drawn on.
            x: one image ``[C, H, W]`` (broadcast to every row) or a batch ``[k, C, H, W]``, in [0,1] pixel space.
            generator: the random stream to draw from; the global one when ``None``.
        """
        if out.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"noise must be drawn in float32 or float64, got a {out.dtype} buffer")
        self.noise.fill_(out, self.sigma, generator)
        return out.add_(x)


def _broadcastable(sigma: SigmaLike, noise: Tensor) -> SigmaLike:
    """Reshape a per-example sigma ``[B]`` so it scales each example's noise ``[B, ...]``."""
    if not isinstance(sigma, Tensor):
        return sigma
    if sigma.dim() == 0:
        return sigma.to(device=noise.device, dtype=noise.dtype)
    if sigma.shape[0] != noise.shape[0] or sigma.dim() != 1:
        raise ValueError(f"per-example sigma must have shape [{noise.shape[0]}], got {tuple(sigma.shape)}")
    return sigma.to(device=noise.device, dtype=noise.dtype).view(-1, *([1] * (noise.dim() - 1)))
