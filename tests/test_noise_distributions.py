"""The smoothing distributions: each at per-pixel standard deviation sigma, in fp32, seeded, never clamped.

Statistical checks use fixed seeds and large draws; each states its tolerance. Distribution checks are
Kolmogorov-Smirnov tests of one coordinate's draws against the exact CDF, failing only at p < 1e-3.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import kstest

from rsbench.certify.algorithm.smooth import Smooth
from rsbench.noise import NoiseMixin
from rsbench.noise_distributions import GAUSSIAN, NOISES, noise_distribution
from tests.stats import noise_cdfs

SIGMA = 0.5
DRAWS = 200_000
CDFS = noise_cdfs(SIGMA)


class Module(NoiseMixin):
    def __init__(self, noise: str) -> None:
        self.sigma = SIGMA
        self.noise = noise_distribution(noise)


def draw(name: str, seed: int = 0, shape: tuple[int, ...] = (DRAWS,)) -> torch.Tensor:
    out = torch.empty(shape)
    return NOISES[name].fill_(out, SIGMA, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", sorted(NOISES))
def test_every_noise_has_variance_sigma_squared_and_mean_zero(name: str) -> None:
    """Matched variance (Yang et al.): the sd of 200,000 draws is sigma within 1% (its relative SE is < 0.3%)."""
    values = draw(name).double()
    assert abs(float(values.mean())) < 5 * SIGMA / math.sqrt(DRAWS)
    assert float(values.std()) == pytest.approx(SIGMA, rel=0.01)


@pytest.mark.parametrize("name", sorted(NOISES))
def test_every_noise_follows_its_law(name: str) -> None:
    assert kstest(draw(name, seed=1).numpy(), CDFS[name]).pvalue >= 1e-3


def test_the_scales_are_rs4as() -> None:
    """lambda = sigma / _sigma() with rs4a's _sigma(): 1 (Gaussian), sqrt(2) (Laplace), 3^-1/2 (uniform)."""
    assert NOISES["gaussian"].scale(SIGMA) == SIGMA
    assert NOISES["laplace"].scale(SIGMA) == pytest.approx(SIGMA / 2**0.5, rel=1e-15)
    assert NOISES["uniform"].scale(SIGMA) == pytest.approx(SIGMA / 3**-0.5, rel=1e-15)


def test_uniform_noise_stays_in_its_cube_and_laplace_is_finite() -> None:
    assert float(draw("uniform").abs().max()) <= SIGMA * math.sqrt(3)
    big = draw("laplace", shape=(20, DRAWS))  # 4e6 draws: an inverse-CDF sampler would hit log(0) here
    assert bool(torch.isfinite(big).all())


@pytest.mark.parametrize("name", sorted(NOISES))
def test_draws_are_reproducible_and_float32(name: str) -> None:
    assert torch.equal(draw(name, seed=3, shape=(100,)), draw(name, seed=3, shape=(100,)))
    assert not torch.equal(draw(name, seed=3, shape=(100,)), draw(name, seed=4, shape=(100,)))
    assert NOISES[name].unit(torch.zeros(4, dtype=torch.bfloat16)).dtype == torch.float32
    assert NOISES[name].unit(torch.zeros(4, dtype=torch.float64)).dtype == torch.float64


def test_gaussian_fill_is_the_call_certify_always_made() -> None:
    """Default path unchanged: the Gaussian fill is out.normal_(0, sigma) with the same generator, bit for bit."""
    generator = torch.Generator().manual_seed(7)
    expected = torch.empty(1000).normal_(0.0, SIGMA, generator=generator)
    assert torch.equal(draw("gaussian", seed=7, shape=(1000,)), expected)


@pytest.mark.parametrize("name", ["laplace", "uniform"])
def test_the_mixin_draws_the_chosen_noise_everywhere(name: str) -> None:
    """add_noise, noisy copies, per-example sigma and CERTIFY's fill all draw the module's noise, unclamped."""
    module = Module(name)
    x = torch.full((2000, 1, 4, 4), 0.5)
    noisy = module.add_noise(x, generator=torch.Generator().manual_seed(0))
    assert kstest((noisy - x).flatten().numpy(), CDFS[name]).pvalue >= 1e-3
    assert float(noisy.min()) < 0.0 or name == "uniform"  # never clamped to [0, 1] (uniform's cube is 0.87 wide)
    per_example = module.sample_noise(x[:2], torch.tensor([SIGMA, 2 * SIGMA]), torch.Generator().manual_seed(1))
    assert float(per_example[1].abs().max()) > float(per_example[0].abs().max())
    copies = module.noise_copies(x[:3], 5, generator=torch.Generator().manual_seed(2))
    assert copies.shape == (15, 1, 4, 4)
    buffer = torch.empty(5000, 1, 4, 4)
    filled = module.fill_noisy(buffer, x[0], torch.Generator().manual_seed(3))
    assert filled.data_ptr() == buffer.data_ptr()
    assert kstest((filled - 0.5).flatten().numpy(), CDFS[name]).pvalue >= 1e-3


def test_smooth_draws_its_noise() -> None:
    smooth = Smooth(lambda batch: torch.zeros(len(batch), 2), 2, SIGMA, noise="uniform")
    assert smooth.noise.name == "uniform"
    assert Smooth(lambda batch: batch, 2, SIGMA).noise is GAUSSIAN


def test_an_unknown_noise_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match=r"noise must be one of \['gaussian', 'laplace', 'uniform'\], got 'cauchy'"):
        noise_distribution("cauchy")
    with pytest.raises(ValueError, match=r"certify\.noise must be one of"):
        Smooth(lambda batch: batch, 2, SIGMA, noise="cauchy")
